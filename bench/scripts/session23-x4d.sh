#!/usr/bin/env bash
# Twenty-third session (2026-11-27), four GPUs (nvidia-h200-x4), this session's final
# build (.carry/ferroccl-final.gz): the lean path (LL packets, the automatic choice up to
# 512 KiB for all_reduce and 1 MiB for all_gather and reduce_scatter) against the staged
# one-shot, now in the push form, forced, on 2, 3 and 4 ranks, 64 KiB - 2 MiB, back to
# back and in CUDA graphs, every row checked; then the 4-rank GPU matrix with the
# automatic choice again, with time to finish (the last call's 120 s cut it at 1600 of
# 1628 cases). NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x4d.txt
gunzip -c .carry/ferroccl-final.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for devs in 0,1,2,3 0,1,2 0,1; do
  for algo in auto one-shot; do
    step "bench 64 KiB - 2 MiB, devices $devs, --algo $algo"
    timeout 60 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 64K -e 2M -f 2 -c 1 -n 20 -w 5 --devices=$devs --algo $algo --timing back-to-back,graph --latency-maxbytes 2M --json $res/lean-$devs-$algo.json > $res/lean-$devs-$algo.txt 2>&1; echo "rc $?" | tee -a "$log"
  done
done
step "coll --algo auto, 4 ranks on devices 0-3, stream path"
timeout 200 /tmp/ferroccl coll --devices=0,1,2,3 --path stream --algo auto > $res/coll-auto.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 2 $res/coll-auto.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
