#!/usr/bin/env bash
# One H200 (nvidia-h200), 2026-11-26 (twelfth session): shift --check-api's stream-ordered
# stage (the heap's work loops) hung on four H200s; here with deadlines per stage and the
# host's debug log, 2 and 3 PEs on one GPU.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
gunzip -c .carry/shift.gz > /tmp/shift && chmod +x /tmp/shift
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
for pes in 2 3; do
  echo "## shift --check-api --pes $pes on device 0 ($(date -u +%FT%TZ))"
  FERROCCL_LOG=debug timeout 60 /tmp/shift --pes $pes --devices $(printf '0,%.0s' $(seq $pes) | sed 's/,$//') --check-api 2>&1 | tail -n 40
  echo "rc=$?"
done
# Second call, with the module's stack reservation (Module::load): the same, then the GPU
# self-tests.
if [ "${SELFTEST:-0}" = 1 ]; then
  gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
  echo "## ferroccl test ($(date -u +%FT%TZ))"
  FERROCCL_LOG=debug timeout 200 /tmp/ferroccl test 2>&1 | grep -v "^\[.*DEBUG host_shim::work\]" | tail -n 30
fi
