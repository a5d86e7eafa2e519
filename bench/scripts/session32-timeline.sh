#!/usr/bin/env bash
# Thirty-second session, one H200: where the loop's 1.05 µs a queued item goes.
# `ferroccl bench work_loop --timeline` (held batches of 512 timestamps: 256 threads with a
# stamp every 1-64 items, then 32-128 threads with one every 8), $1 rounds; with a second
# argument, one `bench work_loop` too (the same call's reference).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/timeline.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-t.gz > /tmp/ferroccl-t && chmod +x /tmp/ferroccl-t
for round in $(seq 1 "$1"); do
  step "timeline, round $round"
  timeout 60 /tmp/ferroccl-t bench work_loop --timeline "$res/tl-$round.json" >> "$log" 2>&1
done
if [ $# -gt 1 ]; then
  step "bench work_loop"
  timeout 60 /tmp/ferroccl-t bench work_loop --json "$res/wl-t.json" >> "$log" 2>&1
fi
step end
cat "$log"
