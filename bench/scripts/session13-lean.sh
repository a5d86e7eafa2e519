#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (thirteenth session): the lean all-reduce (small
# stream-ordered all-reduces as LL packets on the first guest channel, .carry/ferroccl.gz)
# against main (9678ffa, .carry/ferroccl-main.gz), alternately in one device call, each
# with NCCL in the same process: all_reduce 8 B - 4 KiB back to back, call + synchronize
# and in CUDA graphs, on 4 ranks (devices 0-3, twice) and 2 (devices 0, 1); then the lean
# build's GPU matrix on 4 and 2 ranks (automatic choice and one-shot forced, stream path)
# and its self-tests. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
log=$res/lean.txt
gunzip -c .carry/ferroccl.gz > /tmp/lean && gunzip -c .carry/ferroccl-main.gz > /tmp/main && chmod +x /tmp/lean /tmp/main
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for round in 1 2; do
  devsets="0,1,2,3 0,1"; [ $round = 2 ] && devsets=0,1,2,3
  for devs in $devsets; do
    for build in main lean; do
      step "round $round: $build, bench all_reduce 8 B - 4 KiB, devices $devs, back to back, sync and graph, NCCL in the same process"
      timeout 100 /tmp/$build bench all_reduce -b 8 -e 4K -f 8 -c 1 -n 100 -w 20 --devices $devs --nccl --timing back-to-back,sync,graph --latency-maxbytes 4K --json "$res/ar-$build-$(echo $devs | tr -d ,)-r$round.json" 2>&1 | grep -v "^#" | tee -a "$log"
    done
  done
done
for devs in 0,1,2,3 0,1; do
  for algo in auto one-shot; do
    step "lean: coll --algo $algo, devices $devs, stream path"
    timeout 60 /tmp/lean coll --devices $devs --path stream --algo $algo 2>&1 | tail -n 1 | tee -a "$log"
  done
done
step "lean: ferroccl test (device 0)"
timeout 150 /tmp/lean test 2>&1 | grep -v "^\[" | tail -n 3 | tee -a "$log"
step end
tar czf $out/lean.tgz -C $res .
