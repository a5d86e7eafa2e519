#!/usr/bin/env bash
# Twenty-third session (2026-11-27), four GPUs (nvidia-h200-x4), the push build
# (.carry/ferroccl-push.gz): for the 3-rank row of THRESHOLDS, three ranks on devices 0-2
# with each algorithm forced (two-shot and one-shot with 64 MiB of staging, the ring),
# 1-64 MiB back to back, every row checked, NCCL in the ring's run; then four ranks with
# 512 threads a channel against the default 256, 4-16 MiB, automatic choice.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x4b1.txt
gunzip -c .carry/ferroccl-push.gz > /tmp/new && chmod +x /tmp/new
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
b() { step "$1"; shift; name=$1; shift; timeout 100 /tmp/new bench "$@" -c 1 -n 20 -w 5 --json $res/$name.json > $res/$name.txt 2>&1; echo "rc $?" | tee -a "$log"; }
three=--devices=0,1,2
b "3 ranks: all_reduce two-shot forced, 64 MiB staging" three-two all_reduce -b 1M -e 64M -f 2 $three --algo two-shot --staging 64M
b "3 ranks: one-shot forced, 64 MiB staging" three-one all_reduce all_gather reduce_scatter -b 1M -e 64M -f 2 $three --algo one-shot --staging 64M
b "3 ranks: ring forced, NCCL" three-ring all_reduce all_gather reduce_scatter -b 1M -e 64M -f 2 $three --algo ring --nccl
b "4 ranks: auto, 512 threads" four-512 all_reduce all_gather reduce_scatter -b 4M -e 16M -f 2 --devices=0,1,2,3 --threads 512
b "4 ranks: auto, 256 threads" four-256 all_reduce all_gather reduce_scatter -b 4M -e 16M -f 2 --devices=0,1,2,3
step end
cd $out && tar czf res.tgz res
