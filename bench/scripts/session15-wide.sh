#!/usr/bin/env bash
# For the next device session (written 2026-11-26, fourteenth session, not yet run): the
# lean collectives with 16-byte lines (branch lean-wide, or main with
# bench/experiments/lean-wide.patch applied: .carry/ferroccl.gz) against main's 8-byte
# lines (.carry/ferroccl-main.gz), both --algo auto, NCCL in the same process:
# all_reduce, all_gather and reduce_scatter 8 B - 512 KiB (factor 4) back to back, call +
# synchronize and in CUDA graphs on 2 ranks (devices 0, 1), each build twice,
# alternating; then the wide build's GPU matrix (automatic choice, stream path, 2 ranks)
# and self-tests. Four ranks where the machine has four GPUs. NCCL_NVLS_ENABLE=0; no
# multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/wide.txt
gunzip -c .carry/ferroccl-main.gz > /tmp/main && gunzip -c .carry/ferroccl.gz > /tmp/wide && chmod +x /tmp/main /tmp/wide
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
sets=0,1; [ "$(nvidia-smi -L | wc -l)" -ge 4 ] && sets="0,1 0,1,2,3"
for devs in $sets; do
  for v in main wide main wide; do
    tag=$v-$(echo $devs | tr -d ,)
    n=$(ls $res | grep -c "^$tag-")
    step "$v, bench all_reduce all_gather reduce_scatter 8 B - 512 KiB, devices $devs, run $n"
    timeout 60 /tmp/$v bench all_reduce all_gather reduce_scatter -b 8 -e 512K -f 4 -c 1 -n 50 -w 10 --devices $devs --nccl --timing back-to-back,sync,graph --latency-maxbytes 512K --json "$res/$tag-r$n.json" 2>&1 | grep -v "^#" >> "$log"
  done
done
step "wide: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 90 /tmp/wide coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "wide: ferroccl test (device 0)"
timeout 60 /tmp/wide test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
