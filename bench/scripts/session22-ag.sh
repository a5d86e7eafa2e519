#!/usr/bin/env bash
# Twenty-second session (2026-11-27), two H200s (nvidia-h200-x2): all_gather's own 2-rank
# row (one-shot to 64 MiB of output, where reduce_scatter stays at 32 MiB), build
# .carry/ferroccl-ag.gz: all_gather and reduce_scatter 16-128 MiB with the automatic
# choice and with the ring forced, each against NCCL in the same process, every row
# checked. NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ag.txt
gunzip -c .carry/ferroccl-ag.gz > /tmp/new && chmod +x /tmp/new
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
for algo in auto ring; do
  echo "## bench all_gather reduce_scatter 16-128 MiB, --algo $algo ($(date -u +%FT%TZ))" | tee -a "$log"
  timeout 100 /tmp/new bench all_gather reduce_scatter -b 16M -e 128M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --algo $algo --json $res/ag-$algo.json > $res/ag-$algo.txt 2>&1
  echo "rc $?" | tee -a "$log"
done
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
cd $out && tar czf res.tgz res
