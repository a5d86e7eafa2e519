#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: communicator configurations (ferroccl bench flags, one line
# each in $CONFIGS) one after the other, each against NCCL measured by the same process
# (reduce_scatter, all_reduce, all_gather, 64 MiB to 1 GiB), into $OUT/$NAME.txt.
# Session 4 ran it twice (raw/final-h200x2/tune3.txt, raw/final2-h200x2/tune4.txt):
#   NAME=tune3 CONFIGS=$'--step 524288\n--step 1048576\n--step 262144\n--channels 26\n--channels 28\n--step 524288'
#   NAME=tune4 CONFIGS=$'--step 1048576\n--step 2097152\n--channels 26\n--step 1048576\n--step 2097152\n--channels 26'
# Run from the repository root with the release binary in .carry/.
set -u
source "$(dirname "$0")/device-env.sh"
name=${NAME:-configs}
date -u +%FT%TZ | tee "$out/$name.txt"
warm_jit 512
while read -r flags; do
  echo "## $flags" | tee -a "$out/$name.txt"
  timeout 100 ./.carry/ferroccl bench reduce_scatter all_reduce all_gather -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices 0,1 $flags --nccl 2>&1 | grep -v "^#  " | tee -a "$out/$name.txt"
done <<< "${CONFIGS:-}"
date -u +%FT%TZ | tee -a "$out/$name.txt"
