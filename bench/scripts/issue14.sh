#!/usr/bin/env bash
# Issue 14's GPU checks and figures on one GPU (two-rank runs share it: devices 0,0): the
# self-tests (comm_graph_replays: two ranks' graphs of 20 Comm::all_reduce calls replayed
# 100 times, checked), `bench work_loop` (stream-ordered no-op in a graph, back to back,
# with a synchronize; Comm::all_reduce's host time per call; same-run baselines: empty
# kernel launches), the correctness matrix through the communicator's stream path (2
# ranks 24 x 512, 4 ranks), abort in a burst of stream-ordered calls, all_reduce 8 B -
# 64 MiB through the stream path and the direct path in one process each, and `bench
# footprint` (default communicator, then 1 rank x 1 channel x 128 threads). Run from the
# repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
export CUDA_MODULE_LOADING=EAGER
log=$out/issue14.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$log"
echo "## GPU self-tests" | tee -a "$log"
timeout 150 ./.carry/ferroccl test 2>&1 | tail -n 4 | tee -a "$log"
echo "## bench work_loop" | tee -a "$log"
timeout 100 ./.carry/ferroccl bench work_loop --json "$out/work_loop.json" 2>&1 | tee -a "$log"
echo "## matrix through the stream path: 2 ranks, 24 x 512; 4 ranks" | tee -a "$log"
timeout 100 ./.carry/ferroccl coll --devices 0 --ranks 2 --channels 24 --threads 512 --big 1572864 --path stream 2>&1 | tail -n 1 | tee -a "$log"
timeout 100 ./.carry/ferroccl coll --devices 0 --ranks 4 --channels 4 --step 65536 --path stream 2>&1 | tail -n 1 | tee -a "$log"
echo "## abort() in a burst of 64 MiB all-reduces (stream path)" | tee -a "$log"
for devs in 0,0 0,0,0,0; do
  timeout 60 ./.carry/ferroccl bench abort --devices $devs 2>&1 | tee -a "$log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"
done
echo "## all_reduce 8 B - 64 MiB, 2 ranks on one GPU: stream path, then direct path" | tee -a "$log"
for p in stream direct; do
  timeout 120 ./.carry/ferroccl bench all_reduce -b 8 -e 64M -f 8 -c 1 -n 20 -w 5 --devices 0,0 --path $p --stats \
    --json "$out/allreduce-1gpu-$p.json" 2>&1 | tee -a "$log"
done
echo "## bench footprint" | tee -a "$log"
cublas=$(ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib/libcublas.so.* 2>/dev/null | head -n 1)
mkdir -p /tmp/cublas && ln -sf "$cublas" /tmp/cublas/libcublas.so
export LD_LIBRARY_PATH=/tmp/cublas:$(dirname "$cublas"):$LD_LIBRARY_PATH
echo "cuBLAS: $cublas" | tee -a "$log"
timeout 200 ./.carry/ferroccl bench footprint --json "$out/footprint.json" 2>&1 | tee -a "$log"
timeout 200 ./.carry/ferroccl bench footprint --ranks 1 --channels 1 --threads 128 --json "$out/footprint-1x128.json" 2>&1 | tee -a "$log"
date -u +%FT%TZ | tee -a "$log"
