#!/usr/bin/env bash
# Twenty-seventh session (2026-11-28), four GPUs (nvidia-h200-x4), the direct-by-default
# build: the ring's step (FIFO slot) of 512 KiB against the default 1 MiB, the ring forced,
# all_reduce, all_gather and reduce_scatter 32-512 MiB on 4 ranks (devices 0-3) and on 2
# (devices 0,1), each pair run twice in alternation (A B A B) to see the runs' own spread;
# a timing comparison in one machine, data checks off. NCCL_NVLS_ENABLE=0; nothing
# creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for d in 0,1,2,3 0,1; do
  for round in 1 2; do
    for s in 1M 512K; do
      step "ring 32-512 MiB, devices $d, step $s, round $round"
      timeout 60 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 32M -e 512M -f 4 -c 0 -n 20 -w 5 --devices=$d --algo ring --step $s --json $res/step-${d//,/}-$s-$round.json > $res/step-${d//,/}-$s-$round.txt 2>&1; echo "rc $?" | tee -a "$log"
    done
  done
done
step end
cd $out && tar czf res.tgz res
