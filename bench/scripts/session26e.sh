#!/usr/bin/env bash
# Twenty-sixth session (2026-11-28), nvidia-h200-x2: the polling channel with four reads of
# the next ring slot in flight (.carry/ferroccl.gz) against two (.carry/ferroccl-base.gz,
# the same host code), A/B/A/B in one call: `bench work_loop` (the direct path's no-op
# round trip, the ring route's round trip against an empty launch + synchronize). Then,
# with the new build: the work-loop self-tests, and the collective matrix through the
# ring: 2 ranks on device 0 with one resident channel and no guests (stream path: ring
# route) and 2 ranks on devices 0,1 on the direct path. Timeouts cut the matrices short;
# the cases run are in the log. NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl-base.gz > /tmp/a && gunzip -c .carry/ferroccl.gz > /tmp/b && chmod +x /tmp/a /tmp/b
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for round in 1 2; do
  for v in a b; do
    step "work_loop, build $v, round $round"
    timeout 60 /tmp/$v bench work_loop --json $res/work_loop-$v-$round.json > $res/work_loop-$v-$round.txt 2>&1; echo "rc $?" | tee -a "$log"
    grep -E "^\(a\)|launch \+ sync  |\(d\)|no-op \+ sync|vs_launch_sync|polling|post route" $res/work_loop-$v-$round.txt | tee -a "$log"
  done
done
step "ferroccl test work_loop"
timeout 120 /tmp/b test work_loop > $res/test.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 1 $res/test.txt | tee -a "$log"
step "coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 70 /tmp/b coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 2 $res/coll-1ch.txt | tee -a "$log"
step "coll, 2 ranks on devices 0,1, direct path"
timeout 70 /tmp/b coll --devices 0,1 --ranks 2 --path direct > $res/coll-direct.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 2 $res/coll-direct.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
