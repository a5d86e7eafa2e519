#!/usr/bin/env bash
# Installs ptxas 13.0 for ferroccl's build, once: PyPI's nvidia-cuda-nvcc 13.0 into
# target/tools/nvcc-13.0 of this workspace, where host-shim's build script looks for it
# (ferroccl_ptx_builder::sass::WORKSPACE_PTXAS) when FERROCCL_PTXAS is unset. Prints the
# path of ptxas on stdout (tests/run.sh sets FERROCCL_PTXAS to it). Needs python3 with pip
# and access to PyPI; `cargo clean` removes it with the rest of target/.
#
# 13.0 is the CUDA version of the GPU machines' driver (580): the build embeds SASS made
# by this ptxas, and a newer ptxas may make SASS that driver refuses.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/target/tools/nvcc-13.0"
ptxas="$tools/nvidia/cu13/bin/ptxas"
if [ ! -x "$ptxas" ]; then
  echo "install-ptxas.sh: installing nvidia-cuda-nvcc==13.0.* into $tools" >&2
  python3 -m pip install --quiet --disable-pip-version-check --target "$tools" 'nvidia-cuda-nvcc==13.0.*' >&2
fi
"$ptxas" --version > /dev/null
echo "$ptxas"
