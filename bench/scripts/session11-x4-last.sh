#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (eleventh session), fifth call, with 4 ranks'
# one-shot all_reduce up to 1 MiB and two-shot above: (1) the automatic choice,
# all_reduce 256 KiB - 8 MiB against NCCL in the same process, back to back and in
# graphs, with statistics; (2) two-shot (64 KiB a channel) against one-shot forced on 2
# ranks (devices 0, 1) and two-shot on 3 (devices 0-2), 1-8 MiB; (3) the ring's
# all_reduce at 64 and 256 MiB with 32, 48 and 64 channels and 512 KiB / 2 MiB steps.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/x4-last.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "all_reduce 256K - 8M, automatic choice, 4 ranks, NCCL in the same process, statistics"
timeout 60 /tmp/ferroccl bench all_reduce -b 256K -e 8M -f 2 -c 1 -n 20 -w 5 --devices 0,1,2,3 --nccl --stats --timing back-to-back,graph --json "$out/x4-auto-ar.json" 2>&1 | grep -v "placement\|taken after" | tee -a "$log" > /dev/null
for algo in one-shot two-shot; do
  step "all_reduce 1M - 8M, --algo $algo, 2 ranks on devices 0 and 1"
  timeout 30 /tmp/ferroccl bench all_reduce -b 1M -e 8M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --algo $algo --json "$out/x2-$algo.json" 2>&1 | grep -v "^#" | tee -a "$log"
done
step "all_reduce 1M - 8M, --algo two-shot, 3 ranks on devices 0-2"
timeout 30 /tmp/ferroccl bench all_reduce -b 1M -e 8M -f 2 -c 1 -n 20 -w 5 --devices 0,1,2 --algo two-shot --json "$out/x3-two-shot.json" 2>&1 | grep -v "^#" | tee -a "$log"
for ch in 32 48 64; do
  for st in 512K 2M; do
    step "ring all_reduce 64M, 256M, --channels $ch --step $st, 4 ranks"
    timeout 30 /tmp/ferroccl bench all_reduce -b 64M -e 256M -f 4 -c 0 -n 10 -w 3 --devices 0,1,2,3 --algo ring --channels $ch --step $st 2>&1 | grep -v "^#" | tee -a "$log"
  done
done
step end
