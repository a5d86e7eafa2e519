#!/usr/bin/env bash
# Twenty-first session (2026-11-27): this session's final build (.carry/ferroccl-sleep2.gz:
# loops that sleep when idle, relaunched as one CTA; one-shot up to 32 MiB on 2 ranks
# with 32 MiB of staging by default). First issue 14's work_loop benchmark on device 0
# (with a call after the loop slept against an empty launch + sync just before it), then
# issue 16's sweep: all_reduce, all_gather and reduce_scatter 8 B - 1 GiB,
# back to back, call + synchronize and in CUDA graphs (up to 1 MiB), every row checked,
# NCCL 2.28.9 in the same process, 2 ranks on devices 0, 1. NCCL_NVLS_ENABLE=0; no
# multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/sweep.txt
gunzip -c .carry/ferroccl-sleep2.gz > /tmp/new && chmod +x /tmp/new
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
echo "## bench work_loop, device 0 ($(date -u +%FT%TZ))" >> "$log"
timeout 60 /tmp/new bench work_loop --json "$res/work_loop.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
echo "## bench all_reduce all_gather reduce_scatter 8 B - 1 GiB, devices 0,1 ($(date -u +%FT%TZ))" >> "$log"
timeout 480 /tmp/new bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json "$res/sweep.json" >> "$log" 2>&1
echo "## end rc=$? ($(date -u +%FT%TZ))" >> "$log"
cd $out && tar czf res.tgz res
