#!/usr/bin/env bash
# Session 5 on nvidia-h200-x2: ring/staged vs NCCL 8 B-1 GiB (stream path, data checked), graphs at small sizes, shmem shift across the two GPUs.
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run16.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvidia-smi topo -m | head -4; } | tee $log
echo "=== shift --pes 2 --devices 0,1 --check-api" | tee -a $log
timeout 60 ./.carry/shift --pes 2 --devices 0,1 --check-api 2>&1 | tee -a $log; echo "exit $?" | tee -a $log
echo "=== bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 --nccl (back to back)" | tee -a $log
timeout 330 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --json $OUT/ring.json 2>&1 | tee -a $log
echo "=== bench all_reduce -b 8 -e 16M -f 4 -c 1 --nccl --timing graph" | tee -a $log
timeout 150 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 16M -f 4 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing graph --json $OUT/graph.json 2>&1 | tee -a $log
date -u +%FT%TZ | tee -a $log
