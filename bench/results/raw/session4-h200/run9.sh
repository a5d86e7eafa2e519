#!/usr/bin/env bash
# Session 4, third run: the default 24 x 256 communicator; where a small call's time goes (busy per collective vs the no-op round trip).
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run9.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $log
echo "=== ferroccl test" | tee -a $log
timeout 90 ./.carry/ferroccl test 2>&1 | grep -v '^  ' | tail -n 3 | tee -a $log
echo "=== bench work_loop" | tee -a $log
timeout 90 ./.carry/ferroccl bench work_loop --json $OUT/work_loop.json 2>&1 | grep -E '^\(|^    [a-z]' | tee -a $log
for algo in one-shot ring; do
  echo "=== all_reduce --algo $algo, 2 ranks one GPU, default shape (24 x 256), stats" | tee -a $log
  timeout 40 ./.carry/ferroccl bench all_reduce -b 8 -e 256K -f 32 -c 1 -n 50 -w 10 --devices 0,0 --algo $algo \
    --timing back-to-back,graph --stats --json $OUT/default-$algo.json 2>&1 | grep -E '^ +[0-9]|channels:' | tee -a $log
done
date -u +%FT%TZ | tee -a $log
