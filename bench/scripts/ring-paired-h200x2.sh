#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: paired channels (48 channels, one per TPC from SM 2; every
# function on the first 24; reduce_scatter sends on SMs 2..48 and receives and reduces
# on SMs 50..96). The collective matrix with paired channels, then the default
# communicator and paired channels alternately, each against NCCL measured by the same
# process (reduce_scatter, all_reduce, all_gather, 64 MiB to 1 GiB), then
# reduce_scatter's per-channel statistics with paired channels.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
name=${NAME:-paired}
paired="--channels 48 --paired true"
date -u +%FT%TZ | tee "$out/$name.txt"
warm_jit 512
timeout 150 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --threads 512 --big 1572864 $paired 2>&1 \
  | tail -n 2 | tee -a "$out/$name.txt"
for flags in "" "$paired" "" "$paired"; do
  echo "## ${flags:-default}" | tee -a "$out/$name.txt"
  timeout 100 ./.carry/ferroccl bench reduce_scatter all_reduce all_gather -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  \|^# \(ferroccl on\|measuring\|baseline\|20 it\)" | tee -a "$out/$name.txt"
done
echo "## reduce_scatter statistics, paired" | tee -a "$out/$name.txt"
timeout 60 ./.carry/ferroccl bench reduce_scatter -b 64M -e 1G -f 4 -c 0 -n 10 -w 3 --devices 0,1 $paired --stats 2>&1 \
  | grep -v "^#  *[(s]" | tee -a "$out/$name.txt"
date -u +%FT%TZ | tee -a "$out/$name.txt"
