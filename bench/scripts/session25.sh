#!/usr/bin/env bash
# Twenty-fifth session (2026-11-28), one H200 (nvidia-h200): issue 14's ring route of
# stream-ordered calls (.carry/ferroccl.gz). The GPU self-tests (the new
# work_loop_stream_ring_route among them), the work-loop benchmark twice (the round trip
# against an empty launch + synchronize in the same run), and the collective matrix on
# the stream path with one resident channel and no guests (every call that finds its
# stream idle takes the ring route), 2 and 4 ranks on the one GPU.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test"
timeout 240 /tmp/ferroccl test > $res/test.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 3 $res/test.txt | tee -a "$log"
grep -A2 "ring_route" $res/test.txt | tee -a "$log"
for run in 1 2; do
  step "bench work_loop, run $run"
  timeout 120 /tmp/ferroccl bench work_loop --json $res/work_loop-$run.json > $res/work_loop-$run.txt 2>&1; echo "rc $?" | tee -a "$log"
  grep -E "round trip|launch \+ sync|vs_launch|ring route|in a graph|back to back|host time" $res/work_loop-$run.txt | tee -a "$log"
done
for ranks in 2 4; do
  step "coll, $ranks ranks on device 0, stream path, 1 resident channel, no guests"
  timeout 200 /tmp/ferroccl coll --devices 0 --ranks $ranks --channels 1 --resident 1 --path stream > $res/coll-$ranks.txt 2>&1; echo "rc $?" | tee -a "$log"
  tail -n 2 $res/coll-$ranks.txt | tee -a "$log"
done
step end
