#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (eleventh session), issue 19, second call:
# (1) the new self-test device_alloc_zeroed with the build before the fix (DeviceAlloc
# zeroed with cuMemsetD8 on the legacy stream: .carry/ferroccl-old.gz) and after it;
# (2) the first rows of all_reduce and reduce_scatter with a 5 GiB buffer arena (-e 1G),
# checked, which came out wrong in the first call's sweeps, twice with the fixed build;
# (3) the 1 GiB rows those sweeps did not reach, against NCCL in the same process;
# (4) every algorithm forced, 256 KiB - 32 MiB, back to back and in CUDA graphs, for the
# 4-rank row of the thresholds; (5) the ring's per-channel statistics at 16 and 64 MiB.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/x4-fix.txt
for b in ferroccl ferroccl-old; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test device_alloc_zeroed, build before the fix (negative control)"
timeout 40 /tmp/ferroccl-old test device_alloc_zeroed 2>&1 | tail -n 3 | tee -a "$log"
step "ferroccl test, build with the fix"
timeout 90 /tmp/ferroccl test 2>&1 | tail -n 22 | tee -a "$log"
for i in 1 2; do
  step "first rows with a 5 GiB arena, fixed build, run $i"
  timeout 40 /tmp/ferroccl bench all_reduce reduce_scatter -b 8 -e 1G -f 1024 -c 1 -n 5 -w 2 --devices 0,1,2,3 2>&1 | grep -v "^#" | tee -a "$log"
done
step "1 GiB rows against NCCL"
timeout 60 /tmp/ferroccl bench all_reduce reduce_scatter -b 1G -e 1G -c 1 -n 10 -w 3 --devices 0,1,2,3 --nccl --json "$out/x4-1G.json" 2>&1 | grep -v "^#" | tee -a "$log"
for algo in one-shot two-shot ring; do
  fns="all_reduce all_gather reduce_scatter"; [ $algo = two-shot ] && fns=all_reduce
  step "bench $fns 256K - 32M, --algo $algo, back to back and graphs"
  timeout 100 /tmp/ferroccl bench $fns -b 256K -e 32M -f 2 -c 1 -n 20 -w 5 --devices 0,1,2,3 --algo $algo --timing back-to-back,graph --json "$out/x4-algo-$algo.json" 2>&1 | tee -a "$log" > /dev/null
done
step "ring statistics, all_reduce 16 and 64 MiB"
timeout 60 /tmp/ferroccl bench all_reduce all_gather -b 16M -e 64M -f 4 -c 0 -n 20 -w 5 --devices 0,1,2,3 --stats 2>&1 | tee -a "$log" > /dev/null
step end
