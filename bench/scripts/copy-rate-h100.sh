#!/usr/bin/env bash
# Issue 5 on nvidia-h100-x1: how fast one channel (one SM, 512 threads) copies locally,
# with the ring's data movers: one rank's all_reduce of 1 GiB (a copy of the input to the
# output) on 24, 32, 48 and 64 channels, one per TPC, with per-channel statistics; and
# cuMemcpyDtoD of the same bytes through `bench reduce_copy` for scale.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/copy-rate.txt"
for channels in 24 32 48 64; do
  timeout 120 ./.carry/ferroccl bench all_reduce -b 1G -e 1G -c 0 -n 10 -w 3 --devices 0 --ranks 1 \
    --channels "$channels" --stats 2>&1 | grep -v "^#  *[(s]" | tee -a "$out/copy-rate.txt"
done
timeout 120 ./.carry/ferroccl bench reduce_copy --device 0 2>&1 | tee -a "$out/copy-rate.txt"
date -u +%FT%TZ | tee -a "$out/copy-rate.txt"
