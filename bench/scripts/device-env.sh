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
