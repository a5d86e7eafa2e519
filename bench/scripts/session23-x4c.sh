#!/usr/bin/env bash
# Twenty-third session (2026-11-27), four GPUs (nvidia-h200-x4), this session's final
# build (.carry/ferroccl-final.gz): the GPU matrix through the stream path, one rank per
# GPU, with the automatic choice and with one-shot and two-shot forced (the push form on
# four ranks, and the pull form where a call's share is too large for it), then eight
# ranks, two a GPU (the first cases the time limit allows). NCCL is not used;
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x4c.txt
gunzip -c .carry/ferroccl-final.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for algo in auto one-shot two-shot; do
  step "coll --algo $algo, 4 ranks on devices 0-3, stream path"
  timeout 120 /tmp/ferroccl coll --devices=0,1,2,3 --path stream --algo $algo > $res/coll-$algo.txt 2>&1; echo "rc $?" | tee -a "$log"
  tail -n 2 $res/coll-$algo.txt | tee -a "$log"
done
step "coll --algo auto, 8 ranks on devices 0-3 (two a GPU), stream path, 150 s"
timeout 150 /tmp/ferroccl coll --devices=0,1,2,3 --ranks 8 --path stream --algo auto > $res/coll-8.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 2 $res/coll-8.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
