#!/usr/bin/env bash
# Thirty-third session, one H200: the probe's stream doorbell (ring slot written by the
# host, one cuStreamBatchMemOp: doorbell write + wait for done; no launch, no query, no
# host spin) against empty launches in the same run (bench/probes/dispatch_costs.cu,
# ONLY_STREAM_DOORBELL=1), twice.
set -uo pipefail
source bench/scripts/device-env.sh
res=$out/res; mkdir -p $res
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee $res/doorbell.txt
nv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
nvcc -O2 -arch=sm_90 -I$nv/cu13/include bench/probes/dispatch_costs.cu \
    -L$nv/cu13/lib -Xlinker -rpath=$nv/cu13/lib -lcuda -lcublas -o /tmp/dispatch_costs 2>&1 | tee -a $res/doorbell.txt
for run in 1 2; do
  echo "## run $run ($(date -u +%FT%TZ))" | tee -a $res/doorbell.txt
  CUDA_MODULE_LOADING=EAGER ONLY_STREAM_DOORBELL=1 timeout 120 /tmp/dispatch_costs 2>&1 | tee -a $res/doorbell.txt
done
cd $out && tar czf res.tgz res && rm -rf res
