// A timeline of what a program ran on its GPUs, outside the program (bench/probes/README.md):
// a CUDA injection library that records every kernel, copy and memset through CUPTI's
// activity API (concurrent kernels stay concurrent) and writes one CSV line per record at
// the program's exit, so a run of any binary (ferroccl-matmul, nccl-tests) shows its
// per-stream sequence and the gaps between operations. `trace_gaps.py` reads it.
//
// Build: g++ -O2 -shared -fPIC -I$CUDA/include kernel_trace.cpp -L$CUDA/lib -lcupti -o libkernel_trace.so
// Run:   CUDA_INJECTION64_PATH=$PWD/libkernel_trace.so KERNEL_TRACE=trace.csv PROGRAM ...
//        (KERNEL_TRACE gets ".PID" appended: one file per process; KERNEL_TRACE_DRIVER=1
//        also records every driver API call the host makes, with its host time)
// Columns: kind, start_ns, end_ns, device (the thread for driver calls), stream, bytes
// (copies and memsets), name (kernels, driver calls).
// A kernel that has not ended when the program exits (a persistent loop still running) has
// no record.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <unistd.h>

#include <cupti.h>

static FILE* out = nullptr;
static std::mutex out_lock;
static const size_t kBufferBytes = 8u << 20;

#define CUPTI_CK(x)                                                                   \
  do {                                                                                \
    CUptiResult r_ = (x);                                                             \
    if (r_ != CUPTI_SUCCESS) {                                                        \
      const char* s_ = nullptr;                                                       \
      cuptiGetResultString(r_, &s_);                                                  \
      fprintf(stderr, "kernel_trace: %s -> %s\n", #x, s_ ? s_ : "?");                 \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> guard(out_lock);
  CUpti_Activity* record = nullptr;
  while (out && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
        fprintf(out, "kernel,%llu,%llu,%u,%u,0,%s\n", (unsigned long long)k->start, (unsigned long long)k->end, k->deviceId,
                k->streamId, k->name ? k->name : "?");
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
        fprintf(out, "memcpy,%llu,%llu,%u,%u,%llu,kind%u\n", (unsigned long long)m->start, (unsigned long long)m->end, m->deviceId,
                m->streamId, (unsigned long long)m->bytes, (unsigned)m->copyKind);
        break;
      }
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        auto* a = reinterpret_cast<CUpti_ActivityAPI*>(record);
        const char* name = nullptr;
        cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, a->cbid, &name);
        fprintf(out, "driver,%llu,%llu,%u,0,0,%s\n", (unsigned long long)a->start, (unsigned long long)a->end, a->threadId,
                name ? name : "?");
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(record);
        fprintf(out, "memset,%llu,%llu,%u,%u,%llu,\n", (unsigned long long)m->start, (unsigned long long)m->end, m->deviceId,
                m->streamId, (unsigned long long)m->bytes);
        break;
      }
      default:
        break;
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  if (out && dropped) fprintf(out, "dropped,0,0,0,0,%zu,\n", dropped);
  free(buffer);
}

static void flush_at_exit() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> guard(out_lock);
  if (out) {
    fclose(out);
    out = nullptr;
  }
}

extern "C" int InitializeInjection(void) {
  const char* path = getenv("KERNEL_TRACE");
  char name[4096];
  snprintf(name, sizeof name, "%s.%d", path ? path : "kernel_trace.csv", (int)getpid());
  out = fopen(name, "w");
  if (!out) {
    fprintf(stderr, "kernel_trace: cannot open %s\n", name);
    return 1;
  }
  fprintf(out, "kind,start_ns,end_ns,device,stream,bytes,name\n");
  CUPTI_CK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  CUPTI_CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  CUPTI_CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));
  CUPTI_CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET));
  const char* driver = getenv("KERNEL_TRACE_DRIVER");
  if (driver && strcmp(driver, "1") == 0) CUPTI_CK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
  atexit(flush_at_exit);
  return 1;
}
