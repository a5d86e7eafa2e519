#!/usr/bin/env bash
# Session 4: staged broadcast/reduce on a GPU, the staged small-call cost by channel count,
# and what the capped shape's spills cost (24 x 512 capped at 128 registers vs 256 threads uncapped).
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run7.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $log
echo "=== ferroccl test" | tee -a $log
timeout 90 ./.carry/ferroccl test 2>&1 | grep -v '^  ' | tail -n 20 | tee -a $log
echo "=== matrix one-shot (every function) 2 ranks stream path" | tee -a $log
timeout 70 ./.carry/ferroccl coll --devices 0 --ranks 2 --algo one-shot --path stream 2>&1 | tail -n 2 | tee -a $log
echo "=== matrix auto 4 ranks stream path" | tee -a $log
timeout 70 ./.carry/ferroccl coll --devices 0 --ranks 4 --channels 4 --step 65536 --path stream 2>&1 | tail -n 2 | tee -a $log
for ch in 24 4 1; do
  echo "=== staged fixed cost: all_reduce one-shot, 2 ranks one GPU, $ch channels, graph + back-to-back, stats" | tee -a $log
  timeout 40 ./.carry/ferroccl bench all_reduce -b 8 -e 64K -f 8 -c 1 -n 50 -w 10 --devices 0,0 --channels $ch --algo one-shot \
    --timing back-to-back,graph --stats --json $OUT/staged-ch$ch.json 2>&1 | grep -E '^ +[0-9]|channels:|taken after' | tee -a $log
done
for shape in "24 512" "24 256" "48 256"; do
  set -- $shape
  echo "=== spill cost: ring all_reduce 2 ranks one GPU, $1 channels x $2 threads" | tee -a $log
  timeout 60 ./.carry/ferroccl bench all_reduce -b 8 -e 1G -f 32 -c 1 -n 10 -w 3 --devices 0,0 --channels $1 --threads $2 --algo ring \
    --timing back-to-back --stats --json $OUT/spill-$1x$2.json 2>&1 | grep -E '^ +[0-9]|channels:' | tee -a $log
done
date -u +%FT%TZ | tee -a $log
