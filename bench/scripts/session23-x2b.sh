#!/usr/bin/env bash
# Twenty-third session (2026-11-27), two GPUs (nvidia-h200-x2), the build whose 2-rank
# row runs all_reduce two-shot (pushing) above 16 MiB to 32 MiB (.carry/ferroccl-two2.gz):
# all_reduce 4-64 MiB with the automatic choice against NCCL 2.28.9 in the same process,
# back to back and in CUDA graphs, every row checked; then the GPU matrix with the
# automatic choice on 2 ranks (stream path). NCCL_NVLS_ENABLE=0; nothing creates a
# multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x2b.txt
gunzip -c .carry/ferroccl-two2.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "bench all_reduce 4-64 MiB, auto, NCCL, back to back and graphs"
timeout 90 /tmp/ferroccl bench all_reduce -b 4M -e 64M -f 2 -c 1 -n 20 -w 5 --devices=0,1 --nccl --timing back-to-back,graph --latency-maxbytes 64M --json $res/auto.json > $res/auto.txt 2>&1; echo "rc $?" | tee -a "$log"
step "coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 170 /tmp/ferroccl coll --devices=0,1 --path stream --algo auto > $res/coll-auto.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 1 $res/coll-auto.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
