#!/usr/bin/env bash
# Thirty-sixth session, one H200, second try at Nsight Compute on the post kernel (the first,
# session36-ncu.sh, failed with the loop kernel on the GPU at the profiled launch): one rank,
# main's build, an 8-byte all_reduce (the general path's local copy on the post grid alone,
# which never needs the loop), 4000 calls back to back; ncu skips the first 3000 post
# launches, by when the idle loop (which sleeps after 1 ms without items) has left the GPU,
# and profiles one.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ncu2.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
gunzip -c .carry/ferroccl-m.gz > /tmp/ferroccl-m && chmod +x /tmp/ferroccl-m
echo "## m all_reduce 8 B, 1 rank ($(date -u +%FT%TZ))" | tee -a "$log"
timeout 100 $NCU --clock-control none --kernel-name ferroccl_mailbox_post --launch-skip 3000 --launch-count 1 \
  --section WarpStateStats --section SourceCounters --section LaunchStats --section SchedulerStats \
  -o $res/m-8 /tmp/ferroccl-m bench all_reduce -b 8 -e 8 -c 1 -n 4000 -w 5 --devices 0 --ranks 1 --timing back-to-back > $res/m-8.txt 2>&1
echo "rc $?" | tee -a "$log"
if [ -f $res/m-8.ncu-rep ]; then
  $NCU --import $res/m-8.ncu-rep --print-details all > $res/m-8-details.txt 2>&1
  $NCU --import $res/m-8.ncu-rep --page source --csv --print-source sass > $res/m-8-source.csv 2>&1
  gzip $res/m-8-source.csv
fi
ls -la $res | tee -a "$log"
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
cd $out && tar czf res.tgz res && rm -rf res
