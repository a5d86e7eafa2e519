#!/usr/bin/env bash
# The collectives' sweep against NCCL (each rank a process of its own, --procs, NCCL the
# same way in the same run; PROCS=0: every rank in one process): all_reduce, all_gather and
# reduce_scatter from 8 B to 1 GiB back to back (bus bandwidth, results/ring.json), and up
# to 1 MiB also each call synchronized and in CUDA graphs (results/latency.json), every row
# checked. With the defaults this is the command of results/ring.json and latency.json (two
# GPUs); results/ring-4gpu.json: DEVICES=0,1,2,3 FACTOR=4 ITERS=10 WARMUP=3
# TIMING=back-to-back; results/ring-8gpu.json: DEVICES=0,1,2,3,4,5,6,7.
# Writes OUTDIR/ring[-Ngpu].json, OUTDIR/latency[-Ngpu].json (when TIMING has sync or
# graph) and the raw output OUTDIR/raw/ring/sweep-Ngpu-DATE.{json,txt}.
set -euo pipefail
usage="usage: $0 BINARY OUTDIR
  BINARY: ferroccl built with --features nccl; OUTDIR: where the results go
  env: DEVICES (0,1) PROCS (one process per device; 0: every rank in one process) FACTOR (-f, 2) ITERS (-n, 20) WARMUP (-w, 5) REPEATS (--repeats, 5) MAX (-e, 1G)
       TIMING (back-to-back,sync,graph) LIMIT (seconds, 590) DEVICE (the machine's line)
       BUILD (the binary's commit)"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
source "$(dirname "$0")/env.sh"
devices=${DEVICES:-0,1}
timing=${TIMING:-back-to-back,sync,graph}
n=$(ndevices "$devices")
suffix=$([ "$n" -eq 2 ] || echo "-${n}gpu")
open_results "$2" ring
raw=$rawdir/sweep-${n}gpu-$day
args=(bench all_reduce all_gather reduce_scatter -b 8 -e "${MAX:-1G}" -f "${FACTOR:-2}" -c 1
      -n "${ITERS:-20}" -w "${WARMUP:-5}" --repeats "${REPEATS:-5}" --devices "$devices" --nccl
      $([ "${PROCS:-$n}" -gt 0 ] && echo "--procs ${PROCS:-$n}" || true) --timing "$timing"
      --json "$out/$raw.json")
step "ferroccl ${args[*]}"
timeout "${LIMIT:-590}" "$bin" "${args[@]}" > "$out/$raw.txt" 2>&1
meta=("device=$(device_line)" "build=$(build_of "$bin")" "baseline=$(nccl_baseline "$out/$raw.txt")"
      "raw=[\"bench/results/$raw.json\", \"bench/results/$raw.txt\"]" "script=bench/gpu/ring.sh")
"${results[@]}" ring "$out/$raw.json" "$out/ring$suffix.json" "${meta[@]}" | tee -a "$log"
case $timing in
  *sync*|*graph*) "${results[@]}" latency "$out/$raw.json" "$out/latency$suffix.json" "${meta[@]}" | tee -a "$log" ;;
esac
step end
