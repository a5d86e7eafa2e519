#!/usr/bin/env bash
# Twenty-eighth session (2026-11-28), four GPUs (nvidia-h200-x4), the session's build:
# two-shot's direct outputs, 48 MiB of default staging, two-shot to 32 MiB on 3 and 4
# ranks (and one-shot to 8 MiB on 2). The GPU matrix of all_reduce with two-shot forced on
# 4 ranks (stream path, direct on); all_reduce 4-64 MiB on 3 ranks (devices 0-2) against NCCL;
# issue 19's back-to-back sweep on 4 GPUs, 8 B - 1 GiB, against NCCL 2.28.9 in the same
# process, every row checked. NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "coll two-shot all_reduce, 4 ranks on devices 0-3, stream path"
timeout 60 /tmp/ferroccl coll --devices=0,1,2,3 --path stream --algo two-shot all_reduce > $res/coll-2s-4.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-2s-4.txt | tee -a "$log"
step "all_reduce 4-64 MiB, 3 ranks (devices 0-2), NCCL"
timeout 60 /tmp/ferroccl bench all_reduce -b 4M -e 64M -f 2 -c 1 -n 20 -w 5 --devices=0,1,2 --nccl > $res/ar-3.txt 2>&1; echo "rc $?" | tee -a "$log"
step "bench 8 B - 1 GiB back to back, NCCL, 4 ranks"
timeout 250 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 4 -c 1 -n 10 -w 3 --devices=0,1,2,3 --nccl --json $res/sweep.json > $res/sweep.txt 2>&1; echo "rc $?" | tee -a "$log"
grep -E "busbw_vs|small_" $res/sweep.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
