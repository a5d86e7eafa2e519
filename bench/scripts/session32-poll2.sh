#!/usr/bin/env bash
# Thirty-second session, one H200: the polling channel's poll reading two ring slots
# (256 B) instead of four (build p, branch poll2) against the committed device code
# (build h, 7a1e7fc): reads of the host ring cost by the byte (session32.md §1), so a
# smaller poll may answer sooner. `bench work_loop --timeline` once each, `bench
# work_loop` eight rounds each, alternated; then p's self-tests and the matrix with 2 ranks
# on the one GPU on the ring route (one resident channel, no guests).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/poll2.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in h p; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
for b in h p; do
  step "$b timeline"
  timeout 60 /tmp/ferroccl-$b bench work_loop --timeline "$res/tl-$b.json" >> "$log" 2>&1
done
for round in $(seq 1 8); do
  for b in h p; do
    step "$b bench work_loop, round $round"
    timeout 60 /tmp/ferroccl-$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
  done
done
step "p test"
timeout 150 /tmp/ferroccl-p test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "p coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 100 /tmp/ferroccl-p coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-1ch.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
