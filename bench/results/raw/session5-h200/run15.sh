#!/usr/bin/env bash
# Session 5: the device API's ring shift checked on GPUs, 2, 3, 4 and 8 PEs in one process on one GPU.
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run15.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $log
for n in 2 3 4 8; do
  devs=$(python3 -c "print(','.join(['0']*$n))")
  echo "=== shift --pes $n --devices $devs --check-api" | tee -a $log
  timeout 60 ./.carry/shift --pes $n --devices $devs --check-api 2>&1 | tee -a $log
  echo "exit $?" | tee -a $log
done
date -u +%FT%TZ | tee -a $log
