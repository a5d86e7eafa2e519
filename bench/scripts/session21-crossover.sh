#!/usr/bin/env bash
# Twenty-first session (2026-11-27): where issue 16's busbw_vs_nccl_min_512K_1G is lost,
# on main's device code (.carry/ferroccl-final.gz, b270bf7, the sweep's build): the ring's
# first size (32 MiB, 0.95-0.99 of NCCL) and all_reduce 1 MiB in CUDA graphs (0.95).
# 2 ranks on devices 0,1, NCCL 2.28.9 in the same process for every row, every row
# checked. (1) 16-64 MiB, all three collectives: the default; the ring forced on 64, 32
# and 16 channels and with 512 KiB and 256 KiB steps; one-shot forced with 32 MiB of
# staging. (2) all_reduce 512 KiB - 2 MiB back to back and in graphs: auto, one-shot,
# two-shot. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/crossover.txt
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-final.gz > /tmp/final && chmod +x /tmp/final
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
big() { # name, extra flags...
  local name=$1; shift
  step "16-64 MiB: $name ($*)"
  timeout 90 /tmp/final bench all_reduce all_gather reduce_scatter -b 16M -e 64M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl "$@" --json "$res/big-$name.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
}
big auto
big ring64 --algo ring
big ring32 --algo ring --channels 32
big ring16 --algo ring --channels 16
big ring-step512k --algo ring --step 512K
big ring-step256k --algo ring --step 256K
big oneshot32m --algo one-shot --staging 32M
big auto-again
for algo in auto one-shot two-shot; do
  step "all_reduce 512 KiB - 2 MiB: $algo"
  timeout 90 /tmp/final bench all_reduce -b 512K -e 2M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --algo $algo --timing back-to-back,graph --json "$res/mid-$algo.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
done
step end
cd $out && tar czf res.tgz res
