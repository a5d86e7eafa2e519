#!/usr/bin/env bash
# Thirty-fifth session, one H200: the release build whose cubins ptxas made with
# --split-compile=0 (.carry/ferroccl-s.gz, d889f63: the same SASS as without it by
# nvdisasm, other bytes of the cubins differ): it loads its SASS and runs. Self-tests, the
# matrix through the stream calls with 2 ranks (default, and paired with every channel
# resident) and 4 ranks, a 512-thread loop (the capped cubin), and `bench work_loop`.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER FERROCCL_LOG=host_shim::module=info
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl-s.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "test"
timeout 150 /tmp/ferroccl test > $res/test.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/test.txt | tee -a "$log"
run() {
  local t=$1; shift
  step "$1: coll ${*:2}"
  timeout $t /tmp/ferroccl coll "${@:2}" > "$res/$1.txt" 2>&1; echo "rc $?" | tee -a "$log"; grep "module:" "$res/$1.txt" | head -n 2 | tee -a "$log"; tail -n 1 "$res/$1.txt" | tee -a "$log"
}
run 120 coll-2 --devices 0 --ranks 2 --path stream
run 90 coll-2-paired --devices 0 --ranks 2 --channels 8 --resident 8 --paired true --big 262144
run 90 coll-4 --devices 0 --ranks 4 --path stream --big 262144
run 90 coll-2-512t --devices 0 --ranks 2 --threads 512 --path stream --big 262144
step "bench work_loop"
timeout 60 /tmp/ferroccl bench work_loop --json $res/work_loop.json > $res/work_loop.txt 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
