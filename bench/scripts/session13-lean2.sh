#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (thirteenth session): the lean all-reduce with
# up to 16 lines a thread (32 KiB), taken when the device chooses (--algo auto), against
# the staged one-shot of the same build (--algo one-shot forces it at every size), NCCL
# in the same process: all_reduce 8 B - 32 KiB back to back, call + synchronize and in
# CUDA graphs on 4 ranks (devices 0-3) and 2 (devices 0, 1), twice each; then the GPU
# matrix (automatic choice, 2 ranks) and the self-tests. NCCL_NVLS_ENABLE=0; no multicast
# object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
log=$res/lean2.txt
gunzip -c .carry/ferroccl.gz > /tmp/lean && chmod +x /tmp/lean
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for round in 1 2; do
  for devs in 0,1,2,3 0,1; do
    for algo in one-shot auto; do
      step "round $round: --algo $algo, bench all_reduce 8 B - 32 KiB, devices $devs, back to back, sync and graph, NCCL in the same process"
      timeout 100 /tmp/lean bench all_reduce -b 8 -e 32K -f 4 -c 1 -n 100 -w 20 --devices $devs --algo $algo --nccl --timing back-to-back,sync,graph --latency-maxbytes 32K --json "$res/ar-$algo-$(echo $devs | tr -d ,)-r$round.json" 2>&1 | grep -v "^#" | tee -a "$log"
    done
  done
done
step "lean: coll --algo auto, devices 0,1, stream path"
timeout 60 /tmp/lean coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 1 | tee -a "$log"
step "lean: ferroccl test (device 0)"
timeout 150 /tmp/lean test 2>&1 | grep -v "^\[" | tail -n 2 | tee -a "$log"
step end
tar czf $out/lean2.tgz -C $res .
