#!/usr/bin/env bash
# Thirty-fifth session, two H200s (nvidia-h200-x2), main's build (.carry/ferroccl-m.gz):
# what issue 14 still asks of two GPUs. Self-tests (a CUDA graph of 20 calls replayed 100
# times among them), the correctness matrix through the public stream calls with 2 ranks
# (one per GPU) and 4 ranks (two per GPU), `bench work_loop` and `bench footprint`.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl-m.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "test"
timeout 150 /tmp/ferroccl test > $res/test.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/test.txt | tee -a "$log"
run() {
  step "$1: coll ${*:2}"
  timeout 130 /tmp/ferroccl coll "${@:2}" > "$res/$1.txt" 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 "$res/$1.txt" | tee -a "$log"
}
run coll-2 --devices 0,1 --path stream
run coll-4 --devices 0,1 --ranks 4 --path stream
step "bench work_loop"
timeout 60 /tmp/ferroccl bench work_loop --json $res/work_loop.json > $res/work_loop.txt 2>&1; echo "rc $?" | tee -a "$log"
step "bench footprint"
timeout 120 /tmp/ferroccl bench footprint --json $res/footprint.json > $res/footprint.txt 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
