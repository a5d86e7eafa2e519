#!/usr/bin/env bash
# Two or more builds compared on one machine, the way every build comparison in NOTES.md
# was made: ROUNDS rounds, the builds' order rotated each round, each round running the
# same `ferroccl bench` command (ARGS) with every build, then a table of the medians over
# rounds of the mean of out-of-place and in-place µs per call, and each build's ratio to
# the first. The default ARGS are the LL/one-shot edge sizes, two ranks on GPU 0.
# Writes OUTDIR/ab-DATE.txt (the table) and OUTDIR/raw/ab/bench-NAME-ROUND.txt.
set -euo pipefail
usage="usage: $0 OUTDIR NAME=BINARY NAME=BINARY [NAME=BINARY...]
  env: ROUNDS (3) ARGS (the bench command after 'ferroccl bench') LIMIT (seconds a run, 150)"
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
source "$(dirname "$0")/env.sh"
open_results "$1" ab
shift
args=${ARGS:-all_reduce all_gather reduce_scatter -b 64K -e 4M -f 2 -c 1 -n 100 -w 10 --devices 0 --ranks 2 --timing back-to-back,graph --latency-maxbytes 4M}
read_builds "$@"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for b in "${order[@]}"; do
    step "$b round $round: ferroccl bench $args"
    # shellcheck disable=SC2086
    timeout "${LIMIT:-150}" "${bins[$b]}" bench $args > "$out/$rawdir/bench-$b-$round.txt" 2>&1
  done
  order=("${order[@]:1}" "${order[0]}")
done
"${results[@]}" compare "$out/$rawdir" bench "${names[@]}" | tee "$out/ab-$day.txt" | tee -a "$log"
step end
