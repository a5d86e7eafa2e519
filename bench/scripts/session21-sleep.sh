#!/usr/bin/env bash
# Twenty-first session (2026-11-27): the loop that sleeps when idle (.carry/ferroccl-sleep.gz,
# this session's build: a communicator's loop of one resident channel leaves the GPU after
# 1 ms with nothing to do; the next call launches it again). Self-tests; the GPU matrix
# through the stream path (2 ranks on devices 0,1; 2 ranks on device 0), where the loops
# sleep between cases while the host checks results; issue 14's work_loop benchmark (new,
# then the old build .carry/ferroccl-final.gz in the same call, for the host time per
# call); the footprint with the default (loops asleep in the idle phase) and with
# --sleep-after never (loops polling). NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/sleep.txt
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-sleep.gz > /tmp/new && chmod +x /tmp/new
gunzip -c .carry/ferroccl-final.gz > /tmp/old && chmod +x /tmp/old
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
step "new: self-tests (ferroccl test), device 0"
timeout 120 /tmp/new test >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "new: bench work_loop, device 0"
timeout 100 /tmp/new bench work_loop --json "$res/work_loop.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "old: bench work_loop, device 0"
timeout 80 /tmp/old bench work_loop --json "$res/work_loop-old.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "new: bench footprint, device 0, 2 ranks, default (loops sleep after 1 ms)"
timeout 100 /tmp/new bench footprint --json "$res/footprint.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "new: bench footprint, device 0, 2 ranks, --sleep-after never (loops poll)"
timeout 100 /tmp/new bench footprint --sleep-after never --json "$res/footprint-awake.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
step "new: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/new coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 3 | tee -a "$log"
step "new: coll --algo auto, 2 ranks on device 0, stream path"
timeout 100 /tmp/new coll --devices 0 --ranks 2 --path stream --algo auto 2>&1 | tail -n 3 | tee -a "$log"
step "end"
cd $out && tar czf res.tgz res
