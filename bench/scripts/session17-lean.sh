#!/usr/bin/env bash
# Seventeenth session (2026-11-27), fourth device call: thr (.carry/ferroccl-thr.gz,
# 6fe1dce) against "lean" (.carry/ferroccl-lean.gz: the lean all_gather and
# reduce_scatter up to 1 MiB instead of 512 KiB), 256 KiB - 4 MiB, back to back and in
# CUDA graphs, 2 ranks (devices 0, 1), NCCL 2.28.9 in the same process, every row
# checked, build order alternated; --stats of the staged one-shot at 2 MiB; the lean
# build's GPU matrix (automatic choice, stream path) and self-tests.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/lean.txt
for v in thr lean; do gunzip -c .carry/ferroccl-$v.gz > /tmp/$v && chmod +x /tmp/$v; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
mid() {
  step "$1 round $2: bench all_reduce all_gather reduce_scatter 256 KiB - 4 MiB, devices 0,1"
  timeout 120 /tmp/$1 bench all_reduce all_gather reduce_scatter -b 256K -e 4M -f 2 -c 1 -n 50 -w 10 --devices 0,1 --nccl --timing back-to-back,graph --latency-maxbytes 4M --json "$res/$1-r$2.json" 2>&1 | grep -v "^#" >> "$log"
}
mid thr 0; mid lean 0
mid lean 1; mid thr 1
for f in all_reduce all_gather reduce_scatter; do
  step "lean --stats $f 2 MiB graph"
  timeout 60 /tmp/lean bench $f -b 2M -e 2M -c 1 -n 50 -w 10 --devices 0,1 --timing graph --latency-maxbytes 4M --stats 2>&1 | grep -v "^#" >> "$log"
done
step "lean: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/lean coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "lean: ferroccl test (device 0)"
timeout 60 /tmp/lean test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
