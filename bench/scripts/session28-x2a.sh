#!/usr/bin/env bash
# Twenty-eighth session (2026-11-28), two GPUs (nvidia-h200-x2; four were not lent at the
# time), the session's build: two-shot's direct outputs, 48 MiB of default staging,
# two-shot to 32 MiB on 3 and 4 ranks. The self-tests (device 0); the GPU matrix with the
# automatic choice on 2 ranks and on 4 ranks two a GPU, two-shot forced on 4 ranks two a
# GPU (stream path, direct on); all_reduce 4-64 MiB on 2 ranks against NCCL 2.28.9 in the
# same process, every row checked, direct on and off. NCCL_NVLS_ENABLE=0; nothing creates
# a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test (device 0)"
timeout 90 /tmp/ferroccl test > $res/selftest.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 3 $res/selftest.txt | tee -a "$log"
step "coll auto, 2 ranks on devices 0,1, stream path"
timeout 110 /tmp/ferroccl coll --devices=0,1 --path stream > $res/coll-auto-2.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/coll-auto-2.txt | tee -a "$log"
step "coll auto, 4 ranks on devices 0,1, stream path"
timeout 110 /tmp/ferroccl coll --devices=0,1 --ranks 4 --path stream > $res/coll-auto-4.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/coll-auto-4.txt | tee -a "$log"
step "coll two-shot all_reduce, 4 ranks on devices 0,1, stream path"
timeout 60 /tmp/ferroccl coll --devices=0,1 --ranks 4 --path stream --algo two-shot all_reduce > $res/coll-2s-4.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/coll-2s-4.txt | tee -a "$log"
for direct in true false; do
  step "all_reduce 4-64 MiB, 2 ranks, --direct $direct, NCCL"
  timeout 60 /tmp/ferroccl bench all_reduce -b 4M -e 64M -f 2 -c 1 -n 20 -w 5 --devices=0,1 --direct $direct --nccl > $res/ar-2-$direct.txt 2>&1; echo "rc $?" | tee -a "$log"
done
step end
cd $out && tar czf res.tgz res
