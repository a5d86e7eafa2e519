// Which driver calls wait for a running kernel of their context: one operation per run
// (argv[1]), made on the host while a one-warp kernel spins on another stream (until a
// host-mapped flag is set, or 2 s pass). The operation's host time says it: about 2000 ms
// means it waited for the spinner's end. What ferroccl's docs say of allocations, frees and
// kernel loads beside a persistent loop rests on this (run it with CUDA_MODULE_LOADING=EAGER
// and =LAZY: lazy loading makes a kernel's first use load it).
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check.h"

constexpr unsigned long long SPIN_NS = 2000000000ull;

__global__ void spin(volatile unsigned* flag, unsigned long long budget_ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (*flag == 0 && now - start < budget_ns);
}

// First launched beside the spinner (its first use: loaded then where loading is lazy).
__global__ void touch(int* p) { p[0] = 1; }

static const char* NOOP_PTX =
    ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry noop()\n{\n ret;\n}\n";

static double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: driver_waits OPERATION\n");
    return 2;
  }
  const std::string op = argv[1];
  CK(cudaSetDevice(0));
  CK(cudaFree(nullptr));
  CUcontext ctx;
  CK(cuCtxGetCurrent(&ctx));
  unsigned* flag;
  CK(cudaHostAlloc(&flag, sizeof(unsigned), cudaHostAllocMapped));
  *flag = 0;
  CUstream spinner, other;
  CK(cuStreamCreate(&spinner, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CUmemoryPool pool;
  CK(cuDeviceGetDefaultMemPool(&pool, 0));
  unsigned long long keep = ~0ull;
  CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));

  // What the operation needs, made before the spinner starts.
  CUdeviceptr before = 0, pooled = 0;
  CK(cuMemAlloc(&before, 64 << 20));
  std::vector<char> pageable(64 << 20, 1);
  void* pinned = nullptr;
  CUmemGenericAllocationHandle vmm_handle = 0;
  CUdeviceptr vmm_va = 0;
  size_t gran = 0;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (op == "pool_reuse" || op == "free_async") {
    CK(cuMemAllocAsync(&pooled, 256 << 20, other));
    if (op == "pool_reuse") CK(cuMemFreeAsync(pooled, other));
    CK(cuStreamSynchronize(other));
  }
  if (op == "memset_warm") {
    CK(cuMemsetD8Async(before, 0, 1 << 20, other));
    CK(cuStreamSynchronize(other));
  }
  if (op == "free_host") CK(cuMemHostAlloc(&pinned, 64 << 20, 0));
  if (op == "vmm_unmap") {
    CK(cuMemCreate(&vmm_handle, gran, &prop, 0));
    CK(cuMemAddressReserve(&vmm_va, gran, 0, 0, 0));
    CK(cuMemMap(vmm_va, gran, 0, vmm_handle, 0));
  }

  unsigned* dflag;
  CK(cudaHostGetDevicePointer((void**)&dflag, flag, 0));
  spin<<<1, 32, 0, (cudaStream_t)spinner>>>(dflag, SPIN_NS);
  CK(cudaGetLastError());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (cuStreamQuery(spinner) != CUDA_ERROR_NOT_READY) {
    fprintf(stderr, "the spinner is not running\n");
    return 1;
  }

  auto t = std::chrono::steady_clock::now();
  CUdeviceptr d = 0;
  if (op == "malloc_small") {
    CK(cuMemAlloc(&d, 1 << 20));
  } else if (op == "malloc_large") {
    CK(cuMemAlloc(&d, 1ull << 30));
  } else if (op == "free") {
    CK(cuMemFree(before));
  } else if (op == "pool_grow") {
    CK(cuMemAllocAsync(&d, 256 << 20, other));
  } else if (op == "pool_reuse") {
    CK(cuMemAllocAsync(&d, 256 << 20, other));
  } else if (op == "free_async") {
    CK(cuMemFreeAsync(pooled, other));
  } else if (op == "memset_first" || op == "memset_warm") {
    CK(cuMemsetD8Async(before, 0, 1 << 20, other));
  } else if (op == "memcpy_pageable") {
    CK(cuMemcpyHtoDAsync(before, pageable.data(), pageable.size(), other));
  } else if (op == "host_alloc") {
    CK(cuMemHostAlloc(&pinned, 64 << 20, 0));
  } else if (op == "free_host") {
    CK(cuMemFreeHost(pinned));
  } else if (op == "stream_create") {
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamDestroy(s));
  } else if (op == "event") {
    CUevent e;
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuEventRecord(e, other));
    CK(cuEventDestroy(e));
  } else if (op == "module_load") {
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, NOOP_PTX));
    CK(cuModuleGetFunction(&f, m, "noop"));
  } else if (op == "launch_first") {
    touch<<<1, 1, 0, (cudaStream_t)other>>>((int*)before);
    CK(cudaGetLastError());
  } else if (op == "stack_limit") {
    CK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 32 << 10));
  } else if (op == "vmm_map") {
    CK(cuMemCreate(&vmm_handle, gran, &prop, 0));
    CK(cuMemAddressReserve(&vmm_va, gran, 0, 0, 0));
    CK(cuMemMap(vmm_va, gran, 0, vmm_handle, 0));
    CUmemAccessDesc access = {};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(vmm_va, gran, &access, 1));
  } else if (op == "vmm_unmap") {
    CK(cuMemUnmap(vmm_va, gran));
    CK(cuMemRelease(vmm_handle));
  } else if (op == "ctx_synchronize") {
    CK(cuCtxSynchronize());
  } else {
    fprintf(stderr, "unknown operation %s\n", op.c_str());
    return 2;
  }
  double took = ms_since(t);
  bool still = cuStreamQuery(spinner) == CUDA_ERROR_NOT_READY;
  *flag = 1;
  CK(cuStreamSynchronize(spinner));
  CK(cuCtxSynchronize());
  const char* mode = getenv("CUDA_MODULE_LOADING");
  printf("%-16s %-6s %9.3f ms  the spinner %s\n", op.c_str(), mode ? mode : "unset", took, still ? "still ran" : "had ended");
  return 0;
}
