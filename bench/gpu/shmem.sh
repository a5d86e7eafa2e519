#!/usr/bin/env bash
# The symmetric heap between two GPUs, PE 0 and PE 1 of one process (results/shmem.json):
# put and get bandwidth by size (8 B - 64 MiB, a grid of one CTA per SM) against
# cuMemcpyPeerAsync of the same bytes in the same run, put latency by a thread, a warp and
# a CTA, the put_signal + wait_until round trip and barrier_all; the moved data checked.
# Writes OUTDIR/shmem.json and OUTDIR/raw/shmem/shmem-2gpu-DATE.{json,txt}.
set -euo pipefail
usage="usage: $0 BINARY OUTDIR
  env: DEVICES (0,1) DEVICE (the machine's line) BUILD"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
source "$(dirname "$0")/env.sh"
open_results "$2" shmem
raw=$rawdir/shmem-2gpu-$day
step "ferroccl bench shmem --devices ${DEVICES:-0,1}"
timeout 120 "$bin" bench shmem --devices "${DEVICES:-0,1}" --json "$out/$raw.json" > "$out/$raw.txt" 2>&1
"${results[@]}" annotate "$out/shmem.json" "$out/$raw.json" \
  "measures=the symmetric heap between two GPUs, one PE each: put and get bandwidth by size against the copy engine, put latency by a thread, a warp and a CTA, the put_signal + wait_until round trip and barrier_all" \
  "command=ferroccl bench shmem --devices ${DEVICES:-0,1} --json shmem.json" \
  "device=$(device_line)" "build=$(build_of "$bin")" \
  "baseline=cuMemcpyPeerAsync of the same bytes between the same two GPUs in the same run (copy_engine_gbps); no NCCL figure" \
  "raw=[\"bench/results/$raw.json\", \"bench/results/$raw.txt\"]" "script=bench/gpu/shmem.sh" | tee -a "$log"
step end
