#!/usr/bin/env bash
# What two GPUs show of a build, one process per GPU as users deploy communicators, in
# parts that each fit one command of at most ten minutes. CARRY is the folder
# bench/gpu/pack.sh's archive was unpacked into (bin/, mpich/, nccl-tests/).
#   check:  the self-tests on each GPU (`ferroccl test`), then the correctness matrix with
#           one process per GPU (`ferroccl coll --procs 2`; one-shot and two-shot forced
#           too): OUTDIR/raw/selftest/two-gpu-DATE.txt
#   nccl:   bench/gpu/nccl.sh with NGPUS=2 and CARRY/mpich (nccl-tests with -g 2 and with
#           one process per GPU, two_ranks.cu, torch_nccl.py under torchrun):
#           OUTDIR/nccl_abi.json
#   bench:  bench/gpu/ring.sh (`ferroccl bench --procs 2 --nccl`, 8 B - 1 GiB, back to
#           back, and up to 1 MiB synchronized and in CUDA graphs): OUTDIR/ring.json,
#           OUTDIR/latency.json
#   matmul: bench/gpu/matmul.sh with NGPUS=2 (the collective matmuls against NCCL +
#           cuBLAS and cuBLAS alone): OUTDIR/collective_matmul.json
set -euo pipefail
usage="usage: $0 check|nccl|bench|matmul CARRY OUTDIR
  env: DEVICE (the machine's line, as the device tool gave it) and what each part's script takes"
[ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
part=$1 carry=$(realpath "$2")
mkdir -p "$3"
out=$(realpath "$3")
bin=$carry/bin
# The commit the carried binaries were built from (the checkout here may differ).
if [ -z "${BUILD:-}" ] && [ -f "$bin/BUILD" ]; then BUILD=$(cat "$bin/BUILD"); export BUILD; fi
here=$(cd "$(dirname "$0")" && pwd)
case $part in
  check)
    source "$here/env.sh"
    open_results "$out" selftest
    f=$out/$rawdir/two-gpu-$day.txt
    for d in 0 1; do
      step "ferroccl test --device $d" >> "$f"
      timeout 100 "$bin/ferroccl" test --device "$d" >> "$f" 2>&1 || echo "exit status $?" >> "$f"
    done
    # Limits that keep the part within ten minutes (the matrix took 48-128 s on two GPUs
    # in one process).
    for run in auto:180 one-shot:90 two-shot:60; do
      algo=${run%:*}
      step "ferroccl coll --procs 2 --devices 0,1 --algo $algo" >> "$f"
      timeout "${run#*:}" "$bin/ferroccl" coll --procs 2 --devices 0,1 --algo "$algo" >> "$f" 2>&1 || echo "exit status $?" >> "$f"
    done
    grep -E "passed, .* failed|wrong across|exit status|FAILED" "$f" | tee -a "$log" || true
    step "device: $(device_line)"
    step end
    ;;
  nccl)
    NGPUS=2 MPI_HOME=$carry/mpich bash "$here/nccl.sh" "$bin/libnccl.so.2" "$carry/nccl-tests" "$out"
    ;;
  bench)
    DEVICES=0,1 bash "$here/ring.sh" "$bin/ferroccl" "$out"
    ;;
  matmul)
    NGPUS=2 bash "$here/matmul.sh" "$bin/ferroccl" "$bin/ferroccl-matmul" "$out"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
