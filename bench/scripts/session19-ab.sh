#!/usr/bin/env bash
# Nineteenth session (2026-11-27): 420da84 ("base", .carry/ferroccl-push2.gz) against the
# session's dispatch changes ("new", .carry/ferroccl-s19.gz: the post of a loop without
# guests is its own one-CTA kernel, `ferroccl_mailbox_post_alone`; the polling channel
# reads the host's abort flag right after completing a mailbox item, not in front of the
# next one; the mailbox poll loads the error claim before the state's acquire), order
# alternated, three rounds of `bench work_loop`; small sizes 8 B - 1 MiB in CUDA graphs,
# 2 ranks (devices 0, 1), NCCL 2.28.9 in the same process, every row checked, two rounds;
# the new build's GPU matrix (automatic choice, stream path) and self-tests.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab.txt
gunzip -c .carry/ferroccl-push2.gz > /tmp/base && gunzip -c .carry/ferroccl-s19.gz > /tmp/new && chmod +x /tmp/base /tmp/new
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
loop() {
  step "$1 round $2: bench work_loop (device 0)"
  timeout 120 /tmp/$1 bench work_loop --json "$res/loop-$1-r$2.json" >> "$log" 2>&1
}
loop base 0; loop new 0; loop new 1; loop base 1; loop base 2; loop new 2
small() {
  step "$1 round $2: bench all_reduce all_gather reduce_scatter 8 B - 1 MiB in graphs, devices 0,1"
  timeout 150 /tmp/$1 bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 30 -w 10 --devices 0,1 --nccl --timing graph --json "$res/$1-r$2.json" 2>&1 | grep -v "^# [0-9]* iterations" >> "$log"
}
small base 0; small new 0; small new 1; small base 1
step "new: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/new coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 1 | tee -a "$log"
step "new: ferroccl test (device 0)"
timeout 60 /tmp/new test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
cd $out && tar czf res.tgz res
