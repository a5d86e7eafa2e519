#!/usr/bin/env bash
# Twenty-ninth session, eighth device call (one H200): bench/probes/dispatch_costs.cu,
# ONLY_RING, with a seventh ring poll (mode 6: as mode 1, the device-memory word every
# mode waits for before each read of the slot read only every 64th round), to size what
# the loop's look at its mailbox between two reads of the ring costs.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/probe2.txt
nv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "nvcc dispatch_costs.cu"
nvcc -O2 -arch=sm_90 -I$nv/cu13/include bench/probes/dispatch_costs.cu -L$nv/cu13/lib -Xlinker -rpath=$nv/cu13/lib -lcuda -lcublas -o /tmp/dispatch_costs >> "$log" 2>&1
for round in 1 2; do
  step "dispatch_costs ONLY_RING, round $round"
  ONLY_RING=1 timeout 100 /tmp/dispatch_costs >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
done
step end
cd $out && tar czf res.tgz res
