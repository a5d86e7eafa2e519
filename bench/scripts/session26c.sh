#!/usr/bin/env bash
# Twenty-sixth session (2026-11-28), nvidia-h200-x2. (1) `bench dispatch` A/B/A/B:
# .carry/ferroccl-a.gz (e13aa55's host code; its FERROCCL_WAIT experiment left unset
# behaves as merged) against .carry/ferroccl.gz (the post's parameters in a fixed array,
# an in-place buffer checked once). (2) Call + synchronize and back to back of small
# all_reduces with 64 (default), 8 and 2 channels a rank: does the post grid's size
# cost latency? (3) Issue 16's sweep with the new build: all_reduce, all_gather and
# reduce_scatter 8 B - 1 GiB, back to back, call + synchronize and in CUDA graphs (to
# 1 MiB), every row checked, NCCL 2.28.9 in the same process, devices 0,1.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl-a.gz > /tmp/a && gunzip -c .carry/ferroccl.gz > /tmp/b && chmod +x /tmp/a /tmp/b
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for round in 1 2; do
  for v in a b; do
    step "dispatch, build $v, round $round"
    timeout 60 /tmp/$v bench dispatch --devices 0,1 --json $res/dispatch-$v-$round.json > $res/dispatch-$v-$round.txt 2>&1; echo "rc $?" | tee -a "$log"
    grep -E "^ +(call|launch_empty_post_grid|pointer)" $res/dispatch-$v-$round.txt | tee -a "$log"
  done
done
for ch in 64 8 2 64; do
  step "small all_reduce, $ch channels a rank"
  timeout 120 /tmp/b bench all_reduce -b 8 -e 256K -f 64 -c 1 -n 50 -w 5 --devices 0,1 --channels $ch --nccl --timing back-to-back,sync --json $res/channels-$ch.json > $res/channels-$ch.txt 2>&1; echo "rc $?" | tee -a "$log"
  python3 - $res/channels-$ch.json <<'PY' | tee -a "$log"
import json,sys
d=json.load(open(sys.argv[1]))
for r in d["rows"]:
    print("  %-12s %-12s %7d  ours %6.2f %6.2f  nccl %6.2f %6.2f" % (r["function"], r["timing"], r["size"], r["oop"]["time_us"], r["ip"]["time_us"], r["baseline_oop"]["time_us"], r["baseline_ip"]["time_us"]))
PY
done
step "sweep 8 B - 1 GiB"
timeout 420 /tmp/b bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync,graph --json $res/sweep.json > $res/sweep.txt 2>&1; echo "rc $?" | tee -a "$log"
python3 -c "
import json; d=json.load(open('$res/sweep.json')); print({k: v for k, v in d.items() if k != 'rows'})" | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
