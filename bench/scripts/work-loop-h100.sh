#!/usr/bin/env bash
# The work loop's benchmark (issue 4) on one GPU: the no-op round trip against an empty
# launch + sync, device dispatch, and the stream-ordered path against graph launches, in
# one run per binary. .carry/ferroccl is the build measured; any other .carry/ferroccl-*
# binaries (earlier queue designs) run right after it, on the same GPU, for comparison.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/work_loop.txt"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$out/work_loop.txt"
timeout 200 ./.carry/ferroccl bench work_loop --json "$out/work_loop.json" 2>&1 | tee -a "$out/work_loop.txt"
for alt in .carry/ferroccl-*; do
  [ -x "$alt" ] || continue
  echo "## $alt" | tee -a "$out/work_loop-variants.txt"
  timeout 150 "$alt" bench work_loop 2>&1 | tee -a "$out/work_loop-variants.txt"
done
