#!/usr/bin/env bash
# Thirty-eighth session, one H200: the lean collectives' lines past a thread's first in
# batches run by functions of their own (send_rest, receive_rest), entered only by threads
# with more lines (t1: from the second line, t3: from the third; t4 and t5 are t3 and t1
# with the lean edges raised on two ranks: all-reduce to 1 MiB, all-gather and
# reduce-scatter to 2 MiB, packet slots of 20 KiB), against main's device code (m).
# BUILDS names the builds (.carry/ferroccl-BUILD.gz). Three rounds, the builds' order
# rotated each round, every row checked, the public Comm calls on streams: two ranks with
# the default 64 channels, all three collectives 8 B - 4 MiB back to back and in CUDA
# graphs; two ranks on 32 channels, all_reduce 8 B - 2 MiB; four ranks, all three 8 B -
# 4 MiB. Then the self-tests and matrices of TEST_BUILD (none where BENCH_ONLY=1).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/lean.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
builds=${BUILDS:-m t1 t3 t4 t5}
for b in $builds; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
bench() {
  local name=$1; shift
  timeout 120 /tmp/ferroccl-$b bench "$@" > "$res/$name-$b-$round.txt" 2>&1
  echo "$name rc $?" | tee -a "$log"
}
rotate() { local first=$1; shift; echo "$@" $first; }
order=$builds
for round in 1 2 3; do
  for b in $order; do
    step "$b round $round"
    bench lean-2 all_reduce all_gather reduce_scatter -b 8 -e 4M -f 2 -c 1 -n 50 -w 10 --devices 0 --ranks 2 --timing back-to-back,graph --latency-maxbytes 4M
    bench ar-32ch all_reduce -b 8 -e 2M -f 8 -c 1 -n 100 -w 10 --devices 0 --ranks 2 --channels 32 --timing back-to-back,graph --latency-maxbytes 2M
    bench ar-4 all_reduce all_gather reduce_scatter -b 8 -e 4M -f 4 -c 1 -n 50 -w 10 --devices 0 --ranks 4 --timing back-to-back,graph --latency-maxbytes 4M
  done
  order=$(rotate $order)
done
last=${TEST_BUILD:-${builds##* }}
if [ -n "${BENCH_ONLY:-}" ]; then step end; cd $out && tar czf res.tgz res && rm -rf res; exit 0; fi
step "$last test"
timeout 150 /tmp/ferroccl-$last test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
run() {
  step "$last $1: coll ${*:2}"
  timeout 110 /tmp/ferroccl-$last coll "${@:2}" > "$res/$1.txt" 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 "$res/$1.txt" | tee -a "$log"
}
run coll-2-64ch --devices 0 --ranks 2 --channels 64 --path stream
run coll-2-32ch --devices 0 --ranks 2 --channels 32 --path stream --big 262144
run coll-3-32ch --devices 0 --ranks 3 --channels 32 --path stream --big 262144
run coll-4-32ch --devices 0 --ranks 4 --channels 32 --path stream --big 262144
run coll-8-8ch --devices 0 --ranks 8 --channels 8 --path stream --big 262144
step end
cd $out && tar czf res.tgz res && rm -rf res
