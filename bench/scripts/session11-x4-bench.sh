#!/usr/bin/env bash
# Four H200s (nvidia-h200-x4), 2026-11-26 (eleventh session), issue 19: one rank per GPU.
# all_reduce, all_gather and reduce_scatter 8 B - 1 GiB back to back against NCCL in the
# same process (one JSON per collective, so a timeout loses one), then 8 B - 1 MiB back to
# back, synchronized per call and in CUDA graphs. NCCL_NVLS_ENABLE=0; no multicast object is made. Release binaries gzipped in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/x4-bench.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
nvidia-smi topo -m | tee -a "$log"
/tmp/ferroccl info 2>&1 | tee -a "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for c in all_reduce all_gather reduce_scatter; do
  step "bench $c 8 B - 1 GiB, back to back, 4 ranks on devices 0-3, NCCL in the same process"
  timeout 140 /tmp/ferroccl bench $c -b 8 -e 1G -f 2 -c 1 -n 10 -w 3 --devices 0,1,2,3 --nccl --json "$out/x4-$c.json" 2>&1 | tee -a "$log" > /dev/null
done
step "bench 8 B - 1 MiB, back to back, sync and graph, 4 ranks on devices 0-3, NCCL in the same process"
timeout 120 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 --devices 0,1,2,3 --nccl --timing back-to-back,sync,graph --json "$out/x4-small.json" 2>&1 | tee -a "$log" > /dev/null
step end
