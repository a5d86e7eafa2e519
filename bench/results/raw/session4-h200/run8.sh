#!/usr/bin/env bash
# Session 4, second run: the small-call cost by threads per channel (512 capped at 128 registers, 256, 128 uncapped).
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run8.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $log
for t in 512 256 128; do
  for algo in one-shot ring; do
    echo "=== all_reduce --algo $algo, 2 ranks one GPU, 24 channels x $t threads" | tee -a $log
    timeout 40 ./.carry/ferroccl bench all_reduce -b 8 -e 256K -f 32 -c 1 -n 50 -w 10 --devices 0,0 --channels 24 --threads $t --algo $algo \
      --timing back-to-back,graph --json $OUT/small-$algo-$t.json 2>&1 | grep -E '^ +[0-9]' | tee -a $log
  done
done
echo "=== matrix 2 ranks 24 x 256 stream path; 4 ranks 4 x 256" | tee -a $log
timeout 60 ./.carry/ferroccl coll --devices 0 --ranks 2 --channels 24 --threads 256 --path stream 2>&1 | tail -n 1 | tee -a $log
timeout 60 ./.carry/ferroccl coll --devices 0 --ranks 4 --channels 4 --threads 256 --step 65536 --path stream 2>&1 | tail -n 1 | tee -a $log
date -u +%FT%TZ | tee -a $log
