#!/usr/bin/env bash
# ferroccl's test command (the README's, and what .ci/run calls). Works on a fresh machine
# without a GPU: it installs what it needs, then runs every host test, the PTX build,
# and the ptxas checks, ending with cargo's summary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# 1. rust-src for -Zbuild-std=core (the toolchain itself comes from rust-toolchain.toml).
if [ -x ../shared/toolchain/install-rust-src.sh ]; then
  ../shared/toolchain/install-rust-src.sh nightly
else
  rustup component add rust-src --toolchain nightly
fi

# 2. ptxas, from PyPI's nvidia-cuda-nvcc, unless one is already given or on PATH.
if [ -z "${FERROCCL_PTXAS:-}" ] && ! command -v ptxas >/dev/null 2>&1; then
  site=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null || true)
  if [ -z "$site" ] || [ ! -x "$site/cu13/bin/ptxas" ]; then
    python3 -m pip install --quiet --disable-pip-version-check nvidia-cuda-nvcc
    site=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])')
  fi
  export FERROCCL_PTXAS="$site/cu13/bin/ptxas"
fi
"${FERROCCL_PTXAS:-ptxas}" --version | tail -n 1

# 3. Every host test, the PTX build (host-shim's build script) and the ptxas checks.
cargo test --workspace --all-features
