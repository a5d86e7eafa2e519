#!/usr/bin/env bash
# Session 4: the staged flag exchange's share of a small staged call (exchange_ns), default shape.
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run11.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $log
for algo in one-shot two-shot; do
  echo "=== all_reduce --algo $algo 2 ranks one GPU 24 x 256, stats" | tee -a $log
  timeout 40 ./.carry/ferroccl bench all_reduce -b 8 -e 256K -f 32 -c 1 -n 50 -w 10 --devices 0,0 --algo $algo \
    --timing back-to-back,graph --stats 2>&1 | grep -E '^ +[0-9]|channels:' | tee -a $log
done
echo "=== all_reduce one-shot 4 ranks one GPU 4 x 256, stats" | tee -a $log
timeout 40 ./.carry/ferroccl bench all_reduce -b 8 -e 8K -f 32 -c 1 -n 50 -w 10 --devices 0,0,0,0 --channels 4 --algo one-shot \
  --timing graph --stats 2>&1 | grep -E '^ +[0-9]|channels:' | tee -a $log
echo "=== matrix one-shot 2 ranks stream path" | tee -a $log
timeout 60 ./.carry/ferroccl coll --devices 0 --ranks 2 --algo one-shot --path stream 2>&1 | tail -n 1 | tee -a $log
date -u +%FT%TZ | tee -a $log
