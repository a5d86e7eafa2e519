#!/usr/bin/env bash
# Issue 5's matrix with 4 ranks on the two GPUs of nvidia-h200-x2 (two ranks per GPU: the
# hardware's placement), FIFO and direct connections and paired channels, 4 channels of
# 64 KiB steps.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/coll-4ranks.txt"
for mode in "" --direct "--paired true"; do
  timeout 140 ./.carry/ferroccl coll --devices 0,1 --ranks 4 --channels 4 --step 65536 --big 1572864 $mode 2>&1 \
    | grep -v "^  [0-9]*/900" | tee -a "$out/coll-4ranks.txt"
done
date -u +%FT%TZ | tee -a "$out/coll-4ranks.txt"
