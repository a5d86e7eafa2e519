#!/usr/bin/env bash
# Twentieth session, four GPUs (issue 19, 2026-11-27): the nineteenth session's final device build, b270bf7 (overlapping posts, the post alone)
# (.carry/ferroccl-final.gz), one rank per GPU on devices 0-3: the GPU matrix through the
# stream path with the automatic choice (ring, one-shot/two-shot, lean path as the
# device picks), the self-tests, and `ferroccl bench` against NCCL 2.28.9 in the same
# process for all_reduce, all_gather and reduce_scatter, every row checked: 8 B - 1 MiB
# back to back, call + synchronize and in CUDA graphs, 2 MiB - 1 GiB back to back.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x4.txt
gunzip -c .carry/ferroccl-final.gz > /tmp/final && chmod +x /tmp/final
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
nvidia-smi topo -m | head -6 >> "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "coll --algo auto, 4 ranks on devices 0-3, stream path"
timeout 150 /tmp/final coll --devices 0,1,2,3 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "bench 8 B - 1 MiB, back to back, sync, graph"
timeout 150 /tmp/final bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 --devices 0,1,2,3 --nccl --timing back-to-back,sync,graph --latency-maxbytes 1M --json "$res/x4-small.json" 2>&1 | grep -v "^#" >> "$log"
step "bench 2 MiB - 1 GiB, back to back"
timeout 200 /tmp/final bench all_reduce all_gather reduce_scatter -b 2M -e 1G -f 4 -c 1 -n 10 -w 3 --devices 0,1,2,3 --nccl --json "$res/x4-large.json" 2>&1 | grep -v "^#" >> "$log"
step "ferroccl test (device 0)"
timeout 60 /tmp/final test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
cd $out && tar czf res.tgz res
