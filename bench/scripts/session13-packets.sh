#!/usr/bin/env bash
# Four H200s or H100s (nvidia-h200-x4), 2026-11-26 (thirteenth session): one-shot all_reduce
# shares of up to 64 KiB as LL packets (branch `packets`) against main's staged flags
# (the binary built at 9678ffa), alternately in one device call, each with NCCL in the
# same process: all_reduce 8 B - 256 KiB back to back, call + synchronize and in CUDA
# graphs, on 4 ranks (devices 0-3; twice) and 2 (devices 0, 1); then the packets build's GPU
# matrix (one-shot forced, stream path) on 4 ranks. NCCL_NVLS_ENABLE=0; no multicast
# object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
log=$res/packets.txt
gunzip -c .carry/ferroccl.gz > /tmp/packets && gunzip -c .carry/ferroccl-main.gz > /tmp/main && chmod +x /tmp/packets /tmp/main
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for round in 1 2; do
  devsets="0,1,2,3 0,1"; [ $round = 2 ] && devsets=0,1,2,3
  for devs in $devsets; do
    for build in main packets; do
      step "round $round: $build, bench all_reduce 8 B - 256 KiB, devices $devs, back to back, sync and graph, NCCL in the same process"
      timeout 100 /tmp/$build bench all_reduce -b 8 -e 256K -f 4 -c 1 -n 50 -w 10 --devices $devs --nccl --timing back-to-back,sync,graph --latency-maxbytes 256K --json "$res/ar-$build-$(echo $devs | tr -d ,)-r$round.json" 2>&1 | grep -v "^#" | tee -a "$log"
    done
  done
done
step "packets: coll --algo one-shot, devices 0-3, stream path"
timeout 90 /tmp/packets coll --devices 0,1,2,3 --path stream --algo one-shot 2>&1 | tail -n 2 | tee -a "$log"
step end
tar czf $out/packets.tgz -C $res .
