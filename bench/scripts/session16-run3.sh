#!/usr/bin/env bash
# Sixteenth session, third device call (2026-11-26): main (.carry/ferroccl-main.gz,
# 78f0b43: DataType::size as a `match`) against main with DataType::size computed from a
# packed constant (.carry/ferroccl-arith.gz: the fifteenth session's 4747c08 form), same
# run, 2 ranks (devices 0, 1), NCCL in the same process, every row checked; the order of
# the two builds alternates between rounds; --stats at 8 B; the arith build's GPU matrix
# (automatic choice) and self-tests.
# NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/run3.txt
for v in main arith; do gunzip -c .carry/ferroccl-$v.gz > /tmp/$v && chmod +x /tmp/$v; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
bench_small() {
  step "$1 round $2: bench all_reduce all_gather reduce_scatter 8 B - 512 KiB, devices 0,1"
  timeout 60 /tmp/$1 bench all_reduce all_gather reduce_scatter -b 8 -e 512K -f 4 -c 1 -n 50 -w 10 --devices 0,1 --nccl --timing back-to-back,sync,graph --latency-maxbytes 512K --json "$res/$1-r$2.json" 2>&1 | grep -v "^#" >> "$log"
}
bench_small main 0; bench_small arith 0
bench_small arith 1; bench_small main 1
bench_small main 2; bench_small arith 2
for v in main arith; do
  for f in all_reduce all_gather reduce_scatter; do
    step "$v --stats $f 8 B graph"
    timeout 60 /tmp/$v bench $f -b 8 -e 8 -c 1 -n 50 -w 10 --devices 0,1 --timing graph --latency-maxbytes 1M --stats 2>&1 | grep -E "^ +8 |parts run" | sed 's/.*(\([0-9.]* us of it in staged flag exchanges\)).*parts run on the post grid alone: [0-9]*, \(.*\)/#   \1; \2/' >> "$log"
  done
done
step "arith: coll --algo auto, 2 ranks on devices 0,1, stream path"
timeout 120 /tmp/arith coll --devices 0,1 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "arith: ferroccl test (device 0)"
timeout 60 /tmp/arith test 2>&1 | grep -v "^\[" | tail -n 1 | tee -a "$log"
step end
