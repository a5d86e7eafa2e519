#!/usr/bin/env bash
# Issue 14, point 3, third run: a resident channel of 128 threads (--resident-threads 128)
# beside 23 guests of 256, against the default (256), same run: the footprint with 2 and
# 1 rank(s), all_reduce on 2 ranks of one GPU, and the stream-path matrix. Run from the
# repository root with the binary in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/issue14-guests-3.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
date -u +%FT%TZ | tee -a "$log"
f=./.carry/ferroccl
cublas=$(ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib/libcublas.so.* 2>/dev/null | head -n 1)
mkdir -p /tmp/cublas && ln -sf "$cublas" /tmp/cublas/libcublas.so
export LD_LIBRARY_PATH=/tmp/cublas:$(dirname "$cublas"):$LD_LIBRARY_PATH
for ranks in 2 1; do
  for rt in 128 256; do
    echo "## footprint, $ranks rank(s), 1 resident channel of $rt threads + 23 guests" | tee -a "$log"
    timeout 200 $f bench footprint --ranks $ranks --resident-threads $rt --iters 40 --json "$out/footprint-$ranks-rt$rt.json" 2>&1 | tee -a "$log"
  done
done
echo "## matrix, stream path, 2 ranks x (1 resident of 128 threads + 23 guests)" | tee -a "$log"
timeout 120 $f coll --devices 0 --ranks 2 --channels 24 --resident 1 --resident-threads 128 --path stream 2>&1 | tail -1 | tee -a "$log"
for rt in 128 256; do
  echo "## all_reduce 2 ranks on one GPU, 1 resident of $rt threads + 23 guests" | tee -a "$log"
  timeout 150 $f bench all_reduce -b 8 -e 256M -f 8 -c 1 -n 20 -w 5 --devices 0,0 --resident-threads $rt --timing back-to-back,graph --json "$out/allreduce-rt$rt.json" 2>&1 | grep -v "^#  " | tee -a "$log"
done
