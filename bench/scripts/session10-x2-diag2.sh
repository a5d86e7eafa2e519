#!/usr/bin/env bash
# Two H200s (nvidia-h200-x2), 2026-11-26 (tenth session): a throwaway build with globaltimer
# stamps in the post grid (bench/results/raw/session10-h200x2/diag-preamble-2.patch, applied to main, never committed there),
# all_reduce 8 B - 64 KiB back to back and in graphs with --stats: where a small call's time goes.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
timeout 100 /tmp/ferroccl bench all_reduce -b 8 -e 64K -f 8 -c 1 -n 50 -w 5 --devices 0,1 --timing back-to-back,graph --stats 2>&1 | grep -v "placement\|spread\|no channel" > $OUT/diag2.txt
echo "## coll, 8 ranks on device 0, default communicator ($(date -u +%FT%TZ))" > $OUT/coll8.txt
timeout 420 /tmp/ferroccl coll --devices 0 --ranks 8 2>&1 | tail -n 3 >> $OUT/coll8.txt
date -u +%FT%TZ >> $OUT/coll8.txt
