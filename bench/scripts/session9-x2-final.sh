#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-25 (ninth session), the session's final build (48
# channels by default, the measured 2-rank thresholds): the GPU self-tests on one GPU,
# the collective matrix with 2 and 4 ranks on the two GPUs (stream path, the default
# communicator's guests), the symmetric heap's benchmark (issue 17) and the footprint
# benchmark (issue 14) on device 0. Release binary gzipped in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
cublas=$(ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib/libcublas.so.* 2>/dev/null | head -n 1)
mkdir -p /tmp/cublas && ln -sf "$cublas" /tmp/cublas/libcublas.so
export LD_LIBRARY_PATH=/tmp/cublas:$(dirname "$cublas"):$LD_LIBRARY_PATH
log=$out/session9-final.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "bench shmem, PE 0 on device 0, PE 1 on device 1"
timeout 150 /tmp/ferroccl bench shmem --devices 0,1 --json "$out/shmem.json" 2>&1 | tee -a "$log"
step "ferroccl test, one GPU"
timeout 120 /tmp/ferroccl test 2>&1 | tail -n 3 | tee -a "$log"
step "coll, 2 ranks on devices 0 and 1, stream path, default communicator"
timeout 100 /tmp/ferroccl coll --devices 0,1 --ranks 2 --path stream --channels 48 --resident 1 2>&1 | tail -n 1 | tee -a "$log"
step "coll, 4 ranks on devices 0 and 1"
timeout 120 /tmp/ferroccl coll --devices 0,1 --ranks 4 2>&1 | tail -n 1 | tee -a "$log"
step "bench footprint, device 0, 2 ranks, default communicator"
timeout 200 /tmp/ferroccl bench footprint --json "$out/footprint.json" 2>&1 | tee -a "$log"
step end
