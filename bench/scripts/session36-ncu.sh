#!/usr/bin/env bash
# Thirty-sixth session, one H200: Nsight Compute's warp stall reasons for the post grid's
# general path. One rank (a one-rank all_reduce runs the local copy on the post grid alone,
# through the general path's check, plan, part context and copy; its idle loop sleeps after
# 1 ms, which was meant to keep ncu's serialization of kernels from waiting on it), main's
# build (m) and h2; `--kernel-name ferroccl_mailbox_post`, a few launches, clocks left
# alone. It did not work: ncu could not prepare the kernel and the program hung to the
# timeout (results/session36.md §3). Kept as the record of what ran.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/ncu.txt
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
$NCU --version | tail -1 | tee -a "$log"
for b in ${BUILDS:-m h2}; do
  gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b
  for size in 8 4M; do
    echo "## $b all_reduce $size, 1 rank ($(date -u +%FT%TZ))" | tee -a "$log"
    timeout 240 $NCU --clock-control none --kernel-name ferroccl_mailbox_post --launch-skip 20 --launch-count 3 \
      --section WarpStateStats --section SourceCounters --section SchedulerStats --section InstructionStats --section LaunchStats --section SpeedOfLight --section MemoryWorkloadAnalysis \
      --print-details all -o $res/$b-$size \
      /tmp/ferroccl-$b bench all_reduce -b $size -e $size -c 1 -n 20 -w 5 --devices 0 --ranks 1 --timing back-to-back > $res/$b-$size.txt 2>&1
    echo "rc $?" | tee -a "$log"
    $NCU --import $res/$b-$size.ncu-rep --print-details all > $res/$b-$size-details.txt 2>&1
    $NCU --import $res/$b-$size.ncu-rep --page source --csv --print-source sass > $res/$b-$size-source.csv 2>&1
    ls -la $res/$b-$size* | tee -a "$log"
  done
done
echo "## end ($(date -u +%FT%TZ))" | tee -a "$log"
cd $out && tar czf res.tgz res && rm -rf res
