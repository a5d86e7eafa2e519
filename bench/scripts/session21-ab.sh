#!/usr/bin/env bash
# Twenty-first session (2026-11-27): why the sweep's small-size ratios moved. Main's
# previous build (.carry/ferroccl-final.gz, b270bf7) and this session's
# (.carry/ferroccl-sleep2.gz), alternated twice, each measuring NCCL 2.28.9 first in its
# own process: all three collectives 8 B - 1 MiB (×4), back to back and call +
# synchronize, 2 ranks on devices 0,1, every row checked. Then the GPU matrix through the
# stream path with this session's build, 2 ranks on device 0 (the loops relaunched as one
# CTA). NCCL_NVLS_ENABLE=0; no multicast object is made.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ab.txt
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-final.gz > /tmp/old && chmod +x /tmp/old
gunzip -c .carry/ferroccl-sleep2.gz > /tmp/new && chmod +x /tmp/new
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
for round in 1 2; do
  for b in old new; do
    step "round $round, $b: 8 B - 1 MiB, back to back and call + sync"
    timeout 100 /tmp/$b bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f 4 -c 1 -n 20 -w 5 --devices 0,1 --nccl --timing back-to-back,sync --json "$res/small-$b-r$round.json" >> "$log" 2>&1; echo "rc=$?" >> "$log"
  done
done
step "new: coll --algo auto, 2 ranks on device 0, stream path"
timeout 100 /tmp/new coll --devices 0 --ranks 2 --path stream --algo auto 2>&1 | tail -n 2 | tee -a "$log"
step "end"
cd $out && tar czf res.tgz res
