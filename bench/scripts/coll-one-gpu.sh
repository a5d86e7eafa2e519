#!/usr/bin/env bash
# Issue 5's matrix on one GPU (nvidia-h100-x1 or nvidia-h200): 2, 4 and 8 ranks sharing
# device 0, FIFO and direct connections; 2 channels of 64 KiB steps, so that the big cases
# take several chunk rounds on every channel and 8 ranks' loops fit on one GPU.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/coll-one-gpu.txt"
for ranks in 2 4 8; do
  for mode in "" --direct; do
    timeout 170 ./.carry/ferroccl coll --devices 0 --ranks $ranks --channels 2 --step 65536 --big 1572864 $mode 2>&1 \
      | tee -a "$out/coll-one-gpu.txt"
  done
done
