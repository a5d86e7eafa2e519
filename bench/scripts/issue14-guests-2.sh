#!/usr/bin/env bash
# Issue 14, point 3, second run: the new default communicator (1 resident + 23 guest
# channels) against 24 resident channels, same run: self-tests, the 8-rank matrix on one
# GPU (stream path), all_gather and reduce_scatter on 2 ranks of one GPU, and the footprint
# with 1 rank and with 2 ranks (40 runs each). Run from the repository root.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/issue14-guests-2.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
date -u +%FT%TZ | tee -a "$log"
f=./.carry/ferroccl
echo "## ferroccl test" | tee -a "$log"
timeout 120 $f test 2>&1 | tail -3 | tee -a "$log"
echo "## matrix, stream path, 8 ranks on one GPU x (1 resident + 3 guests)" | tee -a "$log"
timeout 240 $f coll --devices 0 --ranks 8 --channels 4 --path stream 2>&1 | tail -2 | tee -a "$log"
for r in 1 24; do
  echo "## all_gather reduce_scatter, 2 ranks on one GPU, 24 channels, $r resident" | tee -a "$log"
  timeout 150 $f bench all_gather reduce_scatter -b 8 -e 128M -f 16 -c 1 -n 20 -w 5 --devices 0,0 --resident $r --timing back-to-back,graph --json "$out/ag-rs-r$r.json" 2>&1 | grep -v "^#  " | tee -a "$log"
done
cublas=$(ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib/libcublas.so.* 2>/dev/null | head -n 1)
mkdir -p /tmp/cublas && ln -sf "$cublas" /tmp/cublas/libcublas.so
export LD_LIBRARY_PATH=/tmp/cublas:$(dirname "$cublas"):$LD_LIBRARY_PATH
for ranks in 1 2; do
  for r in 1 24; do
    echo "## footprint, $ranks rank(s) x 24 channels, $r resident" | tee -a "$log"
    timeout 200 $f bench footprint --ranks $ranks --resident $r --iters 40 --json "$out/footprint-$ranks-r$r.json" 2>&1 | tee -a "$log"
  done
done
