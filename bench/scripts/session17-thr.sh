#!/usr/bin/env bash
# Seventeenth session (2026-11-27), second device call: main (.carry/ferroccl-main.gz, the
# sixteenth session's final device code) against "thr" (.carry/ferroccl-thr.gz: staged
# plans of 16 KiB a channel on up to 63 channels, one-shot up to 16 MiB on 2 ranks for
# all_reduce, all_gather and reduce_scatter, 16 MiB of staging by default), 512 KiB -
# 64 MiB, back to back and in CUDA graphs, 2 ranks (devices 0, 1), NCCL 2.28.9 in the
# same process, every row checked, build order alternated; then thr's GPU matrix
# (automatic choice, stream path) and self-tests.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/thr.txt
for v in main thr; do gunzip -c .carry/ferroccl-$v.gz > /tmp/$v && chmod +x /tmp/$v; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
mid() {
  step "$1 round $2: bench all_reduce all_gather reduce_scatter 512 KiB - 64 MiB, devices 0,1"
  timeout 120 /tmp/$1 bench all_reduce all_gather reduce_scatter -b 512K -e 64M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,graph --latency-maxbytes 64M --json "$res/$1-r$2.json" 2>&1 | grep -v "^#" >> "$log"
}
mid main 0; mid thr 0
mid thr 1; mid main 1
step "thr: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/thr coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "thr: ferroccl test (device 0)"
timeout 60 /tmp/thr test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
