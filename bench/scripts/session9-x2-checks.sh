#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-25 (ninth session): the GPU self-tests on one GPU
# (issue 13's "ferroccl test after the move"), the work loop's benchmark (issue 14), seed
# 004's shift and seed 002's Jacobi as 2 PEs in 2 processes (issue 17; Jacobi after the
# heap-zeroing fix of 5307e50), and the collective matrix with 2 ranks on the two GPUs.
# Run from the repository root with the release binaries gzipped in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session9-checks.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
echo "## ferroccl test, one GPU ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 150 /tmp/ferroccl test 2>&1 | tail -n 22 | tee -a "$log"
echo "## bench work_loop ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 120 /tmp/ferroccl bench work_loop --json "$out/work_loop.json" 2>&1 | tee -a "$log"
echo "## shift, 2 PEs as processes on devices 0 and 1 ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 40 /tmp/ferroccl run -n 2 --devices 0,1 --grace 5s /tmp/shift --check-api 2>&1 | tee -a "$log"
for i in 1 2; do
echo "## jacobi, 2 PEs as processes on devices 0 and 1, run $i ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 40 /tmp/ferroccl run -n 2 --devices 0,1 --grace 5s /tmp/jacobi 2>&1 | grep -v "^ " | tail -n 9 | tee -a "$log"
done
echo "## coll, 2 ranks on devices 0 and 1 ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 150 /tmp/ferroccl coll --devices 0,1 --ranks 2 2>&1 | tail -n 3 | tee -a "$log"
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
