#!/usr/bin/env bash
# What one GPU can show of a build, in one run: the GPU self-tests (`ferroccl test`), the
# collective matmuls with two ranks sharing the GPU (bench/gpu/matmul.sh, NGPUS=1), and
# torch.distributed on the NCCL backend in one process (bench/gpu/torch_nccl.py: the
# CUDA-graph-captured all_reduce among its checks) on NVIDIA's NCCL and on ferroccl's
# libnccl.so.2. Writes OUTDIR/raw/selftest/one-gpu-DATE.txt, OUTDIR/raw/nccl/torch-DATE.txt
# and what bench/gpu/matmul.sh writes.
set -euo pipefail
usage="usage: $0 BINDIR OUTDIR
  BINDIR: a folder with ferroccl, ferroccl-matmul and libnccl.so.2 (target/release's, libnccl.so renamed)
  env: SHAPES, ITERS (bench/gpu/matmul.sh's; default the seed's shape and two larger, 10 iterations)"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
source "$(dirname "$0")/env.sh"
open_results "$out" selftest
step "ferroccl test" >> "$out/$rawdir/one-gpu-$day.txt"
timeout 300 "$bin/ferroccl" test >> "$out/$rawdir/one-gpu-$day.txt" 2>&1 || echo "exit status $?" >> "$out/$rawdir/one-gpu-$day.txt"
NGPUS=1 ITERS=${ITERS:-10} SHAPES=${SHAPES:-"1024,4096,4096 4096,4096,4096 1024,8192,8192"} \
  bash "$here/matmul.sh" "$bin/ferroccl" "$bin/ferroccl-matmul" "$out" || echo "matmul.sh: exit status $?" | tee -a "$log"
mkdir -p "$out/raw/nccl"
t=$out/raw/nccl/torch-$day.txt
for lib in NCCL ferroccl; do
  step "$lib torch_nccl.py, 1 process" >> "$t"
  preload=$([ "$lib" = ferroccl ] && echo "$bin/libnccl.so.2" || true)
  LD_PRELOAD=$preload timeout 300 /opt/torch/.venv/bin/torchrun --nproc-per-node 1 "$repo/bench/gpu/torch_nccl.py" >> "$t" 2>&1 || echo "exit status $?" >> "$t"
done
step "device: $(device_line)"
step end
