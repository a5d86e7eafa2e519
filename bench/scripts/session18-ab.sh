#!/usr/bin/env bash
# Eighteenth session (2026-11-27), fourth device call: main at 3975b82 ("lean",
# .carry/ferroccl-lean.gz) against 420da84 ("push2", .carry/ferroccl-push2.gz: the push
# form of the staged one-shot on two ranks, alone), 8 B - 8 MiB, back to back and in CUDA
# graphs, 2 ranks (devices 0, 1), NCCL 2.28.9 in the same process, every row checked,
# build order alternated; then a probe build ("probe2", .carry/ferroccl-probe2.gz, not
# merged: /tmp/probe2.patch in the session's notes) whose --stats lines carry clock stamps
# of the post grid's preamble (after the lean choice, after the item's checks, after
# post_only_plan, after a second post_only_plan of the same item, after the barrier, at
# the collective's start), one-shot forced, 64 KiB - 2 MiB in graphs; push2's GPU matrix
# (automatic choice and one-shot forced, stream path) and self-tests.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab.txt
for v in lean push2 probe2; do gunzip -c .carry/ferroccl-$v.gz > /tmp/$v && chmod +x /tmp/$v; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
mid() {
  step "$1 round $2: bench all_reduce all_gather reduce_scatter 8 B - 8 MiB, devices 0,1"
  timeout 200 /tmp/$1 bench all_reduce all_gather reduce_scatter -b 8 -e 8M -f 2 -c 1 -n 30 -w 10 --devices 0,1 --nccl --timing back-to-back,graph --latency-maxbytes 8M --json "$res/$1-r$2.json" 2>&1 | grep -v "^# [0-9]* iterations" >> "$log"
}
mid lean 0; mid push2 0
mid push2 1; mid lean 1
for f in all_reduce all_gather reduce_scatter; do
  step "probe2 one-shot --stats $f 64 KiB - 2 MiB graph"
  timeout 90 /tmp/probe2 bench $f -b 64K -e 2M -f 2 -c 1 -n 50 -w 10 --devices 0,1 --algo one-shot --timing graph --latency-maxbytes 4M --stats 2>&1 | grep -v "busiest\|placement\|no channel" >> "$log"
done
step "push2: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/push2 coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 1 | tee -a "$log"
step "push2: coll --algo one-shot, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/push2 coll --devices 0,1 --path stream --algo one-shot 2>&1 | tail -n 1 | tee -a "$log"
step "push2: ferroccl test (device 0)"
timeout 60 /tmp/push2 test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
