#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (fourteenth session): the lean collectives with
# a few lines a thread (up to 512 KiB as the staged plans count size), taken when the
# device chooses (--algo auto), against the staged one-shot of the same build (--algo
# one-shot), NCCL in the same process: all_reduce, all_gather and reduce_scatter 8 B -
# 1 MiB (factor 2) back to back, call + synchronize and in CUDA graphs on 4 ranks
# (devices 0-3) and 2 (devices 0, 1); then the sweep 8 B - 1 GiB (--algo auto) on
# 2 and 4 ranks, the GPU matrix (automatic choice, stream path, 2 and 4 ranks) and the
# self-tests (argument `checks`: those alone). NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/lean.txt
gunzip -c .carry/ferroccl.gz > /tmp/lean && chmod +x /tmp/lean
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
if [ "${1:-}" != checks ]; then
for devs in 0,1,2,3 0,1; do
  for algo in one-shot auto; do
    step "--algo $algo, bench all_reduce all_gather reduce_scatter 8 B - 1 MiB, devices $devs, back to back, sync and graph, NCCL in the same process"
    timeout 200 /tmp/lean bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 2 -c 1 -n 50 -w 10 --devices $devs --algo $algo --nccl --timing back-to-back,sync,graph --latency-maxbytes 1M --json "$res/$algo-$(echo $devs | tr -d ,).json" 2>&1 | grep -v "^#" >> "$log"
  done
done
for devs in 0,1 0,1,2,3; do
  step "bench all_reduce all_gather reduce_scatter 8 B - 1 GiB (the issue's sweep), devices $devs, NCCL in the same process"
  timeout 280 /tmp/lean bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices $devs --nccl --timing back-to-back,sync,graph --json "$res/sweep-$(echo $devs | tr -d ,).json" 2>&1 | grep -v "^#" >> "$log"
done
fi
if [ "${1:-}" = checks ]; then
  for devs in 0,1 0,1,2,3; do
    step "coll --algo auto, devices $devs, stream path"
    timeout 150 /tmp/lean coll --devices $devs --path stream --algo auto 2>&1 | tail -n 3 | tee -a "$log"
  done
  step "ferroccl test (device 0)"
  timeout 150 /tmp/lean test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
fi
step end

