#!/usr/bin/env bash
# Twenty-sixth session (2026-11-28), two H200s (nvidia-h200-x2): where the host time of a
# stream-ordered collective call goes (`bench dispatch`: the whole call and the driver
# calls it can be made of, the ranks called in turn across the two GPUs and on one), and
# the small-message sweep against NCCL in the same process (the issue-16 fields).
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
bin=${BIN:-.carry/ferroccl.gz}
gunzip -c $bin > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "bench dispatch, devices 0,1"
timeout 120 /tmp/ferroccl bench dispatch --devices 0,1 --json $res/dispatch-2.json > $res/dispatch.txt 2>&1; echo "rc $?" | tee -a "$log"
step "bench dispatch, device 0"
timeout 120 /tmp/ferroccl bench dispatch --devices 0 --json $res/dispatch-1.json >> $res/dispatch.txt 2>&1; echo "rc $?" | tee -a "$log"
cat $res/dispatch.txt | tee -a "$log"
step "small sweep against NCCL"
timeout 300 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 256K -f 8 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json $res/small.json > $res/small.txt 2>&1; echo "rc $?" | tee -a "$log"
grep -E "small_|allreduce_graph|^#.*(ferroccl|iterations)|^ +8 " $res/small.txt | tee -a "$log"
