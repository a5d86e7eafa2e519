#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: one polling channel per rank (the others wait in device
# memory until it has found the next queue slot). The collective matrix on the default
# shape and with paired channels, then the default communicator and paired channels
# (48, reduce_scatter sends on SMs 2..48 and reduces on SMs 50..96) alternately, each
# against NCCL measured by the same process (reduce_scatter, all_reduce, all_gather,
# 64 MiB to 1 GiB), then the small sizes (8 B to 1 MiB) of both.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
name=${NAME:-poller}
paired="--channels 48 --paired true"
date -u +%FT%TZ | tee "$out/$name.txt"
warm_jit 512
for flags in "--channels 24" "$paired"; do
  timeout 150 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --threads 512 --big 1572864 $flags 2>&1 \
    | tail -n 1 | tee -a "$out/$name.txt"
done
for flags in "" "$paired" "" "$paired"; do
  echo "## ${flags:-default}" | tee -a "$out/$name.txt"
  timeout 100 ./.carry/ferroccl bench reduce_scatter all_reduce all_gather -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  \|^# \(ferroccl on\|measuring\|baseline\|20 it\)" | tee -a "$out/$name.txt"
done
for flags in "" "$paired"; do
  echo "## small, ${flags:-default}" | tee -a "$out/$name.txt"
  timeout 100 ./.carry/ferroccl bench reduce_scatter all_reduce all_gather -b 8 -e 1M -f 8 -c 0 -n 20 -w 5 \
    --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  \|^# \(ferroccl on\|measuring\|baseline\|20 it\)" | tee -a "$out/$name.txt"
done
date -u +%FT%TZ | tee -a "$out/$name.txt"
