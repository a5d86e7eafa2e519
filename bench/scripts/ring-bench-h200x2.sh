#!/usr/bin/env bash
# nccl-tests' table of the ring collectives against NCCL on nvidia-h200-x2 (default
# communicator at the time: 24 channels; now pass --channels 24 for the same run);
# results to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
timeout 200 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 0 -n 20 -w 5 \
  --devices 0,1 --channels 24 --nccl --json "$out/ring.json" 2>&1 | tee "$out/ring.txt"
