// A CUDA C++ kernel that calls ferroccl's device functions: scale, then all-reduce through
// the symmetric heap, then add a bias, in one kernel (what would otherwise be three
// launches and a host-called collective). Compiled as relocatable device code
// (`nvcc -arch=sm_90a -dc`), linked with ferroccl's library by `ferroccl-link link` (or
// `nvcc -rdc=true ... -lferroccl_device`), launched by `src/main.rs` with one block per PE.

#include "ferroccl_device.h"

// `heap` by value: the kernel argument is the whole handle (no global state, no module
// initialisation); `x` and `sum` are symmetric (the same heap allocation on every PE).
// One block per PE: the block-scope all-reduce is the PE's barrier.
extern "C" __global__ void scale_all_reduce_bias(ferroccl_heap heap, float *x, float *sum, const float *bias, float scale, size_t n,
                                                 int *status) {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        x[i] *= scale;
    }
    // The scaled values are read by every PE's threads inside the all-reduce, after its
    // first barrier (which starts with the block's and a system-scope fence).
    __syncthreads();
    ferroccl_status s = ferroccl_all_reduce_sum_f32_block(&heap, sum, x, n);
    if (s != FERROCCL_STATUS_SUCCESS) {
        if (threadIdx.x == 0) {
            *status = (int)s;
        }
        return;
    }
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        sum[i] += bias[i];
    }
    if (threadIdx.x == 0) {
        *status = (int)s;
    }
}

// The same sum, two-shot, then the next PE's block read with a get: the point-to-point
// functions from a warp.
extern "C" __global__ void two_shot_then_get(ferroccl_heap heap, float *x, float *sum, float *neighbour, size_t n, int *status) {
    ferroccl_status s = ferroccl_all_reduce_two_shot_sum_f32_block(&heap, sum, x, n);
    if (s == FERROCCL_STATUS_SUCCESS && threadIdx.x < 32) {
        unsigned me = ferroccl_my_pe(&heap), n_pes = ferroccl_n_pes(&heap);
        s = ferroccl_getmem_warp(&heap, neighbour, x, n * sizeof(float), (me + 1) % n_pes);
    }
    if (threadIdx.x == 0) {
        *status = (int)s;
    }
}

// The application's own work in ferroccl's persistent loop: work items the host enqueues
// between collectives on a communicator's stream (`WorkItem::application(1, args)`) call
// this on every thread of the loop's first channel. Function 1 scales `count` floats at
// `buf` by `factor` (its argument block in device memory); any other number is refused,
// which stops the loop with `BadItem::ApplicationRefused`. It replaces the module's weak
// default when linked with it.
struct scale_args {
    float *buf;
    unsigned long long count;
    float factor;
};

extern "C" __device__ ferroccl_status ferroccl_app_work(uint32_t function, uint64_t arg) {
    if (function != 1) {
        return FERROCCL_STATUS_INVALID_ARGUMENT;
    }
    const scale_args *a = (const scale_args *)arg;
    for (unsigned long long i = threadIdx.x; i < a->count; i += blockDim.x) {
        a->buf[i] *= a->factor;
    }
    return FERROCCL_STATUS_SUCCESS;
}

// The benchmark's kernels (`cuda-interop --bench`): `iters` all-reduces from inside one
// kernel, one-shot or two-shot, with the status of the last; and the unfused sequence's
// element-wise kernels.
extern "C" __global__ void bench_all_reduce(ferroccl_heap heap, float *x, float *sum, size_t n, int iters, int two_shot, int *status) {
    ferroccl_status s = FERROCCL_STATUS_SUCCESS;
    for (int i = 0; i < iters && s == FERROCCL_STATUS_SUCCESS; i++) {
        s = two_shot ? ferroccl_all_reduce_two_shot_sum_f32_block(&heap, sum, x, n) : ferroccl_all_reduce_sum_f32_block(&heap, sum, x, n);
    }
    if (threadIdx.x == 0) {
        *status = (int)s;
    }
}

extern "C" __global__ void scale(float *x, float factor, size_t n) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        x[i] *= factor;
    }
}

extern "C" __global__ void add_bias(float *sum, const float *bias, size_t n) {
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        sum[i] += bias[i];
    }
}
