#!/usr/bin/env bash
# Thirty-ninth session, one H200: t5 (the lean path's lines past a thread's first in
# batches run by functions of their own, the lean edges on two ranks raised: all-reduce
# to 1 MiB, all-gather and reduce-scatter to 2 MiB, 20 KiB packet slots) against main (m),
# second call: the sizes around the edges again, and the staged and ring sizes (8 MiB -
# 256 MiB) that t5 does not route differently, to see whether its larger work loop costs
# them. BUILDS names the builds (.carry/ferroccl-BUILD.gz). Four rounds, the builds'
# order rotated each round, every row checked, the public Comm calls on streams, two
# ranks on GPU 0 with the default 64 channels. ROUNDS: how many rounds (default 4).
set -uo pipefail
source bench/scripts/device-env.sh
open_results log.txt
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
builds=${BUILDS:-m t5}
unpack_builds $builds
bench() {
  local name=$1; shift
  timeout 150 /tmp/ferroccl-$b bench "$@" > "$res/$name-$b-$round.txt" 2>&1
  echo "$name rc $?" | tee -a "$log"
}
rotate() { local first=$1; shift; echo "$@" $first; }
order=$builds
for round in $(seq 1 ${ROUNDS:-4}); do
  for b in $order; do
    step "$b round $round"
    bench edge all_reduce all_gather reduce_scatter -b 64K -e 4M -f 2 -c 1 -n 100 -w 10 --devices 0 --ranks 2 --timing back-to-back,graph --latency-maxbytes 4M
    bench big all_reduce all_gather reduce_scatter -b 8M -e 256M -f 4 -c 1 -n 20 -w 5 --devices 0 --ranks 2 --timing back-to-back
  done
  order=$(rotate $order)
done
step end
cd $out && tar czf res.tgz res && rm -rf res
