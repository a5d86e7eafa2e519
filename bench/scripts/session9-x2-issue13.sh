#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-26 (ninth session), the last build (b5e47e3): issue
# 13's check that the layout move changed no figures, `bench all_reduce -b 64M -e 1G
# --nccl`, with the loop shape and path of 2026-11-23 (24 resident channels x 512 threads,
# the host queue) and with today's default, NCCL in each process.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session9-issue13.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
echo "## 24 resident x 512 threads, direct path ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 90 /tmp/ferroccl bench all_reduce -b 64M -e 1G --nccl --devices 0,1 --channels 24 --resident 24 --threads 512 --path direct 2>&1 | grep -v "^#  " | tee -a "$log"
echo "## default ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 90 /tmp/ferroccl bench all_reduce -b 64M -e 1G --nccl --devices 0,1 2>&1 | grep -v "^#  " | tee -a "$log"
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
