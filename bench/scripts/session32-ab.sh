#!/usr/bin/env bash
# Thirty-second session, one H200: the ring read without a division a row and the stop
# look started before the fetch (build g) against the session's starting device code
# (build t: 6e3c7b3, the thirty-first session's device code with the timeline diagnosis): `bench work_loop
# --timeline` twice each, then `bench work_loop` ten rounds each, alternated; then g's
# self-tests and the matrix on the one GPU: 2 ranks on the direct path (4 channels), the
# ring route (one resident channel, no guests), the stream path's default; 4 ranks on the
# stream path.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in t g; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
for round in 1 2; do
  for b in t g; do
    step "$b timeline, round $round"
    timeout 60 /tmp/ferroccl-$b bench work_loop --timeline "$res/tl-$b-$round.json" >> "$log" 2>&1
  done
done
for round in $(seq 1 10); do
  for b in t g; do
    step "$b bench work_loop, round $round"
    timeout 60 /tmp/ferroccl-$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
  done
done
step "g test"
timeout 150 /tmp/ferroccl-g test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "g coll, 2 ranks on device 0, direct path, 4 channels"
timeout 100 /tmp/ferroccl-g coll --devices 0 --ranks 2 > $res/coll-2-direct.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-direct.txt | tee -a "$log"
step "g coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 100 /tmp/ferroccl-g coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-1ch.txt | tee -a "$log"
step "g coll, 2 ranks on device 0, stream path, default"
timeout 100 /tmp/ferroccl-g coll --devices 0 --ranks 2 --path stream > $res/coll-2-default.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-default.txt | tee -a "$log"
step "g coll, 4 ranks on device 0, stream path"
timeout 100 /tmp/ferroccl-g coll --devices 0 --ranks 4 --path stream > $res/coll-4-stream.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-4-stream.txt | tee -a "$log"
step end
grep -E "^## |stamp every|diag|rc |passed|cases" "$log" | head -80
