#!/usr/bin/env bash
# The Jacobi solver on the symmetric heap (results/jacobi.json): on GPU 0 the block-reduce
# step kernel timed against the one-float-atomic-per-point step kernel (mean of 50 steps
# each, PE 0), then 1 PE with the atomic kernel and 2, 4 and 8 PEs in one process on the
# one GPU; with two GPUs also 2 PEs on devices 0,1 (20 steps timed), and with FERROCCL given
# 2 PEs as 2 processes (`ferroccl run`). Every run's printed error lines are checked against
# the reference table.
# Writes OUTDIR/jacobi.json and OUTDIR/raw/jacobi/{one-gpu,eight-pes-one-gpu,two-gpus,
# processes-2gpu}-DATE.txt.
set -euo pipefail
usage="usage: $0 JACOBI OUTDIR [FERROCCL]
  JACOBI: target/release/jacobi; FERROCCL: target/release/ferroccl (for the processes run)
  env: DEVICE (the machine's line) BUILD"
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
ferroccl=${3:+$(realpath "$3")}
source "$(dirname "$0")/env.sh"
open_results "$2" jacobi
run() { local f=$1; shift; step "$*" >> "$f"; timeout 120 "$@" >> "$f" 2>&1; }
one=$rawdir/one-gpu-$day.txt eight=$rawdir/eight-pes-one-gpu-$day.txt
run "$out/$one" "$bin" --time-kernels 50
run "$out/$one" "$bin" --kernel atomic
run "$out/$one" "$bin" --pes 2 --devices 0,0
run "$out/$one" "$bin" --pes 4 --devices 0,0,0,0 --kernel atomic
run "$out/$eight" "$bin" --pes 8 --devices 0,0,0,0,0,0,0,0
logs=("$out/$one" "eight_pes_one_gpu:$out/$eight")
files=("\"bench/results/$one\"" "\"bench/results/$eight\"")
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  two=$rawdir/two-gpus-$day.txt
  run "$out/$two" "$bin" --pes 2 --devices 0,1 --time-kernels 20
  logs+=("two_gpus:$out/$two") files+=("\"bench/results/$two\"")
  if [ -n "$ferroccl" ]; then
    procs=$rawdir/processes-2gpu-$day.txt
    run "$out/$procs" "$ferroccl" run -n 2 --devices 0,1 --grace 5s "$bin"
    logs+=("processes_two_gpus:$out/$procs") files+=("\"bench/results/$procs\"")
  fi
fi
"${results[@]}" jacobi "$out/jacobi.json" "${logs[@]}" \
  "command=jacobi --time-kernels 50; jacobi --kernel atomic; jacobi --pes 2 --devices 0,0; jacobi --pes 4 --devices 0,0,0,0 --kernel atomic (each sub-object: its own log's runs)" \
  "device=$(device_line)" "date=$(date -u +%FT%TZ)" "build=$(build_of "$bin")" \
  "baseline=the same solver's step kernel with one float atomic per point (step_atomic_ms), same process; the reference error table" \
  "raw=[$(IFS=,; echo "${files[*]}")]" "script=bench/gpu/jacobi.sh" | tee -a "$log"
step end
