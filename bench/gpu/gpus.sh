#!/usr/bin/env bash
# What NGPUS GPUs (default: every GPU) show of a build, one process per GPU as users
# deploy communicators, in parts that each fit one command of at most ten minutes (sized
# on two GPUs; on more, the matrix's limits may cut a run short: it then says "exit
# status 124"). CARRY is the folder bench/gpu/pack.sh's archive was unpacked into (bin/,
# mpich/, nccl-tests/).
#   tests:  the self-tests (`ferroccl test`) on the first and the last GPU:
#           OUTDIR/raw/selftest/gpus-N-DATE.txt
#   matrix: the correctness matrix with one process per GPU (`ferroccl coll --procs N`:
#           the device's choice, then one-shot, two-shot and the NVLS software twin
#           forced; ALGOS names fewer, e.g. "auto"): OUTDIR/raw/selftest/matrix-N-DATE.txt
#   nccl:   bench/gpu/nccl.sh with CARRY/mpich (nccl-tests with -g N and with one process
#           per GPU, two_ranks.cu, torch_nccl.py under torchrun): OUTDIR/nccl_abi.json
#   bench:  bench/gpu/ring.sh (`ferroccl bench --procs N --nccl`, 8 B - 1 GiB back to
#           back, and up to 1 MiB synchronized and in CUDA graphs): OUTDIR/ring[-Ngpu].json,
#           OUTDIR/latency[-Ngpu].json
#   matmul: bench/gpu/matmul.sh (the collective matmuls against NCCL + cuBLAS and cuBLAS
#           alone): OUTDIR/collective_matmul.json
#   shmem:  the symmetric-heap examples with one PE per GPU, each PE a process (`ferroccl
#           run -n N … jacobi`, `… shift`), each checking its results, and `ferroccl bench
#           shmem` on the first two GPUs: OUTDIR/raw/shmem/procs-N-DATE.txt
set -euo pipefail
usage="usage: $0 tests|matrix|nccl|bench|matmul|shmem CARRY OUTDIR
  env: NGPUS (default: every GPU) DEVICE (the machine's line, as it was lent)
       ALGOS (matrix: default \"auto one-shot two-shot nvls\") and what each part's script takes"
[ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
part=$1 carry=$(realpath "$2")
mkdir -p "$3"
out=$(realpath "$3")
bin=$carry/bin
# The commit the carried binaries were built from (the checkout here may differ).
if [ -z "${BUILD:-}" ] && [ -f "$bin/BUILD" ]; then BUILD=$(cat "$bin/BUILD"); export BUILD; fi
here=$(cd "$(dirname "$0")" && pwd)
n=${NGPUS:-$(nvidia-smi -L | wc -l)}
devices=$(seq -s, 0 $((n - 1)))
# run LIMIT FILE COMMAND…: one step of a part, its output and exit status into FILE.
run() {
  local limit=$1 f=$2
  shift 2
  step "$*" >> "$f"
  timeout "$limit" "$@" >> "$f" 2>&1 || echo "exit status $?" >> "$f"
}
case $part in
  tests|matrix|shmem)
    source "$here/env.sh"
    open_results "$out" "$([ "$part" = shmem ] && echo shmem || echo selftest)"
    if [ "$part" = shmem ]; then
      f=$out/$rawdir/procs-$n-$day.txt
      run 120 "$f" "$bin/ferroccl" run -n "$n" --devices "$devices" --grace 5s "$bin/jacobi"
      run 120 "$f" "$bin/ferroccl" run -n "$n" --devices "$devices" --grace 5s "$bin/shift" --check-api
      run 120 "$f" "$bin/ferroccl" bench shmem --devices 0,1
    elif [ "$part" = tests ]; then
      f=$out/$rawdir/gpus-$n-$day.txt
      for d in $(echo 0 $((n - 1)) | tr ' ' '\n' | sort -un); do
        run 150 "$f" "$bin/ferroccl" test --device "$d"
      done
    else
      f=$out/$rawdir/matrix-$n-$day.txt
      for algo in ${ALGOS:-auto one-shot two-shot nvls}; do
        case $algo in
          auto) run 240 "$f" "$bin/ferroccl" coll --procs "$n" --devices "$devices" ;;
          one-shot) run 120 "$f" "$bin/ferroccl" coll --procs "$n" --devices "$devices" --algo one-shot ;;
          two-shot) run 90 "$f" "$bin/ferroccl" coll --procs "$n" --devices "$devices" --algo two-shot ;;
          nvls) run 120 "$f" "$bin/ferroccl" coll --procs "$n" --devices "$devices" --algo nvls --threads 256 ;;
          *) echo "ALGOS: no algorithm $algo (auto, one-shot, two-shot, nvls)" >&2; exit 2 ;;
        esac
      done
    fi
    grep -E "passed, .* failed|wrong across|exit status|FAILED|WRONG" "$f" | tee -a "$log" || true
    step "device: $(device_line)"
    step end
    ;;
  nccl)
    NGPUS=$n MPI_HOME=$carry/mpich bash "$here/nccl.sh" "$bin/libnccl.so.2" "$carry/nccl-tests" "$out"
    ;;
  bench)
    DEVICES=$devices bash "$here/ring.sh" "$bin/ferroccl" "$out"
    ;;
  matmul)
    NGPUS=$n bash "$here/matmul.sh" "$bin/ferroccl" "$bin/ferroccl-matmul" "$out"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
