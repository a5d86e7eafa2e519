#!/usr/bin/env bash
# Twenty-ninth session, fourth device call (one H200): `ferroccl bench work_loop` three
# rounds of four builds: the session-28 build (.carry/ferroccl.gz), one read of the ring
# slot at a time with the stop look issued before the fetch (ferroccl-b) and without it
# (ferroccl-b2), and b plus the mailbox looked at with relaxed loads issued before the
# slot's read (ferroccl-c); then c's self-tests and the matrix: on the stream path 2 ranks with
# one resident channel and no guests (the ring route) and 8 ranks on the one GPU; on the
# direct path 4 ranks.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab3.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in ferroccl ferroccl-b ferroccl-b2 ferroccl-c; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
for round in 1 2 3; do
  for b in ferroccl ferroccl-b ferroccl-b2 ferroccl-c; do
    step "$b bench work_loop, round $round"
    timeout 100 /tmp/$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
  done
done
step "ferroccl-c test"
timeout 150 /tmp/ferroccl-c test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "ferroccl-c coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 100 /tmp/ferroccl-c coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/coll-2-1ch.txt | tee -a "$log"
step "ferroccl-c coll, 8 ranks on device 0, stream path"
timeout 150 /tmp/ferroccl-c coll --devices 0 --ranks 8 --path stream > $res/coll-8.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/coll-8.txt | tee -a "$log"
step "ferroccl-c coll, 4 ranks on device 0, direct path (4 resident channels polling the ring)"
timeout 100 /tmp/ferroccl-c coll --devices 0 --ranks 4 --path direct > $res/coll-4-direct.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/coll-4-direct.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
