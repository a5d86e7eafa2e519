#!/usr/bin/env bash
# Twenty-seventh session (2026-11-28), four GPUs (nvidia-h200-x4), the build with direct
# operations per call and on by default: the GPU matrix through the stream path with the
# ring forced (its direct all-reduce, all-gather and broadcast) on 4 ranks (devices 0-3)
# and 2 (devices 0,1), then the automatic choice on 4 ranks. NCCL is not used;
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for d in 0,1,2,3 0,1; do
  for f in all_reduce all_gather broadcast; do
    step "coll --algo ring $f, devices $d, stream path"
    timeout 70 /tmp/ferroccl coll --devices=$d --path stream --algo ring $f > $res/coll-ring-$f-${d//,/}.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-ring-$f-${d//,/}.txt | tee -a "$log"
  done
done
step "coll auto, devices 0-3, stream path"
timeout 200 /tmp/ferroccl coll --devices=0,1,2,3 --path stream > $res/coll-auto.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-auto.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
