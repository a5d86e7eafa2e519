#!/usr/bin/env bash
# Twenty-third session (2026-11-27), four GPUs (nvidia-h200-x4), one rank per GPU, issue
# 19's benchmarks with this session's final build (.carry/ferroccl-final.gz: the push form
# and the 3-/4-rank rows measured with it), and its shift and jacobi: `ferroccl bench`
# against NCCL 2.28.9 in the same process for all_reduce, all_gather and reduce_scatter
# from 8 B to 1 GiB back to back and to 1 MiB with call + synchronize and in CUDA graphs,
# every row checked; `bench footprint`; the shmem examples with one PE (process) per GPU.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x4b.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b-final.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
devs=--devices=0,1,2,3
step "bench 8 B - 1 GiB back to back, NCCL"
timeout 240 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 4 -c 1 -n 10 -w 3 $devs --nccl --json $res/sweep.json > $res/sweep.txt 2>&1; echo "rc $?" | tee -a "$log"
step "bench 8 B - 1 MiB, sync and graph, NCCL"
timeout 120 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 $devs --nccl --timing sync,graph --json $res/latency.json > $res/latency.txt 2>&1; echo "rc $?" | tee -a "$log"
step "shift --check-api, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/shift --check-api 2>&1 | tail -n 6 | tee -a "$log"
step "jacobi, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/jacobi 2>&1 | grep -v "^ " | tail -n 6 | tee -a "$log"
step "bench footprint (device 0)"
timeout 90 /tmp/ferroccl bench footprint --json $res/footprint.json > $res/footprint.txt 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res
