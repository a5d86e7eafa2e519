#!/usr/bin/env bash
# Fifteenth session, first device call (2026-11-26): the lean-wide A/B
# (bench/scripts/session15-wide.sh: .carry/ferroccl-main.gz = main at the session's start,
# .carry/ferroccl.gz = main + bench/experiments/lean-wide.patch), then, with main's build:
# where a small lean call's time goes (--stats: the CTA's span and the packet exchange
# against the per-call time in graphs), whether the smallest sizes' extra 0.4 µs in graphs
# depends on the sweep's order (8 B measured alone, after 512 B, and first), and the work
# loop benchmark (host time per call). NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
bash bench/scripts/session15-wide.sh
log=$res/run1.txt
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
m=/tmp/main
for f in all_reduce reduce_scatter; do
  for s in 8 512 64K; do
    step "main --stats $f $s graph, devices 0,1"
    timeout 60 $m bench $f -b $s -e $s -c 1 -n 50 -w 10 --devices 0,1 --timing graph --latency-maxbytes 1M --stats 2>&1 | tee -a "$log" | tail -n 12 > /dev/null
  done
done
step "main order: 512 then 8 B (-f 64 reversed is not possible: two processes)"
timeout 60 $m bench all_reduce reduce_scatter -b 512 -e 512 -c 1 -n 50 -w 10 --devices 0,1 --nccl --timing graph --latency-maxbytes 1M 2>&1 | grep -v "^#" >> "$log"
timeout 60 $m bench all_reduce reduce_scatter -b 8 -e 8 -c 1 -n 50 -w 10 --devices 0,1 --nccl --timing graph --latency-maxbytes 1M 2>&1 | grep -v "^#" >> "$log"
timeout 60 $m bench all_reduce reduce_scatter -b 8 -e 512 -f 4 -c 1 -n 50 -w 10 --devices 0,1 --nccl --timing graph --latency-maxbytes 1M 2>&1 | grep -v "^#" >> "$log"
step "main bench work_loop (device 0)"
timeout 120 $m bench work_loop --json $res/work_loop.json 2>&1 | tee -a "$log" | tail -n 3
step end
