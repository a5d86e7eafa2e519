#!/usr/bin/env bash
# reduce_copy on one GPU (results/reduce_copy.json): copy, 2- and 8-source sum of 256 MiB
# buffers in f32 and bf16, every fixed-shape kernel at several launch shapes, against
# cuMemcpyDtoD of the same bytes in the same run (bytes moved = read + written).
# Writes OUTDIR/reduce_copy.json and OUTDIR/raw/reduce_copy/reduce_copy-1gpu-DATE.{json,txt}.
set -euo pipefail
usage="usage: $0 BINARY OUTDIR
  env: GPU (device index, 0) DEVICE (the machine's line) BUILD"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
source "$(dirname "$0")/env.sh"
open_results "$2" reduce_copy
raw=$rawdir/reduce_copy-1gpu-$day
step "ferroccl bench reduce_copy -d ${GPU:-0}"
timeout 300 "$bin" bench reduce_copy -d "${GPU:-0}" --json "$out/$raw.json" > "$out/$raw.txt" 2>&1
"${results[@]}" annotate "$out/reduce_copy.json" "$out/$raw.json" \
  "measures=reduce_copy (copy, 2- and 8-source sum; f32, bf16) moving 256 MiB buffers on one GPU, against cuMemcpyDtoD of the same bytes in the same run; each case's fastest launch shape counts" \
  "command=ferroccl bench reduce_copy -d ${GPU:-0} --json reduce_copy.json" \
  "device=$(device_line)" "build=$(build_of "$bin")" \
  "baseline=cuMemcpyDtoD of the same 256 MiB buffers on the same GPU in the same run" \
  "raw=[\"bench/results/$raw.json\", \"bench/results/$raw.txt\"]" "script=bench/gpu/reduce_copy.sh" | tee -a "$log"
step end
