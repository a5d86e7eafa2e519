#!/usr/bin/env bash
# Issue 5's benchmark on nvidia-h200-x2 with the default communicator (24 channels × 512
# threads, one channel per TPC from SM 2, 1 MiB FIFO steps): nccl-tests' table from 8 B to 1 GiB for
# all_reduce, all_gather and reduce_scatter against NCCL measured by the same process
# (ring.json), a second process over 64 MiB to 1 GiB (run-to-run spread), reduce_scatter's
# per-channel statistics, the collective matrix with the default shape, and a process with
# paired channels over 64 MiB to 1 GiB.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/final.txt"
warm_jit 512
timeout 240 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 0 -n 20 -w 5 \
  --devices 0,1 --nccl --json "$out/ring.json" 2>&1 | tee "$out/ring.txt"
echo "## second process" | tee -a "$out/final.txt"
timeout 100 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
  --devices 0,1 --nccl 2>&1 | grep -v "^#  " | tee -a "$out/final.txt"
echo "## reduce_scatter statistics" | tee -a "$out/final.txt"
timeout 60 ./.carry/ferroccl bench reduce_scatter -b 256M -e 1G -f 4 -c 0 -n 10 -w 3 --devices 0,1 --stats 2>&1 \
  | grep -v "^#  *[(s]" | tee -a "$out/final.txt"
timeout 120 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 24 --threads 512 --big 1572864 2>&1 | tail -n 2 | tee -a "$out/final.txt"
echo "## paired channels (48: reduce_scatter sends on SMs 2..48, reduces on SMs 50..96)" | tee -a "$out/final.txt"
timeout 100 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
  --devices 0,1 --channels 48 --paired true --nccl 2>&1 | grep -v "^#  " | tee -a "$out/final.txt"
date -u +%FT%TZ | tee -a "$out/final.txt"
