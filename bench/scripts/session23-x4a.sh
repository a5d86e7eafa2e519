#!/usr/bin/env bash
# Twenty-third session (2026-11-27), four GPUs (nvidia-h200-x4), one rank per GPU: the push
# form of the staged collectives on more than two ranks (.carry/ferroccl-push.gz) against
# the build before it (.carry/ferroccl-ag.gz, 80fd4c1, which pushes on two ranks only),
# each with NCCL 2.28.9 in the same process, 512 KiB - 32 MiB back to back and in CUDA
# graphs, every row checked; then the new build with each algorithm forced (two-shot and
# one-shot with 64 MiB of staging, the ring) to 64 MiB, and the channels' statistics of
# the automatic choice at 4-16 MiB. NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/x4a.txt
gunzip -c .carry/ferroccl-push.gz > /tmp/new && chmod +x /tmp/new
gunzip -c .carry/ferroccl-ag.gz > /tmp/old && chmod +x /tmp/old
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
devs=--devices=0,1,2,3
for b in new old; do
  step "bench 512 KiB - 32 MiB, $b build, back to back and graphs, NCCL"
  timeout 120 /tmp/$b bench all_reduce all_gather reduce_scatter -b 512K -e 32M -f 2 -c 1 -n 20 -w 5 $devs --nccl --timing back-to-back,graph --latency-maxbytes 32M --json $res/ab-$b.json > $res/ab-$b.txt 2>&1
  echo "rc $?" | tee -a "$log"
done
step "new: all_reduce two-shot forced, 64 MiB staging, 1-64 MiB"
timeout 80 /tmp/new bench all_reduce -b 1M -e 64M -f 2 -c 1 -n 20 -w 5 $devs --algo two-shot --staging 64M --json $res/two.json > $res/two.txt 2>&1; echo "rc $?" | tee -a "$log"
step "new: one-shot forced, 64 MiB staging, 1-64 MiB"
timeout 100 /tmp/new bench all_reduce all_gather reduce_scatter -b 1M -e 64M -f 2 -c 1 -n 20 -w 5 $devs --algo one-shot --staging 64M --json $res/one.json > $res/one.txt 2>&1; echo "rc $?" | tee -a "$log"
step "new: ring forced, 4-64 MiB, NCCL"
timeout 100 /tmp/new bench all_reduce all_gather reduce_scatter -b 4M -e 64M -f 2 -c 1 -n 20 -w 5 $devs --algo ring --nccl --json $res/ring.json > $res/ring.txt 2>&1; echo "rc $?" | tee -a "$log"
step "new: auto with --stats, 4-16 MiB"
timeout 60 /tmp/new bench all_reduce all_gather reduce_scatter -b 4M -e 16M -f 2 -c 1 -n 20 -w 5 $devs --stats > $res/stats.txt 2>&1; echo "rc $?" | tee -a "$log"
step end
cd $out && tar czf res.tgz res
