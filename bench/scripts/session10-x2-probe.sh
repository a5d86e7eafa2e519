#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-26 (tenth session), build of 25a26ea: the GPU
# self-tests (the multicast granularity query among them; no multicast object is made),
# where a small stream-ordered call's time goes (--stats: post-grid preamble against the
# collective) back to back, in graphs and with a synchronize per call, and the matrix with
# 4 and 8 ranks on one GPU with the 48-channel default (fitted to what the GPU holds).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/probe.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test, one GPU"
timeout 120 /tmp/ferroccl test 2>&1 | tail -n 20 | tee -a "$log"
step "bench small sizes with stats, 2 ranks on devices 0 and 1"
timeout 240 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --stats 2>&1 | tee -a "$log" > /dev/null
grep -c . "$log"
step "coll, 4 ranks on device 0, default communicator"
timeout 150 /tmp/ferroccl coll --devices 0 --ranks 4 2>&1 | tail -n 2 | tee -a "$log"
step "coll, 8 ranks on device 0, default communicator"
timeout 150 /tmp/ferroccl coll --devices 0 --ranks 8 2>&1 | tail -n 2 | tee -a "$log"
step end
