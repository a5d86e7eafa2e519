#!/usr/bin/env bash
# Builds of the collective matmul example (ferroccl-matmul) compared on one machine:
# ROUNDS rounds, the builds' order rotated each round, each round running every case with
# every build (two ranks sharing the GPU on one GPU, else one process per GPU through
# LAUNCHER, as bench/gpu/matmul.sh runs them), then per case each build's median time
# over the rounds and its ratio to the first build's.
# Writes OUTDIR/raw/matmul/ab-DATE.txt (every run's rank-0 line, then the table).
set -euo pipefail
usage="usage: $0 OUTDIR NAME=FERROCCL_MATMUL NAME=FERROCCL_MATMUL [NAME=FERROCCL_MATMUL...]
  env: ROUNDS (3) ITERS (20) NGPUS (default: every GPU) LAUNCHER (target/release/ferroccl, for NGPUS > 1)
       CASES (collective,m,pieces ...; K = N = 4096; default: the seed's shard and 4096 rows,
       all-gather and reduce-scatter in one and two pieces)"
[ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
source "$(dirname "$0")/env.sh"
open_results "$1" matmul
shift
f=$out/$rawdir/ab-$day.txt
ngpus=${NGPUS:-$(nvidia-smi -L | wc -l)}
cases=${CASES:-"all-gather,1024,1 reduce-scatter,1024,1 reduce-scatter,1024,2 all-gather,4096,1 reduce-scatter,4096,1 reduce-scatter,4096,2"}
export FERROCCL_TIMEOUT_MS=${FERROCCL_TIMEOUT_MS:-20000}
read_builds "$@"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for b in "${order[@]}"; do
    if [ "$ngpus" = 1 ]; then runner=("${bins[$b]}" --pes 2); else runner=("$(realpath "${LAUNCHER:?LAUNCHER for NGPUS > 1}")" run -n "$ngpus" "${bins[$b]}"); fi
    for case in $cases; do
      IFS=, read -r c m p <<< "$case"
      pieces=()
      [ "$c" != reduce-scatter ] || pieces=(--pieces "$p")
      echo "## $b round $round $c m=$m pieces=$p" >> "$f"
      timeout 120 "${runner[@]}" --collective "$c" --dtype f16 -m "$m" -k 4096 -n 4096 --iters "${ITERS:-20}" "${pieces[@]}" 2>&1 | grep '"rank":0' >> "$f" || echo "exit status $?" >> "$f"
    done
  done
  order=("${order[@]:1}" "${order[0]}")
done
python3 - "$f" "${names[@]}" <<'EOF' | tee -a "$f" | tee -a "$log"
import json, statistics, sys
path, names = sys.argv[1], sys.argv[2:]
runs, key = {}, None
for line in open(path):
    if line.startswith("## "):
        build, _, _, c, m, p = line[3:].split()
        key = (c, m, p)
        runs.setdefault(key, {}).setdefault(build, [])
    elif line.startswith("{") and key:
        runs[key][build].append(json.loads(line)["time_us"])
print("# median µs per call over rounds (ratio to " + names[0] + ")")
print("case".ljust(40) + "".join(n.rjust(22) for n in names))
for (c, m, p), by in runs.items():
    first = statistics.median(by[names[0]]) if by.get(names[0]) else None
    cells = []
    for n in names:
        if not by.get(n):
            cells.append("failed".rjust(22))
            continue
        us = statistics.median(by[n])
        cells.append((f"{us:.1f}" + (f" ({us / first:.3f})" if first else "")).rjust(22))
    print(f"{c} {m} {p}".ljust(40) + "".join(cells))
EOF
step "device: $(device_line)"
step end
