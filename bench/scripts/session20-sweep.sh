#!/usr/bin/env bash
# Twentieth session (2026-11-27), device call 2: issue 16's sweep with the doorbell build
# (.carry/ferroccl-doorbell.gz), first in its call: all_reduce, all_gather and
# reduce_scatter 8 B - 1 GiB, back to back, call + synchronize and in CUDA graphs, every
# row checked, NCCL 2.28.9 in the same process, 2 ranks on devices 0, 1 (the doorbell on,
# the default); then 8 B - 1 MiB again with the doorbell off (a post kernel for every
# call, as before this session), NCCL again in that run.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/sweep.txt
gunzip -c .carry/ferroccl-doorbell.gz > /tmp/new && chmod +x /tmp/new
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
echo "## bench all_reduce all_gather reduce_scatter 8 B - 1 GiB, devices 0,1, doorbell on ($(date -u +%FT%TZ))" >> "$log"
timeout 400 /tmp/new bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json "$res/sweep.json" >> "$log" 2>&1
echo "## end rc=$? ($(date -u +%FT%TZ))" >> "$log"
echo "## bench 8 B - 1 MiB, devices 0,1, doorbell off ($(date -u +%FT%TZ))" >> "$log"
timeout 150 /tmp/new bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --doorbell false --timing back-to-back,sync,graph --json "$res/small-doorbell-off.json" >> "$log" 2>&1
echo "## end rc=$? ($(date -u +%FT%TZ))" >> "$log"
cd $out && tar czf res.tgz res
