set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
gunzip -c .carry/ferroccl.gz > /tmp/ferroccl && chmod +x /tmp/ferroccl
timeout 200 /tmp/ferroccl bench all_reduce all_gather -b 8 -e 64K -f 8 -c 1 -n 50 -w 5 --devices 0,1 --timing back-to-back,graph --stats 2>&1 | grep -v "placement\|spread\|no channel" > $OUT/diag.txt
