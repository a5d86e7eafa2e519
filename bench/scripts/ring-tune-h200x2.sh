#!/usr/bin/env bash
# Channel-count sweep of the ring (all_reduce, all_gather, 256 MiB - 1 GiB) on
# nvidia-h200-x2; no NCCL (its figures come from ring-h200x2.sh's run).
set -u
source "$(dirname "$0")/device-env.sh"
for ch in ${CHANNELS:-16 32 48 64}; do
  echo "## channels $ch"
  timeout 120 ./.carry/ferroccl bench all_reduce all_gather -b 256M -e 1G -f 4 -c 0 -n 10 -w 3 \
    --devices 0,1 --channels "$ch" 2>&1 | grep -v "^#  "
done
