#!/usr/bin/env bash
# nvidia-h200-x2 (two H100s when they come; four-GPU kinds were no longer lent), 2026-11-26 (fourteenth session): the lean
# collectives, first form with a few lines a thread (.carry/ferroccl-v1.gz, 96ce8bb)
# against the form that loads the next line before storing and every peer's line at once
# (.carry/ferroccl.gz), both --algo auto, NCCL in the same process: all_reduce,
# all_gather and reduce_scatter 32 KiB - 1 MiB back to back, call + synchronize and in
# CUDA graphs on 2 ranks (devices 0, 1). Then, with the second build: the GPU matrix
# (automatic choice, stream path, 2 ranks, and 4 ranks on the two GPUs), the self-tests, and the
# issue's sweep 8 B - 1 GiB on 2 ranks. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab.txt
gunzip -c .carry/ferroccl-v1.gz > /tmp/v1 && gunzip -c .carry/ferroccl.gz > /tmp/v2 && chmod +x /tmp/v1 /tmp/v2
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for devs in 0,1; do
  for v in v1 v2 v1 v2; do
    step "$v, bench all_reduce all_gather reduce_scatter 32 KiB - 1 MiB, devices $devs"
    n=$(ls $res | grep -c "^$v-$(echo $devs | tr -d ,)")
    timeout 100 /tmp/$v bench all_reduce all_gather reduce_scatter -b 32K -e 1M -f 2 -c 1 -n 50 -w 10 --devices $devs --nccl --timing back-to-back,sync,graph --latency-maxbytes 1M --json "$res/$v-$(echo $devs | tr -d ,)-r$n.json" 2>&1 | grep -v "^#" >> "$log"
  done
done
for ranks in 2 4; do
  step "v2: coll --algo auto, $ranks ranks on devices 0,1, stream path"
  timeout 100 /tmp/v2 coll --devices 0,1 --ranks $ranks --path stream --algo auto 2>&1 | tail -n 3 | tee -a "$log"
done
step "v2: ferroccl test (device 0)"
timeout 100 /tmp/v2 test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step "v2: bench all_reduce all_gather reduce_scatter 8 B - 1 GiB (the issue's sweep), devices 0,1"
timeout 290 /tmp/v2 bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json "$res/sweep-01.json" 2>&1 | grep -v "^#" >> "$log"
step end
