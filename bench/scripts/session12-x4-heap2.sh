#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (twelfth session), with one-shot reading heap
# inputs in place only from 1 MiB (THRESHOLDS.one_shot_zero_copy_min) and the self-test's
# inputs rewritten by device-to-device copies (its first version rewrote them from pageable
# host memory, which waits for the stream: it timed out by its own design): (1) the
# self-test comm_on_heap_zero_copy; (2) all_reduce 256 KiB - 8 MiB back to back and in CUDA
# graphs with and without --heap, on 2 ranks (devices 0, 1: one-shot up to 4 MiB) and 4
# (devices 0-3), NCCL in the same process; (3) the matrix with --heap, one-shot and
# two-shot forced, on 2 and 4 ranks. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
log=$res/x4-heap2.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test comm_on_heap_zero_copy (device 0)"
timeout 60 /tmp/ferroccl test comm_on_heap_zero_copy 2>&1 | grep -v "^\[" | tail -n 4 | tee -a "$log"
for devs in 0,1 0,1,2,3; do
  for heap in "" --heap; do
    step "bench all_reduce 256 KiB - 8 MiB ${heap:-staged}, devices $devs, back to back and graph, NCCL in the same process"
    timeout 70 /tmp/ferroccl bench all_reduce -b 256K -e 8M -f 2 -c 1 -n 20 -w 5 --devices $devs --nccl $heap --timing back-to-back,graph --latency-maxbytes 8M --json "$res/ar-$(echo $devs | tr -d ,)${heap:---staged}.json" 2>&1 | grep -v "^#" | tee -a "$log"
  done
done
for devs in 0,1 0,1,2,3; do
  for algo in one-shot two-shot; do
    step "coll --heap --algo $algo, devices $devs, stream path"
    timeout 40 /tmp/ferroccl coll --devices $devs --path stream --heap --algo $algo 2>&1 | tail -n 1 | tee -a "$log"
  done
done
step end
tar czf $out/x4-heap2.tgz -C $res .
