#!/usr/bin/env bash
# Twentieth session (2026-11-27), device call 1: the doorbell route (stream calls that the
# loop's first channel runs alone go through the ring and one cuStreamBatchMemOp instead
# of a post kernel launch), .carry/ferroccl-doorbell.gz, against the nineteenth session's
# final build (.carry/ferroccl-final.gz, b270bf7) where a same-run baseline is needed. On
# two H200s: the self-tests; `bench work_loop` of both builds (the new one measures its
# stream no-ops with the doorbell on and off); the GPU matrix through the stream path
# (doorbell on, the default) on 2 ranks of devices 0,1 and a forced one-shot on 2 ranks of
# device 0; the ring's large all_reduce of both builds (the loop's own code path), every
# row checked. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/doorbell.txt
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-doorbell.gz > /tmp/new && chmod +x /tmp/new
gunzip -c .carry/ferroccl-final.gz > /tmp/old && chmod +x /tmp/old
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
step "new: self-tests (ferroccl test), device 0"
timeout 120 /tmp/new test >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "new: bench work_loop, device 0"
timeout 100 /tmp/new bench work_loop --json "$res/work_loop.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "old: bench work_loop, device 0"
timeout 80 /tmp/old bench work_loop --json "$res/work_loop-old.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "new: coll --algo auto, 2 ranks on devices 0,1, stream path (doorbell on)"
timeout 120 /tmp/new coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "new: coll --algo one-shot, 2 ranks on device 0, stream path (doorbell on)"
timeout 60 /tmp/new coll --devices 0 --ranks 2 --path stream --algo one-shot 2>&1 | tail -n 2 | tee -a "$log"
for b in old new; do
  step "$b: bench all_reduce 64 MiB - 256 MiB, devices 0,1 (the loop's ring)"
  timeout 50 /tmp/$b bench all_reduce -b 64M -e 256M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --json "$res/ring-$b.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
done
step "end"
cd $out && tar czf res.tgz res
