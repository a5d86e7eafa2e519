#!/usr/bin/env bash
# Session 5 on nvidia-h200-x2: large all_reduce vs NCCL by loop shape (24x512 = the pre-session-4 default, 24x256 = today's, 48x256); Jacobi on the two GPUs.
set -u
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$OUT/run17.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee $log
echo "=== jacobi --pes 2 --devices 0,1 --time-kernels 20" | tee -a $log
timeout 90 ./.carry/jacobi --pes 2 --devices 0,1 --time-kernels 20 2>&1 | tee -a $log
for shape in "--channels 24 --threads 512" "--channels 24 --threads 256" "--channels 48 --threads 256"; do
  echo "=== bench all_reduce -b 64M -e 1G -f 2 -c 1 --nccl $shape" | tee -a $log
  timeout 150 ./.carry/ferroccl bench all_reduce -b 64M -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl $shape 2>&1 | grep -E '^#.*ferroccl|^ +[0-9]' | tee -a $log
done
date -u +%FT%TZ | tee -a $log
