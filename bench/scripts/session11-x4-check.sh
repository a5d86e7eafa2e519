#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (eleventh session), issue 19: the correctness
# matrix (the default communicator on the stream path, then each staged algorithm and the NVLS software twin forced (4 ranks, one per
# GPU), seed 004's shift and seed 002's Jacobi as 4 PEs in 4 processes (one per GPU), and
# the footprint benchmark on device 0. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/x4-check.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "coll, 4 ranks on devices 0-3, default communicator, stream path"
timeout 90 /tmp/ferroccl coll --devices 0,1,2,3 --path stream 2>&1 | tail -n 3 | tee -a "$log"
for algo in nvls one-shot two-shot; do
  step "coll, --algo $algo, 4 ranks on devices 0-3"
  timeout 90 /tmp/ferroccl coll --devices 0,1,2,3 --algo $algo 2>&1 | tail -n 3 | tee -a "$log"
done
step "shift, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/shift --check-api 2>&1 | tail -n 12 | tee -a "$log"
step "jacobi, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/jacobi 2>&1 | grep -v "^ " | tail -n 12 | tee -a "$log"
step "shift, 4 PEs in one process on devices 0-3"
timeout 40 /tmp/shift --pes 4 --devices 0,1,2,3 --check-api 2>&1 | tail -n 12 | tee -a "$log"
step "bench footprint, device 0, default"
timeout 110 /tmp/ferroccl bench footprint --json "$out/x4-footprint.json" 2>&1 | tee -a "$log"
step end
