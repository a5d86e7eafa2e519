#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-25 (ninth session): issue 16's sweep, 8 B - 1 GiB
# (factor 2) back to back and, up to 1 MiB, call + synchronize and 20 calls in a CUDA
# graph, all_reduce, all_gather and reduce_scatter, NCCL 2.28.9 in the same process,
# every row checked (latency.json, ring.json; issue 13's 64M-1G all_reduce figures).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session9-sweep.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
echo "## sweep ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 560 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl \
  --timing back-to-back,sync,graph --json "$out/latency.json" 2>&1 | tee -a "$log"
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
