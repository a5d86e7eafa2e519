#!/usr/bin/env bash
# Issue 14, point 3: what an idle (and a busy) communicator costs other work on its GPU:
# f32 FMAs, 1 GiB copies and a bf16 cuBLAS GEMM, before / beside the idle loops / while
# they run all-reduces / after shutdown, as ratios against before; the default
# communicator (2 ranks x 24 channels x 512 threads), then 1 rank x 1 channel x 128
# threads (the smallest). Runs on nvidia-h100-x1 or nvidia-h200.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
# No kernel may load lazily while a persistent loop runs.
export CUDA_MODULE_LOADING=EAGER
# cuBLAS from the image, under the name cudarc looks for first, its own folder on the
# loader's path for libcublasLt.
cublas=$(ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib/libcublas.so.* 2>/dev/null | head -n 1)
mkdir -p /tmp/cublas && ln -sf "$cublas" /tmp/cublas/libcublas.so
export LD_LIBRARY_PATH=/tmp/cublas:$(dirname "$cublas"):$LD_LIBRARY_PATH
log=$out/footprint.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; echo "cuBLAS: $cublas"; } | tee "$log"
timeout 280 ./.carry/ferroccl bench footprint --json "$out/footprint.json" 2>&1 | tee -a "$log"
timeout 280 ./.carry/ferroccl bench footprint --ranks 1 --channels 1 --threads 128 \
  --json "$out/footprint-1x128.json" 2>&1 | tee -a "$log"
date -u +%FT%TZ | tee -a "$log"
