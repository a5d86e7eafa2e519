#!/usr/bin/env bash
# Eighteenth session (2026-11-27): issue 16's sweep with the session's final code
# (.carry/ferroccl-push2.gz: 420da84, the push form of the staged one-shot on two ranks), alone in its device call: all_reduce, all_gather and
# reduce_scatter 8 B - 1 GiB, back to back, call + synchronize and in CUDA graphs, every
# row checked, NCCL 2.28.9 in the same process, 2 ranks on devices 0, 1.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/sweep.txt
gunzip -c .carry/ferroccl-push2.gz > /tmp/final && chmod +x /tmp/final
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
echo "## bench all_reduce all_gather reduce_scatter 8 B - 1 GiB, devices 0,1 ($(date -u +%FT%TZ))" >> "$log"
timeout 570 /tmp/final bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json "$res/sweep.json" >> "$log" 2>&1
echo "## end rc=$? ($(date -u +%FT%TZ))" >> "$log"
