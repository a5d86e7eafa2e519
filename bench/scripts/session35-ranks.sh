#!/usr/bin/env bash
# Thirty-fifth session, one H200, main's build (.carry/ferroccl-t.gz: main's device code,
# the gated self-test): the correctness matrix through the public stream calls with 8
# ranks on one GPU (issues 14 and 16), 3 ranks, and 2 ranks in paired and in non-direct
# mode; then `bench work_loop`.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl-t.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
run() {
  local t=$1; shift
  step "$1: coll ${*:2}"
  timeout $t /tmp/ferroccl coll "${@:2}" > "$res/$1.txt" 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 "$res/$1.txt" | tee -a "$log"
}
run 300 coll-8 --devices 0 --ranks 8 --path stream --big 65536
run 90 coll-3 --devices 0 --ranks 3 --path stream --big 262144
run 60 coll-2-paired --devices 0 --ranks 2 --path stream --paired true --big 262144
run 60 coll-2-not-direct --devices 0 --ranks 2 --path stream --direct false --big 262144
step "bench work_loop"
timeout 60 /tmp/ferroccl bench work_loop --json $res/work_loop.json > $res/work_loop.txt 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
