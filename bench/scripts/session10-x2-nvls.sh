#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-26 (tenth session): issue 18's NVLS collectives on
# the software multicast twin (no multicast object is ever made): the NVLS matrix on the
# two GPUs (2 ranks) and on one GPU (4 and 8 ranks), then all_reduce, reduce_scatter and
# all_gather 8 B - 1 GiB with NVLS forced, the ring forced, and the automatic choice, each
# against NCCL in the same process. Release binary gzipped in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/nvls.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
case "${1:-all}" in
  coll)
    step "coll, NVLS forced, 2 ranks on devices 0 and 1"
    timeout 150 /tmp/ferroccl coll --devices 0,1 --ranks 2 --algo nvls 2>&1 | tail -n 2 | tee -a "$log"
    step "coll, NVLS forced, 4 ranks on device 0"
    timeout 150 /tmp/ferroccl coll --devices 0 --ranks 4 --algo nvls 2>&1 | tail -n 2 | tee -a "$log"
    step "coll, NVLS forced, 8 ranks on device 0"
    timeout 240 /tmp/ferroccl coll --devices 0 --ranks 8 --algo nvls 2>&1 | tail -n 2 | tee -a "$log"
    ;;
  bench)
    for algo in nvls ring auto; do
      step "bench 8 B - 1 GiB, --algo $algo, 2 ranks on devices 0 and 1, NCCL in the same process"
      timeout 170 /tmp/ferroccl bench all_reduce reduce_scatter all_gather -b 8 -e 1G -f 4 -c 1 -n 10 -w 3 --devices 0,1 --nccl --algo $algo --json "$out/bench-$algo.json" 2>&1 | tee -a "$log" > /dev/null
    done
    ;;
esac
step end
