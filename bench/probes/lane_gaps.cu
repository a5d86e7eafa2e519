// What a wait or a signal between two GEMMs costs a stream, measured apart from ferroccl
// (bench/probes/README.md): the collective matmuls' compute lane runs GEMM, wait, GEMM,
// signal; each way of waiting or signalling is timed as GEMM + X repeated on one stream
// (the GPU kept busy: calls queued before the first event), against GEMM alone. The flags
// are set beforehand, so a wait costs only its own passage. X is:
//   kernel_wait   a one-thread kernel that polls a device word (acquire, system scope)
//                 until it is at least a value (as ferroccl_matmul_wait, without its abort
//                 flag and spin budget)
//   kernel_signal a one-thread kernel: fence.acq_rel.sys, then a relaxed store
//   memop_wait    cuStreamWaitValue64 (>=) on the word
//   memop_write   cuStreamWriteValue64 to the word (the default: after a memory barrier)
//   event_wait    cuStreamWaitEvent on an event another stream recorded (complete)
//   event_record  cuEventRecord on this stream
// and, apart from the GEMMs' stream, what waiting beside them costs (GEMM alone on its
// stream while another stream of the highest priority waits through the timed steps, as
// the collective matmuls' watch and copy lanes wait while the compute lane's GEMMs run):
//   beside_kernel a one-thread kernel polling a host-mapped word (one resident CTA)
//   beside_memop  cuStreamWaitValue64 on the same word (no SM)
// Env: SPINNERS (default 1): beside_kernel's CTAs (one-thread each, as many side lanes
// waiting at once); SM_TARGET: the GEMM planned for that many SMs
// (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, as when a concurrent stream takes some).
// Build: nvcc -O2 -arch=sm_90 lane_gaps.cu -lcuda -lcublasLt -o lane_gaps
// Run:   lane_gaps [ROWS K N]   (default 1024 4096 4096, f16)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include "check.h"

static const size_t kWorkspace = 32u << 20;
static const int kIters = 50, kRounds = 7;

__global__ void wait_kernel(const unsigned long long* word, unsigned long long at_least) {
  unsigned long long v;
  do {
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(word) : "memory");
  } while (v < at_least);
}

__global__ void signal_kernel(unsigned long long* word, unsigned long long value) {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(word), "l"(value) : "memory");
}

enum Mode { kGemm, kKernelWait, kKernelSignal, kMemopWait, kMemopWrite, kEventWait, kEventRecord, kBesideKernel, kBesideMemop, kModes };
static const char* kNames[] = {"gemm", "kernel_wait", "kernel_signal", "memop_wait", "memop_write", "event_wait", "event_record", "beside_kernel", "beside_memop"};

struct Gemm {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t lb, la, lc;
  cublasLtMatmulAlgo_t algo;
  void *a, *b, *c, *ws;
  void run(cudaStream_t s) {
    float alpha = 1.f, beta = 0.f;
    CK(cublasLtMatmul(lt, desc, &alpha, b, lb, a, la, &beta, c, lc, c, lc, &algo, ws, kWorkspace, s));
  }
};

