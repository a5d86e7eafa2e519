#!/usr/bin/env bash
# Issue 5's matrix on one GPU (nvidia-h100-x1) with 4 and 8 ranks, FIFO and direct
# connections, 2 channels of 64 KiB steps: coll-one-gpu.sh without its 2-rank part (run
# by check-h100.sh), after a change to the work loop.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/coll-one-gpu.txt"
for ranks in 4 8; do
  for mode in "" --direct; do
    timeout 170 ./.carry/ferroccl coll --devices 0 --ranks $ranks --channels 2 --step 65536 --big 1572864 $mode 2>&1 \
      | grep -v "^  [0-9]*/900" | tee -a "$out/coll-one-gpu.txt"
  done
done
date -u +%FT%TZ | tee -a "$out/coll-one-gpu.txt"
