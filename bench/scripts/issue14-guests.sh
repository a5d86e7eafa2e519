#!/usr/bin/env bash
# Issue 14, point 3 (guest channels), on one GPU: the self-tests, the correctness matrix
# through the stream path with 1 resident and 3 guest channels (4 ranks) and with 1 + 23
# (2 ranks), the stream-ordered no-op, all_reduce on 2 ranks of one GPU with 24 resident
# channels against 1 resident + 23 guests (same run, alternating), and the footprint of
# both. Run from the repository root with the binary in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/issue14-guests.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
date -u +%FT%TZ | tee -a "$log"
f=./.carry/ferroccl
echo "## ferroccl test" | tee -a "$log"
timeout 120 $f test 2>&1 | tail -3 | tee -a "$log"
echo "## matrix, stream path, 4 ranks x (1 resident + 3 guests)" | tee -a "$log"
timeout 200 $f coll --devices 0 --ranks 4 --channels 4 --resident 1 --path stream 2>&1 | tail -4 | tee -a "$log"
echo "## matrix, stream path, 2 ranks x (1 resident + 23 guests)" | tee -a "$log"
timeout 200 $f coll --devices 0 --ranks 2 --channels 24 --resident 1 --path stream 2>&1 | tail -4 | tee -a "$log"
echo "## work_loop" | tee -a "$log"
timeout 120 $f bench work_loop --json "$out/work_loop.json" 2>&1 | tee -a "$log"
for round in 1 2; do
  for r in 24 1; do
    echo "## all_reduce 2 ranks on one GPU, 24 channels, $r resident (round $round)" | tee -a "$log"
    timeout 150 $f bench all_reduce -b 8 -e 256M -f 8 -c 1 -n 20 -w 5 --devices 0,0 --channels 24 --resident $r --timing back-to-back,graph --json "$out/allreduce-r$r-$round.json" 2>&1 | tee -a "$log"
  done
done
cublas=$(ls /opt/torch/.venv/lib/python3.12/site-packages/nvidia/*/lib/libcublas.so.* 2>/dev/null | head -n 1)
mkdir -p /tmp/cublas && ln -sf "$cublas" /tmp/cublas/libcublas.so
export LD_LIBRARY_PATH=/tmp/cublas:$(dirname "$cublas"):$LD_LIBRARY_PATH
for r in 1 24; do
  echo "## footprint, 2 ranks x 24 channels, $r resident" | tee -a "$log"
  timeout 200 $f bench footprint --resident $r --json "$out/footprint-r$r.json" 2>&1 | tee -a "$log"
done
