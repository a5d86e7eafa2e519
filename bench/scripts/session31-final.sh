#!/usr/bin/env bash
# Thirty-first session, one H200, device call 3: the final device code (.carry/ferroccl-f.gz:
# the polling channel's poll reads four slots with acquire loads and takes every whole one
# from the first on, no backlog read below five slots; other channels poll one slot, as
# before, every lane of the warp reading it) against the thirtieth session's (.carry/ferroccl-base.gz), `ferroccl bench
# work_loop` eight rounds each, alternated; then the final build's self-tests and the
# matrix with 2 ranks on the one GPU: the direct path (4 channels: ring items spread over
# every channel), the stream path with one resident channel and no guests (the ring
# route), and the stream path's default (the post route with guests).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/final.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in base f; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
for round in $(seq 1 8); do
  for b in base f; do
    step "$b bench work_loop, round $round"
    timeout 60 /tmp/ferroccl-$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
  done
done
step "f test"
timeout 150 /tmp/ferroccl-f test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "f coll, 2 ranks on device 0, direct path, 4 channels"
timeout 100 /tmp/ferroccl-f coll --devices 0 --ranks 2 > $res/coll-2-direct.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-direct.txt | tee -a "$log"
step "f coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 100 /tmp/ferroccl-f coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-1ch.txt | tee -a "$log"
step "f coll, 2 ranks on device 0, stream path, default"
timeout 100 /tmp/ferroccl-f coll --devices 0 --ranks 2 --path stream > $res/coll-2-default.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-default.txt | tee -a "$log"
step "f coll, 4 ranks on device 0, direct path, 4 channels, all_reduce"
timeout 100 /tmp/ferroccl-f coll --devices 0 --ranks 4 all_reduce > $res/coll-4-direct.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-4-direct.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
