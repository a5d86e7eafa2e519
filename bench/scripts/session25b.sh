#!/usr/bin/env bash
# Twenty-fifth session (2026-11-28), one H200: the ring route with its 10 µs watch
# (.carry/ferroccl.gz): the loop and communicator self-tests, the work-loop benchmark
# three times, the matrix with one resident channel and no guests on 2 and 4 ranks.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for filter in work_loop comm; do
  step "ferroccl test $filter"
  timeout 120 /tmp/ferroccl test $filter > $res/test-$filter.txt 2>&1; echo "rc $?" | tee -a "$log"
  cat $res/test-$filter.txt | tee -a "$log"
done
for run in 1 2 3; do
  step "bench work_loop, run $run"
  timeout 120 /tmp/ferroccl bench work_loop --json $res/work_loop-$run.json > $res/work_loop-$run.txt 2>&1; echo "rc $?" | tee -a "$log"
  grep -E "launch \+ sync|vs_launch|ring route|polling|post route|in a graph|back to back|host time" $res/work_loop-$run.txt | tee -a "$log"
done
for ranks in 2 4; do
  step "coll, $ranks ranks on device 0, stream path, 1 resident channel, no guests"
  timeout 200 /tmp/ferroccl coll --devices 0 --ranks $ranks --channels 1 --resident 1 --path stream > $res/coll-$ranks.txt 2>&1; echo "rc $?" | tee -a "$log"
  tail -n 1 $res/coll-$ranks.txt | tee -a "$log"
done
step end
