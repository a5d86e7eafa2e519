#!/usr/bin/env bash
# Nineteenth session (2026-11-27): issue 16's sweep with the session's final code
# (.carry/ferroccl-pdl.gz: overlapping posts, the post alone for loops without guests),
# first in its device call: all_reduce, all_gather and reduce_scatter 8 B - 1 GiB, back to
# back, call + synchronize and in CUDA graphs, every row checked, NCCL 2.28.9 in the same
# process, 2 ranks on devices 0, 1; then issue 14's benchmarks on device 0 (`bench
# work_loop`, `bench footprint`).
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/sweep.txt
gunzip -c .carry/ferroccl-pdl.gz > /tmp/final && chmod +x /tmp/final
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
echo "## bench all_reduce all_gather reduce_scatter 8 B - 1 GiB, devices 0,1 ($(date -u +%FT%TZ))" >> "$log"
timeout 400 /tmp/final bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json "$res/sweep.json" >> "$log" 2>&1
echo "## end rc=$? ($(date -u +%FT%TZ))" >> "$log"
echo "## bench work_loop ($(date -u +%FT%TZ))" >> "$log"
timeout 100 /tmp/final bench work_loop --json "$res/work_loop.json" >> "$log" 2>&1
echo "## bench footprint, device 0, 2 ranks, default communicator ($(date -u +%FT%TZ))" >> "$log"
timeout 100 /tmp/final bench footprint --json "$res/footprint.json" >> "$log" 2>&1
echo "## bench footprint, device 0, 1 rank ($(date -u +%FT%TZ))" >> "$log"
timeout 100 /tmp/final bench footprint --ranks 1 --json "$res/footprint-1rank.json" >> "$log" 2>&1
echo "## end ($(date -u +%FT%TZ))" >> "$log"
cd $out && tar czf res.tgz res
