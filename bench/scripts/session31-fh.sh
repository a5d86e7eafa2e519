#!/usr/bin/env bash
# Thirty-first session, one H200, device call 4: `ferroccl bench work_loop` (with its new
# measure, the dispatch rate of items all queued before the loop reads the first), ten
# rounds of two builds alternated: f (the polling channel's poll reads four slots) and h
# (every poll reads one slot; a slot found on a poll's first read starts a backlog read,
# one found after a wait does not); the thirtieth session's build (base, without the new
# measure) between them.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/fh.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in base f h; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
for round in $(seq 1 10); do
  for b in base f h; do
    step "$b bench work_loop, round $round"
    timeout 60 /tmp/ferroccl-$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
  done
done
step end
cd $out && tar czf res.tgz res
