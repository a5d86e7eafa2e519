#!/usr/bin/env bash
# Twenty-sixth session, nvidia-h200-x2: how the host waits for a stream, A/B/C in one call,
# on the call + synchronize timing of the small collectives (NCCL in the same process
# waits with cuStreamSynchronize). .carry/ferroccl-wait.gz is main plus an experiment
# (raw/session26/wait-exp.diff): FERROCCL_WAIT=query (host_shim::stream::wait as merged:
# cuStreamQuery, yield between polls), spin (cuStreamQuery, a spin hint between polls),
# sync (cuStreamSynchronize). Three rounds, modes alternating.
# NCCL_NVLS_ENABLE=0; nothing creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
gunzip -c .carry/ferroccl-wait.gz > /tmp/f && chmod +x /tmp/f
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
for round in 1 2 3; do
  for mode in query spin sync; do
    echo "## round $round, FERROCCL_WAIT=$mode ($(date -u +%FT%TZ))" | tee -a "$log"
    FERROCCL_WAIT=$mode timeout 120 /tmp/f bench all_reduce all_gather reduce_scatter -b 8 -e 256K -f 64 -c 1 -n 50 -w 5 --devices 0,1 --nccl --timing sync --json $res/sync-$mode-$round.json > $res/sync-$mode-$round.txt 2>&1; echo "rc $?" | tee -a "$log"
    python3 - $res/sync-$mode-$round.json <<'PY' | tee -a "$log"
import json,sys
d=json.load(open(sys.argv[1]))
print("small_sync_time_vs_nccl_le256K %.3f" % d["small_sync_time_vs_nccl_le256K"])
for r in d["rows"]:
    print("  %-14s %7d  ours %6.2f %6.2f  nccl %6.2f %6.2f" % (r["function"], r["size"], r["oop"]["time_us"], r["ip"]["time_us"], r["baseline_oop"]["time_us"], r["baseline_ip"]["time_us"]))
PY
  done
done
