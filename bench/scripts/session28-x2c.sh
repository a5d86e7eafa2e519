#!/usr/bin/env bash
# Twenty-eighth session (2026-11-28), two GPUs (nvidia-h200-x2), the session's build: on 2
# ranks, two-shot (now with direct outputs) and one-shot forced against the automatic
# choice and NCCL 2.28.9 in the same process, all_reduce 2-32 MiB, every row checked,
# twice in alternation. NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
B="-b 2M -e 32M -f 2 -c 1 -n 20 -w 5 --devices=0,1"
for round in 1 2; do
  step "round $round: auto + NCCL"
  timeout 60 /tmp/ferroccl bench all_reduce $B --nccl > $res/auto-$round.txt 2>&1; echo "rc $?" | tee -a "$log"
  for a in one-shot two-shot; do
    step "round $round: --algo $a"
    timeout 60 /tmp/ferroccl bench all_reduce $B --algo $a > $res/$a-$round.txt 2>&1; echo "rc $?" | tee -a "$log"
  done
done
step end
cd $out && tar czf res.tgz res
