#!/usr/bin/env bash
# Fifteenth session (2026-11-26): --stats of a probe build (.carry/ferroccl-probe.gz), not
# merged. Probe 1 (on 965ca1c) reused statistics fields for three more globaltimer stamps
# in the lean path: dispatch_ns/mailbox_items = CTA start to after `lean_item`, copy_ns =
# to `lean_collective`'s start, busy_ns = to after its first barrier, exchange_ns = from
# there to the end. Probe 2 (on 36d4afa) ran `lean_item` three times in a row on CTA 1
# and stamped each (dispatch_ns, busy_ns, copy_ns). The sed below prints them as
# copy% / busy / exch / lean_item / span.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res; log=$res/probe.txt
gunzip -c .carry/ferroccl-probe.gz > /tmp/probe && chmod +x /tmp/probe
for f in all_reduce reduce_scatter all_gather; do for s in 8 512 64K; do for t in graph; do
  echo "## $f $s $t" >> $log
  timeout 60 /tmp/probe bench $f -b $s -e $s -c 1 -n 50 -w 10 --devices 0,1 --timing $t --latency-maxbytes 1M --stats 2>&1 | grep -E "^ +[0-9]+ |channels:" | sed "s/.*copying \([0-9]*\)%.*; \([0-9.]*\) us busy per collective per channel (\([0-9.]*\) us of it.*taken \([0-9.]*\) us.*, \([0-9.]*\) us each.*/copy%=\1 busy=\2 exch=\3 lean_item=\4 span=\5/" | cut -c1-120 >> $log
done; done; done
