#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-25 (ninth session): staged plans kept to 32
# channels (so a default communicator's staged calls all run on the post grid alone):
# 1-8 MiB back to back and in CUDA graphs against NCCL in the same process, then the
# collective matrix on 2 ranks through the stream path with the default channels.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session9-cap.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
echo "## 1-8 MiB ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 150 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 1M -e 8M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl \
  --timing back-to-back,graph --latency-maxbytes 8M --json "$out/cap.json" 2>&1 | grep -v "^#  " | tee -a "$log"
echo "## coll, 2 ranks, stream path, 48 channels (1 resident) ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 100 /tmp/ferroccl coll --devices 0,1 --ranks 2 --path stream --channels 48 --resident 1 2>&1 | tail -n 1 | tee -a "$log"
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
