#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (eleventh session), third call: the self-test
# device_alloc_zeroed (a 50 ms kernel on the legacy stream first) with the build before
# the fix (.carry/ferroccl-old.gz: cuMemsetD8 on the legacy stream) and after it; then
# 3 ranks on devices 0-2 with every algorithm forced, 64 KiB - 32 MiB back to back and
# 64 KiB - 1 MiB in CUDA graphs, for the 3-rank row of the thresholds.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/x4-three.txt
for b in ferroccl ferroccl-old; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test device_alloc_zeroed, build before the fix (negative control)"
timeout 40 /tmp/ferroccl-old test device_alloc_zeroed 2>&1 | tail -n 3 | tee -a "$log"
step "ferroccl test device_alloc_zeroed, build with the fix"
timeout 40 /tmp/ferroccl test device_alloc_zeroed 2>&1 | tail -n 3 | tee -a "$log"
for algo in one-shot two-shot ring; do
  fns="all_reduce all_gather reduce_scatter"; [ $algo = two-shot ] && fns=all_reduce
  step "bench $fns 64K - 32M, --algo $algo, 3 ranks on devices 0-2, back to back and graphs"
  timeout 100 /tmp/ferroccl bench $fns -b 64K -e 32M -f 2 -c 1 -n 20 -w 5 --devices 0,1,2 --algo $algo --timing back-to-back,graph --json "$out/x3-algo-$algo.json" 2>&1 | tee -a "$log" > /dev/null
done
step end
