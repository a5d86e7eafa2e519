#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: where the channels run (--sms) against how fast they copy.
# First per-channel statistics for each placement (every channel's SM and copy rate),
# then each placement against NCCL measured by the same process, then the matrix with
# an even spread (one SM per TPC, the TPCs evenly spaced over the SM ids: the session-4
# `spread` placement, spelled out). Run from the repository root with the release binary in .carry/;
# results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/place.txt"
warm_jit 256 512
even_low=$(seq -s, 2 2 48)
while read -r flags; do
  echo "## stats: $flags" | tee -a "$out/place.txt"
  timeout 60 ./.carry/ferroccl bench all_reduce all_gather -b 256M -e 1G -f 4 -c 0 -n 10 -w 3 \
    --devices 0,1 $flags --stats 2>&1 | grep -v "^#  *[(s]" | tee -a "$out/place.txt"
done <<EOC
--channels 24 --threads 512 --sms hardware
--channels 24 --threads 512 --sms 0,4,10,16,22,26,32,38,44,48,54,60,66,70,76,82,88,92,98,104,110,114,120,126
--channels 24 --threads 512 --sms $even_low
--channels 32 --threads 256 --sms 0,4,8,12,16,20,24,28,32,36,40,44,48,52,56,60,66,70,74,78,82,86,90,94,98,102,106,110,114,118,122,126
EOC
while read -r flags; do
  echo "## vs NCCL: $flags" | tee -a "$out/place.txt"
  timeout 100 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  " | tee -a "$out/place.txt"
done <<EOC
--channels 24 --threads 512 --sms 0,4,10,16,22,26,32,38,44,48,54,60,66,70,76,82,88,92,98,104,110,114,120,126
--channels 32 --threads 256 --sms 0,4,8,12,16,20,24,28,32,36,40,44,48,52,56,60,66,70,74,78,82,86,90,94,98,102,106,110,114,118,122,126
--channels 24 --threads 512 --sms hardware
EOC
timeout 90 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 4 --step 65536 --sms 0,32,66,98 2>&1 | tail -n 2 | tee -a "$out/place.txt"
date -u +%FT%TZ | tee -a "$out/place.txt"
