#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (thirteenth session): many-source reductions
# (staged algorithms) that load every source's packs before reducing (branch `inflight`,
# .carry/ferroccl.gz) against main (9678ffa, .carry/ferroccl-main.gz), alternately in one
# device call: all_reduce and reduce_scatter 256 KiB - 16 MiB back to back and in CUDA
# graphs on 4 ranks (devices 0-3) and 2 (devices 0, 1), NCCL in the same process, every
# row checked; then the branch's GPU matrix on 4 ranks (automatic choice, two-shot and
# one-shot forced). NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
log=$res/inflight.txt
gunzip -c .carry/ferroccl.gz > /tmp/inflight && gunzip -c .carry/ferroccl-main.gz > /tmp/main && chmod +x /tmp/inflight /tmp/main
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for round in 1 2; do
  for devs in 0,1,2,3 0,1; do
    for build in main inflight; do
      step "round $round: $build, bench all_reduce reduce_scatter 256 KiB - 16 MiB, devices $devs, back to back and graph, NCCL in the same process"
      timeout 100 /tmp/$build bench all_reduce reduce_scatter -b 256K -e 16M -f 2 -c 1 -n 20 -w 5 --devices $devs --nccl --timing back-to-back,graph --latency-maxbytes 16M --json "$res/$build-$(echo $devs | tr -d ,)-r$round.json" 2>&1 | grep -v "^#" | tee -a "$log"
    done
  done
done
for algo in auto two-shot one-shot; do
  step "inflight: coll --algo $algo, devices 0-3, stream path"
  timeout 60 /tmp/inflight coll --devices 0,1,2,3 --path stream --algo $algo 2>&1 | tail -n 1 | tee -a "$log"
done
step end
tar czf $out/inflight.tgz -C $res .
