#!/usr/bin/env bash
# Nineteenth session (2026-11-27), third device call: bench/probes/dispatch_costs.cu's
# footprint part only (ONLY_FOOTPRINT): the cuBLAS bf16 8192^3 GEMM beside resident CTAs of
# several shapes, and beside one full-SM CTA placed on each of several SMs, alternated
# with runs beside none. No ferroccl code runs.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/placed.txt
nv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
nvcc -O2 -arch=sm_90 -I$nv/cu13/include bench/probes/dispatch_costs.cu -L$nv/cu13/lib -Xlinker -rpath=$nv/cu13/lib -lcuda -lcublas -o /tmp/dispatch_costs >> "$log" 2>&1
echo "## footprint, 4 rounds ($(date -u +%FT%TZ))" >> "$log"
ONLY_FOOTPRINT=1 timeout 300 /tmp/dispatch_costs 4 >> "$log" 2>&1
echo "## end ($(date -u +%FT%TZ))" >> "$log"
cd $out && tar czf res.tgz res
