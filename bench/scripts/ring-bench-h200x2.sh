#!/usr/bin/env bash
# nccl-tests' table of the ring collectives against NCCL on nvidia-h200-x2 (default
# communicator at the time: 24 channels; now pass --channels 24 for the same run);
# results to $OUT.
set -u
export CUDA_CACHE_PATH=$PWD/.nvcache CUDA_CACHE_MAXSIZE=4294967296 NCCL_NVLS_ENABLE=0
mkdir -p /tmp/nccl && ln -sf /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2 /tmp/nccl/libnccl.so
export LD_LIBRARY_PATH=/tmp/nccl:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp}
timeout 200 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 0 -n 20 -w 5 \
  --devices 0,1 --channels 24 --nccl --json "$out/ring.json" 2>&1 | tee "$out/ring.txt"
