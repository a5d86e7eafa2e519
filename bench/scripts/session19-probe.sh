#!/usr/bin/env bash
# Nineteenth session (2026-11-27), first device call: issue 14's cost model.
# 1. bench/probes/dispatch_costs.cu (nvcc on the machine): host time of each driver call
#    a collective call makes and of the alternatives; a cuBLAS bf16 8192^3 GEMM beside
#    resident CTAs of several shapes, alternated with runs beside none.
# 2. `ferroccl bench footprint` of the current build (.carry/ferroccl-push2.gz, 420da84)
#    with 2 ranks (the default), 1 rank, and 1 rank whose resident channel has 32 threads.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/probe.txt
nv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
inc=$(ls -d $nv/cu13/include $nv/cublas/include 2>/dev/null | tr '\n' ' ')
lib=$(dirname $(ls $nv/cu13/lib/libcublas.so* $nv/cublas/lib/libcublas.so* 2>/dev/null | head -1))
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "nvcc dispatch_costs.cu (include: $inc; lib: $lib)"
nvcc -O2 -arch=sm_90 $(for i in $inc; do echo -I$i; done) bench/probes/dispatch_costs.cu -L$lib -Xlinker -rpath=$lib -lcuda -lcublas -o /tmp/dispatch_costs >> "$log" 2>&1
step "dispatch_costs 5"
timeout 120 /tmp/dispatch_costs 5 >> "$log" 2>&1
gunzip -c .carry/ferroccl-push2.gz > /tmp/base && chmod +x /tmp/base
export LD_LIBRARY_PATH=$lib:$LD_LIBRARY_PATH
for round in 1 2; do
  step "footprint round $round: 2 ranks (default)"
  timeout 120 /tmp/base bench footprint --json "$res/fp-2r-$round.json" >> "$log" 2>&1
  step "footprint round $round: 1 rank"
  timeout 120 /tmp/base bench footprint --ranks 1 --json "$res/fp-1r-$round.json" >> "$log" 2>&1
  step "footprint round $round: 1 rank, resident channel of 32 threads"
  timeout 120 /tmp/base bench footprint --ranks 1 --resident-threads 32 --json "$res/fp-1r32-$round.json" >> "$log" 2>&1
done
step end
cd $out && tar czf res.tgz res
