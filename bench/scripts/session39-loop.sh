#!/usr/bin/env bash
# Thirty-ninth session, one H200: issue 14's single-GPU benchmarks (`bench work_loop`,
# `bench footprint`) of main before this session's lean merge (m) and after it (t5), one
# process each, alternated twice, to see whether the merge moved the dispatch path or the
# idle loop's footprint.
set -uo pipefail
source bench/scripts/device-env.sh
open_results log.txt
unpack_builds m t5
for round in 1 2; do
  for b in m t5; do
    echo "## $b round $round ($(date -u +%FT%TZ))" | tee -a "$log"
    timeout 120 /tmp/ferroccl-$b bench work_loop --json $res/work_loop-$b-$round.json > $res/work_loop-$b-$round.txt 2>&1; echo "work_loop rc $?" | tee -a "$log"
    timeout 150 /tmp/ferroccl-$b bench footprint --json $res/footprint-$b-$round.json > $res/footprint-$b-$round.txt 2>&1; echo "footprint rc $?" | tee -a "$log"
  done
done
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
cd $out && tar czf res.tgz res && rm -rf res
