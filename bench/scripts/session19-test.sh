#!/usr/bin/env bash
# Nineteenth session (2026-11-27), last device call: the final build's self-tests
# (`ferroccl test`, device 0), whose `comm_graph_replays` now replays its CUDA graphs of 20
# all_reduces 100 times twice: on the default layout (two ranks on one GPU: plain
# launches) and with 31 guests (posts overlap), results checked each time.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/test.txt
gunzip -c .carry/ferroccl-final.gz > /tmp/final && chmod +x /tmp/final
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
echo "## ferroccl test (device 0) ($(date -u +%FT%TZ))" >> "$log"
timeout 120 /tmp/final test >> "$log" 2>&1
echo "## end rc=$? ($(date -u +%FT%TZ))" >> "$log"
