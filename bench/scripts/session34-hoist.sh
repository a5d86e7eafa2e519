#!/usr/bin/env bash
# Thirty-fourth session, one H200: a post-only part's channel context made before the post
# grid waits for the kernel before it (build h) against HEAD's device code (m, b6e46c5's
# build). Three rounds, builds alternated: `bench work_loop` (its (e): a one-rank
# all_reduce, the local copy on the post grid alone, whose posts overlap), and two ranks on
# one GPU with 32 channels (where two post grids of each rank fit, so posts overlap):
# all_reduce automatic and forced one-shot, back to back and in CUDA graphs; then h's
# self-tests and matrices.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/hoist.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in m h; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
for round in 1 2 3; do
  for b in m h; do
    step "$b round $round: bench work_loop"
    timeout 60 /tmp/ferroccl-$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
    for algo in auto one-shot; do
      step "$b round $round: bench all_reduce --algo $algo, 2 ranks on device 0, 32 channels"
      timeout 120 /tmp/ferroccl-$b bench all_reduce -b 8 -e 2M -f 8 -c 1 -n 100 -w 10 --devices 0 --ranks 2 --channels 32 --algo $algo --timing back-to-back,graph --latency-maxbytes 2M > "$res/ar-$algo-$b-$round.txt" 2>&1
      echo "rc $?" | tee -a "$log"; grep -v "^#" "$res/ar-$algo-$b-$round.txt" >> "$log"
    done
  done
done
step "h test"
timeout 150 /tmp/ferroccl-h test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
run() {
  step "h $1: coll ${*:2}"
  timeout 110 /tmp/ferroccl-h coll "${@:2}" > "$res/$1.txt" 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 "$res/$1.txt" | tee -a "$log"
}
run coll-1-64ch --devices 0 --ranks 1 --channels 64 --path stream
run coll-2-32ch --devices 0 --ranks 2 --channels 32 --path stream
run coll-2-default --devices 0 --ranks 2 --path stream
run coll-2-32ch-one-shot --devices 0 --ranks 2 --channels 32 --path stream --algo one-shot
run coll-4-default --devices 0 --ranks 4 --path stream --big 262144
step end
cd $out && tar czf res.tgz res && rm -rf res
