#!/usr/bin/env bash
# Thirty-fifth session, one H200: the self-tests with work_loop_stream_ring_route's gated
# rounds (its posting rounds wait on a host-mapped gate opened after the call), the whole
# set once, then that test ten times.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl-t.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "test"
timeout 150 /tmp/ferroccl test > $res/test.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/test.txt | tee -a "$log"
for i in $(seq 1 10); do
  step "test work_loop_stream_ring_route, run $i"
  timeout 60 /tmp/ferroccl test work_loop_stream_ring_route >> $res/ring-route.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/ring-route.txt | tee -a "$log"
done
step end
cd $out && tar czf res.tgz res && rm -rf res
