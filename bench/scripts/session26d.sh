#!/usr/bin/env bash
# Twenty-sixth session (2026-11-28), nvidia-h200-x2: the final build's host path (the post's
# parameters in a fixed array, an in-place buffer checked once) on the GPUs. The GPU
# self-tests (device 0); the collective matrix on the stream path, 2 ranks on devices
# 0,1 (the default communicator: guests, posts overlapping) and 2 ranks on device 0 with
# one resident channel and no guests (posts of one CTA, the ring route); the work-loop
# benchmark (Comm::all_reduce host time per call). Timeouts cut the matrices short where
# they run long: the count of cases run is in the log.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/f && chmod +x /tmp/f
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test"
timeout 200 /tmp/f test > $res/test.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 2 $res/test.txt | tee -a "$log"
step "coll, 2 ranks on devices 0,1, stream path, default communicator"
timeout 150 /tmp/f coll --devices 0,1 --ranks 2 > $res/coll-x2.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 2 $res/coll-x2.txt | tee -a "$log"
step "coll, 2 ranks on device 0, stream path, 1 resident channel, no guests"
timeout 100 /tmp/f coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-1ch.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 2 $res/coll-1ch.txt | tee -a "$log"
step "bench work_loop, device 0"
timeout 90 /tmp/f bench work_loop --json $res/work_loop.json > $res/work_loop.txt 2>&1; echo "rc $?" | tee -a "$log"
cat $res/work_loop.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
