#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: channels packed on the even SMs from SM 2 up (one per TPC),
# 24, 28 and 32 channels, each against NCCL measured by the same process (64 MiB to
# 1 GiB), and 32 × 256 with per-channel statistics. Run from the repository root with the
# release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/place2.txt"
warm_jit 256 512
evens() { seq -s, 2 2 $((2 * $1)); }
while read -r flags; do
  echo "## vs NCCL: $flags" | tee -a "$out/place2.txt"
  timeout 100 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  " | tee -a "$out/place2.txt"
done <<EOC
--channels 24 --threads 512 --sms $(evens 24)
--channels 28 --threads 512 --sms $(evens 28)
--channels 32 --threads 512 --sms $(evens 32)
--channels 24 --threads 512 --sms $(evens 24)
EOC
echo "## stats: 32 x 256" | tee -a "$out/place2.txt"
timeout 60 ./.carry/ferroccl bench all_reduce all_gather -b 256M -e 1G -f 4 -c 0 -n 10 -w 3 \
  --devices 0,1 --channels 32 --threads 256 --sms $(evens 32) --stats 2>&1 | grep -v "^#  *[(s]" | tee -a "$out/place2.txt"
date -u +%FT%TZ | tee -a "$out/place2.txt"
