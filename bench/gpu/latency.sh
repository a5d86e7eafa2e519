#!/usr/bin/env bash
# The small calls alone against NCCL (each rank a process of its own, --procs; NCCL the
# same way, in the same run; PROCS=0: every rank in one process): all_reduce, all_gather and
# reduce_scatter from 8 B to 1 MiB back to back, each call synchronized and in CUDA graphs
# of 20 calls, every row checked (results/latency.json's rows and small_* fields; the
# current file came out of ring.sh's whole sweep, whose rows up to 1 MiB are the same
# command's). results/latency-4gpu.json: DEVICES=0,1,2,3 FACTOR=4 TIMING=sync,graph.
# Writes OUTDIR/latency[-Ngpu].json and OUTDIR/raw/latency/small-Ngpu-DATE.{json,txt}.
set -euo pipefail
usage="usage: $0 BINARY OUTDIR
  BINARY: ferroccl built with --features nccl; OUTDIR: where the results go
  env: DEVICES (0,1) PROCS (one process per device; 0: every rank in one process) FACTOR (-f, 2) ITERS (-n, 20) WARMUP (-w, 5) REPEATS (--repeats, 5)
       TIMING (back-to-back,sync,graph) LIMIT (seconds, 300) DEVICE BUILD"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
source "$(dirname "$0")/env.sh"
devices=${DEVICES:-0,1}
n=$(ndevices "$devices")
suffix=$([ "$n" -eq 2 ] || echo "-${n}gpu")
open_results "$2" latency
raw=$rawdir/small-${n}gpu-$day
args=(bench all_reduce all_gather reduce_scatter -b 8 -e 1M -f "${FACTOR:-2}" -c 1
      -n "${ITERS:-20}" -w "${WARMUP:-5}" --repeats "${REPEATS:-5}" --devices "$devices" --nccl
      $([ "${PROCS:-$n}" -gt 0 ] && echo "--procs ${PROCS:-$n}" || true)
      --timing "${TIMING:-back-to-back,sync,graph}" --json "$out/$raw.json")
step "ferroccl ${args[*]}"
timeout "${LIMIT:-300}" "$bin" "${args[@]}" > "$out/$raw.txt" 2>&1
"${results[@]}" latency "$out/$raw.json" "$out/latency$suffix.json" \
  "device=$(device_line)" "build=$(build_of "$bin")" "baseline=$(nccl_baseline "$out/$raw.txt")" \
  "raw=[\"bench/results/$raw.json\", \"bench/results/$raw.txt\"]" "script=bench/gpu/latency.sh" | tee -a "$log"
step end
