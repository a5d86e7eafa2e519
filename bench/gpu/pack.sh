#!/usr/bin/env bash
# Run where Rust is, not on the GPU machine: builds the release binaries the GPU scripts
# take and packs them with an MPI (PyPI's mpich wheel, for nccl-tests' one process per GPU)
# and nccl-tests' source into one archive to carry there (GPU machines have no Rust and
# reach no network). On the GPU machine: `tar xJf OUT.tar.xz -C DIR`, then
# bench/gpu/gpus.sh PART DIR OUTDIR (or the scripts it runs, with DIR/bin's binaries).
# The archive holds bin/ (ferroccl with the `nccl` feature, ferroccl-matmul, jacobi,
# shift, libnccl.so.2, stripped; BUILD: the commit they were built from), mpich/ (include/, lib/, bin/mpiexec)
# and nccl-tests/.
set -euo pipefail
usage="usage: $0 NCCL_TESTS_SRC OUT.tar.xz
  NCCL_TESTS_SRC: a checkout of NVIDIA/nccl-tests (its .git is left out)
  env: MPICH (the mpich wheel's version, default 5.0.2)"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 2; }
src=$(realpath "$1")
dest=$(realpath -m "$2")
[ -f "$src/src/all_reduce.cu" ] || { echo "$0: $src is not a checkout of nccl-tests (no src/all_reduce.cu)" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
cargo build --release -p ferroccl --features nccl -p ferroccl-matmul -p ferroccl-nccl -p ferroccl-jacobi -p ferroccl-shift
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin"
strip -o "$stage/bin/ferroccl" target/release/ferroccl
for b in ferroccl-matmul jacobi shift; do strip -o "$stage/bin/$b" "target/release/$b"; done
strip -o "$stage/bin/libnccl.so.2" target/release/libnccl.so
echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!bench/results' || echo ' with uncommitted changes')" > "$stage/bin/BUILD"
# A wheel keeps no file modes: mpiexec and its helpers are made executable again.
pip download --quiet --no-deps --only-binary=:all: "mpich==${MPICH:-5.0.2}" -d "$stage/wheel"
python3 -m zipfile -e "$stage"/wheel/mpich-*.whl "$stage/wheel/x"
mv "$stage"/wheel/x/mpich-*.data/data "$stage/mpich"
chmod +x "$stage"/mpich/bin/*
tar -C "$src" --exclude=.git -cf - . | (mkdir -p "$stage/nccl-tests" && tar -C "$stage/nccl-tests" -xf -)
tar -C "$stage" -cJf "$dest" bin mpich nccl-tests
echo "$dest: $(du -h "$dest" | cut -f1), build $(cat "$stage/bin/BUILD")"
