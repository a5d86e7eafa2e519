#!/usr/bin/env bash
# Nineteenth session (2026-11-27), second device call: bench/probes/dispatch_costs.cu with
# the stream-memory-operation route (one cuStreamBatchMemOp: an 8-word item, a doorbell, a
# wait for done, against a running echo kernel) beside the host-cost table and the GEMM
# footprint of resident CTAs; then `ferroccl bench work_loop` of the current build
# (.carry/ferroccl-push2.gz, 420da84) in the same call for the post-kernel route's figures.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/memop.txt
nv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "nvcc dispatch_costs.cu"
nvcc -O2 -arch=sm_90 -I$nv/cu13/include bench/probes/dispatch_costs.cu -L$nv/cu13/lib -Xlinker -rpath=$nv/cu13/lib -lcuda -lcublas -o /tmp/dispatch_costs >> "$log" 2>&1
for round in 1 2; do
  step "dispatch_costs 3, round $round (item as 8 stream writes)"
  timeout 150 /tmp/dispatch_costs 3 >> "$log" 2>&1
  step "dispatch_costs, round $round, route only, item in a host slot"
  HOST_ITEM=1 ONLY_MEMOP=1 timeout 100 /tmp/dispatch_costs >> "$log" 2>&1
done
gunzip -c .carry/ferroccl-push2.gz > /tmp/base && chmod +x /tmp/base
step "ferroccl bench work_loop (420da84)"
timeout 150 /tmp/base bench work_loop --json "$res/work_loop.json" >> "$log" 2>&1
step end
cd $out && tar czf res.tgz res
