# Sourced by bench/gpu/*.sh: the environment every GPU run needs and the helpers that open
# OUTDIR and describe the machine, the build and the baseline. Not run on its own.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
results=(python3 "$here/results.py")
day=$(date -u +%F)

# Never create an NVLink multicast object: NCCL (the baseline) must not either.
export NCCL_NVLS_ENABLE=0
# A kernel loaded lazily beside a running persistent loop waits for that loop forever.
export CUDA_MODULE_LOADING=EAGER
# The JIT cache beside the checkout, kept between runs on one machine.
export CUDA_CACHE_PATH=${CUDA_CACHE_PATH:-$repo/.nvcache} CUDA_CACHE_MAXSIZE=${CUDA_CACHE_MAXSIZE:-4294967296}

# NCCL (the baseline, opened at run time as libnccl.so), cuBLAS (the footprint's GEMM,
# opened as libcublas.so) and cuBLASLt (the collective matmuls' GEMMs, opened as
# libcublasLt.so) from the image's Python packages, under the names the program looks
# for, in a folder of links put first on the loader's path. NVIDIA_LIBS, NCCL_LIB,
# CUBLAS_LIB and CUBLASLT_LIB override where they are.
nv=${NVIDIA_LIBS:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia}
libs=${TMPDIR:-/tmp}/ferroccl-libs
mkdir -p "$libs"
nccl_lib=${NCCL_LIB:-$(ls "$nv"/nccl/lib/libnccl.so.* 2>/dev/null | head -n 1 || true)}
cublas_lib=${CUBLAS_LIB:-$(ls "$nv"/*/lib/libcublas.so.* 2>/dev/null | head -n 1 || true)}
cublaslt_lib=${CUBLASLT_LIB:-$(ls "$nv"/*/lib/libcublasLt.so.* 2>/dev/null | head -n 1 || true)}
[ -z "$nccl_lib" ] || ln -sf "$nccl_lib" "$libs/libnccl.so"
[ -z "$cublas_lib" ] || ln -sf "$cublas_lib" "$libs/libcublas.so"
[ -z "$cublaslt_lib" ] || ln -sf "$cublaslt_lib" "$libs/libcublasLt.so"
export LD_LIBRARY_PATH=$libs${cublas_lib:+:$(dirname "$cublas_lib")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# open_results OUTDIR BENCHMARK: OUTDIR/raw/BENCHMARK/ for the raw output and its log
# ($log), opened with the GPUs' nvidia-smi lines. Copy OUTDIR/*.json to bench/results/ and
# OUTDIR/raw/* to bench/results/raw/: every `raw` field already names that place.
open_results() {
  out=$1
  rawdir=raw/$2
  mkdir -p "$out/$rawdir"
  log=$out/$rawdir/log-$day.txt
  echo "## $(basename "$0") ($(date -u +%FT%TZ))" | tee -a "$log"
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader | tee -a "$log"
}

step() { echo "## $* ($(date -u +%FT%TZ))" | tee -a "$log"; }

# The machine's line: DEVICE if set (the line the machine was lent with), else what this
# host says of itself.
device_line() {
  if [ -n "${DEVICE:-}" ]; then echo "$DEVICE"; return; fi
  local gpus
  gpus=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c |
    awk -F, '{sub(/^ +/, ""); n=$1+0; sub(/^[0-9]+ /, "", $1); printf "%d x %s, driver%s", n, $1, $2}')
  echo "$gpus; $(nproc) CPU cores, $(free -g | awk '/^Mem:/ {print $2}') GiB memory"
}

# The build: BUILD if set (say the commit the binary was built from), else the binary's
# hash and the checkout's commit.
build_of() {
  if [ -n "${BUILD:-}" ]; then echo "$BUILD"; return; fi
  echo "binary $(basename "$1") sha256 $(sha256sum "$1" | cut -c1-12); checkout at $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown) (set BUILD to the binary's commit)"
}

# The NCCL baseline as the benchmark printed it.
nccl_baseline() {
  local line
  line=$(grep -m1 '^# baseline:' "$1" | sed 's/^# baseline: //' || true)
  echo "${line:-NCCL} on the same GPUs in the same run, one rank per process as ferroccl's (or all in one process with PROCS=0), set up before ferroccl's loops start; each row the median of its rounds, NCCL and ferroccl taking turns round by round (graph rows: NCCL's timed before ferroccl's loops start), NCCL's fastest mode per row and placement (plain buffers or symmetric windows); NCCL_NVLS_ENABLE=0, no multicast object"
}

# ndevices 0,1,2: how many devices a list names.
ndevices() { local IFS=,; set -- $1; echo $#; }

# read_builds NAME=BINARY...: for the scripts that compare builds, bins[NAME] the binary's
# full path, and order and names the NAMEs as given (order rotates by round, names stays).
read_builds() {
  declare -gA bins
  order=()
  local nb
  for nb in "$@"; do bins[${nb%%=*}]=$(realpath "${nb#*=}"); order+=("${nb%%=*}"); done
  names=("${order[@]}")
}
