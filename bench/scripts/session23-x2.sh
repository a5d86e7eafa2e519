#!/usr/bin/env bash
# Twenty-third session (2026-11-27), two GPUs (nvidia-h200-x2), the final build
# (.carry/ferroccl-lean256.gz): on two ranks only a forced two-shot changed (it pushes
# now); the GPU matrix with two-shot forced (stream path), and all_reduce two-shot
# against one-shot forced, 1-32 MiB back to back, every row checked.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x2.txt
gunzip -c .carry/ferroccl-lean256.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "coll --algo two-shot, 2 ranks on devices 0,1, stream path"
timeout 60 /tmp/ferroccl coll --devices=0,1 --path stream --algo two-shot > $res/coll-two-shot.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 1 $res/coll-two-shot.txt | tee -a "$log"
for algo in two-shot one-shot; do
  step "bench all_reduce 1-32 MiB, --algo $algo"
  timeout 60 /tmp/ferroccl bench all_reduce -b 1M -e 32M -f 2 -c 1 -n 20 -w 5 --devices=0,1 --algo $algo --json $res/$algo.json > $res/$algo.txt 2>&1; echo "rc $?" | tee -a "$log"
done
step end
cd $out && tar czf res.tgz res
