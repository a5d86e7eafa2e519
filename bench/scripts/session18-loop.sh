#!/usr/bin/env bash
# Eighteenth session (2026-11-27), last device call: issue 14's benchmarks with the
# session's final build (.carry/ferroccl-push2.gz, 420da84), one process each, device 0:
# `bench work_loop` (stream-ordered no-op, host time per call, round trips against an
# empty launch in the same run) and `bench footprint` (FMA, copy and cuBLAS bf16 GEMM
# kernels before / beside an idle default communicator / after, and beside a large
# all_reduce). NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/loop.txt
gunzip -c .carry/ferroccl-push2.gz > /tmp/final && chmod +x /tmp/final
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "bench work_loop"
timeout 150 /tmp/final bench work_loop --json "$res/work_loop.json" >> "$log" 2>&1
step "bench footprint, device 0, 2 ranks, default communicator"
timeout 250 /tmp/final bench footprint --json "$res/footprint.json" >> "$log" 2>&1
step end
