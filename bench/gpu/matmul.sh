#!/usr/bin/env bash
# The collective matmuls (examples/collective-matmul: ferroccl-matmul) on every GPU, one
# process per GPU (`ferroccl run`), against the baselines of the same run
# (bench/gpu/matmul_torch.py under torchrun: NCCL's all-gather then cuBLAS, cuBLAS then
# NCCL's reduce-scatter, cuBLAS alone on the gathered shape). Shapes: the seed's (every
# shard M = 1024, K = N = 4096), M = 256, 512, 4096 per shard, and K = N = 8192.
# Writes OUTDIR/raw/matmul/run-DATE.txt and OUTDIR/collective_matmul.json.
set -euo pipefail
usage="usage: $0 FERROCCL FERROCCL_MATMUL OUTDIR
  FERROCCL: target/release/ferroccl (the launcher); FERROCCL_MATMUL: target/release/ferroccl-matmul
  env: NGPUS (default: every GPU) DTYPE (default f16) ITERS (default 20) SM_COPIES (CTAs of the SM-copy design, default 16)
       SHAPES (default the seed's and the issue's)"
[ $# -eq 3 ] || { echo "$usage" >&2; exit 2; }
launcher=$(realpath "$1") ours=$(realpath "$2")
source "$(dirname "$0")/env.sh"
open_results "$3" matmul
f=$out/$rawdir/run-$day.txt
ngpus=${NGPUS:-$(nvidia-smi -L | wc -l)}
dtype=${DTYPE:-f16} iters=${ITERS:-20}
shapes=${SHAPES:-"1024,4096,4096 256,4096,4096 512,4096,4096 4096,4096,4096 1024,8192,8192"}
# One process per GPU; on one GPU, two ranks of one process share it (the logic and the
# results, not a speed to compare: the baselines then run one rank, no communication).
if [ "$ngpus" = 1 ]; then runner=("$ours" --pes 2); else runner=("$launcher" run -n "$ngpus" "$ours"); fi
for shape in $shapes; do
  IFS=, read -r m k n <<< "$shape"
  for c in all-gather all-gather-both reduce-scatter; do
    step "ours $c m=$m k=$k n=$n, $ngpus processes" >> "$f"
    timeout 300 "${runner[@]}" --collective "$c" --dtype "$dtype" -m "$m" -k "$k" -n "$n" --iters "$iters" --gemm-alone >> "$f" 2>&1 || echo "exit status $?" >> "$f"
    # The second design: copies by SMs (a kernel of SM_COPIES CTAs) instead of the copy engines.
    step "ours $c m=$m k=$k n=$n, $ngpus processes, sm copies" >> "$f"
    timeout 300 "${runner[@]}" --collective "$c" --dtype "$dtype" -m "$m" -k "$k" -n "$n" --iters "$iters" --sm-copies "${SM_COPIES:-16}" >> "$f" 2>&1 || echo "exit status $?" >> "$f"
  done
done
torchrun=/opt/torch/.venv/bin/torchrun
step "baseline matmul_torch.py, $ngpus processes" >> "$f"
timeout 600 "$torchrun" --nproc-per-node "$ngpus" "$repo/bench/gpu/matmul_torch.py" "$dtype" "$iters" 5 $shapes >> "$f" 2>&1 || echo "exit status $?" >> "$f"
python3 - "$f" "$out/collective_matmul.json" "$(device_line)" "$(date -u +%FT%TZ)" "$(build_of "$ours")" "bench/results/$rawdir/run-$day.txt" "$ngpus" "$dtype" <<'PY'
import json, sys
raw, dest, device, date, build, rawpath, ngpus, dtype = sys.argv[1:]
ours, base = {}, {}
for line in open(raw, errors="replace"):
    line = line.strip()
    if not line.startswith("{"):
        continue
    row = json.loads(line)
    key = (row["m"], row["k"], row["n"])
    if "baseline" in row:
        base[key] = row
    else:
        # The slowest rank's time is the call's.
        mine = (row["collective"], row["copies"]) + key
        kept = ours.get(mine)
        if kept is None or row["time_us"] > kept["time_us"]:
            ours[mine] = row
rows = []
for (c, copies, m, k, n), row in sorted(ours.items()):
    b = base.get((m, k, n), {})
    against = b.get("gemm_then_reduce_scatter_us" if c == "reducescatter" else "all_gather_then_gemm_us")
    rows.append({"collective": c, "copies": copies, "gpus": int(ngpus), "m": m, "k": k, "n": n, "time_us": row["time_us"], "tc_util": row["tc_util"],
                 "vs_nccl_cublas": against / row["time_us"] if against else None,
                 "vs_gemm_alone": row["time_us"] / b["gemm_alone_us"] if b.get("gemm_alone_us") else row.get("vs_gemm_alone"),
                 "nccl_cublas_us": against, "gemm_alone_us": b.get("gemm_alone_us"), "max_error_in_eps": row["max_error_in_eps"]})
json.dump({"measures": "ferroccl's collective matmuls (cuBLASLt GEMMs; the ring's copies by the copy engines, or by SMs) against NCCL + cuBLAS and cuBLAS alone, one process per GPU",
           "command": f"bash bench/gpu/matmul.sh target/release/ferroccl target/release/ferroccl-matmul OUTDIR (NGPUS={ngpus} DTYPE={dtype})",
           "device": device, "date": date, "build": build, "raw": [rawpath], "script": "bench/gpu/matmul.sh",
           "baseline": "torch.distributed on NCCL (NCCL_NVLS_ENABLE=0) + torch.matmul, same GPUs, same run",
           "rows": rows}, open(dest, "w"), indent=2)
PY
step "device: $(device_line)"
step end
