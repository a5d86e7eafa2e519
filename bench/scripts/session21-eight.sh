#!/usr/bin/env bash
# Twenty-first session (2026-11-27): the GPU matrix through the stream path with 8 ranks on
# device 0, this session's final build (.carry/ferroccl-sleep2.gz, 2a6d4ba), the loops
# sleeping between cases while the host checks them (session21-final.sh's run of it was
# cut by its 200 s timeout at 900 of 1620 cases, 0 wrong). NCCL_NVLS_ENABLE=0.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/eight.txt
gunzip -c .carry/ferroccl-sleep2.gz > /tmp/new && chmod +x /tmp/new
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
echo "## coll --algo auto, 8 ranks on device 0, stream path ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 370 /tmp/new coll --devices 0 --ranks 8 --path stream --algo auto 2>&1 | tail -n 3 | tee -a "$log"
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
cd $out && tar czf res.tgz res
