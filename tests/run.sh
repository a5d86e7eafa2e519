#!/usr/bin/env bash
# ferroccl's test command (the README's, and what .ci/run calls). Works on a fresh machine
# without a GPU: it installs what it needs, then runs every host test, the PTX build,
# and the ptxas checks, ending with cargo's summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

echo "== tests/run.sh: step 1 $(date -u +%T)"
# 1. rust-src for -Zbuild-std=core (the toolchain itself comes from rust-toolchain.toml).
if [ -x ../shared/toolchain/install-rust-src.sh ]; then
  ../shared/toolchain/install-rust-src.sh nightly
else
  rustup component add rust-src --toolchain nightly
fi

echo "== tests/run.sh: step 2 $(date -u +%T)"
# 2. ptxas 13.0, from PyPI's nvidia-cuda-nvcc, unless FERROCCL_PTXAS names one. 13.0 is the
#    CUDA version of the GPU machines' driver (580): the build embeds SASS made by this
#    ptxas, and a newer ptxas may make SASS that driver refuses.
if [ -z "${FERROCCL_PTXAS:-}" ]; then
  tools="$root/target/tools/nvcc-13.0"
  if [ ! -x "$tools/nvidia/cu13/bin/ptxas" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --target "$tools" 'nvidia-cuda-nvcc==13.0.*'
  fi
  export FERROCCL_PTXAS="$tools/nvidia/cu13/bin/ptxas"
fi
"$FERROCCL_PTXAS" --version | tail -n 1

echo "== tests/run.sh: step 3 $(date -u +%T)"
# 3. Lints, warnings as errors: clippy over the whole workspace on the host, then the
#    nvptx-only code (device-rt's arch/nvptx.rs, then the kernel crate, which is outside
#    the workspace) for the GPU target.
cargo clippy --workspace --all-features --all-targets -- -D warnings
nvptx_clippy=(clippy --release --target nvptx64-nvidia-cuda -Zbuild-std=core --target-dir "$root/target/nvptx-clippy")
RUSTFLAGS="-C target-cpu=sm_90 -C target-feature=+ptx83" cargo "${nvptx_clippy[@]}" -p device-rt -- -D warnings
(cd ptx/kernels && RUSTFLAGS="-C target-cpu=sm_90 -C target-feature=+ptx83" cargo "${nvptx_clippy[@]}" -- -D warnings)

echo "== tests/run.sh: step 4 $(date -u +%T)"
# 4. Every host test, the PTX build (host-shim's build script) and the ptxas checks, with
#    every register cap of the work loop (about 4 more minutes on 2 cores than the three
#    caps a plain `cargo test` assembles). The whole collective matrix
#    (FERROCCL_FULL_MATRIX=1) adds about 6.5 minutes: with it CI took about 43 of its 45
#    minutes (2026-11-27), so CI runs the reduced one.
FERROCCL_PTXAS_EVERY_CAP=1 cargo test --workspace --all-features
