#!/usr/bin/env bash
# Twenty-eighth session (2026-11-28), two GPUs (nvidia-h200-x2), the final build (153b485:
# one-shot all_reduce to 8 MiB on 2 ranks, two-shot above): the self-tests; the GPU
# matrix with the automatic choice on 2 ranks and on 4 ranks two a GPU (stream path,
# direct on); all_reduce 2-32 MiB against NCCL 2.28.9 in the same process, every row
# checked, twice; shift and jacobi as 2 PEs in 2 processes. NCCL_NVLS_ENABLE=0; nothing
# creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test (device 0)"
timeout 90 /tmp/ferroccl test > $res/selftest.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/selftest.txt | tee -a "$log"
step "coll auto, 2 ranks on devices 0,1, stream path"
timeout 110 /tmp/ferroccl coll --devices=0,1 --path stream > $res/coll-auto-2.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-auto-2.txt | tee -a "$log"
step "coll auto, 4 ranks on devices 0,1, stream path"
timeout 130 /tmp/ferroccl coll --devices=0,1 --ranks 4 --path stream > $res/coll-auto-4.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 $res/coll-auto-4.txt | tee -a "$log"
for round in 1 2; do
  step "all_reduce 2-32 MiB auto + NCCL, round $round"
  timeout 60 /tmp/ferroccl bench all_reduce -b 2M -e 32M -f 2 -c 1 -n 20 -w 5 --devices=0,1 --nccl > $res/ar-$round.txt 2>&1; echo "rc $?" | tee -a "$log"
done
step "shift --check-api, 2 PEs as processes"
timeout 40 /tmp/ferroccl run -n 2 --devices 0,1 --grace 5s /tmp/shift --check-api 2>&1 | tail -n 4 | tee -a "$log"
step "jacobi, 2 PEs as processes"
timeout 40 /tmp/ferroccl run -n 2 --devices 0,1 --grace 5s /tmp/jacobi 2>&1 | grep -v "^ " | tail -n 3 | tee -a "$log"
step end
cd $out && tar czf res.tgz res
