#!/usr/bin/env bash
# The ring collectives on nvidia-h200-x8, one rank per GPU. Stage `table` (the default):
# nccl-tests' table against NCCL on the same GPUs, then the correctness matrix on 8 ranks.
# Stage `direct`: the matrix and the large sizes again with direct connections (NCCL's
# direct operations), to set against the table's FIFO-only figures. Stage `matrix`: the
# correctness matrix alone, FIFO and direct, with 2 channels and 64 KiB steps so that the
# big cases (1.5 Mi elements) take several chunk rounds on every channel.
# Run from the repository root with the release binary (built with --features nccl) in
# .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
all=0,1,2,3,4,5,6,7
case "${1:-table}" in
table)
  date -u +%FT%TZ | tee "$out/gpus-h200x8.txt"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$out/gpus-h200x8.txt"
  ./.carry/ferroccl info | tee -a "$out/gpus-h200x8.txt"
  timeout 360 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices $all --nccl --json "$out/ring-8gpu.json" 2>&1 | tee "$out/ring-8gpu.txt"
  timeout 150 ./.carry/ferroccl coll --devices $all --ranks 8 --channels 8 2>&1 | tail -5 | tee "$out/coll-8gpu-8ranks.txt"
  ;;
direct)
  date -u +%FT%TZ | tee "$out/ring-8gpu-direct.txt"
  timeout 150 ./.carry/ferroccl coll --devices $all --ranks 8 --channels 8 --direct 2>&1 | tail -5 | tee "$out/coll-8gpu-8ranks-direct.txt"
  timeout 150 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices $all --direct 2>&1 | tee -a "$out/ring-8gpu-direct.txt"
  ;;
matrix)
  date -u +%FT%TZ | tee "$out/coll-8gpu.txt"
  timeout 280 ./.carry/ferroccl coll --devices $all --ranks 8 --channels 2 --step 65536 --big 1572864 2>&1 | tee -a "$out/coll-8gpu.txt"
  timeout 280 ./.carry/ferroccl coll --devices $all --ranks 8 --channels 2 --step 65536 --big 1572864 --direct 2>&1 | tee -a "$out/coll-8gpu.txt"
  ;;
esac
