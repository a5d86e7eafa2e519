#!/usr/bin/env bash
# Sixteenth session, second device call (2026-11-26): main (.carry/ferroccl-main.gz,
# 78f0b43: the fifteenth session's code) against the post kernel with its general path
# out of line (`serve_general`, #[inline(never)]: .carry/ferroccl-split.gz), same
# run, 2 ranks (devices 0, 1), NCCL in the same process, every row checked; --stats at
# 8 B; the patched build's GPU matrix (automatic choice) and self-tests.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/run2.txt
for v in main split; do gunzip -c .carry/ferroccl-$v.gz > /tmp/$v && chmod +x /tmp/$v; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for round in 0 1; do
  for v in main split; do
    step "$v round $round: bench all_reduce all_gather reduce_scatter 8 B - 512 KiB, devices 0,1"
    timeout 60 /tmp/$v bench all_reduce all_gather reduce_scatter -b 8 -e 512K -f 4 -c 1 -n 50 -w 10 --devices 0,1 --nccl --timing back-to-back,sync,graph --latency-maxbytes 512K --json "$res/$v-r$round.json" 2>&1 | grep -v "^#" >> "$log"
  done
done
for v in main split; do
  for f in all_reduce all_gather reduce_scatter; do
    step "$v --stats $f 8 B graph"
    timeout 60 /tmp/$v bench $f -b 8 -e 8 -c 1 -n 50 -w 10 --devices 0,1 --timing graph --latency-maxbytes 1M --stats 2>&1 | grep -E "^ +8 |parts run" | sed 's/.*(\([0-9.]* us of it in staged flag exchanges\)).*parts run on the post grid alone: [0-9]*, \(.*\)/#   \1; \2/' >> "$log"
  done
done
step "split: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 120 /tmp/split coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "split: ferroccl test (device 0)"
timeout 60 /tmp/split test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
