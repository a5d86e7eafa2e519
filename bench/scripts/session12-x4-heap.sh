#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (twelfth session). Issue 17 pt 5 (zero copy on
# heap buffers) and pt 4 (the heap's stream-ordered calls), with Module::load's stack
# reservation and the staged calls' descriptors: (1) the GPU self-tests, the new
# comm_on_heap_zero_copy included; (2) shift --check-api as 4 PEs in 4 processes, 4 PEs in
# one process, 8 PEs in one process (two a GPU); (3) the correctness matrix on 4 ranks with
# every buffer in a symmetric heap (--heap), automatic choice then one-shot and two-shot
# forced, and the default communicator without the heap (the descriptors' regression
# check); (4) all_reduce 8 B - 8 MiB back to back, synchronized and in CUDA graphs, with
# and without --heap, NCCL in the same process. NCCL_NVLS_ENABLE=0; no multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
log=$res/x4-heap.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test (device 0)"
timeout 120 /tmp/ferroccl test 2>&1 | grep -v "^\[" | tail -n 24 | tee -a "$log"
step "shift --check-api, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/shift --check-api 2>&1 | tail -n 12 | tee -a "$log"
step "shift --check-api, 4 PEs in one process on devices 0-3"
timeout 40 /tmp/shift --pes 4 --devices 0,1,2,3 --check-api 2>&1 | tail -n 8 | tee -a "$log"
step "shift --check-api, 8 PEs in one process, two a GPU"
timeout 40 /tmp/shift --pes 8 --devices 0,1,2,3,0,1,2,3 --check-api 2>&1 | tail -n 12 | tee -a "$log"
for algo in auto one-shot two-shot; do
  step "coll --heap --algo $algo, 4 ranks on devices 0-3, stream path"
  timeout 80 /tmp/ferroccl coll --devices 0,1,2,3 --path stream --heap --algo $algo 2>&1 | tail -n 3 | tee -a "$log"
done
step "coll, 4 ranks on devices 0-3, default communicator, stream path (no heap)"
timeout 90 /tmp/ferroccl coll --devices 0,1,2,3 --path stream 2>&1 | tail -n 3 | tee -a "$log"
for heap in "" --heap; do
  step "bench all_reduce 8 B - 8 MiB ${heap:-staged}, back to back, sync, graph, 4 ranks, NCCL in the same process"
  timeout 100 /tmp/ferroccl bench all_reduce -b 8 -e 8M -f 4 -c 1 -n 20 -w 5 --devices 0,1,2,3 --nccl $heap --timing back-to-back,sync,graph --latency-maxbytes 8M --json "$res/ar${heap:---staged}.json" 2>&1 | grep -v "^#" | tee -a "$log"
done
step end
tar czf $out/x4-heap.tgz -C $res .
