# Sourced by the scripts run on the GPU machines: the JIT cache next to the checkout (kept
# between calls on a warm machine), NCCL's library from the image on the loader's path
# with NVLink multicast off (never create a multicast object there), and $out, where the
# device tool collects results.
export CUDA_CACHE_PATH=$PWD/.nvcache CUDA_CACHE_MAXSIZE=4294967296 NCCL_NVLS_ENABLE=0
mkdir -p /tmp/nccl && ln -sf /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2 /tmp/nccl/libnccl.so
export LD_LIBRARY_PATH=/tmp/nccl:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp}
# Fills the JIT cache with the loop module for each thread count given (a matrix filter that
# matches no case only loads the modules), all at once.
warm_jit() {
  for t in "$@"; do
    timeout 170 ./.carry/ferroccl coll --devices 0,1 --ranks 2 --channels 2 --threads "$t" no-such-case > /dev/null 2>&1 &
  done
  wait
}
# Starts a session script's results: $res under $out, and $log in it, opened with the GPUs'
# nvidia-smi line; module loading eager (a persistent loop must not wait on a lazy load).
open_results() {
  export CUDA_MODULE_LOADING=EAGER
  res=$out/res; mkdir -p "$res"
  log=$res/${1:-log.txt}
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee "$log"
}
# Unpacks each named build B (.carry/ferroccl-B.gz) to /tmp/ferroccl-B.
unpack_builds() {
  for b in "$@"; do gunzip -c .carry/ferroccl-$b.gz > /tmp/ferroccl-$b && chmod +x /tmp/ferroccl-$b; done
}
