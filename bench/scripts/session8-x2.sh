#!/usr/bin/env bash
# Two GPUs, 2026-11-25 (eighth session): stream-ordered staged collectives on the post grid
# alone (no mailbox round trip), through the public Comm calls on streams, NCCL in the
# same process, every row checked before it is timed:
# 1. the self-tests (graphs of 20 all_reduces replayed 100 times, checked) and the
#    stream-path matrix with 2 ranks on 2 GPUs;
# 2. 8 B - 16 MiB back to back, call + synchronize and 20 calls in a CUDA graph, for
#    all_reduce, all_gather and reduce_scatter (issue 16's small-size fields);
# 3. the stream-path matrix with 4 ranks on 2 GPUs.
# Run from the repository root with the release binary (--features nccl) in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session8-x2.txt
f=./.carry/ferroccl
stamp() { echo "## $* ($(date -u +%FT%TZ))" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
stamp "1. self-tests, matrix 2 ranks on 2 GPUs (stream path)"
timeout 90 $f test 2>&1 | tail -n 3 | tee -a "$log"
timeout 120 $f coll --devices 0,1 --ranks 2 --path stream 2>&1 | tail -n 2 | tee -a "$log"
stamp "2. sweep 8 B - 16 MiB, default communicator, NCCL in the same run"
timeout 200 $f bench all_reduce all_gather reduce_scatter -b 8 -e 16M -f 4 -c 1 -n 20 -w 5 --devices 0,1 --nccl \
  --timing back-to-back,sync,graph --json "$out/small.json" 2>&1 | tee -a "$log"
stamp "3. matrix 4 ranks on 2 GPUs (stream path)"
timeout 150 $f coll --devices 0,1 --ranks 4 --path stream 2>&1 | tail -n 2 | tee -a "$log"
stamp end
