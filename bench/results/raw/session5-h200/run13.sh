#!/usr/bin/env bash
# Session 5: seed 004's simple_shift with 2, 4 and 8 PEs in one process on one GPU.
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run13.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $log
for n in 2 4 8; do
  devs=$(python3 -c "print(','.join(['0']*$n))")
  echo "=== shift --pes $n --devices $devs" | tee -a $log
  timeout 60 ./.carry/shift --pes $n --devices $devs 2>&1 | tee -a $log
  echo "exit $?" | tee -a $log
done
echo "=== jacobi --pes 8 on one GPU" | tee -a $log
timeout 120 ./.carry/jacobi --pes 8 --devices 0,0,0,0,0,0,0,0 2>&1 | tee -a $log
date -u +%FT%TZ | tee -a $log
