#!/usr/bin/env bash
# Twenty-first session (2026-11-27): this session's final build (.carry/ferroccl-sleep2.gz,
# 2a6d4ba) through issue 14's point 5 checks: the GPU matrix through the stream path with
# 4 ranks on devices 0,1 (two per GPU) and 8 ranks on device 0, the loops sleeping between
# cases while the host checks them; then `bench footprint` (default, then --sleep-after
# never) on device 0. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/final.txt
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-sleep2.gz > /tmp/new && chmod +x /tmp/new
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
step "coll --algo auto, 4 ranks on devices 0,1, stream path"
timeout 200 /tmp/new coll --devices 0,1 --ranks 4 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "coll --algo auto, 8 ranks on device 0, stream path"
timeout 200 /tmp/new coll --devices 0 --ranks 8 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "bench footprint, device 0, 2 ranks, default (loops sleep after 1 ms)"
timeout 100 /tmp/new bench footprint --json "$res/footprint.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "bench footprint, device 0, 2 ranks, --sleep-after never (loops poll)"
timeout 100 /tmp/new bench footprint --sleep-after never --json "$res/footprint-awake.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "end"
cd $out && tar czf res.tgz res
