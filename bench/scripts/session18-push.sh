#!/usr/bin/env bash
# Eighteenth session (2026-11-27), third device call: main at 3975b82 ("lean",
# .carry/ferroccl-lean.gz) against "push" (.carry/ferroccl-push.gz: on two ranks the
# staged one-shot all-reduce, all-gather and reduce-scatter push their shares into the
# peer's staging; the post grid's choices read the communicator's fields once),
# 256 KiB - 8 MiB, back to back and in CUDA graphs, 2 ranks (devices 0, 1), NCCL 2.28.9
# in the same process, every row checked, build order alternated; --stats of one-shot
# forced at 64 KiB - 2 MiB in graphs for both builds; the push build's GPU matrix
# (automatic choice and one-shot forced, stream path) and self-tests.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/push.txt
for v in lean push; do gunzip -c .carry/ferroccl-$v.gz > /tmp/$v && chmod +x /tmp/$v; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
mid() {
  step "$1 round $2: bench all_reduce all_gather reduce_scatter 256 KiB - 8 MiB, devices 0,1"
  timeout 150 /tmp/$1 bench all_reduce all_gather reduce_scatter -b 256K -e 8M -f 2 -c 1 -n 50 -w 10 --devices 0,1 --nccl --timing back-to-back,graph --latency-maxbytes 8M --json "$res/$1-r$2.json" 2>&1 | grep -v "^# [0-9]* iterations" >> "$log"
}
mid lean 0; mid push 0
mid push 1; mid lean 1
for v in lean push; do
  for f in all_reduce all_gather reduce_scatter; do
    step "$v one-shot --stats $f 64 KiB - 2 MiB graph"
    timeout 90 /tmp/$v bench $f -b 64K -e 2M -f 2 -c 1 -n 50 -w 10 --devices 0,1 --algo one-shot --timing graph --latency-maxbytes 4M --stats 2>&1 | grep -v "busiest\|placement\|no channel" >> "$log"
  done
done
step "push: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/push coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "push: coll --algo one-shot, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/push coll --devices 0,1 --path stream --algo one-shot 2>&1 | tail -n 2 | tee -a "$log"
step "push: ferroccl test (device 0)"
timeout 60 /tmp/push test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
