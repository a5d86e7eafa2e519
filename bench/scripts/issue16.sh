#!/usr/bin/env bash
# Issue 16's GPU checks, and the sweeps that set device_rt::algo::THRESHOLDS (provisional
# until these run), on nvidia-h200-x2. Run from the repository root with the release
# binary (built with --features nccl) in .carry/; results go to $OUT.
#
# 1. correctness: the staged matrix (random floats, compared with a reduction in rank
#    order; both sides of every threshold) with each algorithm forced and with the
#    device's choice, on 2 GPUs (2 and 4 ranks) and on one GPU (4 and 8 ranks), through
#    the stream path; the self-tests (comm_graph_replays: graphs of 20 all_reduces
#    replayed 100 times, checked; small ones now run one-shot by default).
# 2. thresholds: all_reduce with each algorithm forced (ring, one-shot, two-shot) and
#    with the device's choice against NCCL, 8 B - 64 MiB, staging 64 MiB so that every
#    forced size runs: where one-shot stops beating two-shot and two-shot the ring, per
#    rank count, gives all_reduce_one_shot_max and all_reduce_two_shot_max; the same for
#    all_gather / reduce_scatter (gather_scatter_one_shot_max) and broadcast / reduce
#    (rooted_one_shot_max), one-shot against the ring.
# 3. channels: one-shot and two-shot all_reduce on 1, 2, 4, 8, 16 and 24 channels (a
#    staged call takes min(ceil(bytes / bytes_per_channel), channels) channels, so the
#    loop's channel count caps it): the size where one more channel starts to pay gives
#    one_shot_bytes_per_channel and two_shot_bytes_per_channel.
set -u
source "$(dirname "$0")/device-env.sh"
log=$out/issue16.txt
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$log"
bench() { timeout 580 ./.carry/ferroccl bench "$@" 2>&1 | tee -a "$log"; }

echo "## 1. correctness" | tee -a "$log"
timeout 150 ./.carry/ferroccl test 2>&1 | tail -n 4 | tee -a "$log"
for algo in one-shot two-shot auto; do
  for shape in "--devices 0,1 --ranks 2" "--devices 0,1 --ranks 4" "--devices 0 --ranks 4" "--devices 0 --ranks 8 --channels 4"; do
    echo "# coll $shape --algo $algo" | tee -a "$log"
    timeout 300 ./.carry/ferroccl coll $shape --algo $algo --path stream 2>&1 | tail -n 3 | tee -a "$log"
  done
done

echo "## 2. thresholds, 2 ranks on 2 GPUs (then 4 ranks on 2 GPUs)" | tee -a "$log"
for ranks in 2 4; do
  bench all_reduce -b 8 -e 64M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --ranks $ranks --nccl --stats \
    --json "$out/allreduce-auto-r$ranks.json"
  for algo in ring one-shot two-shot; do
    bench all_reduce -b 8 -e 64M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --ranks $ranks --algo $algo --staging 64M \
      --json "$out/allreduce-$algo-r$ranks.json"
  done
  for algo in ring one-shot; do
    bench all_gather reduce_scatter broadcast reduce -b 8 -e 16M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --ranks $ranks \
      --algo $algo --staging 64M --json "$out/others-$algo-r$ranks.json"
  done
done

echo "## 3. channels, 2 ranks on 2 GPUs" | tee -a "$log"
for algo in one-shot two-shot; do
  for ch in 1 2 4 8 16 24; do
    bench all_reduce -b 4K -e 16M -f 2 -c 0 -n 20 -w 5 --devices 0,1 --channels $ch --algo $algo --staging 64M \
      --json "$out/channels-$algo-$ch.json"
  done
done
date -u +%FT%TZ | tee -a "$log"
