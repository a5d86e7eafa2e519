#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (thirteenth session): the lean collectives
# spread over guest CTAs (up to 64 KiB as the staged plans count it), taken when the
# device chooses (--algo auto), against the staged one-shot of the same build (--algo
# one-shot), NCCL in the same process: all_reduce, all_gather and reduce_scatter 8 B -
# 128 KiB (factor 4) back to back, call + synchronize and in CUDA graphs on 4 ranks
# (devices 0-3) and 2 (devices 0, 1); then the GPU matrix (automatic choice, 2 ranks)
# and the self-tests. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
log=$res/ctas.txt
gunzip -c .carry/ferroccl.gz > /tmp/lean && chmod +x /tmp/lean
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for devs in 0,1,2,3 0,1; do
  for algo in one-shot auto; do
    step "--algo $algo, bench all_reduce all_gather reduce_scatter 8 B - 128 KiB, devices $devs, back to back, sync and graph, NCCL in the same process"
    timeout 120 /tmp/lean bench all_reduce all_gather reduce_scatter -b 8 -e 128K -f 4 -c 1 -n 50 -w 10 --devices $devs --algo $algo --nccl --timing back-to-back,sync,graph --latency-maxbytes 128K --json "$res/$algo-$(echo $devs | tr -d ,).json" 2>&1 | grep -v "^#" >> "$log"
  done
done
step "coll --algo auto, devices 0,1, stream path"
timeout 60 /tmp/lean coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 1 | tee -a "$log"
step "ferroccl test (device 0)"
timeout 150 /tmp/lean test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
tar czf $out/ctas.tgz -C $res .
