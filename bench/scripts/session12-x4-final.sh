#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (twelfth session), the final build (two-shot
# alone reads heap inputs in place): the GPU self-tests (comm_on_heap_zero_copy forces
# two-shot), the matrix with --heap (automatic, one-shot, two-shot) on 4 ranks, shift
# --check-api as 4 processes, and all_reduce 1-8 MiB with and without --heap on 4 ranks,
# back to back and in graphs, NCCL in the same process.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
log=$res/x4-final.txt
for b in ferroccl shift; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test (device 0)"
timeout 100 /tmp/ferroccl test 2>&1 | grep -v "^\[" | tail -n 3 | tee -a "$log"
step "shift --check-api, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/shift --check-api 2>&1 | tail -n 4 | tee -a "$log"
for algo in one-shot two-shot auto; do
  step "coll --heap --algo $algo, devices 0-3, stream path"
  timeout 60 /tmp/ferroccl coll --devices 0,1,2,3 --path stream --heap --algo $algo 2>&1 | tail -n 1 | tee -a "$log"
done
for heap in "" --heap; do
  step "bench all_reduce 1 MiB - 8 MiB ${heap:-staged}, devices 0-3, back to back and graph, NCCL in the same process"
  timeout 60 /tmp/ferroccl bench all_reduce -b 1M -e 8M -f 2 -c 1 -n 20 -w 5 --devices 0,1,2,3 --nccl $heap --timing back-to-back,graph --latency-maxbytes 8M --json "$res/final-ar${heap:---staged}.json" 2>&1 | grep -v "^#" | tee -a "$log"
done
step end
tar czf $out/x4-final.tgz -C $res .
