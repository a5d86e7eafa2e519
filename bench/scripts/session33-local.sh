#!/usr/bin/env bash
# Thirty-third session, one H200: one-rank collectives as a local copy on one channel per
# 64 KiB (build l), on the post grid alone where they fit the guests, against build b
# (bdc153e: every channel, through the mailbox). `bench work_loop` four rounds each,
# alternated (its (e) is Comm::all_reduce of 8 B on one rank of the default communicator);
# then l's self-tests and matrices: 1 rank on 64 channels (1 resident, 63 guests: the
# default communicator's shape) and on 4 channels (1 resident, 3 guests), 2 and 4 ranks on
# the stream default. The build measured is $1 (default l; session33-local2.sh passes m).
set -uo pipefail
new=${1:-l}
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/local.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in b $new; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
for round in 1 2 3 4; do
  for b in b $new; do
    step "$b bench work_loop, round $round"
    timeout 60 /tmp/ferroccl-$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
  done
done
step "$new test"
timeout 150 /tmp/ferroccl-$new test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
run() {
  step "$new $1: coll ${*:2}"
  timeout 110 /tmp/ferroccl-$new coll "${@:2}" > "$res/$1.txt" 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 "$res/$1.txt" | tee -a "$log"
}
run coll-1-64ch --devices 0 --ranks 1 --channels 64 --path stream
run coll-1-4ch --devices 0 --ranks 1 --channels 4 --resident 1 --path stream
run coll-2-default --devices 0 --ranks 2 --path stream
run coll-4-default --devices 0 --ranks 4 --path stream --big 262144
step end
cd $out && tar czf res.tgz res && rm -rf res
