#!/usr/bin/env bash
# Twenty-ninth session, second device call (one H200): ferroccl's ring polling and
# variants outside ferroccl (bench/probes/dispatch_costs.cu, ONLY_RING=1), then `ferroccl
# bench work_loop` A/B/A/B: the session-28 build (.carry/ferroccl.gz) against this
# session's first change (.carry/ferroccl-a.gz: the stop look's read issued before the
# fetch instead of after it).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab1.txt
nv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "nvcc dispatch_costs.cu"
nvcc -O2 -arch=sm_90 -I$nv/cu13/include bench/probes/dispatch_costs.cu -L$nv/cu13/lib -Xlinker -rpath=$nv/cu13/lib -lcuda -lcublas -o /tmp/dispatch_costs >> "$log" 2>&1
step "dispatch_costs ONLY_RING"
ONLY_RING=1 timeout 100 /tmp/dispatch_costs >> "$log" 2>&1
for b in ferroccl ferroccl-a; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
for round in 1 2; do
  for b in ferroccl ferroccl-a; do
    step "$b bench work_loop, round $round"
    timeout 100 /tmp/$b bench work_loop --json "$res/work_loop-$b-$round.json" >> "$log" 2>&1
  done
done
step end
cd $out && tar czf res.tgz res
