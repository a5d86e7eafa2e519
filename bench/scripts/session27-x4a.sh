#!/usr/bin/env bash
# Twenty-seventh session (2026-11-28), four GPUs (nvidia-h200-x4), one rank per GPU, the
# build of 89ef19e (device code of aaf192c): issue 19's benchmarks against NCCL 2.28.9 in
# the same process (8 B - 1 GiB back to back, to 1 MiB call + synchronize and in CUDA
# graphs, every row checked), the shmem examples with one PE per GPU and `bench
# footprint`; then what could close the 4-rank shortfalls at 8 MiB and >= 32 MiB: the
# ring's knobs (step, direct operations, channel count) at 32-512 MiB without data
# checks (a timing comparison in one process each), two-shot 4-16 MiB on 16/32/64
# channels (checked), and the channels' statistics of the automatic choice at 8-128 MiB.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
devs=--devices=0,1,2,3
step "bench 8 B - 1 GiB back to back, NCCL"
timeout 240 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 4 -c 1 -n 10 -w 3 $devs --nccl --json $res/sweep.json > $res/sweep.txt 2>&1; echo "rc $?" | tee -a "$log"
step "bench 8 B - 1 MiB, sync and graph, NCCL"
timeout 120 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 $devs --nccl --timing sync,graph --json $res/latency.json > $res/latency.txt 2>&1; echo "rc $?" | tee -a "$log"
step "shift --check-api, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/shift --check-api 2>&1 | tail -n 6 | tee -a "$log"
step "jacobi, 4 PEs as processes on devices 0-3"
timeout 40 /tmp/ferroccl run -n 4 --devices 0,1,2,3 --grace 5s /tmp/jacobi 2>&1 | grep -v "^ " | tail -n 3 | tee -a "$log"
step "bench footprint (device 0)"
timeout 90 /tmp/ferroccl bench footprint --json $res/footprint.json > $res/footprint.txt 2>&1; echo "rc $?" | tee -a "$log"
ring() { name=$1; shift; step "ring 32-512 MiB: $name"; timeout 60 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 32M -e 512M -f 4 -c 0 -n 10 -w 3 $devs --algo ring "$@" --json $res/ring-$name.json > $res/ring-$name.txt 2>&1; echo "rc $?" | tee -a "$log"; }
ring default --nccl
ring step512K --step 512K
ring step2M --step 2M
ring step4M --step 4M
ring direct --direct
ring ch48 --channels 48
ring ch32 --channels 32
for ch in 16 32 64; do
  step "all_reduce two-shot 4-16 MiB, $ch channels"
  timeout 60 /tmp/ferroccl bench all_reduce -b 4M -e 16M -f 2 -c 1 -n 20 -w 5 $devs --algo two-shot --channels $ch --json $res/two-$ch.json > $res/two-$ch.txt 2>&1; echo "rc $?" | tee -a "$log"
done
step "auto with --stats, 8-128 MiB"
timeout 60 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8M -e 128M -f 4 -c 0 -n 20 -w 5 $devs --stats > $res/stats.txt 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res
