#!/usr/bin/env bash
# Twenty-seventh session (2026-11-28), four GPUs (nvidia-h200-x4), the session's final
# build (direct operations per call and on by default, 256 KiB ring steps, the lean path
# taking calls whose output is marked mapped): issue 19's benchmarks on four GPUs against
# NCCL 2.28.9 in the same process, every row checked: 8 B - 1 MiB call + synchronize and
# in CUDA graphs, then 8 B - 1 GiB back to back. NCCL_NVLS_ENABLE=0; nothing creates a
# multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "bench 8 B - 1 MiB, sync and graph, NCCL, 4 ranks"
timeout 60 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 --devices=0,1,2,3 --nccl --timing sync,graph --json $res/latency.json > $res/latency.txt 2>&1; echo "rc $?" | tee -a "$log"
grep -E "small_|allreduce_graph" $res/latency.txt | tee -a "$log"
step "bench 8 B - 1 GiB back to back, NCCL, 4 ranks"
timeout 190 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 4 -c 1 -n 10 -w 3 --devices=0,1,2,3 --nccl --json $res/sweep.json > $res/sweep.txt 2>&1; echo "rc $?" | tee -a "$log"
grep -E "busbw_vs|small_" $res/sweep.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
