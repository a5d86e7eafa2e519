#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (thirteenth session): the CTA-spread lean build
# with LEAN_MAX_BYTES at 64 KiB (the build of session13-ctas.sh), --algo auto (lean up to
# 64 KiB) against --algo one-shot (staged), 32 KiB - 128 KiB, all_reduce, all_gather and
# reduce_scatter, back to back and in CUDA graphs, on 4 ranks and 2, NCCL in the same
# process, every row checked. NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=/tmp/res; mkdir -p $res
gunzip -c .carry/ferroccl.gz > /tmp/lean && chmod +x /tmp/lean
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader > $res/lean64k.txt
for devs in 0,1,2,3 0,1; do
  for algo in one-shot auto; do
    timeout 60 /tmp/lean bench all_reduce all_gather reduce_scatter -b 32K -e 128K -f 2 -c 1 -n 50 -w 10 --devices $devs --algo $algo --nccl --timing back-to-back,graph --latency-maxbytes 128K --json "$res/$algo-$(echo $devs | tr -d ,).json" >> $res/lean64k.txt 2>&1
  done
done
tar czf $out/lean64k.tgz -C $res .
