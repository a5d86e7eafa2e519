#!/usr/bin/env bash
# Thirty-first session, one H200: `ferroccl bench work_loop`, six rounds of two builds,
# alternated: the thirtieth session's final device code (.carry/ferroccl-base.gz: after a
# slot found by the poll, the next fetch reads two slots with volatile loads, a fence when
# it finds one) and the same with a poll that reads four slots with acquire loads, one
# 16-byte piece a lane, and takes every whole one from the first on, no backlog read below
# five slots (.carry/ferroccl-new.gz); then the new build's self-tests, the matrix on the
# stream path with 2 ranks on the one GPU and one resident channel, no guests (the ring
# route), and the default communicator's matrix with 2 ranks (the post route).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in base new; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
for round in 1 2 3 4 5 6; do
  for b in base new; do
    step "$b bench work_loop, round $round"
    timeout 60 /tmp/ferroccl-$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
  done
done
step "new test"
timeout 150 /tmp/ferroccl-new test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "new coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 100 /tmp/ferroccl-new coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-1ch.txt | tee -a "$log"
step "new coll, 2 ranks on device 0, default communicator, stream path"
timeout 100 /tmp/ferroccl-new coll --devices 0 --ranks 2 --path stream > $res/coll-2-default.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-default.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
