#!/usr/bin/env bash
# Twenty-ninth session, seventh device call (one H200): bench/probes/dispatch_costs.cu
# after its echo probes' setup became one helper: ONLY_RING and ONLY_MEMOP (item in a host
# slot), to show the tidied source runs and gives the figures of session29.md §1.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/probe.txt
nv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "nvcc dispatch_costs.cu"
nvcc -O2 -arch=sm_90 -I$nv/cu13/include bench/probes/dispatch_costs.cu -L$nv/cu13/lib -Xlinker -rpath=$nv/cu13/lib -lcuda -lcublas -o /tmp/dispatch_costs >> "$log" 2>&1
step "dispatch_costs ONLY_RING"
ONLY_RING=1 timeout 100 /tmp/dispatch_costs >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step "dispatch_costs ONLY_MEMOP, item in a host slot"
HOST_ITEM=1 ONLY_MEMOP=1 timeout 100 /tmp/dispatch_costs >> "$log" 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res
