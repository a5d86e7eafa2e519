#!/usr/bin/env bash
# Twenty-ninth session, third device call (one H200): `ferroccl bench work_loop`
# A/B/C three rounds: the session-28 build (.carry/ferroccl.gz), the stop look issued
# before the fetch (.carry/ferroccl-a.gz), and that plus one read of the ring slot at a
# time instead of two halves half a round trip apart (.carry/ferroccl-b.gz).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab2.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in ferroccl ferroccl-a ferroccl-b; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
for round in 1 2 3; do
  for b in ferroccl ferroccl-a ferroccl-b; do
    step "$b bench work_loop, round $round"
    timeout 100 /tmp/$b bench work_loop --json "$res/work_loop-$b-$round.json" >> "$log" 2>&1
  done
done
step "ferroccl-b test work_loop"
timeout 120 /tmp/ferroccl-b test work_loop >> "$log" 2>&1
step end
cd $out && tar czf res.tgz res
