#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-25 (ninth session): Jacobi as 2 processes after the
# handle fix; large and mid sizes with 24 (the default) and 48 channels (1 resident, the
# rest guests) in one run, NCCL in the same process; and the 8 B all_reduce in a CUDA
# graph with post grids of 2 and 24 channels.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/session9-channels.txt
for b in ferroccl jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
echo "## jacobi, 2 PEs as processes on devices 0 and 1 ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 40 /tmp/ferroccl run -n 2 --devices 0,1 --grace 5s /tmp/jacobi 2>&1 | grep -v "^ " | tail -n 9 | tee -a "$log"
for c in 24 48; do
echo "## $c channels ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 200 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 512K -e 1G -f 4 -c 1 -n 20 -w 5 --devices 0,1 --nccl \
  --channels $c --json "$out/channels-$c.json" 2>&1 | grep -v "^#  " | tee -a "$log"
done
for c in 2 24; do
echo "## 8 B all_reduce in a graph, $c channels ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 60 /tmp/ferroccl bench all_reduce -b 8 -e 8 -c 1 -n 50 -w 10 --devices 0,1 --channels $c --timing graph 2>&1 | tail -n 2 | tee -a "$log"
done
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
