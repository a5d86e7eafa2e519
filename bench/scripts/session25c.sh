#!/usr/bin/env bash
# Twenty-fifth session (2026-11-28), one H200: the ring route with the loop's abort check
# moved after a ring completion's publication (.carry/ferroccl.gz) against the build
# before it (.carry/ferroccl-10.gz), alternately, twice each: `bench work_loop`; then the
# loop and communicator self-tests and the 2-rank matrix (one resident channel, no
# guests) with the new build. NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
for b in ferroccl ferroccl-10; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for run in 1 2; do
  for b in ferroccl ferroccl-10; do
    step "$b bench work_loop, run $run"
    timeout 120 /tmp/$b bench work_loop --json $res/work_loop-$b-$run.json > $res/work_loop-$b-$run.txt 2>&1; echo "rc $?" | tee -a "$log"
    grep -E "round trip, 1|launch \+ sync  |vs_launch_sync|ring route|by the stream|polling|post route|in a graph|back to back|host time" $res/work_loop-$b-$run.txt | tee -a "$log"
  done
done
for filter in work_loop comm; do
  step "ferroccl test $filter"
  timeout 120 /tmp/ferroccl test $filter > $res/test-$filter.txt 2>&1; echo "rc $?" | tee -a "$log"
  tail -n 1 $res/test-$filter.txt | tee -a "$log"
done
step "coll, 2 ranks on device 0, stream path, 1 resident channel, no guests"
timeout 200 /tmp/ferroccl coll --devices 0 --ranks 2 --channels 1 --resident 1 --path stream > $res/coll-2.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 1 $res/coll-2.txt | tee -a "$log"
step end
