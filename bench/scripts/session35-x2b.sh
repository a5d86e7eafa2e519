#!/usr/bin/env bash
# Thirty-fifth session, two H200s (nvidia-h200-x2), main's build (.carry/ferroccl-m.gz):
# issues 14's and 16's sweep (ring.json, latency.json): 8 B - 1 GiB back to back, up to
# 1 MiB also call + synchronize and in CUDA graphs, NCCL 2.28.9 in the same process,
# every row checked. NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl-m.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "sweep 8 B - 1 GiB"
timeout 540 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json $res/sweep.json > $res/sweep.txt 2>&1; echo "rc $?" | tee -a "$log"
python3 -c "
import json; d=json.load(open('$res/sweep.json')); print({k: v for k, v in d.items() if k != 'rows'})" | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
