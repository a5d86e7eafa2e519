#!/usr/bin/env bash
# ferroccl's libnccl.so.2 under programs nobody here wrote, beside NVIDIA's NCCL in the
# same run: nccl-tests (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
# broadcast_perf, sendrecv_perf, gather_perf, scatter_perf, alltoall_perf; built here
# against NCCL's own headers, data checked with `-c 1`): all GPUs in one process (`-g
# NGPUS`), and with MPI_HOME also one process per GPU (built with MPI, `mpiexec -n NGPUS …
# -g 1`; on one GPU that is one process, which shows the MPI build's route through
# ncclGetUniqueId and ncclCommInitRank), then
# torch.distributed on the NCCL backend (bench/gpu/torch_nccl.py under torchrun, one
# process per GPU; ferroccl's library preloaded). Writes OUTDIR/raw/nccl/run-DATE.txt and
# OUTDIR/nccl_abi.json (per test, library and mode: out-of-bounds (wrong) values and
# average bus bandwidth).
set -euo pipefail
usage="usage: $0 LIBNCCL NCCL_TESTS_SRC OUTDIR
  LIBNCCL: target/release/libnccl.so; NCCL_TESTS_SRC: a checkout of NVIDIA/nccl-tests
  env: CUDA_HOME (default /usr/local/cuda) NGPUS (default: every GPU) SIZES (default '-b 8 -e 64M -f 4')
       MPI_HOME (an MPI with include/mpi.h, lib/libmpi.so and bin/mpiexec, e.g. PyPI's mpich
       wheel unpacked (its mpich-*.data/data folder; bench/gpu/pack.sh puts one in the
       carry): nccl-tests one process per GPU as well)"
[ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
ours_lib=$(realpath "$1") src=$(realpath "$2")
source "$(dirname "$0")/env.sh"
open_results "$3" nccl
f=$out/$rawdir/run-$day.txt
cuda=${CUDA_HOME:-/usr/local/cuda}
ngpus=${NGPUS:-$(nvidia-smi -L | wc -l)}
sizes=${SIZES:--b 8 -e 64M -f 4}
# NVIDIA's NCCL (headers and library) from the image's Python packages, and ferroccl's
# library under NCCL's names, each in a folder of its own.
# The builds live in a scratch folder, so OUTDIR holds results only.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
real=$work/real ours=$work/ours
mkdir -p "$real/lib" "$ours"
ln -sf "$nv/nccl/include" "$real/include"
ln -sf "$nccl_lib" "$real/lib/libnccl.so"
ln -sf "$nccl_lib" "$real/lib/libnccl.so.2"
cp "$ours_lib" "$ours/libnccl.so.2"
ln -sf libnccl.so.2 "$ours/libnccl.so"
# One build of nccl-tests per mode: without MPI (every rank in one process), and with
# MPI_HOME's (one process per rank) where it is given.
modes=(single)
if [ -n "${MPI_HOME:-}" ]; then modes+=(mpi); fi
for mode in "${modes[@]}"; do
  step "nccl-tests ($mode) built against $(basename "$nccl_lib")" >> "$f"
  cp -r "$src" "$work/nccl-tests-$mode"
  mpi=$([ "$mode" = mpi ] && echo "MPI=1 MPI_HOME=$MPI_HOME" || echo MPI=0)
  make -C "$work/nccl-tests-$mode" -j"$(nproc)" $mpi CUDA_HOME="$cuda" NCCL_HOME="$real" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >> "$f" 2>&1
done
echo "symbols the tests take from libnccl that ferroccl's library lacks:" >> "$f"
comm -23 <(nm -D --undefined-only "$work"/nccl-tests-single/build/*_perf | awk '/ nccl/ {print $2}' | sort -u) \
         <(nm -D --defined-only "$ours/libnccl.so.2" | awk '{print $3}' | sort -u) >> "$f" || true
# Two ranks of one process on GPU 0 (ferroccl lets ranks of one process share a GPU):
# nccl-abi/tests/gpu/two_ranks.cu, every result checked.
step "ours two_ranks on GPU 0" >> "$f"
"$cuda/bin/nvcc" -I "$repo/nccl-abi/include" "$repo/nccl-abi/tests/gpu/two_ranks.cu" -L "$ours" -lnccl -Xlinker -rpath -Xlinker "$ours" -o "$work/two_ranks" >> "$f" 2>&1 \
  && timeout 120 "$work/two_ranks" >> "$f" 2>&1 || echo "exit status $?" >> "$f"
tests="all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf sendrecv_perf gather_perf scatter_perf alltoall_perf"
for lib in real ours; do
  libpath=${!lib}
  if [ "$lib" = real ]; then libpath=$libpath/lib; fi
  for t in $tests; do
    step "$lib $t -g $ngpus" >> "$f"
    LD_LIBRARY_PATH=$libpath:$LD_LIBRARY_PATH timeout 300 \
      "$work/nccl-tests-single/build/$t" $sizes -g "$ngpus" -c 1 -w 5 -n 20 >> "$f" 2>&1 || echo "exit status $?" >> "$f"
    if [ "${modes[*]}" = "single mpi" ]; then
      # mpiexec passes the environment on; its fork launcher starts the ranks on this host.
      step "$lib $t mpiexec -n $ngpus -g 1" >> "$f"
      LD_LIBRARY_PATH=$libpath:$MPI_HOME/lib:$LD_LIBRARY_PATH timeout 300 \
        "$MPI_HOME/bin/mpiexec" -launcher fork -n "$ngpus" "$work/nccl-tests-mpi/build/$t" $sizes -g 1 -c 1 -w 5 -n 20 >> "$f" 2>&1 || echo "exit status $?" >> "$f"
    fi
  done
done
torchrun=/opt/torch/.venv/bin/torchrun
if [ -x "$torchrun" ]; then
  echo "symbols PyTorch takes from libnccl that ferroccl's library lacks:" >> "$f"
  comm -23 <(nm -D --undefined-only /opt/torch/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so | awk '/ nccl/ {print $2}' | sort -u) \
           <(nm -D --defined-only "$ours/libnccl.so.2" | awk '{print $3}' | sort -u) >> "$f" || true
  for lib in real ours; do
    step "$lib torch_nccl.py, $ngpus processes" >> "$f"
    preload=$([ "$lib" = ours ] && echo "$ours/libnccl.so.2" || true)
    LD_PRELOAD=$preload timeout 300 "$torchrun" --nproc-per-node "$ngpus" "$repo/bench/gpu/torch_nccl.py" >> "$f" 2>&1 || echo "exit status $?" >> "$f"
  done
fi
python3 - "$f" "$out/nccl_abi.json" "$(device_line)" "$(date -u +%FT%TZ)" "$(build_of "$ours_lib")" "bench/results/$rawdir/run-$day.txt" "$ngpus" \
  "$([ "${modes[*]}" = "single mpi" ] && "$MPI_HOME/bin/mpiexec" --version 2>/dev/null | awk 'NR == 1 {first = $0} /Version:/ {v = "MPICH " $2; exit} END {print v ? v : first}' || true)" <<'PY'
import json, re, sys
raw, dest, device, date, build, rawpath, ngpus, mpi = sys.argv[1:]
mpi = f"; one process per GPU through {mpi}'s mpiexec" if mpi else ""
rows, cur = [], None
for line in open(raw, errors="replace"):
    m = re.match(r"## (real|ours) (\S+)(.*) \(\d{4}-", line)
    if m:
        cur = {"library": "NCCL" if m.group(1) == "real" else "ferroccl", "test": m.group(2), "mode": m.group(3).strip(),
               "wrong": None, "avg_busbw_GBs": None, "status": "ran"}
        rows.append(cur)
    elif cur and (m := re.search(r"Out of bounds values\s*:\s*(\d+)", line)):
        cur["wrong"] = int(m.group(1))
    elif cur and (m := re.search(r"Avg bus bandwidth\s*:\s*([\d.]+)", line)):
        cur["avg_busbw_GBs"] = float(m.group(1))
    elif cur and line.startswith("exit status"):
        cur["status"] = line.strip()
    elif cur and re.search(r"rank \d+: .*: (ok|WRONG)", line):
        cur.setdefault("checks", []).append(line.strip())
json.dump({"measures": "nccl-tests and torch.distributed on ferroccl's libnccl.so.2 beside NVIDIA's NCCL",
           "command": f"bash bench/gpu/nccl.sh target/release/libnccl.so NCCL_TESTS_SRC OUTDIR (NGPUS={ngpus}{mpi})",
           "device": device, "date": date, "build": build, "raw": [rawpath], "script": "bench/gpu/nccl.sh",
           "baseline": "NVIDIA's NCCL from the image's PyTorch packages, same run, same GPUs (NCCL_NVLS_ENABLE=0)",
           "rows": rows}, open(dest, "w"), indent=2)
PY
step "device: $(device_line)"
step end
