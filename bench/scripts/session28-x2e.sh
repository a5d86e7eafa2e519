#!/usr/bin/env bash
# Twenty-eighth session (2026-11-28), two GPUs (nvidia-h200-x2), the final device code
# (8f7b13e: the pushed two-shot split into three functions): the GPU matrix of all_reduce
# with two-shot forced on 2 ranks and on 4 ranks two a GPU (stream path, direct on), and
# all_reduce 8-32 MiB on 2 ranks against NCCL 2.28.9 in the same process, every row
# checked. NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "coll two-shot all_reduce, 2 ranks, stream path"
timeout 60 /tmp/ferroccl coll --devices=0,1 --path stream --algo two-shot all_reduce > $res/coll-2s-2.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2s-2.txt | tee -a "$log"
step "coll two-shot all_reduce, 4 ranks on devices 0,1, stream path"
timeout 60 /tmp/ferroccl coll --devices=0,1 --ranks 4 --path stream --algo two-shot all_reduce > $res/coll-2s-4.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2s-4.txt | tee -a "$log"
step "all_reduce 8-32 MiB, 2 ranks, NCCL"
timeout 60 /tmp/ferroccl bench all_reduce -b 8M -e 32M -f 2 -c 1 -n 20 -w 5 --devices=0,1 --nccl > $res/ar.txt 2>&1; echo "rc $?" | tee -a "$log"
grep -v '^#' $res/ar.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
