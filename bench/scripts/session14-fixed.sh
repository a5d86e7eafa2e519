#!/usr/bin/env bash
# nvidia-h200-x2 (two H100s when they come), 2026-11-26 (fourteenth session): the lean
# collectives as of 96ce8bb (.carry/ferroccl-v1.gz: threads 0..nranks wait for the
# peers' descriptors, then a CTA barrier, then every thread its lines) against the form
# that waits for each peer's descriptor in the same poll as its first line, with no
# barrier between sending and receiving (.carry/ferroccl.gz), both --algo auto, NCCL in
# the same process: all_reduce, all_gather and reduce_scatter 8 B - 512 KiB (factor 4)
# back to back, call + synchronize and in CUDA graphs on 2 ranks (devices 0, 1), each
# build twice, alternating. Then, with the second build: the GPU matrix (automatic
# choice, stream path, 2 ranks), the self-tests, and the sweep 8 B - 1 GiB on 2
# ranks. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/fixed.txt
gunzip -c .carry/ferroccl-v1.gz > /tmp/v1 && gunzip -c .carry/ferroccl.gz > /tmp/v3 && chmod +x /tmp/v1 /tmp/v3
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for v in v1 v3 v1 v3; do
  n=$(ls $res | grep -c "^$v-01")
  step "$v, bench all_reduce all_gather reduce_scatter 8 B - 512 KiB, devices 0,1, run $n"
  timeout 60 /tmp/$v bench all_reduce all_gather reduce_scatter -b 8 -e 512K -f 4 -c 1 -n 50 -w 10 --devices 0,1 --nccl --timing back-to-back,sync,graph --latency-maxbytes 512K --json "$res/$v-01-r$n.json" 2>&1 | grep -v "^#" >> "$log"
done
step "v3: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 70 /tmp/v3 coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "v3: ferroccl test (device 0)"
timeout 60 /tmp/v3 test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step "v3: bench all_reduce all_gather reduce_scatter 8 B - 1 GiB (the issue's sweep), devices 0,1"
timeout 290 /tmp/v3 bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json "$res/sweep-01.json" 2>&1 | grep -v "^#" >> "$log"
step end
