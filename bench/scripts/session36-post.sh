#!/usr/bin/env bash
# Thirty-sixth session, one H200: the post grid's general path in a function of its own
# with each post-only part's context made before the wait (build h2), and on top of it the
# staged channel's addresses and epoch loaded at once (h3), against main's device code (m);
# BUILDS names the builds (.carry/ferroccl-BUILD.gz), h4-h6 in later calls.
# Three rounds, builds alternated, every row checked: `bench work_loop`; two ranks on
# device 0 with 32 channels (two post grids of each rank fit, so posts overlap): all_reduce
# automatic and forced one-shot 8 B - 2 MiB, back to back and in CUDA graphs; two ranks
# with the default 64 channels: reduce_scatter and all_reduce 256 KiB - 4 MiB (the staged
# sizes past the lean edges); four ranks: all_reduce 8 B - 4 MiB. Then the last build's
# self-tests and matrices (TEST_BUILD, or the last of BUILDS; BENCH_ONLY=1: none).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/post.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
builds=${BUILDS:-m h2 h3}
for b in $builds; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
bench() {
  local name=$1; shift
  timeout 120 /tmp/ferroccl-$b bench "$@" > "$res/$name-$b-$round.txt" 2>&1
  echo "$name rc $?" | tee -a "$log"
}
for round in 1 2 3; do
  for b in $builds; do
    step "$b round $round"
    timeout 60 /tmp/ferroccl-$b bench work_loop --json "$res/wl-$b-$round.json" >> "$log" 2>&1
    for algo in auto one-shot; do
      bench ar-32ch-$algo all_reduce -b 8 -e 2M -f 8 -c 1 -n 100 -w 10 --devices 0 --ranks 2 --channels 32 --algo $algo --timing back-to-back,graph --latency-maxbytes 2M
    done
    bench staged-2 reduce_scatter all_reduce all_gather -b 256K -e 4M -f 2 -c 1 -n 100 -w 10 --devices 0 --ranks 2 --timing back-to-back,graph --latency-maxbytes 4M
    bench ar-4 all_reduce -b 8 -e 4M -f 8 -c 1 -n 100 -w 10 --devices 0 --ranks 4 --timing back-to-back,graph --latency-maxbytes 4M
  done
done
last=${TEST_BUILD:-${builds##* }}
if [ -n "${BENCH_ONLY:-}" ]; then step end; cd $out && tar czf res.tgz res && rm -rf res; exit 0; fi
step "$last test"
timeout 150 /tmp/ferroccl-$last test >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
run() {
  step "$last $1: coll ${*:2}"
  timeout 110 /tmp/ferroccl-$last coll "${@:2}" > "$res/$1.txt" 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 "$res/$1.txt" | tee -a "$log"
}
run coll-1-64ch --devices 0 --ranks 1 --channels 64 --path stream
run coll-2-32ch --devices 0 --ranks 2 --channels 32 --path stream
run coll-2-default --devices 0 --ranks 2 --path stream
run coll-2-32ch-one-shot --devices 0 --ranks 2 --channels 32 --path stream --algo one-shot
run coll-2-two-shot --devices 0 --ranks 2 --path stream --algo two-shot
run coll-4-default --devices 0 --ranks 4 --path stream --big 262144
run coll-8-default --devices 0 --ranks 8 --path stream --big 262144
step end
cd $out && tar czf res.tgz res && rm -rf res
