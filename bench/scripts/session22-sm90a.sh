#!/usr/bin/env bash
# Twenty-second session (2026-11-27), two H200s (nvidia-h200-x2): the build whose embedded
# SASS is sm_90a (was sm_90) and which adds hardware NVLS's host half
# (.carry/ferroccl-90a.gz). The self-tests (with hardware_nvls_plan: the plan of a
# two-device team, which loads the kernel on both devices and asks for multicast support,
# creating no multicast object), the collective matrix on 2 ranks (devices 0 and 1,
# stream path), and all_reduce 8 B - 128 MiB against NCCL in the same process, with the
# previous build (.carry/ferroccl.gz, e585f0f, sm_90 SASS) in the same call.
# NCCL_NVLS_ENABLE=0; nothing here creates a multicast object.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/sm90a.txt
gunzip -c .carry/ferroccl-90a.gz > /tmp/new && chmod +x /tmp/new
gunzip -c .carry/ferroccl.gz > /tmp/old && chmod +x /tmp/old
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "self-tests, new build (FERROCCL_LOG=host_shim::module=debug shows which image loaded)"
FERROCCL_LOG=host_shim::module=debug timeout 170 /tmp/new test 2>&1 | tee $res/selftest.txt | grep -v "^\[" | tail -n 30 | tee -a "$log"
grep -m2 "loaded the" $res/selftest.txt | tee -a "$log"
step "coll, 2 ranks on devices 0,1, stream path, new build"
timeout 180 /tmp/new coll --devices 0,1 --ranks 2 --path stream 2>&1 | tail -n 2 | tee -a "$log"
for b in new old; do
  step "bench all_reduce 8 B - 128 MiB, $b build, NCCL in the same process"
  timeout 90 /tmp/$b bench all_reduce -b 8 -e 128M -f 8 -c 1 -n 20 -w 5 --devices 0,1 --nccl --json $res/bench-$b.json > $res/bench-$b.txt 2>&1
  echo "rc $?" | tee -a "$log"
done
step end
cd $out && tar czf res.tgz res
# Then, after the default NvlsTeamConfig went to 384 threads (the first run's
# hardware_nvls_plan refused 512: "hardware NVLS runs at most 384 threads per CTA on this
# device"), one call on the same kind (res/nvls-plan.txt):
#   ferroccl test multicast; ferroccl test hardware_nvls; ferroccl test -d 1 hardware_nvls
