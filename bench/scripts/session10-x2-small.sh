#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-26 (tenth session): small calls (8 B - 1 MiB) of
# all_reduce, all_gather and reduce_scatter back to back, with a synchronize per call and
# in CUDA graphs, against NCCL in the same process, after the post grid stopped planning
# twice and the plans stopped dividing in 64 bits; then all_reduce with --stats for the
# post-grid split. Release binary gzipped in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/small.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "bench 8 B - 1 MiB, 2 ranks on devices 0 and 1, NCCL in the same process"
timeout 300 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json "$out/latency-small.json" 2>&1 | tee -a "$log" > /dev/null
step "all_reduce with statistics"
timeout 120 /tmp/ferroccl bench all_reduce -b 8 -e 64K -f 8 -c 1 -n 50 -w 5 --devices 0,1 --timing back-to-back,graph --stats 2>&1 | grep -v "placement\|spread\|no channel" | tee -a "$log" > /dev/null
step end
