#!/usr/bin/env bash
# Twenty-ninth session, sixth device call (one H200): the final device code (one read of
# the ring slot at a time; .carry/ferroccl-b2.gz): `ferroccl bench work_loop` into
# work_loop.json, the self-tests, and the matrix on the stream path on the one GPU: 2
# ranks with one resident channel and no guests (the ring route), 8 ranks.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/final.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-b2.gz > /tmp/f && chmod +x /tmp/f
step "bench work_loop"
timeout 100 /tmp/f bench work_loop --json "$res/work_loop.json" >> "$log" 2>&1
step "test"
timeout 150 /tmp/f test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "coll, 2 ranks on device 0, 1 resident channel, no guests, stream path"
timeout 100 /tmp/f coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2-1ch.txt | tee -a "$log"
step "coll, 8 ranks on device 0, stream path (cut at 200 s)"
timeout 200 /tmp/f coll --devices 0 --ranks 8 --path stream > $res/coll-8.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-8.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
