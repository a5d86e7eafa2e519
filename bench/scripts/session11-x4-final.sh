#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (eleventh session), fourth call, with the
# measured 3- and 4-rank thresholds and two-shot at 64 KiB a channel: (1) two-shot
# all_reduce forced, 256 KiB - 8 MiB, with 64 KiB a channel (this build) and 256 KiB
# (.carry/ferroccl-2shot256k.gz, the build before); (2) the automatic choice against NCCL
# in the same process, 8 B - 32 MiB back to back and 8 B - 1 MiB in CUDA graphs;
# (3) the whole correctness matrix, default communicator, stream path; (4) the 1 GiB
# rows the first call's sweeps did not reach (unchecked: the host reference of 4 GiB of
# inputs takes minutes; 512 MiB was checked), against NCCL. NCCL_NVLS_ENABLE=0.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/x4-final.txt
for b in ferroccl ferroccl-2shot256k; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in ferroccl ferroccl-2shot256k; do
  step "$b: all_reduce 256K - 8M, --algo two-shot, 4 ranks, back to back and graphs"
  timeout 40 /tmp/$b bench all_reduce -b 256K -e 8M -f 2 -c 1 -n 20 -w 5 --devices 0,1,2,3 --algo two-shot --timing back-to-back,graph --json "$out/x4-two-shot-$b.json" 2>&1 | grep -v "^#" | tee -a "$log"
done
step "bench 8 B - 32 MiB, automatic choice, back to back and graphs, 4 ranks, NCCL in the same process"
timeout 170 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 32M -f 2 -c 1 -n 20 -w 5 --devices 0,1,2,3 --nccl --timing back-to-back,graph --json "$out/x4-auto.json" 2>&1 | tee -a "$log" > /dev/null
step "coll, 4 ranks on devices 0-3, default communicator, stream path"
timeout 250 /tmp/ferroccl coll --devices 0,1,2,3 --path stream 2>&1 | tail -n 3 | tee -a "$log"
step "1 GiB rows against NCCL, unchecked"
timeout 60 /tmp/ferroccl bench all_reduce reduce_scatter -b 1G -e 1G -c 0 -n 10 -w 3 --devices 0,1,2,3 --nccl --json "$out/x4-1G.json" 2>&1 | grep -v "^#" | tee -a "$log"
step end
