#!/usr/bin/env bash
# Thirtieth session, device calls 1 and 2 (one H200): `ferroccl bench work_loop` six
# rounds of two builds, alternated: the twenty-ninth session's final device code
# (.carry/ferroccl-base.gz, one read of the ring slot at a time) and the same with the
# polling channel's lane 8 reading the host's abort flag in the poll's round trip, so
# that thread 0 skips its own read before the item found (.carry/ferroccl-new.gz; call 1:
# a volatile load on a path of its own, call 2: the same acquire instruction as the
# slot's pieces); then the new build's self-tests and the matrix on the stream path, 2
# ranks on the one GPU with one resident channel and no guests (the ring route).
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
timeout 120 /tmp/ferroccl-new test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "new coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 100 /tmp/ferroccl-new coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-1ch.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
