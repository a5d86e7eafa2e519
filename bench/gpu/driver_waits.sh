#!/usr/bin/env bash
# Driver calls beside a running kernel, on one GPU, in one run: the `init_rank` on threads
# self-test repeated with CUDA's lazy and eager loading (two ranks of one process sharing
# the GPU, which must never allocate while the other's call waits), then
# bench/probes/driver_waits.cu, each of its operations in both modes. Writes
# OUTDIR/raw/selftest/init-rank-modes-DATE.txt and OUTDIR/raw/selftest/driver-waits-DATE.txt,
# each with its command, device line, date and build.
set -euo pipefail
usage="usage: $0 BINDIR OUTDIR
  BINDIR: a folder with ferroccl (target/release's)
  env: REPEATS (runs of the self-test in each mode, default 45), BUILD (the binary's commit)"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
source "$(dirname "$0")/env.sh"
open_results "$out" selftest
repeats=${REPEATS:-45}
ops="malloc_small malloc_large free pool_grow pool_reuse free_async memset_first memset_warm memcpy_pageable host_alloc free_host stream_create event module_load launch_first stack_limit vmm_map vmm_unmap ctx_synchronize"

t=$out/$rawdir/init-rank-modes-$day.txt
{
  echo "# comm_init_rank_on_threads run $repeats times with CUDA_MODULE_LOADING=LAZY, then $repeats times with EAGER"
  echo "# command: REPEATS=$repeats bash bench/gpu/driver_waits.sh BINDIR OUTDIR"
  echo "# device: $(device_line)"
  echo "# date: $day"
  echo "# build: $(build_of "$bin/ferroccl")"
  echo "# baseline: none (a failure count per mode)"
} > "$t"
for mode in LAZY EAGER; do
  step "CUDA_MODULE_LOADING=$mode" >> "$t"
  for _ in $(seq 1 "$repeats"); do
    CUDA_MODULE_LOADING=$mode timeout 60 "$bin/ferroccl" test init_rank 2>&1 | grep -E '^test|FAIL' >> "$t" || echo "exit status $?" >> "$t"
  done
done

nv=${NVIDIA_LIBS:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia}
probe=${TMPDIR:-/tmp}/driver_waits
nvcc -O2 -arch=sm_90 -I"$nv/cu13/include" "$repo/bench/probes/driver_waits.cu" -L"$nv/cu13/lib" -Xlinker -rpath="$nv/cu13/lib" -lcuda -o "$probe"
p=$out/$rawdir/driver-waits-$day.txt
{
  echo "# bench/probes/driver_waits.cu: each operation's host time while a one-warp kernel spins up to 2 s on another stream (about 2000 ms: it waited for the kernel's end), with lazy and eager loading"
  echo "# command: bash bench/gpu/driver_waits.sh BINDIR OUTDIR (the probe built with nvcc -O2 -arch=sm_90 ... -lcuda)"
  echo "# device: $(device_line)"
  echo "# date: $day"
  echo "# build: bench/probes/driver_waits.cu at $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "# baseline: ctx_synchronize (waits by definition) and the same operation in the other mode"
} > "$p"
for mode in LAZY EAGER; do
  for op in $ops; do
    CUDA_MODULE_LOADING=$mode timeout 20 "$probe" "$op" >> "$p" 2>&1 || echo "$op $mode: exit status $?" >> "$p"
  done
done
cat "$p"
grep -cE ' ok ' "$t" | sed 's/^/init_rank runs passed: /' || true
grep -c FAILED "$t" | sed 's/^/init_rank runs failed: /' || true
step end
