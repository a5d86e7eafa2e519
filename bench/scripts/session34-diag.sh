#!/usr/bin/env bash
# Thirty-fourth session, one H200: where a stream-ordered small collective's call +
# synchronize goes. m = HEAD's device code (b6e46c5), d = the diagnostic build
# (branch diag-post-stamps: globaltimer stamps between the post grid's phases, summed in
# each guest channel's statistics padding, printed by --stats). Two ranks on one GPU.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/diag.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
for b in m d; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
step "m bench work_loop"
timeout 60 /tmp/ferroccl-m bench work_loop --json "$res/wl-m.json" >> "$log" 2>&1
step "m bench dispatch --devices 0"
timeout 90 /tmp/ferroccl-m bench dispatch --devices 0 >> "$log" 2>&1
step "m bench dispatch --devices 0,0"
timeout 90 /tmp/ferroccl-m bench dispatch --devices 0,0 >> "$log" 2>&1
b() {
  local bin=$1 name=$2; shift 2
  step "$bin $name: bench all_reduce $*"
  timeout 120 /tmp/ferroccl-$bin bench all_reduce -b 8 -e 256K -f 8 -c 1 -n 200 -w 20 --devices 0 --ranks 2 "$@" > "$res/$bin-$name.txt" 2>&1
  echo "rc $?" | tee -a "$log"; cat "$res/$bin-$name.txt" >> "$log"
}
b m sync --timing sync
b d sync --timing sync --stats
b d b2b --timing back-to-back --stats
b d graph --timing graph --stats
b d one-shot-sync --timing sync --stats --algo one-shot
b d sync-4ch --timing sync --stats --channels 4
b m sync-4ch --timing sync --channels 4
step end
cd $out && tar czf res.tgz res && rm -rf res
