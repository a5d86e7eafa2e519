#!/usr/bin/env bash
# Twenty-eighth session (2026-11-28), four GPUs (nvidia-h200-x4), the build with two-shot
# all-reduce pushing its reduced blocks straight into the peers' outputs (direct outputs)
# and two peers a pass: all_reduce 4-64 MiB against NCCL 2.28.9 in the same process, every
# row checked, direct on (default) and off, auto and two-shot forced (64 MiB staging);
# the GPU matrix of all_reduce with two-shot forced and with the automatic choice on 4
# ranks (stream path, direct on) and two-shot on 2; the channels' statistics at 8 MiB.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
D=--devices=0,1,2,3
B="-b 4M -e 64M -f 2 -c 1 -n 20 -w 5 $D"
for direct in true false; do
  step "all_reduce auto --direct $direct + NCCL"
  timeout 60 /tmp/ferroccl bench all_reduce $B --direct $direct --nccl > $res/ar-auto-$direct.txt 2>&1; echo "rc $?" | tee -a "$log"
  step "all_reduce two-shot --staging 64M --direct $direct"
  timeout 60 /tmp/ferroccl bench all_reduce $B --algo two-shot --staging 64M --direct $direct > $res/ar-2s-$direct.txt 2>&1; echo "rc $?" | tee -a "$log"
done
step "coll two-shot all_reduce, 4 ranks, stream path"
timeout 120 /tmp/ferroccl coll $D --path stream --algo two-shot all_reduce > $res/coll-2s-4.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/coll-2s-4.txt | tee -a "$log"
step "coll two-shot all_reduce, 2 ranks, stream path"
timeout 90 /tmp/ferroccl coll --devices=0,1 --path stream --algo two-shot all_reduce > $res/coll-2s-2.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/coll-2s-2.txt | tee -a "$log"
step "stats: all_reduce 8M auto"
timeout 60 /tmp/ferroccl bench all_reduce -b 8M -e 8M -c 0 -n 20 -w 5 $D --stats > $res/stats.txt 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res
