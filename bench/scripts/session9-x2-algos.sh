#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-25 (ninth session), default communicator (48
# channels: 1 resident, 47 guests): every algorithm forced, 512 KiB - 16 MiB, back to back
# and in CUDA graphs, to place the size thresholds of `device_rt::algo::select` (2 ranks);
# then 64 channels at 32 MiB - 1 GiB against NCCL (the default's 48 are in the sweep).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session9-algos.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
run() { echo "## $* ($(date -u +%FT%TZ))" | tee -a "$log"; timeout 120 /tmp/ferroccl bench "$@" 2>&1 | grep -v "^#  " | tee -a "$log"; }
for a in one-shot two-shot ring; do
  run all_reduce -b 512K -e 16M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --algo $a --staging 32M --timing back-to-back,graph --latency-maxbytes 16M
done
for a in one-shot ring; do
  run all_gather reduce_scatter -b 512K -e 16M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --algo $a --staging 32M --timing back-to-back,graph --latency-maxbytes 16M
done
run all_reduce all_gather reduce_scatter -b 32M -e 1G -f 4 -c 1 -n 20 -w 5 --devices 0,1 --channels 64 --nccl
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
