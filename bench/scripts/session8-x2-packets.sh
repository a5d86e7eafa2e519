#!/usr/bin/env bash
# Two GPUs, 2026-11-25 (eighth session): small staged shares in packets (commits c8a9964 and
# bc2eaa6, reverted after this run: packets were slower), measured against
# the same commit built with packets off (.carry/ferroccl-nopackets: `has_packets` false
# in device-rt/src/algo/staged.rs, nothing else changed), through the public Comm calls
# on streams, NCCL in the same process, every row checked:
# 1. packets off: all_reduce, all_gather, reduce_scatter 8 B - 1 MiB in CUDA graphs and
#    back to back;
# 2. packets on (the commit as it is): 8 B - 1 GiB back to back, and up to 1 MiB call +
#    synchronize and 20 calls in a CUDA graph (latency.json; ring.json's rows).
# Run from the repository root with both release binaries (--features nccl), gzipped, in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session8-x2-packets.txt
for b in ferroccl ferroccl-nopackets; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
stamp() { echo "## $* ($(date -u +%FT%TZ))" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
stamp "1. packets off: 8 B - 1 MiB, graphs and back to back"
timeout 100 /tmp/ferroccl-nopackets bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 --devices 0,1 \
  --timing back-to-back,graph --json "$out/nopackets.json" 2>&1 | tee -a "$log"
stamp "2. packets on: sweep 8 B - 1 GiB, NCCL in the same run"
timeout 420 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl \
  --timing back-to-back,sync,graph --json "$out/latency.json" 2>&1 | tee -a "$log"
stamp end
