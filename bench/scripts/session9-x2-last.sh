#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-25 (ninth session), the session's last build
# (b5e47e3): the symmetric heap's benchmark again (its bandwidth kernels share one mover
# now) and the GPU self-tests on one GPU.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session9-last.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
echo "## bench shmem ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 60 /tmp/ferroccl bench shmem --devices 0,1 --json "$out/shmem.json" 2>&1 | tee -a "$log"
echo "## ferroccl test ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 80 /tmp/ferroccl test 2>&1 | tail -n 2 | tee -a "$log"
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
