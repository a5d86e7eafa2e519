#!/usr/bin/env bash
# Thirty-fourth session, one H200: session34-diag.sh's stamped rows again, with the stamps
# printed (the diagnostic build d of branch diag-post-stamps, its host side fixed to carry
# them across `ChannelStats::since`). Two ranks on one GPU.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/diag2.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
gunzip -c .carry/ferroccl-d.gz > /tmp/ferroccl-d && chmod +x /tmp/ferroccl-d
b() {
  local name=$1; shift
  step "d $name: bench all_reduce $*"
  timeout 120 /tmp/ferroccl-d bench all_reduce -b 8 -e 256K -f 8 -c 1 -n 200 -w 20 --devices 0 --ranks 2 "$@" 2>&1 | grep -v placement > "$res/d-$name.txt"
  cat "$res/d-$name.txt" >> "$log"
}
b sync --timing sync --stats
b b2b --timing back-to-back --stats
b graph --timing graph --stats
b one-shot-sync --timing sync --stats --algo one-shot
b one-shot-graph --timing graph --stats --algo one-shot
b sync-4ch --timing sync --stats --channels 4
step end
cd $out && tar czf res.tgz res && rm -rf res
