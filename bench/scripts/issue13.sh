#!/usr/bin/env bash
# Issue 13's GPU checks, after the crates moved (host-shim / testkit / examples) and the
# module gained build-time SASS: the first start with no JIT cache (SASS, and the JIT path
# of a shape with no embedded SASS as the same-run baseline), the GPU self-tests, abort() in
# a burst of all-reduces (2 and 4 ranks), the correctness matrix (2 ranks with the default
# shape, 4 ranks), and, with two GPUs, all_reduce 64 MiB - 1 GiB against NCCL in the same
# process. On one GPU the ranks share it (devices 0,0). Run from the repository root with
# the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
export CUDA_CACHE_DISABLE=1   # no JIT cache: what a fresh machine sees
log=$out/issue13.txt
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
if [ "$gpus" -ge 2 ]; then gpu_list=0,1; two=0,1; four=0,0,1,1; else gpu_list=0; two=0,0; four=0,0,0,0; fi
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$log"
echo "## first start: 2 ranks on devices $two, 24 x 512 threads (SASS capped at 128 registers)" | tee -a "$log"
( time FERROCCL_LOG=info timeout 100 ./.carry/ferroccl coll --devices $gpu_list --ranks 2 --channels 24 --threads 512 no-such-case ) 2>&1 \
  | grep -E "module|set up in|^real" | tee -a "$log"
echo "## baseline, same run: 1 rank, 384 threads (cap 168: no SASS embedded, the PTX is JIT-compiled)" | tee -a "$log"
( time FERROCCL_LOG=info timeout 100 ./.carry/ferroccl coll --devices 0 --ranks 1 --threads 384 no-such-case ) 2>&1 \
  | grep -E "module|set up in|^real" | tee -a "$log"
echo "## GPU self-tests, device 0" | tee -a "$log"
timeout 120 ./.carry/ferroccl test 2>&1 | tail -n 25 | tee -a "$log"
echo "## abort() in a burst of 64 MiB all-reduces" | tee -a "$log"
for devs in $two $four; do
  timeout 60 ./.carry/ferroccl bench abort --devices $devs 2>&1 | tee -a "$log"; echo "exit ${PIPESTATUS[0]}" | tee -a "$log"
done
echo "## matrix: 2 ranks, 24 x 512; 4 ranks" | tee -a "$log"
timeout 100 ./.carry/ferroccl coll --devices $gpu_list --ranks 2 --channels 24 --threads 512 --big 1572864 2>&1 | tail -n 2 | tee -a "$log"
timeout 80 ./.carry/ferroccl coll --devices $gpu_list --ranks 4 --channels 4 --step 65536 2>&1 | tail -n 2 | tee -a "$log"
if [ "$gpus" -ge 2 ]; then
  echo "## all_reduce 64 MiB - 1 GiB against NCCL (same process)" | tee -a "$log"
  timeout 100 ./.carry/ferroccl bench all_reduce -b 64M -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl \
    --json "$out/allreduce-64M-1G.json" 2>&1 | tee -a "$log"
fi
date -u +%FT%TZ | tee -a "$log"
