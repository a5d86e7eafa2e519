#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (twelfth session), first call. (1) Issue 17
# pt 4: shift --check-api (now also the host's stream-ordered sum_reduce and barrier_all
# through the heap's work loops) as 4 PEs in 4 processes, 4 PEs in one process, and 8 PEs
# on 4 GPUs in one process. (2) Issue 19: the ring's speed by channel count, to choose a
# channel count by size: the ring forced, all_reduce, all_gather and reduce_scatter
# 2 MiB - 128 MiB back to back, unchecked (timings), on 4 ranks (devices 0-3) and 2 ranks
# (devices 0, 1) with 8, 16, 24, 32, 48 and 64 channels, NCCL in the same process on the
# 64-channel run (the baseline); then each checked once at 16 channels.
# The first try lost its log and four of its JSON files (more than 8 files in $OUT); the
# second ran CHANNELS="64 8" (the NCCL baseline and 8 channels) with the shmem steps again.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
# At most 8 files come back: everything goes to $res, packed into $out at the end.
res=/tmp/res; mkdir -p $res
log=$res/x4-channels.txt
channels=${CHANNELS:-64 48 32 24 16 8}
for b in ferroccl shift jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "shift --check-api, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/shift --check-api 2>&1 | tail -n 12 | tee -a "$log"
step "shift --check-api, 4 PEs in one process on devices 0-3"
timeout 40 /tmp/shift --pes 4 --devices 0,1,2,3 --check-api 2>&1 | tail -n 12 | tee -a "$log"
step "shift --check-api, 8 PEs in one process, two a GPU"
timeout 40 /tmp/shift --pes 8 --devices 0,1,2,3,0,1,2,3 --check-api 2>&1 | tail -n 12 | tee -a "$log"
step "jacobi, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/jacobi 2>&1 | grep -v "^ " | tail -n 6 | tee -a "$log"
for devs in 0,1,2,3 0,1; do
  for ch in $channels; do
    nccl=""; [ $ch = 64 ] && nccl=--nccl
    step "ring forced, --channels $ch, devices $devs, 2 MiB - 128 MiB, unchecked $nccl"
    timeout 70 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 2M -e 128M -f 2 -c 0 -n 10 -w 3 --devices $devs --channels $ch --algo ring $nccl --json "$res/ring-ch$ch-$(echo $devs | tr -d ,).json" 2>&1 | grep -v "^#" | tee -a "$log"
  done
  step "ring forced, --channels 16, devices $devs, 2 MiB - 128 MiB, checked"
  timeout 70 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 2M -e 128M -f 4 -c 1 -n 2 -w 1 --devices $devs --channels 16 --algo ring 2>&1 | grep -v "^#" | tail -n 30 | tee -a "$log"
done
step end
tar czf $out/x4-channels.tgz -C $res .
