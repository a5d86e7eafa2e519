#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: do idle channels polling host memory slow the busy ones?
# With paired channels (48, every function but reduce_scatter on the first 24) the other
# 24 poll the host's queue during all_reduce and all_gather. Two builds, each against
# NCCL measured by the same process (reduce_scatter, all_reduce, all_gather, 64 MiB to
# 1 GiB), default and paired: .carry/ferroccl, and .carry/ferroccl-sleep, whose idle
# warp sleeps 20 us between reads of the queue.
# Ran once: .carry/ferroccl built from cda7f3e, .carry/ferroccl-sleep the same with an
# `arch::nanosleep(20_000)` before each re-read in exec.rs's poll_next_slot.
# Run from the repository root with the builds in .carry/; results go to $OUT/$NAME.txt.
set -u
source "$(dirname "$0")/device-env.sh"
name=${NAME:-poll}
date -u +%FT%TZ | tee "$out/$name.txt"
for b in ferroccl ferroccl-sleep; do
  timeout 170 ./.carry/$b coll --devices 0,1 --ranks 2 --channels 2 --threads 512 no-such-case > /dev/null 2>&1 &
done
wait
for build in ferroccl ferroccl-sleep; do
  for flags in "" "--channels 48 --paired true"; do
    echo "## $build ${flags:-default}" | tee -a "$out/$name.txt"
    timeout 100 ./.carry/$build bench reduce_scatter all_reduce all_gather -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
      --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  \|^# \(ferroccl on\|measuring\|baseline\|20 it\)" | tee -a "$out/$name.txt"
  done
done
date -u +%FT%TZ | tee -a "$out/$name.txt"
