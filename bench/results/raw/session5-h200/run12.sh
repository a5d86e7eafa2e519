#!/usr/bin/env bash
# Session 5: random-normal matrix (ring order) on 2, 3, 4 ranks on one GPU; Jacobi (seed 002) on the symmetric heap.
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run12.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $log
echo "=== jacobi 1 PE, block reduce, time 50 steps of each kernel" | tee -a $log
timeout 120 ./.carry/jacobi --time-kernels 50 2>&1 | tee -a $log
echo "=== jacobi 1 PE, atomic kernel" | tee -a $log
timeout 120 ./.carry/jacobi --kernel atomic 2>&1 | tail -n 3 | tee -a $log
echo "=== jacobi 2 PEs in one process on one GPU (VMM heap, g() across PEs, sum_reduce)" | tee -a $log
timeout 120 ./.carry/jacobi --pes 2 --devices 0,0 2>&1 | tee -a $log
echo "=== jacobi 4 PEs in one process on one GPU, atomic" | tee -a $log
timeout 120 ./.carry/jacobi --pes 4 --devices 0,0,0,0 --kernel atomic 2>&1 | tee -a $log
for r in 2 3 4; do
  echo "=== matrix (with random-normal cases) $r ranks one GPU, ring" | tee -a $log
  timeout 150 ./.carry/ferroccl coll --devices 0 --ranks $r --algo ring 2>&1 | tail -n 4 | tee -a $log
done
echo "=== matrix $r ranks one GPU, auto, stream path" | tee -a $log
timeout 150 ./.carry/ferroccl coll --devices 0 --ranks 3 --path stream 2>&1 | tail -n 4 | tee -a $log
date -u +%FT%TZ | tee -a $log
