#!/usr/bin/env bash
# Step-size and channel sweep of all_reduce (256 MiB and 1 GiB) on nvidia-h200-x2.
set -u
source "$(dirname "$0")/device-env.sh"
for cfg in "32 524288" "32 1048576" "32 262144" "24 524288" "24 1048576"; do
  set -- $cfg
  echo "## channels $1 step $2"
  timeout 60 ./.carry/ferroccl bench all_reduce -b 256M -e 1G -f 4 -c 0 -n 10 -w 3 \
    --devices 0,1 --channels "$1" --step "$2" 2>&1 | grep -E "^ +[0-9]"
done
