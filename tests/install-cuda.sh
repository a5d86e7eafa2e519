#!/usr/bin/env bash
# Installs, once, the CUDA 13.0 toolchain that compiles CUDA C++ device code without a
# GPU (nvcc with cicc, the crt and runtime headers, nvlink, fatbinary, ptxas) from PyPI's
# wheels into target/tools/cuda-13.0 of this workspace, and prints its bin directory on
# stdout. What the linker's tests and the cuda-interop example use (docs/linker.md).
#
# Every wheel is pinned to 13.0 and installed without dependencies into one directory:
# nvcc's nvcc.profile then finds cicc, libdevice and the headers beside it. A newer
# nvidia-nvvm beside nvcc 13.0 (what `pip install nvidia-cuda-nvcc==13.0.*` resolves to)
# makes `nvcc -dc` fail: cicc emits PTX ISA 9.5, which ptxas 13.0 refuses ("Unsupported
# .version 9.5; current version is '9.0'"). 13.0 is the CUDA version of the GPU machines'
# driver (580). Needs python3 with pip, PyPI, and gcc (nvcc's host compiler).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/target/tools/cuda-13.0"
cuda="$tools/nvidia/cu13"
if [ ! -x "$cuda/bin/nvcc" ] || [ ! -x "$cuda/nvvm/bin/cicc" ]; then
  echo "install-cuda.sh: installing the CUDA 13.0 wheels into $tools" >&2
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$tools" \
    nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96 >&2
  # nvcc.profile links host code against $TOP/lib64; the wheels put the libraries in lib.
  ln -sfn lib "$cuda/lib64"
fi
"$cuda/bin/nvcc" --version > /dev/null
echo "$cuda/bin"
