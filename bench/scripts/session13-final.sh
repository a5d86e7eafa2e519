#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (thirteenth session), the final build (the lean
# all-reduce, all-gather and reduce-scatter, one line a thread; run first with the lean
# all-reduce alone, 12:35Z, then with all three, 12:47Z): all_reduce, all_gather and reduce_scatter 8 B - 128 KiB
# (factor 4) back to back, call + synchronize and in CUDA graphs on 2 ranks (devices 0, 1)
# and 4 (devices 0-3), NCCL in the same process, every row checked; the GPU matrix
# (automatic choice, 4 ranks) and the self-tests. NCCL_NVLS_ENABLE=0; no multicast object
# is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
log=$res/final.txt
gunzip -c .carry/ferroccl.gz > /tmp/lean && chmod +x /tmp/lean
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for devs in 0,1 0,1,2,3; do
  step "bench all_reduce all_gather reduce_scatter 8 B - 128 KiB, devices $devs, back to back, sync and graph, NCCL in the same process"
  timeout 200 /tmp/lean bench all_reduce all_gather reduce_scatter -b 8 -e 128K -f 4 -c 1 -n 50 -w 10 --devices $devs --nccl --timing back-to-back,sync,graph --latency-maxbytes 128K --json "$res/small-$(echo $devs | tr -d ,).json" 2>&1 | grep -v "^#" | tee -a "$log"
done
step "coll --algo auto, devices 0-3, stream path"
timeout 150 /tmp/lean coll --devices 0,1,2,3 --path stream --algo auto 2>&1 | tail -n 1 | tee -a "$log"
step "ferroccl test (device 0)"
timeout 150 /tmp/lean test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
tar czf $out/final.tgz -C $res .
