#!/usr/bin/env bash
# The cuda-interop example on GPUs: ferroccl's library made here (ferroccl-link lib, with
# the machine's CUDA 13.0 toolchain), examples/cuda-interop/fused.cu compiled by nvcc as
# relocatable device code, linked offline (ferroccl-link link) and run (--cubin), then
# linked by the driver at run time (--object, which also runs fused.cu's application
# function in a communicator's persistent loops between all-reduces, on the stream and in
# a CUDA graph); the Rust kernel runs in both. Then the benchmark: all-reduces called
# from inside a user kernel (one-shot, two-shot) against the default communicator's
# host-called all_reduce, and the fused kernel against scale + all_reduce + add_bias,
# 8 B – 64 MiB per PE, each route's result checked first. Two PEs on devices 0,1 (0,0 on
# one GPU). Every run checks its results bit for bit and fails otherwise. Writes
# OUTDIR/raw/cuda-interop/run-DATE.txt and OUTDIR/linker.json.
set -euo pipefail
usage="usage: $0 CUDA_INTEROP FERROCCL_LINK OUTDIR
  CUDA_INTEROP: target/release/cuda-interop; FERROCCL_LINK: target/release/ferroccl-link
  env: FERROCCL_CUDA_BIN (a CUDA 13.0 bin directory, default /usr/local/cuda/bin) DEVICES"
[ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
bin=$(realpath "$1") link=$(realpath "$2")
source "$(dirname "$0")/env.sh"
open_results "$3" cuda-interop
export FERROCCL_CUDA_BIN=${FERROCCL_CUDA_BIN:-/usr/local/cuda/bin}
devices=${DEVICES:-$([ "$(nvidia-smi -L | wc -l)" -ge 2 ] && echo 0,1 || echo 0,0)}
f=$out/$rawdir/run-$day.txt
run() { step "$*" >> "$f"; timeout 300 "$@" >> "$f" 2>&1; }
run "$link" lib --out "$out/lib"
run "$FERROCCL_CUDA_BIN/nvcc" -arch=sm_90a -dc -I "$out/lib" "$repo/examples/cuda-interop/fused.cu" -o "$out/fused.o"
run "$link" link --out "$out/fused.cubin" "$out/fused.o" "$out/lib/ferroccl_device.sm_90a.cubin"
run "$bin" --devices "$devices" --cubin "$out/fused.cubin"
run "$bin" --devices "$devices" --object "$out/fused.o"
run "$bin" --devices "$devices" --cubin "$out/fused.cubin" --bench --iters 20 --json "$out/linker-rows.json"
python3 - "$out/linker-rows.json" "$out/linker.json" "$(device_line)" "$(date -u +%FT%TZ)" "$(build_of "$bin")" "bench/results/$rawdir/run-$day.txt" <<'PY'
import json, sys
rows, out, device, date, build, raw = sys.argv[1:]
doc = json.load(open(rows))
doc.update(device=device, date=date, build=build, raw=[raw], script="bench/gpu/cuda-interop.sh",
           baseline="the default communicator's host-called all_reduce, same run, same GPUs")
json.dump(doc, open(out, "w"), indent=2)
PY
step "device: $(device_line)"
step end
