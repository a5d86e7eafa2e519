#!/usr/bin/env bash
# Two GPUs: seed 002's Jacobi as 2 PEs in 2 processes (`ferroccl run`), twice, after the
# heap's zeroing was made to finish before the bootstrap goes on (host-shim/src/shmem/
# vmm.rs). Written 2026-11-25, not yet run (the session's device time ran out). Run from
# the repository root with the release binaries ferroccl and jacobi gzipped in .carry/.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
for b in ferroccl jacobi; do gunzip -c .carry/$b.gz > /tmp/$b && chmod +x /tmp/$b; done
for i in 1 2; do
echo "## jacobi, 2 PEs as processes on devices 0 and 1, run $i ($(date -u +%FT%TZ))"
timeout 40 /tmp/ferroccl run -n 2 --devices 0,1 --grace 5s /tmp/jacobi 2>&1 | grep -v "^ " | tail -n 8
done
echo "## end ($(date -u +%FT%TZ))"
