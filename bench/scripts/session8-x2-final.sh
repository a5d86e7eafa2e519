#!/usr/bin/env bash
# Two GPUs, 2026-11-25 (eighth session), the session's final code (stream-ordered staged
# collectives on the post grid alone; no packets): 8 B - 512 MiB (factor 4) back to back,
# up to 1 MiB call + synchronize and 20 calls in a CUDA graph, all_reduce, all_gather and
# reduce_scatter, NCCL in the same process, every row checked (latency.json, ring.json).
# Run from the repository root with the release binary (--features nccl), gzipped, in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session8-x2-final.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
echo "## sweep ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 280 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 4 -c 1 -n 20 -w 5 --devices 0,1 --nccl \
  --timing back-to-back,sync,graph --json "$out/latency.json" 2>&1 | tee -a "$log"
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
