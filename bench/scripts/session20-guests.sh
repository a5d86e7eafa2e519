#!/usr/bin/env bash
# Twentieth session (2026-11-27): two ranks on one H200 (device 0), the nineteenth
# session's final device build (.carry/ferroccl-final.gz, b270bf7): the default
# communicator (64 channels: 1 resident + 63 guests; posts do not overlap, two post grids
# per rank do not fit beside the loops) against 32 channels (1 + 31 guests; posts
# overlap), alternated, all three collectives 8 B - 1 MiB back to back, call +
# synchronize and in CUDA graphs, then 4 MiB - 256 MiB back to back, every row checked
# (no NCCL: it needs one GPU per rank). NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/guests.txt
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-final.gz > /tmp/final && chmod +x /tmp/final
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
for round in 1 2; do
  for ch in 64 32; do
    step "round $round, $ch channels: 8 B - 1 MiB"
    timeout 100 /tmp/final bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 --devices 0 --ranks 2 --channels $ch --timing back-to-back,sync,graph --json "$res/small-$ch-r$round.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
  done
done
for ch in 64 32; do
  step "$ch channels: 4 MiB - 256 MiB"
  timeout 60 /tmp/final bench all_reduce all_gather reduce_scatter -b 4M -e 256M -f 4 -c 1 -n 10 -w 3 --devices 0 --ranks 2 --channels $ch --json "$res/large-$ch.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
done
step end
cd $out && tar czf res.tgz res
