#!/usr/bin/env bash
# Thirty-third session, one H200: stream-ordered calls in a burst (less than
# `LoopConfig::burst_gap` after the previous call returned) take the post route (build b).
# `bench work_loop` measures back to back with and without bursts in the same run; six
# rounds; then the self-tests and the matrix with 2 ranks on the one GPU on the ring route
# (one resident channel, no guests) and on the stream default.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/burst.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-b.gz > /tmp/ferroccl-b && chmod +x /tmp/ferroccl-b
for round in $(seq 1 6); do
  step "b bench work_loop, round $round"
  timeout 60 /tmp/ferroccl-b bench work_loop --json "$res/wl-b-$round.json" >> "$log" 2>&1
done
step "b test"
timeout 150 /tmp/ferroccl-b test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "b coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 100 /tmp/ferroccl-b coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-1ch.txt | tee -a "$log"
step "b coll, 2 ranks on device 0, stream default"
timeout 100 /tmp/ferroccl-b coll --devices 0 --ranks 2 --path stream > $res/coll-2-default.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-default.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
