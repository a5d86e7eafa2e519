#!/usr/bin/env bash
# After a change to the work loop's start (channel election): the GPU self-tests, the
# work loop's benchmark, and the collective matrix with 2 ranks on one GPU (the
# hardware's placement) and 1 rank with channels placed one per TPC, on nvidia-h100-x1.
# Run from the repository root with the release binary in .carry/; results go to $OUT.
set -u
source "$(dirname "$0")/device-env.sh"
date -u +%FT%TZ | tee "$out/check.txt"
timeout 200 ./.carry/ferroccl test 2>&1 | tail -n 25 | tee -a "$out/check.txt"
timeout 120 ./.carry/ferroccl bench work_loop 2>&1 | tee -a "$out/check.txt"
timeout 120 ./.carry/ferroccl coll --devices 0 --ranks 2 --channels 4 --step 65536 2>&1 | tail -n 2 | tee -a "$out/check.txt"
timeout 120 ./.carry/ferroccl bench all_reduce all_gather -b 1M -e 64M -f 8 --devices 0 --ranks 1 --sms tpcs 2>&1 | tail -n 12 | tee -a "$out/check.txt"
date -u +%FT%TZ | tee -a "$out/check.txt"
