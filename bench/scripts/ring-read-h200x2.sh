#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: direct reads (the reductions' first hop reads the previous
# rank's input straight from its buffer). The collective matrix with --direct on the
# default shape, then the default communicator and --direct alternately, each against
# NCCL measured by the same process (reduce_scatter, all_reduce, all_gather, 64 MiB to
# 1 GiB), then reduce_scatter's per-channel statistics with --direct.
# Ran once, with the binary of commit 5b01c0f (direct reads, reverted since: slower).
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
name=${NAME:-read}
date -u +%FT%TZ | tee "$out/$name.txt"
warm_jit 512
timeout 120 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 24 --threads 512 --big 1572864 --direct 2>&1 \
  | tail -n 2 | tee -a "$out/$name.txt"
for flags in "" --direct "" --direct; do
  echo "## ${flags:-default}" | tee -a "$out/$name.txt"
  timeout 100 ./.carry/ferroccl bench reduce_scatter all_reduce all_gather -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  " | tee -a "$out/$name.txt"
done
echo "## reduce_scatter statistics, --direct" | tee -a "$out/$name.txt"
timeout 60 ./.carry/ferroccl bench reduce_scatter all_reduce -b 1G -e 1G -c 0 -n 10 -w 3 --devices 0,1 --direct --stats 2>&1 \
  | grep -v "^#  *[(s]" | tee -a "$out/$name.txt"
date -u +%FT%TZ | tee -a "$out/$name.txt"
