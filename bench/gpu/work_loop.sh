#!/usr/bin/env bash
# The work loop's hand-over on one GPU, against kernel launches timed in the same process
# (results/work_loop.json): (a) the direct path's no-op round trip, (b) its dispatch rate,
# (c) a stream-ordered no-op in a CUDA graph, (d) back to back and with a synchronize, (e)
# Comm::all_reduce of 8 B on one rank and its host time. ROUNDS processes of the same
# binary one after the other (the host figures move between processes): the first is the
# result's body, the others go under other_processes.
# Writes OUTDIR/work_loop.json and OUTDIR/raw/work_loop/work_loop-1gpu-DATE-R.{json,txt}.
set -euo pipefail
usage="usage: $0 BINARY OUTDIR
  env: GPU (device index, 0) ROUNDS (processes, 2) DEVICE (the machine's line) BUILD"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
source "$(dirname "$0")/env.sh"
open_results "$2" work_loop
raws=() files=()
for r in $(seq 1 "${ROUNDS:-2}"); do
  raw=$rawdir/work_loop-1gpu-$day-$r
  step "ferroccl bench work_loop -d ${GPU:-0}, process $r"
  timeout 120 "$bin" bench work_loop -d "${GPU:-0}" --json "$out/$raw.json" > "$out/$raw.txt" 2>&1
  raws+=("$out/$raw.json") files+=("\"bench/results/$raw.json\"" "\"bench/results/$raw.txt\"")
done
"${results[@]}" annotate "$out/work_loop.json" "${raws[@]}" \
  "measures=the work loop's hand-over: no-op round trips and dispatch rate on the direct path, stream-ordered no-ops (in a CUDA graph, back to back, with a synchronize) and the host time of a Comm call, against kernel launches in the same process" \
  "command=ferroccl bench work_loop -d ${GPU:-0} --json work_loop.json, ${ROUNDS:-2} processes one after the other" \
  "device=$(device_line)" "build=$(build_of "$bin")" \
  "baseline=none from NCCL (one GPU, one rank); the same process's empty kernel launch + cuStreamSynchronize, empty kernel launch in a CUDA graph and host time of an empty launch" \
  "raw=[$(IFS=,; echo "${files[*]}")]" "script=bench/gpu/work_loop.sh" | tee -a "$log"
step end
