#!/usr/bin/env bash
# Seventeenth session (2026-11-27), fifth device call, four GPUs (one rank each): the
# final build (.carry/ferroccl-lean.gz, 3975b82) with the automatic choice against NCCL
# 2.28.9 in the same process, then one-shot and two-shot forced (32 MiB of staging),
# 512 KiB - 32 MiB, back to back and in CUDA graphs, every row checked; then the GPU
# matrix (automatic choice, stream path). For the 4-rank row of THRESHOLDS with staged
# plans of 16 KiB a channel on up to 63 channels, and issue 19.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x4.txt
gunzip -c .carry/ferroccl-lean.gz > /tmp/lean && chmod +x /tmp/lean
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
b() {
  step "bench $1 512 KiB - 32 MiB, devices 0,1,2,3 $2"
  timeout 150 /tmp/lean bench $1 -b 512K -e 32M -f 2 -c 1 -n 20 -w 5 --devices 0,1,2,3 --timing back-to-back,graph --latency-maxbytes 32M $2 --json "$res/x4-$3.json" 2>&1 | grep -v "^# " >> "$log"
}
b "all_reduce all_gather reduce_scatter" --nccl auto
b "all_reduce all_gather reduce_scatter" "--algo one-shot --staging 32M" oneshot
b all_reduce "--algo two-shot --staging 32M" twoshot
step "coll --algo auto, 4 ranks on devices 0-3, stream path"
timeout 150 /tmp/lean coll --devices 0,1,2,3 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step end
