#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (eleventh session), seventh call: the final
# build (64 channels by default, the measured 3- and 4-rank thresholds, two-shot at
# 64 KiB a channel, DeviceAlloc's zeroing waited for): the GPU self-tests; the default
# communicator on 4 ranks against NCCL in the same process, 8 B - 256 MiB back to back
# (every row checked) and 8 B - 1 MiB synchronized and in CUDA graphs; 8 ranks on the
# 4 GPUs (two a GPU: fewer guests fitted), checked; the footprint on device 0; the
# correctness matrix on 8 ranks over the 4 GPUs, stream path.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/x4-verify.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test, device 0"
timeout 60 /tmp/ferroccl test 2>&1 | tail -n 1 | tee -a "$log"
step "bench 8 B - 256 MiB, default communicator, 4 ranks, checked, NCCL in the same process"
timeout 150 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 256M -f 4 -c 1 -n 10 -w 3 --devices 0,1,2,3 --nccl --json "$out/verify-4gpu.json" 2>&1 | tee -a "$log" > /dev/null
step "bench 8 B - 1 MiB, synchronized and in graphs, 4 ranks, NCCL in the same process"
timeout 60 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 --devices 0,1,2,3 --nccl --timing sync,graph --json "$out/verify-4gpu-latency.json" 2>&1 | tee -a "$log" > /dev/null
step "bench 8 B - 64 MiB, 8 ranks on devices 0-3 (two a GPU), checked"
timeout 60 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 64M -f 8 -c 1 -n 5 -w 2 --devices 0,1,2,3,0,1,2,3 2>&1 | grep -v "^#  " | tee -a "$log"
step "bench footprint, device 0, default communicator"
timeout 60 /tmp/ferroccl bench footprint --json "$out/verify-footprint.json" 2>&1 | tee -a "$log"
step "coll, 8 ranks on devices 0-3 (two a GPU), stream path"
timeout 150 /tmp/ferroccl coll --devices 0,1,2,3 --ranks 8 --path stream 2>&1 | tail -n 3 | tee -a "$log"
step end
