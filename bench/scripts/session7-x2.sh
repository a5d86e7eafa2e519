#!/usr/bin/env bash
# Two GPUs (nvidia-h100-x2), 2026-11-25: the default communicator (1 resident channel + 23
# guest channels per call, 256 threads) against NCCL in the same process, through the
# public Comm calls on streams, every row checked before it is timed:
# 1. the self-tests and the stream-path matrix with 2 ranks on 2 GPUs (issue 14 point 5);
# 2. 8 B - 1 GiB back to back, and up to 1 MiB call + synchronize and 20 calls in a CUDA
#    graph, for all_reduce, all_gather and reduce_scatter (latency.json: issue 16's fields,
#    ring.json's rows: issues 13 and 14);
# 3. 64 MiB - 1 GiB with 24 resident channels (no guests), the guests' cost at large sizes;
# 4. the stream-path matrix with 4 ranks on 2 GPUs.
# Run from the repository root with the release binary (--features nccl) in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session7-x2.txt
f=./.carry/ferroccl
stamp() { echo "## $* ($(date -u +%FT%TZ))" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
nvidia-smi topo -m 2>&1 | head -n 3 | tee -a "$log"
stamp "1. self-tests, matrix 2 ranks on 2 GPUs (stream path)"
timeout 90 $f test 2>&1 | tail -n 3 | tee -a "$log"
timeout 120 $f coll --devices 0,1 --ranks 2 --path stream 2>&1 | tail -n 2 | tee -a "$log"
stamp "2. sweep 8 B - 1 GiB, default communicator, NCCL in the same run"
timeout 300 $f bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl \
  --timing back-to-back,sync,graph --json "$out/latency.json" 2>&1 | tee -a "$log"
stamp "3. 64 MiB - 1 GiB, 24 resident channels"
timeout 90 $f bench all_reduce all_gather reduce_scatter -b 64M -e 1G -f 4 -c 1 -n 20 -w 5 --devices 0,1 --resident 24 \
  --nccl --json "$out/large-resident24.json" 2>&1 | grep -v "^#  " | tee -a "$log"
stamp "4. matrix 4 ranks on 2 GPUs (stream path)"
timeout 150 $f coll --devices 0,1 --ranks 4 --path stream 2>&1 | tail -n 2 | tee -a "$log"
stamp end
