#!/usr/bin/env bash
# Thirty-first session, one H200, device call 2: `ferroccl bench work_loop`, ten rounds of
# four builds, alternated: base (the thirtieth session's device code), b (a poll reads
# four slots with acquire loads and takes every whole one; no backlog read below five
# slots), c (b, with a non-polling channel reading only the slots it knows whole) and d
# (c, with the mailbox looked at before a poll's first read only while the stream-ordered
# path is busy and for every eighth slot).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/abcd.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in base new c d; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
for round in $(seq 1 10); do
  for b in base new c d; do
    step "$b bench work_loop, round $round"
    timeout 60 /tmp/ferroccl-$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
  done
done
step end
cd $out && tar czf res.tgz res
