#!/usr/bin/env bash
# Thirty-third session, one H200: build b (bdc153e) with 4 and 8 ranks on the one GPU on the
# stream path (the default communicator; 4 ranks also with one resident channel and no
# guests, the ring route), the large case 262 144 elements so that each matrix can end within
# its 110 s.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ranks.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
gunzip -c .carry/ferroccl-b.gz > /tmp/ferroccl-b && chmod +x /tmp/ferroccl-b
run() {
  echo "## $1: coll ${*:2} ($(date -u +%FT%TZ))" | tee -a "$log"
  timeout 110 /tmp/ferroccl-b coll "${@:2}" > "$res/$1.txt" 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 "$res/$1.txt" | tee -a "$log"
}
run coll-4-default --devices 0 --ranks 4 --path stream --big 262144
run coll-4-1ch --devices 0 --ranks 4 --channels 1 --resident 1 --path stream --big 262144
run coll-8-default --devices 0 --ranks 8 --path stream --big 262144
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
cd $out && tar czf res.tgz res && rm -rf res
