#!/usr/bin/env bash
# Twenty-eighth session (2026-11-28), four GPUs (nvidia-h200-x4), the build the session
# started from (2d43266's code): the host time of a call on four devices (`bench
# dispatch`); every algorithm forced against the automatic choice and NCCL 2.28.9 at
# 4-64 MiB (timings, data checks off), to place issue 19's 4-rank thresholds after the
# twenty-seventh session's ring changes; the channels' statistics of two-shot at 8 MiB
# and the ring at 32 MiB. NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
D=--devices=0,1,2,3
step "bench dispatch, 4 devices"
timeout 60 /tmp/ferroccl bench dispatch --devices 0,1,2,3 > $res/dispatch.txt 2>&1; echo "rc $?" | tee -a "$log"
B="-b 4M -e 64M -f 2 -c 0 -n 20 -w 5 $D"
step "all_reduce auto + NCCL"
timeout 60 /tmp/ferroccl bench all_reduce $B --nccl > $res/ar-auto.txt 2>&1; echo "rc $?" | tee -a "$log"
for a in ring two-shot one-shot; do
  step "all_reduce --algo $a --staging 64M"
  timeout 60 /tmp/ferroccl bench all_reduce $B --algo $a --staging 64M > $res/ar-$a.txt 2>&1; echo "rc $?" | tee -a "$log"
done
step "all_gather reduce_scatter auto + NCCL"
timeout 60 /tmp/ferroccl bench all_gather reduce_scatter $B --nccl > $res/agrs-auto.txt 2>&1; echo "rc $?" | tee -a "$log"
for a in ring one-shot; do
  step "all_gather reduce_scatter --algo $a --staging 64M"
  timeout 60 /tmp/ferroccl bench all_gather reduce_scatter $B --algo $a --staging 64M > $res/agrs-$a.txt 2>&1; echo "rc $?" | tee -a "$log"
done
step "stats: all_reduce 8M and 32M auto"
timeout 60 /tmp/ferroccl bench all_reduce -b 8M -e 32M -f 4 -c 0 -n 20 -w 5 $D --stats > $res/stats.txt 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res
