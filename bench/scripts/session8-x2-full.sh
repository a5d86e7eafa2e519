#!/usr/bin/env bash
# Two GPUs, 2026-11-25 (eighth session), after small staged shares went in packets:
# 1. the self-tests (graphs of 20 all_reduces replayed 100 times, checked) and the
#    stream-path matrix with 2 ranks on 2 GPUs;
# 2. 8 B - 1 GiB back to back, and up to 1 MiB call + synchronize and 20 calls in a CUDA
#    graph, all_reduce, all_gather and reduce_scatter, NCCL in the same process
#    (latency.json: issue 16's fields; ring.json's rows);
# 3. the stream-path matrix with 4 ranks on 2 GPUs.
# Run from the repository root with the release binary (--features nccl) in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session8-x2-full.txt
f=./.carry/ferroccl
stamp() { echo "## $* ($(date -u +%FT%TZ))" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
stamp "1. self-tests, matrix 2 ranks on 2 GPUs (stream path)"
timeout 90 $f test 2>&1 | tail -n 3 | tee -a "$log"
timeout 120 $f coll --devices 0,1 --ranks 2 --path stream 2>&1 | tail -n 2 | tee -a "$log"
stamp "2. sweep 8 B - 1 GiB, default communicator, NCCL in the same run"
timeout 330 $f bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl \
  --timing back-to-back,sync,graph --json "$out/latency.json" 2>&1 | tee -a "$log"
stamp "3. matrix 4 ranks on 2 GPUs (stream path)"
timeout 200 $f coll --devices 0,1 --ranks 4 --path stream 2>&1 | tail -n 2 | tee -a "$log"
stamp end
