#!/usr/bin/env bash
# Twenty-third session (2026-11-27), four GPUs (nvidia-h200-x4), one rank per GPU: issue
# 19's benchmarks again with the session's final build (.carry/ferroccl-lean256.gz: the
# push form, the 3-/4-rank rows measured with it, the lean all-reduce to 256 KiB on more
# than two ranks), against NCCL 2.28.9 in the same process, every row checked: 8 B - 1 GiB
# back to back, to 1 MiB with call + synchronize and in CUDA graphs.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x4f.txt
gunzip -c .carry/ferroccl-lean256.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
devs=--devices=0,1,2,3
step "bench 8 B - 1 GiB back to back, NCCL"
timeout 240 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 4 -c 1 -n 10 -w 3 $devs --nccl --json $res/sweep.json > $res/sweep.txt 2>&1; echo "rc $?" | tee -a "$log"
step "bench 8 B - 1 MiB, sync and graph, NCCL"
timeout 120 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 $devs --nccl --timing sync,graph --json $res/latency.json > $res/latency.txt 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res
