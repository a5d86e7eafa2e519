#!/usr/bin/env bash
# Twenty-sixth session (2026-11-28), nvidia-h200-x2, the final build (.carry/ferroccl.gz,
# 1c90e15's code): the collective matrix with 4 ranks on the two GPUs, two a GPU (posts
# that do not overlap: launched without programmatic serialization), stream path; then
# the small sweep with 100 iterations a row against NCCL (back to back and call +
# synchronize). NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl.gz > /tmp/f && chmod +x /tmp/f
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "coll, 4 ranks on devices 0,1, stream path"
timeout 150 /tmp/f coll --devices 0,1 --ranks 4 > $res/coll-4.txt 2>&1; echo "rc $?" | tee -a "$log"
tail -n 2 $res/coll-4.txt | tee -a "$log"
step "small sweep, 100 iterations a row"
timeout 150 /tmp/f bench all_reduce all_gather reduce_scatter -b 8 -e 256K -f 8 -c 1 -n 100 -w 10 --devices 0,1 --nccl --timing back-to-back,sync --json $res/small-100.json > $res/small-100.txt 2>&1; echo "rc $?" | tee -a "$log"
python3 -c "
import json; d=json.load(open('$res/small-100.json')); print({k: round(v, 3) for k, v in d.items() if k.startswith('small_') and v is not None})" | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
