#!/usr/bin/env bash
# Twenty-ninth session, first device call (one H200): the ring route with a stream doorbell
# against the ring route as built (cuStreamQuery first) and an empty launch, outside
# ferroccl (bench/probes/dispatch_costs.cu, ONLY_RING=1), twice; then `ferroccl bench
# work_loop` of the session-28 build (.carry/ferroccl.gz) for the same run's figures.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ring.txt
nv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "nvcc dispatch_costs.cu"
nvcc -O2 -arch=sm_90 -I$nv/cu13/include bench/probes/dispatch_costs.cu -L$nv/cu13/lib -Xlinker -rpath=$nv/cu13/lib -lcuda -lcublas -o /tmp/dispatch_costs >> "$log" 2>&1
for round in 1 2; do
  step "dispatch_costs ONLY_RING, round $round"
  ONLY_RING=1 timeout 100 /tmp/dispatch_costs >> "$log" 2>&1
done
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
step "ferroccl bench work_loop (session-28 build)"
timeout 150 /tmp/ferroccl bench work_loop --json "$res/work_loop.json" >> "$log" 2>&1
step end
cd $out && tar czf res.tgz res
