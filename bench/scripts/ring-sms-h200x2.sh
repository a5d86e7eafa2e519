#!/usr/bin/env bash
# Issue 5 on nvidia-h200-x2: which SMs give every channel the same copy rate, beyond the
# 24 even SMs 2..48. reduce_scatter and all_reduce at 1 GiB with per-channel statistics
# for each SM list (one line of "CHANNELS SM-LIST" each), into $OUT/$NAME.txt.
# Run from the repository root with the release binary in .carry/.
set -u
source "$(dirname "$0")/device-env.sh"
name=${NAME:-sms}
evens() { seq -s, "$1" 2 "$2"; }
date -u +%FT%TZ | tee "$out/$name.txt"
warm_jit 512
while read -r channels sms; do
  echo "## $channels channels on SMs $sms" | tee -a "$out/$name.txt"
  timeout 60 ./.carry/ferroccl bench reduce_scatter all_reduce -b 1G -e 1G -c 0 -n 10 -w 3 --devices 0,1 \
    --channels "$channels" --sms "$sms" --stats 2>&1 | grep -v "^#  *[(s]\|^# \(ferroccl on\|[0-9]* it\)" | tee -a "$out/$name.txt"
done <<EOT
24 $(evens 2 48)
24 $(evens 66 112)
32 $(evens 2 48),$(evens 66 80)
32 $(evens 16 46),$(evens 80 110)
32 $(evens 2 64)
32 $(seq -s, 2 1 33)
48 $(evens 2 96)
EOT
date -u +%FT%TZ | tee -a "$out/$name.txt"
