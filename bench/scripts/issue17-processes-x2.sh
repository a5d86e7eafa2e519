#!/usr/bin/env bash
# Issue 17 on two GPUs: PEs as processes (`ferroccl run`, the Unix-socket bootstrap, the
# heap exported and imported as POSIX descriptors), one PE per GPU, never two processes'
# kernels on one GPU. Seed 004's shift with the device API check, then the single-process
# form beside it for comparison. Run from the repository root with the release binaries
# `ferroccl` and `shift` in .carry/ (both embed the module: gzip them to stay under the
# carry limit, `gzip -k -9 target/release/{ferroccl,shift}` into .carry/, unpacked here).
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
log=$out/issue17-processes.txt
for b in ferroccl shift; do
  [ -x .carry/$b ] || gunzip -kf .carry/$b.gz
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$log"
date -u +%FT%TZ | tee -a "$log"
echo "## shift, 2 PEs as processes on devices 0 and 1" | tee -a "$log"
timeout 120 ./.carry/ferroccl run -n 2 --devices 0,1 --grace 20s ./.carry/shift --check-api 2>&1 | tee -a "$log"
echo "## a PE that leaves: PE 1 killed by its own timeout, PE 0 must fail, not hang" | tee -a "$log"
timeout 120 ./.carry/ferroccl run -n 2 --devices 0,1 --grace 20s -- sh -c 'if [ $FERROCCL_PE = 1 ]; then exit 7; fi; exec ./.carry/shift' 2>&1 | tee -a "$log"
echo "## shift, 2 PEs in one process (the single-process form)" | tee -a "$log"
timeout 120 ./.carry/shift --pes 2 --devices 0,1 --check-api 2>&1 | tee -a "$log"
date -u +%FT%TZ | tee -a "$log"
