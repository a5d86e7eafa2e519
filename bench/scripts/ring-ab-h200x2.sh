#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: A/B of data-mover builds and channel shapes, each against
# NCCL measured by the same process (all_reduce, all_gather, reduce_scatter, 64 MiB to
# 1 GiB), then NCCL's own tuning choices and where ferroccl's channels spend their time.
# Binaries: .carry/ferroccl (the candidate) and every .carry/ferroccl-* (the others).
# Run from the repository root; results go to $OUT (at most 8 files come back).
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/ab.txt"
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader | tee -a "$out/ab.txt"
bins=$(ls .carry/ferroccl .carry/ferroccl-* 2>/dev/null)
# Fill the JIT cache for every binary's modules at once (a filter that matches no case
# only loads them).
for b in $bins; do
  for t in ${THREADS:-256 512}; do
    timeout 170 "$b" coll --devices 0,1 --ranks 2 --channels 2 --threads $t no-such-case > /dev/null 2>&1 &
  done
done
wait
echo "# JIT done $(date -u +%T)" | tee -a "$out/ab.txt"
configs=${CONFIGS:-"--channels 32 --threads 256
--channels 24 --threads 512"}
while read -r flags; do
  for b in $bins; do
    echo "## $b $flags" | tee -a "$out/ab.txt"
    timeout 100 "$b" bench all_reduce all_gather reduce_scatter -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
      --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  " | tee -a "$out/ab.txt"
  done
done <<< "$configs"
# Where the candidate's channels spend their time (copy, waiting for data, for credit).
timeout 90 ./.carry/ferroccl bench all_reduce all_gather -b 64M -e 1G -f 4 -c 0 -n 10 -w 3 \
  --devices 0,1 $(head -n 1 <<< "$configs") --stats 2>&1 | tee "$out/stats.txt"
# NCCL's own choices (algorithm, protocol, channels, threads) at these sizes.
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING timeout 60 ./.carry/ferroccl bench all_reduce -b 64M -e 1G -f 4 -c 0 -n 3 -w 1 \
  --devices 0,1 --nccl 2>&1 | tail -n 400 > "$out/nccl-tuning.txt"
# The candidate's collective matrix on the two GPUs (4 channels of 64 KiB steps).
timeout 60 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 4 --step 65536 2>&1 | tail -n 2 | tee -a "$out/ab.txt"
date -u +%FT%TZ | tee -a "$out/ab.txt"
