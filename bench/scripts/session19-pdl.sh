#!/usr/bin/env bash
# Nineteenth session (2026-11-27): ace6962 ("s19", .carry/ferroccl-s19.gz) against the
# overlapping posts ("pdl", .carry/ferroccl-pdl.gz: posts launched with programmatic
# stream serialization where the device holds two post grids per rank; each post plans
# its item, then waits for the kernel before it (griddepcontrol.wait) and only then lets
# the next post start), order alternated: `bench work_loop` three rounds each; 8 B - 8 MiB
# back to back and in CUDA graphs, 2 ranks (devices 0, 1), NCCL 2.28.9 in the same
# process, every row checked, two rounds each; the pdl build's GPU matrix (automatic
# choice, stream path, 2 ranks on two GPUs, and 2 ranks on one GPU where posts do not
# overlap) and self-tests.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/pdl.txt
for v in s19 pdl; do gunzip -c .carry/ferroccl-$v.gz > /tmp/$v && chmod +x /tmp/$v; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
loop() {
  step "$1 round $2: bench work_loop (device 0)"
  timeout 120 /tmp/$1 bench work_loop --json "$res/loop-$1-r$2.json" >> "$log" 2>&1
}
loop s19 0; loop pdl 0; loop pdl 1; loop s19 1; loop s19 2; loop pdl 2
sizes() {
  step "$1 round $2: bench all_reduce all_gather reduce_scatter 8 B - 8 MiB, devices 0,1"
  timeout 200 /tmp/$1 bench all_reduce all_gather reduce_scatter -b 8 -e 8M -f 4 -c 1 -n 30 -w 10 --devices 0,1 --nccl --timing back-to-back,graph --latency-maxbytes 8M --json "$res/$1-r$2.json" 2>&1 | grep -v "^# [0-9]* iterations" >> "$log"
}
sizes s19 0; sizes pdl 0; sizes pdl 1; sizes s19 1
step "pdl: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 150 /tmp/pdl coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 1 | tee -a "$log"
step "pdl: coll --algo auto, 2 ranks on device 0, stream path"
timeout 150 /tmp/pdl coll --devices 0,0 --path stream --algo auto 2>&1 | tail -n 1 | tee -a "$log"
step "pdl: ferroccl test (device 0)"
timeout 60 /tmp/pdl test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
cd $out && tar czf res.tgz res
