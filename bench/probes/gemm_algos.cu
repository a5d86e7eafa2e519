// What cuBLASLt's algorithm choice is worth for the collective matmuls' GEMMs, measured apart
// from ferroccl (bench/probes/README.md): for each shape, every algorithm the heuristic offers
// (up to 16) timed on the same operands, against the heuristic's first (what a plain call
// takes), and whether each algorithm's result is bit for bit the first's.
//
// The GEMMs are host-shim's (matmul/blas.rs): row-major C (rows x n) = A (rows x k) x B
// (k x n) [+ C], f16 or bf16 operands, f32 compute, computed column-major as
// C^T = B^T x A^T; workspace 32 MiB.
// Build: nvcc -O2 -arch=sm_90 gemm_algos.cu -lcublasLt -o gemm_algos
// Run:   gemm_algos [f16|bf16] ROWS,K,N[,acc] ...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cublasLt.h>
#include <cuda_runtime.h>

#include "check.h"

static const size_t kWorkspace = 32u << 20;
static const int kCandidates = 16;
static const int kWarmup = 5, kIters = 30, kRounds = 5;

// Fills n 16-bit elements with small values (f16 and bf16 alike: the top 9 bits set an
// exponent near 1, the rest varies), so that sums stay finite.
__global__ void fill(uint16_t* p, size_t n, uint32_t seed, int bf16) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = bf16 ? (uint16_t)(0x3e80 | (h & 0x7f) | ((h >> 8) & 1) << 15) : (uint16_t)(0x3400 | (h & 0x3ff) | ((h >> 12) & 1) << 15);
  }
}

struct Shape {
  long rows, k, n;
  bool acc;
};

static float time_algo(cublasLtHandle_t lt, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t la,
                       cublasLtMatrixLayout_t lc, const cublasLtMatmulAlgo_t* algo, const void* a, const void* b, void* c,
                       void* ws, float beta, cudaStream_t s, cudaEvent_t e0, cudaEvent_t e1) {
  float alpha = 1.f;
  auto run = [&] { return cublasLtMatmul(lt, desc, &alpha, b, lb, a, la, &beta, c, lc, c, lc, algo, ws, kWorkspace, s); };
  for (int i = 0; i < kWarmup; i++) CK(run());
  std::vector<float> rounds;
  for (int r = 0; r < kRounds; r++) {
    CK(cudaEventRecord(e0, s));
    for (int i = 0; i < kIters; i++) CK(run());
    CK(cudaEventRecord(e1, s));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    rounds.push_back(ms * 1000.f / kIters);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[kRounds / 2];
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s f16|bf16 ROWS,K,N[,acc] ...\n", argv[0]);
    return 2;
  }
  int bf16 = strcmp(argv[1], "bf16") == 0;
  cudaDataType_t dt = bf16 ? CUDA_R_16BF : CUDA_R_16F;
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  void* ws;
  CK(cudaMalloc(&ws, kWorkspace));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("# %s, %d SMs; cuBLASLt %zu; %s; median of %d rounds of %d calls\n", prop.name, prop.multiProcessorCount,
         cublasLtGetVersion(), argv[1], kRounds, kIters);
  for (int i = 2; i < argc; i++) {
    Shape sh{};
    char acc[8] = {0};
    if (sscanf(argv[i], "%ld,%ld,%ld,%7s", &sh.rows, &sh.k, &sh.n, acc) < 3) {
      fprintf(stderr, "bad shape %s\n", argv[i]);
      return 2;
    }
    sh.acc = strcmp(acc, "acc") == 0;
    size_t na = sh.rows * sh.k, nb = sh.k * sh.n, nc = sh.rows * sh.n;
    uint16_t *a, *b, *c, *init;
    CK(cudaMalloc(&a, na * 2));
    CK(cudaMalloc(&b, nb * 2));
    CK(cudaMalloc(&c, nc * 2));
    CK(cudaMalloc(&init, nc * 2));
    fill<<<1024, 256, 0, s>>>(a, na, 1, bf16);
    fill<<<1024, 256, 0, s>>>(b, nb, 2, bf16);
    fill<<<1024, 256, 0, s>>>(init, nc, 3, bf16);
    CK(cudaStreamSynchronize(s));

    cublasLtMatmulDesc_t desc;
    CK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t lb, la, lc;
    CK(cublasLtMatrixLayoutCreate(&lb, dt, sh.n, sh.k, sh.n));
    CK(cublasLtMatrixLayoutCreate(&la, dt, sh.k, sh.rows, sh.k));
    CK(cublasLtMatrixLayoutCreate(&lc, dt, sh.n, sh.rows, sh.n));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = kWorkspace;
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
    cublasLtMatmulHeuristicResult_t found[kCandidates];
    int count = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(lt, desc, lb, la, lc, lc, pref, kCandidates, found, &count));
    float beta = sh.acc ? 1.f : 0.f;
    double flops = 2.0 * sh.rows * sh.k * sh.n;
    float first = 0.f;
    int best = 0;
    float best_us = 1e30f;
    std::vector<uint16_t> ref(nc), got(nc);
    for (int j = 0; j < count; j++) {
      if (found[j].state != CUBLAS_STATUS_SUCCESS) continue;
      float us = time_algo(lt, desc, lb, la, lc, &found[j].algo, a, b, c, ws, beta, s, e0, e1);
      // One more call from the same starting C, for the bits.
      CK(cudaMemcpyAsync(c, init, nc * 2, cudaMemcpyDeviceToDevice, s));
      float alpha = 1.f;
      CK(cublasLtMatmul(lt, desc, &alpha, b, lb, a, la, &beta, c, lc, c, lc, &found[j].algo, ws, kWorkspace, s));
      CK(cudaMemcpyAsync(got.data(), c, nc * 2, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      if (j == 0) {
        first = us;
        ref = got;
      }
      int id = 0, tile = 0, stages = 0, splitk = 0;
      size_t w;
      cublasLtMatmulAlgoConfigGetAttribute(&found[j].algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof(id), &w);
      cublasLtMatmulAlgoConfigGetAttribute(&found[j].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &w);
      cublasLtMatmulAlgoConfigGetAttribute(&found[j].algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof(stages), &w);
      cublasLtMatmulAlgoConfigGetAttribute(&found[j].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof(splitk), &w);
      bool same = memcmp(ref.data(), got.data(), nc * 2) == 0;
      printf("%s rows=%ld k=%ld n=%ld%s algo %2d: id %d tile %d stages %d splitk %d ws %zu: %8.2f us %6.1f TFLOP/s %5.3f of the first%s\n",
             argv[1], sh.rows, sh.k, sh.n, sh.acc ? " acc" : "", j, id, tile, stages, splitk, found[j].workspaceSize, us,
             flops / us * 1e-6, us / first, same ? "" : ", other bits");
      if (us < best_us) {
        best_us = us;
        best = j;
      }
    }
    printf("summary %s rows=%ld k=%ld n=%ld%s: %d algorithms; first %.2f us, best %.2f us (algo %d) = %.3f of the first\n", argv[1],
           sh.rows, sh.k, sh.n, sh.acc ? " acc" : "", count, first, best_us, best, best_us / first);
    fflush(stdout);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lc);
    cublasLtMatmulDescDestroy(desc);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    cudaFree(init);
  }
  return 0;
}
