#!/usr/bin/env bash
# ferroccl's test command (the README's, and what .ci/run calls). Works on a fresh machine
# without a GPU: it installs what it needs, then runs every host test, the PTX build,
# and the ptxas checks, ending with cargo's summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# One build from nothing, no edit loop: incremental compilation's files would only take
# disk (about 1.7 GiB of a clean run's target).
export CARGO_INCREMENTAL=0
# Free disk at every step, so that a run stopped by a full disk says so where it stopped.
free_disk() { df -h "$root" | awk 'NR == 2 { print "   (" $4 " free on " $6 ")" }'; }

echo "== tests/run.sh: step 1 $(date -u +%T)"; free_disk
# 1. rust-src for -Zbuild-std=core (the toolchain itself comes from rust-toolchain.toml).
if [ -x ../shared/toolchain/install-rust-src.sh ]; then
  ../shared/toolchain/install-rust-src.sh nightly
else
  rustup component add rust-src --toolchain nightly
fi

echo "== tests/run.sh: step 2 $(date -u +%T)"; free_disk
# 2. ptxas 13.0, from PyPI's nvidia-cuda-nvcc (tests/install-ptxas.sh, which says why 13.0),
#    unless FERROCCL_PTXAS names one; then the CUDA C++ toolchain.
if [ -z "${FERROCCL_PTXAS:-}" ]; then
  FERROCCL_PTXAS=$(bash "$root/tests/install-ptxas.sh")
  export FERROCCL_PTXAS
fi
"$FERROCCL_PTXAS" --version | tail -n 1
# The CUDA 13.0 toolchain that compiles CUDA C++ without a GPU (nvcc, cicc, nvlink), for
# the linker's tests (tests/install-cuda.sh, which says why every wheel is pinned),
# unless FERROCCL_CUDA_BIN names one.
if [ -z "${FERROCCL_CUDA_BIN:-}" ]; then
  FERROCCL_CUDA_BIN=$(bash "$root/tests/install-cuda.sh")
  export FERROCCL_CUDA_BIN
fi

echo "== tests/run.sh: step 3 $(date -u +%T)"; free_disk
# 3. Lints, warnings as errors: clippy over the whole workspace on the host, then the
#    nvptx-only code (device-rt's arch/nvptx.rs, then the kernel crate, which is outside
#    the workspace) for the GPU target.
cargo clippy --workspace --all-features --all-targets -- -D warnings
# host-shim as a user's crate builds it, without the `testing` feature (its test hooks,
# the loop's queue and the wiring are not there), with the examples that use it that way.
cargo clippy -p host-shim -p ferroccl-jacobi -p ferroccl-shift --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc -p host-shim --no-deps
nvptx_clippy=(clippy --release --target nvptx64-nvidia-cuda -Zbuild-std=core --target-dir "$root/target/nvptx-clippy")
RUSTFLAGS="-C target-cpu=sm_90 -C target-feature=+ptx83" cargo "${nvptx_clippy[@]}" -p device-rt -- -D warnings
(cd ptx/kernels && RUSTFLAGS="-C target-cpu=sm_90 -C target-feature=+ptx83" cargo "${nvptx_clippy[@]}" -- -D warnings)

echo "== tests/run.sh: step 3b $(date -u +%T)"; free_disk
# 3b. The twin's protocol tests under ThreadSanitizer (tests/tsan.sh, reduced filters:
#     about 11 minutes on CI's 2 cores from nothing, most of it building std with the
#     sanitizer; docs/testing.md, "ThreadSanitizer").
bash "$root/tests/tsan.sh"
# On CI (a clean clone thrown away after the run) the sanitizer's and the nvptx lints'
# builds are not needed again: their disk goes back before the largest build.
if [ -n "${CI:-}" ]; then
  rm -rf "$root/target/tsan" "$root/target/nvptx-clippy"
fi

echo "== tests/run.sh: step 4 $(date -u +%T)"; free_disk
# 4. Every host test, the PTX build (host-shim's build script) and the ptxas checks of the
#    work loop uncapped and under the loosest, a middle and the tightest register cap
#    (every cap the runtime can give it with FERROCCL_PTXAS_EVERY_CAP=1, by hand after a
#    change to the loop: about three times the ptxas time; see docs/tuning.md,
#    FERROCCL_PTXAS_EVERY_CAP). The whole collective matrix
#    (FERROCCL_FULL_MATRIX=1) adds about 7-9 minutes and the host-twin tests' time
#    swings by half between runs on CI's 2 cores, so CI runs the reduced matrix; the
#    whole one by hand after a change to device code.
#    Each test binary runs one test at a time: the twin's tests run one OS thread per
#    GPU thread, and two of them side by side on 2 cores take longer than one after the
#    other (coll_host 769 s against 558 s, call_kernel_host 423 s against 292 s; see
#    docs/testing.md, "Where CI's time goes").
#    A test binary that dies of a signal (as host-twin tests have: a twin thread whose
#    stack was already gone, a weak-memory store drained through a null pointer; both
#    fixed) leaves a core where the kernel's core_pattern writes one into the working
#    directory: the faulting thread's address and backtrace are printed (with gdb, where
#    the machine has it) before the script fails.
ulimit -c unlimited 2>/dev/null || true
started=$(mktemp)
if ! cargo test --workspace --all-features -- --test-threads=1; then
  command -v gdb > /dev/null || { echo "== tests/run.sh: no gdb, so no backtrace of a crash"; exit 1; }
  find "$root" -path "$root/target" -prune -o -type f -name 'core*' -newer "$started" -print | while read -r core; do
    exe=$(gdb -batch -c "$core" 2>/dev/null | sed -n "s/^Core was generated by \`\([^ ']*\).*/\1/p")
    echo "== tests/run.sh: $core, from ${exe:-an unknown program}"
    gdb -batch -ex 'p $_siginfo._sifields._sigfault.si_addr' -ex 'bt 40' "$exe" "$core" 2>&1 | tail -n 60
    rm -f "$core"
  done
  exit 1
fi
