#!/usr/bin/env bash
# Seventeenth session (2026-11-27), first device call: main (.carry/ferroccl-main.gz, the
# sixteenth session's final device code) against "wide" (.carry/ferroccl-wide.gz: staged
# plans of 16 KiB a channel on up to 63 channels instead of 64 KiB on up to 32), 512 KiB -
# 32 MiB, back to back and in CUDA graphs, 2 ranks (devices 0, 1), NCCL 2.28.9 in the
# same process, every row checked; build order alternated; then the wide build with each
# staged algorithm forced (32 MiB of staging), and its GPU matrix (automatic choice,
# stream path).
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/wide.txt
for v in main wide; do gunzip -c .carry/ferroccl-$v.gz > /tmp/$v && chmod +x /tmp/$v; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
mid() {
  step "$1 round $2: bench all_reduce all_gather reduce_scatter 512 KiB - 32 MiB, devices 0,1 $3"
  timeout 120 /tmp/$1 bench all_reduce all_gather reduce_scatter -b 512K -e 32M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --timing back-to-back,graph --latency-maxbytes 32M $3 --json "$res/$1-r$2${4:-}.json" 2>&1 | grep -v "^#" >> "$log"
}
mid main 0 --nccl; mid wide 0 --nccl
mid wide 1 --nccl; mid main 1 --nccl
mid wide 2 "--algo one-shot --staging 32M" -oneshot
step "wide two-shot"
timeout 60 /tmp/wide bench all_reduce -b 512K -e 32M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --timing back-to-back,graph --latency-maxbytes 32M --algo two-shot --staging 32M --json "$res/wide-twoshot.json" 2>&1 | grep -v "^#" >> "$log"
step "wide: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/wide coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step end
