#!/usr/bin/env bash
# What a communicator costs other work on its GPU (results/footprint.json): f32 FMAs, 1 GiB
# copies and a cuBLAS bf16 8192^3 GEMM, each filling the GPU, timed before the communicator
# exists, beside its idle loops, while it runs 256 MiB all-reduces and after shutdown, as
# ratios against before (median of 20 runs a phase); the default communicator, 2 ranks on
# one GPU, loops asleep after 1 ms idle. ARGS adds options (e.g. --sleep-after never: the
# loops poll through the idle phase). ROUNDS processes of the same binary: the GEMM's ratio
# moves by several hundredths between processes.
# Writes OUTDIR/footprint.json and OUTDIR/raw/footprint/footprint-1gpu-DATE-R.{json,txt}.
set -euo pipefail
usage="usage: $0 BINARY OUTDIR
  env: GPU (device index, 0) ROUNDS (processes, 2) ARGS (more bench footprint options)
       DEVICE (the machine's line) BUILD; needs cuBLAS (env.sh finds the image's)"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
source "$(dirname "$0")/env.sh"
open_results "$2" footprint
echo "cuBLAS: ${cublas_lib:-none found: the loader path decides}" | tee -a "$log"
raws=() files=()
for r in $(seq 1 "${ROUNDS:-2}"); do
  raw=$rawdir/footprint-1gpu-$day-$r
  step "ferroccl bench footprint -d ${GPU:-0} ${ARGS:-}, process $r"
  # shellcheck disable=SC2086
  timeout 280 "$bin" bench footprint -d "${GPU:-0}" ${ARGS:-} --json "$out/$raw.json" > "$out/$raw.txt" 2>&1
  raws+=("$out/$raw.json") files+=("\"bench/results/$raw.json\"" "\"bench/results/$raw.txt\"")
done
"${results[@]}" annotate "$out/footprint.json" "${raws[@]}" \
  "measures=what a communicator costs other work on its GPU: f32 FMAs, 1 GiB copies and a cuBLAS bf16 8192³ GEMM timed before the communicator exists, beside its idle loops, while it runs all-reduces and after shutdown, as ratios against before" \
  "command=ferroccl bench footprint -d ${GPU:-0} ${ARGS:+$ARGS }--json footprint.json, ${ROUNDS:-2} processes one after the other" \
  "device=$(device_line)" "build=$(build_of "$bin")" \
  "baseline=the same kernels timed in the same process before the communicator exists (the before phase); no NCCL (one GPU)" \
  "raw=[$(IFS=,; echo "${files[*]}")]" "script=bench/gpu/footprint.sh" | tee -a "$log"
step end
