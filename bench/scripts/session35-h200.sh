#!/usr/bin/env bash
# Thirty-fifth session, one H200, main's build (.carry/ferroccl-m.gz, shift-m.gz,
# jacobi-m.gz): issue 17 on this build. Self-tests (comm_on_heap_zero_copy among them);
# the matrix on a communicator built on a symmetric heap (`--heap`), 2 and 4 ranks on one
# GPU, one-shot (push form) and two-shot (heap inputs read in place) forced and automatic;
# the same one-shot calls timed on and off the heap in one process each; shift and Jacobi
# with several PEs in one process.
set -uo pipefail
source bench/scripts/device-env.sh
export CUDA_MODULE_LOADING=EAGER
res=$out/res; mkdir -p $res
log=$res/log.txt
for b in ferroccl shift jacobi; do gunzip -c .carry/$b-m.gz > /tmp/$b && chmod +x /tmp/$b; done
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
step() { echo "## $1 ($(date -u +%FT%TZ))" | tee -a "$log"; }
step "test"
timeout 150 /tmp/ferroccl test > $res/test.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 2 $res/test.txt | tee -a "$log"
run() {
  step "$1: coll ${*:2}"
  timeout 100 /tmp/ferroccl coll "${@:2}" > "$res/$1.txt" 2>&1; echo "rc $?" | tee -a "$log"; tail -n 1 "$res/$1.txt" | tee -a "$log"
}
run heap-2-one-shot --devices 0 --ranks 2 --path stream --heap --algo one-shot
run heap-2-two-shot --devices 0 --ranks 2 --path stream --heap --algo two-shot
run heap-2-auto --devices 0 --ranks 2 --path stream --heap
run heap-4-one-shot --devices 0 --ranks 4 --path stream --heap --algo one-shot
run heap-4-auto --devices 0 --ranks 4 --path stream --heap --big 262144
for h in "" --heap; do
  step "bench one-shot ${h:-off the heap}, 2 ranks on device 0, 32 channels"
  timeout 100 /tmp/ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 4M -f 8 -c 1 -n 50 -w 10 --devices 0 --ranks 2 --channels 32 --algo one-shot $h --timing back-to-back,graph --latency-maxbytes 4M > "$res/bench-one-shot${h:+-heap}.txt" 2>&1
  echo "rc $?" | tee -a "$log"; grep -v "^#" "$res/bench-one-shot${h:+-heap}.txt" >> "$log"
done
step "shift --pes 4 --devices 0,0,0,0 --check-api"
timeout 60 /tmp/shift --pes 4 --devices 0,0,0,0 --check-api > $res/shift.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 6 $res/shift.txt | tee -a "$log"
step "jacobi --pes 2 --devices 0,0"
timeout 120 /tmp/jacobi --pes 2 --devices 0,0 > $res/jacobi.txt 2>&1; echo "rc $?" | tee -a "$log"; tail -n 4 $res/jacobi.txt | tee -a "$log"
step end
cd $out && tar czf res.tgz res && rm -rf res
