#!/usr/bin/env bash
# Session 4, experiment: staged exchange with system-scope (a, main) vs gpu-scope (b, experiment only: both ranks on one GPU) fence and acquire.
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run10.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $log
for round in 1 2; do for b in ferroccl-a ferroccl-b; do
  echo "=== $b round $round: all_reduce one-shot 2 ranks one GPU 24 x 256, stats" | tee -a $log
  timeout 40 ./.carry/$b bench all_reduce -b 8 -e 8K -f 32 -c 1 -n 50 -w 10 --devices 0,0 --algo one-shot \
    --timing back-to-back,graph --stats 2>&1 | grep -E '^ +[0-9]|channels:' | tee -a $log
done; done
date -u +%FT%TZ | tee -a $log