int main(int argc, char** argv) {
  long rows = argc > 3 ? atol(argv[1]) : 1024, k = argc > 3 ? atol(argv[2]) : 4096, n = argc > 3 ? atol(argv[3]) : 4096;
  CK(cuInit(0));
  CK(cudaSetDevice(0));
  Gemm g{};
  CK(cublasLtCreate(&g.lt));
  CK(cudaMalloc(&g.a, rows * k * 2));
  CK(cudaMalloc(&g.b, k * n * 2));
  CK(cudaMalloc(&g.c, rows * n * 2));
  CK(cudaMalloc(&g.ws, kWorkspace));
  CK(cudaMemset(g.a, 0x11, rows * k * 2));
  CK(cudaMemset(g.b, 0x11, k * n * 2));
  CK(cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CK(cublasLtMatrixLayoutCreate(&g.lb, CUDA_R_16F, n, k, n));
  CK(cublasLtMatrixLayoutCreate(&g.la, CUDA_R_16F, k, rows, k));
  CK(cublasLtMatrixLayoutCreate(&g.lc, CUDA_R_16F, n, rows, n));
  const char* sm_target = getenv("SM_TARGET");
  int32_t target = sm_target ? atoi(sm_target) : 0;
  if (target > 0) CK(cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &target, sizeof(target)));
  const char* spinners_env = getenv("SPINNERS");
  int spinners = spinners_env ? atoi(spinners_env) : 1;
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wsb = kWorkspace;
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
  cublasLtMatmulHeuristicResult_t found;
  int count = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(g.lt, g.desc, g.lb, g.la, g.lc, g.lc, pref, 1, &found, &count));
  g.algo = found.algo;

  unsigned long long* word;
  CK(cudaMalloc(&word, 8));
  unsigned long long one = 1;
  CK(cudaMemcpy(word, &one, 8, cudaMemcpyHostToDevice));
  cudaStream_t s, other, side;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  int least, greatest;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CK(cudaStreamCreateWithPriority(&side, cudaStreamNonBlocking, greatest));
  // The word the side stream waits for: host-mapped, set by the host after each timed run.
  unsigned long long* released;
  CK(cudaHostAlloc(&released, 8, cudaHostAllocMapped));
  *(volatile unsigned long long*)released = 0;
  unsigned long long* released_dev;
  CK(cudaHostGetDevicePointer(&released_dev, released, 0));
  cudaEvent_t done, e0, e1, mark;
  CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming));
  CK(cudaEventRecord(done, other));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CUdeviceptr w = (CUdeviceptr)word;

  auto step = [&](int mode) {
    g.run(s);
    switch (mode) {
      case kKernelWait: wait_kernel<<<1, 1, 0, s>>>(word, 1); break;
      case kKernelSignal: signal_kernel<<<1, 1, 0, s>>>(word, 1); break;
      case kMemopWait: CK(cuStreamWaitValue64((CUstream)s, w, 1, CU_STREAM_WAIT_VALUE_GEQ)); break;
      case kMemopWrite: CK(cuStreamWriteValue64((CUstream)s, w, 1, CU_STREAM_WRITE_VALUE_DEFAULT)); break;
      case kEventWait: CK(cudaStreamWaitEvent(s, done, 0)); break;
      case kEventRecord: CK(cudaEventRecord(mark, s)); break;
      default: break;
    }
  };
  // Starts the side stream's wait for `released` to reach `value`, resident before the
  // GEMMs are queued.
  auto wait_beside = [&](int mode, unsigned long long value) {
    if (mode == kBesideKernel) wait_kernel<<<spinners, 1, 0, side>>>(released_dev, value);
    if (mode == kBesideMemop) CK(cuStreamWaitValue64((CUstream)side, (CUdeviceptr)released_dev, value, CU_STREAM_WAIT_VALUE_GEQ));
    CK(cudaGetLastError());
  };
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("# %s; GEMM %ld x %ld x %ld f16 (SM target %d, 0: all); %d spinner(s) beside; per step: median of %d rounds of %d steps, modes interleaved\n", prop.name, rows, k, n, target, spinners, kRounds, kIters);
  std::vector<std::vector<float>> us(kModes);
  for (int r = 0; r < kRounds; r++) {
    for (int mode = 0; mode < kModes; mode++) {
      unsigned long long value = (unsigned long long)r * kModes + mode + 1;
      wait_beside(mode, value);
      for (int i = 0; i < 5; i++) step(mode);
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < kIters; i++) step(mode);
      CK(cudaEventRecord(e1, s));
      CK(cudaEventSynchronize(e1));
      *(volatile unsigned long long*)released = value;
      CK(cudaStreamSynchronize(side));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      us[mode].push_back(ms * 1000.f / kIters);
    }
  }
  float base = 0;
  for (int mode = 0; mode < kModes; mode++) {
    std::sort(us[mode].begin(), us[mode].end());
    float med = us[mode][kRounds / 2];
    if (mode == kGemm) base = med;
    printf("%-14s %8.2f us a step (min %.2f, max %.2f); X costs %+.2f us\n", kNames[mode], med, us[mode].front(), us[mode].back(), med - base);
  }
  return 0;
}
