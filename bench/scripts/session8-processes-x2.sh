#!/usr/bin/env bash
# Two GPUs, 2026-11-25 (eighth session): PEs as processes on GPUs (issue 17), one PE per
# GPU, never two processes' kernels on one GPU: seed 004's shift with the device API
# check, then seed 002's Jacobi as 2 processes and, for comparison, as 2 PEs in one
# process. Run from the repository root with the release binaries ferroccl, shift and
# jacobi gzipped in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session8-processes.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
echo "## shift, 2 PEs as processes on devices 0 and 1 ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 60 /tmp/ferroccl run -n 2 --devices 0,1 --grace 10s /tmp/shift --check-api 2>&1 | tee -a "$log"
echo "## jacobi, 2 PEs as processes on devices 0 and 1 ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 60 /tmp/ferroccl run -n 2 --devices 0,1 --grace 10s /tmp/jacobi 2>&1 | tail -n 4 | tee -a "$log"
echo "## jacobi, 2 PEs in one process ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 60 /tmp/jacobi --pes 2 --devices 0,1 2>&1 | tail -n 4 | tee -a "$log"
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
