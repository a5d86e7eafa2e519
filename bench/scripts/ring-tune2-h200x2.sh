#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2, one command: every configuration below runs all_reduce,
# all_gather and reduce_scatter from 64 MiB to 1 GiB against NCCL (measured by the same
# process, before ferroccl's loops start); the configuration with the best minimum ratio
# then runs nccl-tests' whole table (8 B to 1 GiB) against NCCL again, and its matrix.
# Run from the repository root with the release binary (built with --features nccl) in
# .carry/; results go to $OUT (at most 8 files: the device tool returns no more).
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/tune.txt"
# Fill the JIT cache for both modules (the plain one and the 128-register one for 512
# threads) at once; a filter that matches no case only loads them.
timeout 150 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 2 no-such-case > /tmp/jit-256.txt 2>&1 &
timeout 150 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 2 --threads 512 no-such-case > /tmp/jit-512.txt 2>&1 &
wait
configs=${CONFIGS:-"c32t256:--channels 32 --threads 256
c24t512:--channels 24 --threads 512
c28t512:--channels 28 --threads 512
c32t512:--channels 32 --threads 512"}
while IFS=: read -r name flags; do
  echo "## $name: $flags" | tee -a "$out/tune.txt"
  timeout 95 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 64M -e 1G -f 2 -c 0 -n 20 -w 5 \
    --devices 0,1 $flags --nccl --json "$out/tune-$name.json" 2>&1 | grep -v "^#  " | tee -a "$out/tune.txt"
done <<< "$configs"
best=$(python3 - "$out" <<'PY'
import json, glob, os, sys
best = None
for path in glob.glob(os.path.join(sys.argv[1], "tune-*.json")):
    j = json.load(open(path))
    score = min(j[k] for k in ("allreduce_busbw_vs_nccl_ge64M", "allgather_busbw_vs_nccl_ge64M", "reducescatter_busbw_vs_nccl_ge64M"))
    print(f"{os.path.basename(path)} min ratio {score:.3f}", file=sys.stderr)
    if best is None or score > best[0]:
        best = (score, os.path.basename(path)[5:-5])
print(best[1])
PY
)
flags=$(printf '%s\n' "$configs" | grep "^$best:" | cut -d: -f2)
echo "## best: $best ($flags): the whole table" | tee -a "$out/tune.txt"
# NCCL's own choices (algorithm, protocol, channels) for the record, in the same file.
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING timeout 180 ./.carry/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 0 -n 20 -w 5 \
  --devices 0,1 $flags --nccl --json "$out/ring.json" 2>&1 | tee "$out/ring.txt"
timeout 80 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 4 --step 65536 $(echo "$flags" | grep -o -- "--threads [0-9]*\|--direct") 2>&1 | tee "$out/coll-2ranks.txt"
# Where the channels' time goes in that configuration (copying, waiting for data, for credit).
timeout 90 ./.carry/ferroccl bench all_reduce all_gather -b 256M -e 1G -f 4 -c 0 -n 10 -w 3 \
  --devices 0,1 $flags --stats 2>&1 | grep -v "^#  " | tee -a "$out/tune.txt"
