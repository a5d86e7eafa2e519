#!/usr/bin/env bash
# The collective matmuls (examples/collective-matmul: ferroccl-matmul) on every GPU, one
# process per GPU (`ferroccl run`), against the baselines of the same run
# (bench/gpu/matmul_torch.py under torchrun: NCCL's all-gather then cuBLAS, cuBLAS then
# NCCL's reduce-scatter, cuBLAS alone on the gathered shape). Shapes: the seed's (every
# shard M = 1024, K = N = 4096), M = 256, 512, 4096 per shard, and K = N = 8192.
# Writes OUTDIR/raw/matmul/run-DATE.txt, OUTDIR/raw/matmul/trace-DATE.txt (timelines) and
# OUTDIR/collective_matmul.json.
set -euo pipefail
usage="usage: $0 FERROCCL FERROCCL_MATMUL OUTDIR
  FERROCCL: target/release/ferroccl (the launcher); FERROCCL_MATMUL: target/release/ferroccl-matmul
  env: NGPUS (default: every GPU) DTYPE (default f16) ITERS (default 20) SM_COPIES (CTAs of the SM-copy design, default 16)
       SHAPES (default the seed's and the issue's) TRACE (default 1: timelines at the seed's shape; 0: none)"
[ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
launcher=$(realpath "$1") ours=$(realpath "$2")
source "$(dirname "$0")/env.sh"
open_results "$3" matmul
f=$out/$rawdir/run-$day.txt
ngpus=${NGPUS:-$(nvidia-smi -L | wc -l)}
dtype=${DTYPE:-f16} iters=${ITERS:-20}
shapes=${SHAPES:-"1024,4096,4096 256,4096,4096 512,4096,4096 4096,4096,4096 1024,8192,8192"}
# A wait that outlasts 20 s fails the run (the communicator's default waits 10 minutes).
export FERROCCL_TIMEOUT_MS=${FERROCCL_TIMEOUT_MS:-20000}
# One process per GPU; on one GPU, two ranks of one process share it (the logic and the
# results, not a speed to compare: the baselines then run one rank, no communication).
if [ "$ngpus" = 1 ]; then runner=("$ours" --pes 2); else runner=("$launcher" run -n "$ngpus" "$ours"); fi
for shape in $shapes; do
  IFS=, read -r m k n <<< "$shape"
  for c in all-gather all-gather-both reduce-scatter; do
    step "ours $c m=$m k=$k n=$n, $ngpus processes" >> "$f"
    timeout 300 "${runner[@]}" --collective "$c" --dtype "$dtype" -m "$m" -k "$k" -n "$n" --iters "$iters" --gemm-alone >> "$f" 2>&1 || echo "exit status $?" >> "$f"
    # The second design: copies by SMs (a kernel of SM_COPIES CTAs) instead of the copy engines.
    step "ours $c m=$m k=$k n=$n, $ngpus processes, sm copies" >> "$f"
    timeout 300 "${runner[@]}" --collective "$c" --dtype "$dtype" -m "$m" -k "$k" -n "$n" --iters "$iters" --sm-copies "${SM_COPIES:-16}" >> "$f" 2>&1 || echo "exit status $?" >> "$f"
  done
  # The reduce-scatter's other choice of pieces (two from 1024 rows by default, else one).
  other=$([ "$m" -ge 1024 ] && echo 1 || echo 2)
  step "ours reduce-scatter m=$m k=$k n=$n, $ngpus processes, $other piece(s)" >> "$f"
  timeout 300 "${runner[@]}" --collective reduce-scatter --dtype "$dtype" -m "$m" -k "$k" -n "$n" --iters "$iters" --pieces "$other" >> "$f" 2>&1 || echo "exit status $?" >> "$f"
done
# Timelines at the seed's shape (bench/probes/kernel_trace.cpp through CUDA's injection
# hook, one file per process): each rank's lanes in order, the gaps between its GEMMs, where
# its copies fell. TRACE=0 leaves them out; a tracer that does not build is said and skipped.
t=$out/$rawdir/trace-$day.txt
raws="\"bench/results/$rawdir/run-$day.txt\""
tmp=${TMPDIR:-/tmp}
tracer=$tmp/libkernel_trace.so
if [ "${TRACE:-1}" != 0 ]; then
  cuda=${CUDA_HOME:-/usr/local/cuda}
  if g++ -O2 -shared -fPIC -I"$cuda/include" "$repo/bench/probes/kernel_trace.cpp" -L"$cuda/lib64" -lcupti -Xlinker -rpath="$cuda/lib64" -o "$tracer" >> "$t" 2>&1; then
    for c in all-gather reduce-scatter; do
      step "trace $c m=1024 k=4096 n=4096, $ngpus processes (--pes 2 on one GPU)" >> "$t"
      rm -f "$tmp"/matmul-trace.csv.*
      CUDA_INJECTION64_PATH=$tracer KERNEL_TRACE=$tmp/matmul-trace.csv timeout 300 "${runner[@]}" --collective "$c" --dtype "$dtype" -m 1024 -k 4096 -n 4096 --iters "$iters" >> "$t" 2>&1 || echo "exit status $?" >> "$t"
      python3 "$repo/bench/probes/trace_gaps.py" --skip 30 "$tmp"/matmul-trace.csv.* >> "$t" 2>&1 || echo "trace_gaps.py: exit status $?" >> "$t"
    done
    raws="$raws, \"bench/results/$rawdir/trace-$day.txt\""
  else
    echo "kernel_trace.cpp did not build: no timelines" | tee -a "$log"
  fi
fi
torchrun=/opt/torch/.venv/bin/torchrun
step "baseline matmul_torch.py, $ngpus processes" >> "$f"
timeout 600 "$torchrun" --nproc-per-node "$ngpus" "$repo/bench/gpu/matmul_torch.py" "$dtype" "$iters" 5 $shapes >> "$f" 2>&1 || echo "exit status $?" >> "$f"
"${results[@]}" matmul "$f" "$out/collective_matmul.json" "$ngpus" \
  "command=bash bench/gpu/matmul.sh target/release/ferroccl target/release/ferroccl-matmul OUTDIR (NGPUS=$ngpus DTYPE=$dtype SM_COPIES=${SM_COPIES:-16})" \
  "device=$(device_line)" "date=$(date -u +%FT%TZ)" "build=$(build_of "$ours")" \
  "baseline=torch.distributed on NCCL (NCCL_NVLS_ENABLE=0) + torch.matmul (cuBLAS), same GPUs, same run" \
  "raw=[$raws]" "script=bench/gpu/matmul.sh" | tee -a "$log"
step "device: $(device_line)"
step end
