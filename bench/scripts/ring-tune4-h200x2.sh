#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2, after the 1 MiB default step: the default communicator (24
# channels × 512 threads, one per TPC from SM 2, 1 MiB steps) against 2 MiB steps and 26
# channels, twice each, against NCCL measured by the same process (64 MiB to 1 GiB). Run from the repository root with the release binary in .carry/; results go
# to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/tune4.txt"
timeout 170 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 2 --threads 512 no-such-case > /dev/null 2>&1
while read -r flags; do
  echo "## $flags" | tee -a "$out/tune4.txt"
  timeout 100 ./.carry/ferroccl bench reduce_scatter all_reduce all_gather -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  " | tee -a "$out/tune4.txt"
done <<EOC
--step 1048576
--step 2097152
--channels 26
--step 1048576
--step 2097152
--channels 26
EOC
date -u +%FT%TZ | tee -a "$out/tune4.txt"
