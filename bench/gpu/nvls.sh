#!/usr/bin/env bash
# NVLS all_reduce, reduce_scatter and all_gather from 8 B to 1 GiB against our ring, our
# automatic choice and NCCL, one process per algorithm (NCCL measured first in each), every
# row checked (results/nvls.json). No multicast object is created (NCCL_NVLS_ENABLE=0):
# NVLS runs on its software multicast twin. MATRIX=1 first runs the NVLS correctness matrix
# with 8 ranks on one GPU, its in-place half on device 0 and its out-of-place half on
# device 1 at once (about 160 s).
# Writes OUTDIR/nvls.json and OUTDIR/raw/nvls/bench-ALGO-2gpu-DATE.{json,txt}
# (matrix-8ranks-*-DATE.txt with MATRIX=1).
set -euo pipefail
usage="usage: $0 BINARY OUTDIR
  env: DEVICES (0,1) MATRIX (0|1) DEVICE (the machine's line) BUILD"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
source "$(dirname "$0")/env.sh"
devices=${DEVICES:-0,1}
n=$(ndevices "$devices")
open_results "$2" nvls
files=()
if [ "${MATRIX:-0}" = 1 ]; then
  step "ferroccl coll --ranks 8 --algo nvls: in-place on device 0, out-of-place on device 1"
  timeout 470 "$bin" coll --devices 0 --ranks 8 --algo nvls in-place > "$out/$rawdir/matrix-8ranks-in-place-$day.txt" 2>&1 &
  timeout 470 "$bin" coll --devices 1 --ranks 8 --algo nvls out-of-place > "$out/$rawdir/matrix-8ranks-out-of-place-$day.txt" 2>&1 &
  wait
  tail -qn 1 "$out/$rawdir"/matrix-8ranks-*-"$day".txt | tee -a "$log"
  files+=("\"bench/results/$rawdir/matrix-8ranks-in-place-$day.txt\"" "\"bench/results/$rawdir/matrix-8ranks-out-of-place-$day.txt\"")
fi
for algo in nvls ring auto; do
  raw=$rawdir/bench-$algo-${n}gpu-$day
  step "ferroccl bench ... --algo $algo"
  timeout 240 "$bin" bench all_reduce reduce_scatter all_gather -b 8 -e 1G -f 8 -c 1 -n 10 -w 3 \
    --devices "$devices" --nccl --algo "$algo" --json "$out/$raw.json" > "$out/$raw.txt" 2>&1
  files+=("\"bench/results/$raw.json\"")
done
"${results[@]}" nvls "$out/$rawdir/bench-nvls-${n}gpu-$day.json" "$out/$rawdir/bench-ring-${n}gpu-$day.json" \
  "$out/$rawdir/bench-auto-${n}gpu-$day.json" "$out/nvls.json" \
  "device=$(device_line)" "build=$(build_of "$bin")" \
  "baseline=$(nccl_baseline "$out/$rawdir/bench-nvls-${n}gpu-$day.txt"); our ring and automatic choice each in a process of its own" \
  "raw=[$(IFS=,; echo "${files[*]}")]" "script=bench/gpu/nvls.sh" | tee -a "$log"
step end
