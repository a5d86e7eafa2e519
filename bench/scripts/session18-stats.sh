#!/usr/bin/env bash
# Eighteenth session (2026-11-27), first device call: where the staged one-shot's time
# goes at 256 KiB - 2 MiB on 2 ranks (devices 0, 1), in CUDA graphs, the build of 3975b82
# (.carry/ferroccl-lean.gz): --stats lines (busy time per collective and channel, its flag
# exchange, the post grid's CTA start to end) of one-shot forced and of the automatic
# choice (lean up to 512 KiB / 1 MiB). Every row checked. NCCL_NVLS_ENABLE=0; no
# multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/stats.txt
gunzip -c .carry/ferroccl-lean.gz > /tmp/f && chmod +x /tmp/f
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for algo in one-shot auto; do
  for f in all_reduce all_gather reduce_scatter; do
    step "$algo --stats $f 64 KiB - 2 MiB graph"
    timeout 90 /tmp/f bench $f -b 64K -e 2M -f 2 -c 1 -n 50 -w 10 --devices 0,1 --algo $algo --timing graph --latency-maxbytes 4M --stats >> "$log" 2>&1
  done
done
step end
