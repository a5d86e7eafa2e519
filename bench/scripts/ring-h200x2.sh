#!/usr/bin/env bash
# The ring collectives on nvidia-h200-x2: the correctness matrix on 2 ranks (one per GPU)
# and 4 ranks (two per GPU), then nccl-tests' table against NCCL on the same GPUs.
# Run from the repository root with the release binary (built with --features nccl) in
# .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$out/gpus-h200x2.txt"
./.carry/ferroccl info | tee -a "$out/gpus-h200x2.txt"
timeout 330 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 0 -n 20 -w 5 \
  --devices 0,1 --nccl --json "$out/ring.json" 2>&1 | tee "$out/ring.txt"
timeout 100 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 8 2>&1 | tail -5 | tee "$out/coll-2ranks.txt"
timeout 100 ./.carry/ferroccl coll --devices 0,1 --ranks 4 --channels 8 2>&1 | tail -5 | tee "$out/coll-4ranks.txt"
timeout 100 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter broadcast reduce -b 8 -e 4M -f 4 -c 1 -n 5 -w 2 \
  --devices 0,1 2>&1 | tee "$out/ring-checked.txt"
