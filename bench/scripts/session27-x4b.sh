#!/usr/bin/env bash
# Twenty-seventh session (2026-11-28), four GPUs (nvidia-h200-x4), the build with direct
# operations per call and on by default (ring senders write straight into the next rank's
# output where that rank's call found it mapped for its peers): the self-tests (device 0,
# with the new buffer_info test against the second device); the GPU matrix with the ring
# forced on 4 ranks, stream path (direct all-reduce, all-gather, broadcast); issue 19's
# back-to-back sweep 8 B - 1 GiB against NCCL 2.28.9 in the same process, every row
# checked; then direct off against on at 32 MiB - 1 GiB on 4 ranks and on 2 (devices 0,1),
# NCCL in each process, every row checked. NCCL_NVLS_ENABLE=0; nothing creates a
# multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "ferroccl test (device 0)"
timeout 90 /tmp/ferroccl test > $res/selftest.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 4 $res/selftest.txt | tee -a "$log"
step "coll --algo ring, all_reduce all_gather broadcast, 4 ranks on devices 0-3, stream path"
timeout 100 /tmp/ferroccl coll --devices=0,1,2,3 --path stream --algo ring all_reduce all_gather broadcast > $res/coll-ring.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/coll-ring.txt | tee -a "$log"
step "bench 8 B - 1 GiB back to back, NCCL, 4 ranks"
timeout 240 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 4 -c 1 -n 10 -w 3 --devices=0,1,2,3 --nccl --json $res/sweep.json > $res/sweep.txt 2>&1; echo "rc $?" | tee -a "$log"
grep -E "busbw_vs|small_" $res/sweep.txt | tee -a "$log"
for d in 0,1,2,3 0,1; do
  for direct in false true; do
    step "bench 32 MiB - 1 GiB, devices $d, --direct $direct, NCCL"
    timeout 60 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 32M -e 1G -f 4 -c 1 -n 10 -w 3 --devices=$d --direct $direct --nccl --json $res/ab-$d-$direct.json > $res/ab-$d-$direct.txt 2>&1; echo "rc $?" | tee -a "$log"
  done
done
step end
cd $out && tar czf res.tgz res
