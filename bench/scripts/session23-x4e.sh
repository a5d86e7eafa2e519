#!/usr/bin/env bash
# Twenty-third session (2026-11-27), four GPUs (nvidia-h200-x4): the build whose lean
# all-reduce stops at 256 KiB on more than two ranks (.carry/ferroccl-lean256.gz): the
# small sizes of issue 19's sweep again for all_reduce, 8 B - 2 MiB back to back, call +
# synchronize and in CUDA graphs, against NCCL 2.28.9 in the same process, every row
# checked, on 4 ranks and on 3; then the GPU matrix's all_reduce cases with the automatic
# choice on 4 ranks (stream path). NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x4e.txt
gunzip -c .carry/ferroccl-lean256.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for n in 4 3; do
  devs=$(seq -s, 0 $((n - 1)))
  step "bench all_reduce 8 B - 2 MiB, devices $devs, back to back, sync, graph, NCCL"
  timeout 90 /tmp/ferroccl bench all_reduce -b 8 -e 2M -f 4 -c 1 -n 20 -w 5 --devices=$devs --nccl --timing back-to-back,sync,graph --latency-maxbytes 2M --json $res/small-$n.json > $res/small-$n.txt 2>&1; echo "rc $?" | tee -a "$log"
done
step "coll --algo auto, all_reduce cases, 4 ranks on devices 0-3, stream path"
timeout 150 /tmp/ferroccl coll --devices=0,1,2,3 --path stream --algo auto all_reduce > $res/coll-all_reduce.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 2 $res/coll-all_reduce.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res
