#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: where each channel's time goes, in several processes (the
# spread between processes is larger than between configurations). Each run prints, per
# row, the channels' shares (copying, waiting for data, for credit, other), the busiest,
# idlest, slowest and fastest channel, and every channel's SM and copy rate.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/stats.txt"
warm_jit 256 512
for run in ${RUNS:-1 2}; do
  while read -r flags; do
    echo "## run $run: $flags" | tee -a "$out/stats.txt"
    timeout 60 ./.carry/ferroccl bench all_reduce all_gather -b 256M -e 1G -f 4 -c 0 -n 10 -w 3 \
      --devices 0,1 $flags --stats 2>&1 | grep -v "^#  *[(s]" | tee -a "$out/stats.txt"
  done <<< "${CONFIGS:-"--channels 24 --threads 512
--channels 32 --threads 256
--channels 16 --threads 512"}"
done
date -u +%FT%TZ | tee -a "$out/stats.txt"
