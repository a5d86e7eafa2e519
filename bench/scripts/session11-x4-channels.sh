#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (eleventh session), sixth call: 48 channels
# (the default) against 64 (the most) a rank, on 4 ranks (devices 0-3) and 2 (devices 0,
# 1), all_reduce, all_gather and reduce_scatter 4 MiB - 1 GiB back to back against NCCL
# in the same process (unchecked: timings only); then 64 channels checked at 16 and
# 64 MiB on 4 ranks, and small all_reduces on 64 channels back to back and in graphs.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/x4-channels.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for devs in 0,1,2,3 0,1; do
  for ch in 48 64; do
    step "--channels $ch, devices $devs, 4 MiB - 1 GiB, NCCL in the same process"
    timeout 60 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 4M -e 1G -f 4 -c 0 -n 10 -w 3 --devices $devs --channels $ch --nccl --json "$out/channels-$ch-$devs.json" 2>&1 | grep -v "^#" | tee -a "$log"
  done
done
step "--channels 64, 4 ranks, checked at 16 and 64 MiB"
timeout 90 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 16M -e 64M -f 4 -c 1 -n 5 -w 2 --devices 0,1,2,3 --channels 64 2>&1 | grep -v "^#" | tee -a "$log"
step "--channels 64, 4 ranks, all_reduce 8 B - 1 MiB back to back and in graphs"
timeout 40 /tmp/ferroccl bench all_reduce -b 8 -e 1M -f 32 -c 1 -n 20 -w 5 --devices 0,1,2,3 --channels 64 --timing back-to-back,graph 2>&1 | grep -v "^#" | tee -a "$log"
step end
