#!/usr/bin/env bash
# Twenty-second session (2026-11-27), two H200s (nvidia-h200-x2), build e585f0f
# (.carry/ferroccl.gz): issue 18's GPU runs left open since the tenth session.
#   part 1: the whole NVLS matrix with 8 ranks on one GPU, split in two halves by placement
#           (in-place cases on device 0, out-of-place ones on device 1, at once);
#   part 2: NVLS (software twin) all_reduce, reduce_scatter, all_gather 8 B - 1 GiB against
#           the ring and against the automatic choice (one-shot / two-shot below its
#           thresholds), each with NCCL in the same process, one command per algorithm.
# NCCL_NVLS_ENABLE=0 and no multicast object is created: NVLS runs on its software twin.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
part=${1:?part 1 or 2}
res=$out/res; mkdir -p $res
log=$res/nvls-part$part.txt
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
if [ "$part" = 1 ]; then
  step "coll --algo nvls, 8 ranks on device 0 (in-place half) and 8 ranks on device 1 (out-of-place half), at once"
  timeout 470 /tmp/ferroccl coll --devices 0 --ranks 8 --algo nvls in-place > $res/nvls8-in.txt 2>&1 &
  timeout 470 /tmp/ferroccl coll --devices 1 --ranks 8 --algo nvls out-of-place > $res/nvls8-out.txt 2>&1 &
  wait
  for f in in out; do echo "-- $f-place, rc above lines:"; tail -n 3 $res/nvls8-$f.txt; done | tee -a "$log"
else
  for algo in nvls ring auto; do
    step "bench 8 B - 1 GiB, --algo $algo, 2 ranks on devices 0 and 1, NCCL in the same process"
    timeout 185 /tmp/ferroccl bench all_reduce reduce_scatter all_gather -b 8 -e 1G -f 8 -c 1 -n 10 -w 3 --devices 0,1 --nccl --algo $algo --json "$res/bench-$algo.json" > $res/bench-$algo.txt 2>&1
    echo "rc $?" | tee -a "$log"
  done
fi
step end
cd $out && tar czf res.tgz res
