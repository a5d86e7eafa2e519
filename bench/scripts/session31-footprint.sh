#!/usr/bin/env bash
# Thirty-first session, one H200, device call 5: the committed build (.carry/ferroccl-f.gz)
# and the thirtieth session's (.carry/ferroccl-base.gz), `ferroccl bench footprint` on
# device 0 with 2 ranks, the default (loops asleep when idle) and --sleep-after never
# (the polling channel's poll, now four slots a read, running all through the idle
# phase), each build in turn.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/footprint.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in base f; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
for b in f base; do
  step "$b bench footprint (default)"
  timeout 120 /tmp/ferroccl-$b bench footprint --json "$res/footprint-$b.json" >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
  step "$b bench footprint --sleep-after never"
  timeout 120 /tmp/ferroccl-$b bench footprint --sleep-after never --json "$res/footprint-awake-$b.json" >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
done
step end
