#!/usr/bin/env bash
# Twenty-ninth session, fifth device call (one H200): `ferroccl bench work_loop` three
# rounds of three builds: the session-28 build (.carry/ferroccl.gz), one read of the ring
# slot at a time (ferroccl-b2), and that plus the stop look by warp 1 while warp 0
# fetches (ferroccl-d, the final device code); then d's self-tests and the matrix on the
# stream path, 2 ranks on the one GPU: one resident channel and no guests (the ring
# route), and the default loop (guests, the post route).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab4.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in ferroccl ferroccl-b2 ferroccl-d; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
for round in 1 2 3; do
  for b in ferroccl ferroccl-b2 ferroccl-d; do
    step "$b bench work_loop, round $round"
    timeout 100 /tmp/$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
  done
done
step "ferroccl-d test"
timeout 150 /tmp/ferroccl-d test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "ferroccl-d coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 100 /tmp/ferroccl-d coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-1ch.txt | tee -a "$log"
step "ferroccl-d coll, 2 ranks on device 0, default channels, stream path"
timeout 100 /tmp/ferroccl-d coll --devices 0 --ranks 2 --path stream > $res/coll-2.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
