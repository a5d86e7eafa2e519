#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-26 (tenth session): after coll's NVLS matrix kept
# to the calls NVLS runs (and point-to-point): the matrix with NVLS forced on 2 ranks
# (devices 0 and 1) and 4 ranks on device 0; then all_reduce, reduce_scatter and
# all_gather 8 B - 1 GiB with NVLS forced and with the ring forced, each against NCCL in
# the same process. No multicast object is made: NVLS runs on its software twin.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/nvls2.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "coll, NVLS forced, 2 ranks on devices 0 and 1"
timeout 100 /tmp/ferroccl coll --devices 0,1 --ranks 2 --algo nvls 2>&1 | tail -n 2 | tee -a "$log"
step "coll, NVLS forced, 4 ranks on device 0"
timeout 120 /tmp/ferroccl coll --devices 0 --ranks 4 --algo nvls 2>&1 | tail -n 2 | tee -a "$log"
for algo in nvls ring; do
  step "bench 8 B - 1 GiB, --algo $algo, 2 ranks on devices 0 and 1, NCCL in the same process"
  timeout 150 /tmp/ferroccl bench all_reduce reduce_scatter all_gather -b 8 -e 1G -f 8 -c 1 -n 10 -w 3 --devices 0,1 --nccl --algo $algo --json "$out/bench-$algo.json" 2>&1 | tee -a "$log" > /dev/null
done
step end
