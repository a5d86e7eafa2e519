#ifndef FERROCCL_DEVICE_H
#define FERROCCL_DEVICE_H

/* Generated from device-rt's Rust definitions by `ferroccl-link header`: do not edit. */

#include <stddef.h>
#include <stdint.h>

/** Most PEs one symmetric heap may join (device-rt's `abi::MAX_PES`). */
#define FERROCCL_MAX_PES 32

/** The surface's functions are device functions: `__device__` under CUDA C++. */
#ifdef __CUDACC__
#define FERROCCL_DEVICE __device__
#else
#define FERROCCL_DEVICE
#endif

/**
 * What a function of the device runtime's C surface (`crate::cabi`, for kernels of other
 * runtimes) returns: `ferroccl_status` in C, an `int`.
 */
typedef enum {
  /**
   * Done.
   */
  FERROCCL_STATUS_SUCCESS = 0,
  /**
   * A wait ended because the host set the abort word.
   */
  FERROCCL_STATUS_ABORTED = 1,
  /**
   * A wait ran past the handle's spin budget.
   */
  FERROCCL_STATUS_TIMED_OUT = 2,
  /**
   * An argument the handle can check was wrong; nothing was done.
   */
  FERROCCL_STATUS_INVALID_ARGUMENT = 3,
} ferroccl_status;

/**
 * What a PE's device code knows of the symmetric heap (`device_rt::shmem::Shmem` reads
 * it): filled by the host, in device memory, never written while kernels run.
 *
 * Every PE's heap has the same size and layout: a [`ShmemSync`] in its first
 * [`SHMEM_RESERVED_BYTES`], then the allocations. A symmetric address is an address in
 * this PE's own heap (`bases[my_pe] ..+ heap_bytes`); the same offset in `bases[pe]` is
 * PE `pe`'s copy, mapped into this PE's address space.
 */
typedef struct {
  /**
   * Every PE's heap as this PE addresses it (0: that PE's heap is not mapped here, so
   * it is not reachable with loads and stores); entries from `n_pes` on are 0.
   */
  uint64_t bases[FERROCCL_MAX_PES];
  /**
   * Bytes of every PE's heap, the reserved head included.
   */
  uint64_t heap_bytes;
  /**
   * Address of the abort flag (a `u64`, non-zero: stop) every wait reads.
   */
  uint64_t abort;
  /**
   * How long one wait may spin before it gives up, in nanoseconds (`u64::MAX`: never).
   */
  uint64_t spin_budget_ns;
  /**
   * This PE's number, below `n_pes`.
   */
  uint32_t my_pe;
  /**
   * PEs in the heap (1..=[`MAX_PES`]).
   */
  uint32_t n_pes;
} ferroccl_heap;

/**
 * An IEEE binary16 value, as its bits.
 */
typedef uint16_t ferroccl_half;

/**
 * A bfloat16 value (the upper half of an f32), as its bits.
 */
typedef uint16_t ferroccl_bfloat16;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The application's device function number `function` on `arg`, called by every thread
 * of the work loop's channel 0 CTA (a block-scope call: every thread gets the same
 * arguments and must return the same status) when a `DeviceFunction::Application` item
 * comes to the loop. The loop completes the item after the CTA's barrier, so what the
 * function wrote is performed before the next item on any channel (and stream work after
 * the item) runs. A status other than `Success` stops the loop with that error; a wait
 * of the function's own must be bounded (the heap's functions are) and return
 * `TimedOut` or `Aborted` rather than hang.
 *
 * This definition is weak and refuses every function (`InvalidArgument`): an application
 * defines its own, strong, `extern "C"` (in CUDA C++: `extern "C" __device__
 * ferroccl_status ferroccl_app_work(uint32_t function, uint64_t arg)`), links it with the
 * module (`ferroccl-link link`, `Module::load_linked`), and the linker takes it instead.
 *
 * # Safety
 * `arg` means what the application and the host that enqueued the item agree on.
 */
FERROCCL_DEVICE ferroccl_status ferroccl_app_work(uint32_t function, uint64_t arg);

/**
 * Every PE's `dst[i]` becomes the sum over PEs, in PE order, of their
 * `src[i]`, `i < count`: one-shot (each PE reads every PE's `src`), between
 * two barriers across every PE. Ordering on return: as a barrier
 * ([`ferroccl_barrier_all_block`](super::ferroccl_barrier_all_block)).
 * `Aborted` / `TimedOut` when a wait ended early (then `dst` is undefined and
 * the kernel should end); `InvalidArgument` (nothing done) when `dst` or
 * `src` is not a range of every PE's heap, misaligned, or they overlap.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` and `dst` are symmetric;
 * every thread of the block calls it with the same arguments, and every PE
 * calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_sum_f32_block(const ferroccl_heap *heap,
                                                  float *dst,
                                                  const float *src,
                                                  size_t count);

/**
 * As the one-shot all-reduce of this type, in two shots: each PE sums its
 * block of `count / n_pes` elements, then puts it to every other PE (three
 * barriers; each PE loads `count` elements instead of `n_pes · count`).
 * The same bits. `InvalidArgument` also when `count` is not a multiple of
 * the PEs.
 *
 * # Safety
 * As the one-shot all-reduce of this type.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_two_shot_sum_f32_block(const ferroccl_heap *heap,
                                                           float *dst,
                                                           const float *src,
                                                           size_t count);

/**
 * `dst[i]` (any global memory) becomes the sum over PEs, in PE order, of
 * element `my_pe · count + i` of their symmetric `src` (`n_pes · count`
 * elements), between two barriers across every PE. Errors as the one-shot
 * all-reduce of this type.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` is symmetric, `dst` holds
 * `count` writable elements; every thread of the block calls it with the same
 * arguments, and every PE calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_reduce_scatter_sum_f32_block(const ferroccl_heap *heap,
                                                      float *dst,
                                                      const float *src,
                                                      size_t count);

/**
 * Every PE's `dst[i]` becomes the sum over PEs, in PE order, of their
 * `src[i]`, `i < count`: one-shot (each PE reads every PE's `src`), between
 * two barriers across every PE. Ordering on return: as a barrier
 * ([`ferroccl_barrier_all_block`](super::ferroccl_barrier_all_block)).
 * `Aborted` / `TimedOut` when a wait ended early (then `dst` is undefined and
 * the kernel should end); `InvalidArgument` (nothing done) when `dst` or
 * `src` is not a range of every PE's heap, misaligned, or they overlap.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` and `dst` are symmetric;
 * every thread of the block calls it with the same arguments, and every PE
 * calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_sum_f64_block(const ferroccl_heap *heap,
                                                  double *dst,
                                                  const double *src,
                                                  size_t count);

/**
 * As the one-shot all-reduce of this type, in two shots: each PE sums its
 * block of `count / n_pes` elements, then puts it to every other PE (three
 * barriers; each PE loads `count` elements instead of `n_pes · count`).
 * The same bits. `InvalidArgument` also when `count` is not a multiple of
 * the PEs.
 *
 * # Safety
 * As the one-shot all-reduce of this type.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_two_shot_sum_f64_block(const ferroccl_heap *heap,
                                                           double *dst,
                                                           const double *src,
                                                           size_t count);

/**
 * `dst[i]` (any global memory) becomes the sum over PEs, in PE order, of
 * element `my_pe · count + i` of their symmetric `src` (`n_pes · count`
 * elements), between two barriers across every PE. Errors as the one-shot
 * all-reduce of this type.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` is symmetric, `dst` holds
 * `count` writable elements; every thread of the block calls it with the same
 * arguments, and every PE calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_reduce_scatter_sum_f64_block(const ferroccl_heap *heap,
                                                      double *dst,
                                                      const double *src,
                                                      size_t count);

/**
 * Every PE's `dst[i]` becomes the sum over PEs, in PE order, of their
 * `src[i]`, `i < count`: one-shot (each PE reads every PE's `src`), between
 * two barriers across every PE. Ordering on return: as a barrier
 * ([`ferroccl_barrier_all_block`](super::ferroccl_barrier_all_block)).
 * `Aborted` / `TimedOut` when a wait ended early (then `dst` is undefined and
 * the kernel should end); `InvalidArgument` (nothing done) when `dst` or
 * `src` is not a range of every PE's heap, misaligned, or they overlap.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` and `dst` are symmetric;
 * every thread of the block calls it with the same arguments, and every PE
 * calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_sum_f16_block(const ferroccl_heap *heap,
                                                  ferroccl_half *dst,
                                                  const ferroccl_half *src,
                                                  size_t count);

/**
 * As the one-shot all-reduce of this type, in two shots: each PE sums its
 * block of `count / n_pes` elements, then puts it to every other PE (three
 * barriers; each PE loads `count` elements instead of `n_pes · count`).
 * The same bits. `InvalidArgument` also when `count` is not a multiple of
 * the PEs.
 *
 * # Safety
 * As the one-shot all-reduce of this type.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_two_shot_sum_f16_block(const ferroccl_heap *heap,
                                                           ferroccl_half *dst,
                                                           const ferroccl_half *src,
                                                           size_t count);

/**
 * `dst[i]` (any global memory) becomes the sum over PEs, in PE order, of
 * element `my_pe · count + i` of their symmetric `src` (`n_pes · count`
 * elements), between two barriers across every PE. Errors as the one-shot
 * all-reduce of this type.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` is symmetric, `dst` holds
 * `count` writable elements; every thread of the block calls it with the same
 * arguments, and every PE calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_reduce_scatter_sum_f16_block(const ferroccl_heap *heap,
                                                      ferroccl_half *dst,
                                                      const ferroccl_half *src,
                                                      size_t count);

/**
 * Every PE's `dst[i]` becomes the sum over PEs, in PE order, of their
 * `src[i]`, `i < count`: one-shot (each PE reads every PE's `src`), between
 * two barriers across every PE. Ordering on return: as a barrier
 * ([`ferroccl_barrier_all_block`](super::ferroccl_barrier_all_block)).
 * `Aborted` / `TimedOut` when a wait ended early (then `dst` is undefined and
 * the kernel should end); `InvalidArgument` (nothing done) when `dst` or
 * `src` is not a range of every PE's heap, misaligned, or they overlap.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` and `dst` are symmetric;
 * every thread of the block calls it with the same arguments, and every PE
 * calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_sum_bf16_block(const ferroccl_heap *heap,
                                                   ferroccl_bfloat16 *dst,
                                                   const ferroccl_bfloat16 *src,
                                                   size_t count);

/**
 * As the one-shot all-reduce of this type, in two shots: each PE sums its
 * block of `count / n_pes` elements, then puts it to every other PE (three
 * barriers; each PE loads `count` elements instead of `n_pes · count`).
 * The same bits. `InvalidArgument` also when `count` is not a multiple of
 * the PEs.
 *
 * # Safety
 * As the one-shot all-reduce of this type.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_two_shot_sum_bf16_block(const ferroccl_heap *heap,
                                                            ferroccl_bfloat16 *dst,
                                                            const ferroccl_bfloat16 *src,
                                                            size_t count);

/**
 * `dst[i]` (any global memory) becomes the sum over PEs, in PE order, of
 * element `my_pe · count + i` of their symmetric `src` (`n_pes · count`
 * elements), between two barriers across every PE. Errors as the one-shot
 * all-reduce of this type.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` is symmetric, `dst` holds
 * `count` writable elements; every thread of the block calls it with the same
 * arguments, and every PE calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_reduce_scatter_sum_bf16_block(const ferroccl_heap *heap,
                                                       ferroccl_bfloat16 *dst,
                                                       const ferroccl_bfloat16 *src,
                                                       size_t count);

/**
 * Every PE's `dst[i]` becomes the sum over PEs, in PE order, of their
 * `src[i]`, `i < count`: one-shot (each PE reads every PE's `src`), between
 * two barriers across every PE. Ordering on return: as a barrier
 * ([`ferroccl_barrier_all_block`](super::ferroccl_barrier_all_block)).
 * `Aborted` / `TimedOut` when a wait ended early (then `dst` is undefined and
 * the kernel should end); `InvalidArgument` (nothing done) when `dst` or
 * `src` is not a range of every PE's heap, misaligned, or they overlap.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` and `dst` are symmetric;
 * every thread of the block calls it with the same arguments, and every PE
 * calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_sum_i32_block(const ferroccl_heap *heap,
                                                  int32_t *dst,
                                                  const int32_t *src,
                                                  size_t count);

/**
 * As the one-shot all-reduce of this type, in two shots: each PE sums its
 * block of `count / n_pes` elements, then puts it to every other PE (three
 * barriers; each PE loads `count` elements instead of `n_pes · count`).
 * The same bits. `InvalidArgument` also when `count` is not a multiple of
 * the PEs.
 *
 * # Safety
 * As the one-shot all-reduce of this type.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_two_shot_sum_i32_block(const ferroccl_heap *heap,
                                                           int32_t *dst,
                                                           const int32_t *src,
                                                           size_t count);

/**
 * `dst[i]` (any global memory) becomes the sum over PEs, in PE order, of
 * element `my_pe · count + i` of their symmetric `src` (`n_pes · count`
 * elements), between two barriers across every PE. Errors as the one-shot
 * all-reduce of this type.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` is symmetric, `dst` holds
 * `count` writable elements; every thread of the block calls it with the same
 * arguments, and every PE calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_reduce_scatter_sum_i32_block(const ferroccl_heap *heap,
                                                      int32_t *dst,
                                                      const int32_t *src,
                                                      size_t count);

/**
 * Every PE's `dst[i]` becomes the sum over PEs, in PE order, of their
 * `src[i]`, `i < count`: one-shot (each PE reads every PE's `src`), between
 * two barriers across every PE. Ordering on return: as a barrier
 * ([`ferroccl_barrier_all_block`](super::ferroccl_barrier_all_block)).
 * `Aborted` / `TimedOut` when a wait ended early (then `dst` is undefined and
 * the kernel should end); `InvalidArgument` (nothing done) when `dst` or
 * `src` is not a range of every PE's heap, misaligned, or they overlap.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` and `dst` are symmetric;
 * every thread of the block calls it with the same arguments, and every PE
 * calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_sum_u32_block(const ferroccl_heap *heap,
                                                  uint32_t *dst,
                                                  const uint32_t *src,
                                                  size_t count);

/**
 * As the one-shot all-reduce of this type, in two shots: each PE sums its
 * block of `count / n_pes` elements, then puts it to every other PE (three
 * barriers; each PE loads `count` elements instead of `n_pes · count`).
 * The same bits. `InvalidArgument` also when `count` is not a multiple of
 * the PEs.
 *
 * # Safety
 * As the one-shot all-reduce of this type.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_two_shot_sum_u32_block(const ferroccl_heap *heap,
                                                           uint32_t *dst,
                                                           const uint32_t *src,
                                                           size_t count);

/**
 * `dst[i]` (any global memory) becomes the sum over PEs, in PE order, of
 * element `my_pe · count + i` of their symmetric `src` (`n_pes · count`
 * elements), between two barriers across every PE. Errors as the one-shot
 * all-reduce of this type.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` is symmetric, `dst` holds
 * `count` writable elements; every thread of the block calls it with the same
 * arguments, and every PE calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_reduce_scatter_sum_u32_block(const ferroccl_heap *heap,
                                                      uint32_t *dst,
                                                      const uint32_t *src,
                                                      size_t count);

/**
 * Every PE's `dst[i]` becomes the sum over PEs, in PE order, of their
 * `src[i]`, `i < count`: one-shot (each PE reads every PE's `src`), between
 * two barriers across every PE. Ordering on return: as a barrier
 * ([`ferroccl_barrier_all_block`](super::ferroccl_barrier_all_block)).
 * `Aborted` / `TimedOut` when a wait ended early (then `dst` is undefined and
 * the kernel should end); `InvalidArgument` (nothing done) when `dst` or
 * `src` is not a range of every PE's heap, misaligned, or they overlap.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` and `dst` are symmetric;
 * every thread of the block calls it with the same arguments, and every PE
 * calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_sum_i64_block(const ferroccl_heap *heap,
                                                  int64_t *dst,
                                                  const int64_t *src,
                                                  size_t count);

/**
 * As the one-shot all-reduce of this type, in two shots: each PE sums its
 * block of `count / n_pes` elements, then puts it to every other PE (three
 * barriers; each PE loads `count` elements instead of `n_pes · count`).
 * The same bits. `InvalidArgument` also when `count` is not a multiple of
 * the PEs.
 *
 * # Safety
 * As the one-shot all-reduce of this type.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_two_shot_sum_i64_block(const ferroccl_heap *heap,
                                                           int64_t *dst,
                                                           const int64_t *src,
                                                           size_t count);

/**
 * `dst[i]` (any global memory) becomes the sum over PEs, in PE order, of
 * element `my_pe · count + i` of their symmetric `src` (`n_pes · count`
 * elements), between two barriers across every PE. Errors as the one-shot
 * all-reduce of this type.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` is symmetric, `dst` holds
 * `count` writable elements; every thread of the block calls it with the same
 * arguments, and every PE calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_reduce_scatter_sum_i64_block(const ferroccl_heap *heap,
                                                      int64_t *dst,
                                                      const int64_t *src,
                                                      size_t count);

/**
 * Every PE's `dst[i]` becomes the sum over PEs, in PE order, of their
 * `src[i]`, `i < count`: one-shot (each PE reads every PE's `src`), between
 * two barriers across every PE. Ordering on return: as a barrier
 * ([`ferroccl_barrier_all_block`](super::ferroccl_barrier_all_block)).
 * `Aborted` / `TimedOut` when a wait ended early (then `dst` is undefined and
 * the kernel should end); `InvalidArgument` (nothing done) when `dst` or
 * `src` is not a range of every PE's heap, misaligned, or they overlap.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` and `dst` are symmetric;
 * every thread of the block calls it with the same arguments, and every PE
 * calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_sum_u64_block(const ferroccl_heap *heap,
                                                  uint64_t *dst,
                                                  const uint64_t *src,
                                                  size_t count);

/**
 * As the one-shot all-reduce of this type, in two shots: each PE sums its
 * block of `count / n_pes` elements, then puts it to every other PE (three
 * barriers; each PE loads `count` elements instead of `n_pes · count`).
 * The same bits. `InvalidArgument` also when `count` is not a multiple of
 * the PEs.
 *
 * # Safety
 * As the one-shot all-reduce of this type.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_reduce_two_shot_sum_u64_block(const ferroccl_heap *heap,
                                                           uint64_t *dst,
                                                           const uint64_t *src,
                                                           size_t count);

/**
 * `dst[i]` (any global memory) becomes the sum over PEs, in PE order, of
 * element `my_pe · count + i` of their symmetric `src` (`n_pes · count`
 * elements), between two barriers across every PE. Errors as the one-shot
 * all-reduce of this type.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` is symmetric, `dst` holds
 * `count` writable elements; every thread of the block calls it with the same
 * arguments, and every PE calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_reduce_scatter_sum_u64_block(const ferroccl_heap *heap,
                                                      uint64_t *dst,
                                                      const uint64_t *src,
                                                      size_t count);

/**
 * Block `p` of every PE's symmetric `dst` (`bytes` bytes at `dst + p · bytes`)
 * becomes PE `p`'s `src` (any global memory): each PE puts its `src` into every PE's
 * `dst`, then a barrier across every PE (`nvshmem_fcollect`). Ordering on return: as
 * a barrier. Errors as the all-reduces; `InvalidArgument` (nothing done) when `dst`
 * is not a range of every PE's heap or overlaps `src`.
 *
 * # Safety
 * `heap` points to the handle the host filled; no PE reads or writes `dst` from its
 * previous barrier until this call returns; every thread of the block calls it with
 * the same arguments, and every PE calls it as its next barrier.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_all_gather_block(const ferroccl_heap *heap,
                                          void *dst,
                                          const void *src,
                                          size_t bytes);

/**
 * This PE's number (`nvshmem_my_pe`).
 *
 * # Safety
 * `heap` points to the handle the host filled, unchanged while kernels use it.
 */
FERROCCL_DEVICE uint32_t ferroccl_my_pe(const ferroccl_heap *heap);

/**
 * The number of PEs (`nvshmem_n_pes`).
 *
 * # Safety
 * As [`ferroccl_my_pe`].
 */
FERROCCL_DEVICE uint32_t ferroccl_n_pes(const ferroccl_heap *heap);

/**
 * PE `pe`'s copy of the symmetric address `addr`, for this thread's loads and stores
 * (`nvshmem_ptr`); null when `addr` is not in this PE's heap or `pe` is not reachable.
 * Ordering: none (no memory access).
 *
 * # Safety
 * As [`ferroccl_my_pe`].
 */
FERROCCL_DEVICE void *ferroccl_ptr(const ferroccl_heap *heap, const void *addr, uint32_t pe);

/**
 * Copies `bytes` bytes from `src` (any global memory) to PE `pe`'s copy of the
 * symmetric `dst` (`nvshmem_putmem` and its warp and block forms): blocking, so `src`
 * may be reused on return; the stores are delivered once a [`ferroccl_fence`] (same
 * PE), [`ferroccl_quiet`] or barrier orders them. Ends with the group's barrier.
 * `InvalidArgument` (nothing done) when the range is not in the heap or `pe` not
 * reachable.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` holds `bytes` readable bytes not
 * overlapping the destination; every thread of the group calls it with the same
 * arguments; no conflicting access to the destination.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_putmem(const ferroccl_heap *heap,
                                void *dst,
                                const void *src,
                                size_t bytes,
                                uint32_t pe);

/**
 * Copies `bytes` bytes from `src` (any global memory) to PE `pe`'s copy of the
 * symmetric `dst` (`nvshmem_putmem` and its warp and block forms): blocking, so `src`
 * may be reused on return; the stores are delivered once a [`ferroccl_fence`] (same
 * PE), [`ferroccl_quiet`] or barrier orders them. Ends with the group's barrier.
 * `InvalidArgument` (nothing done) when the range is not in the heap or `pe` not
 * reachable.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` holds `bytes` readable bytes not
 * overlapping the destination; every thread of the group calls it with the same
 * arguments; no conflicting access to the destination.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_putmem_warp(const ferroccl_heap *heap,
                                     void *dst,
                                     const void *src,
                                     size_t bytes,
                                     uint32_t pe);

/**
 * Copies `bytes` bytes from `src` (any global memory) to PE `pe`'s copy of the
 * symmetric `dst` (`nvshmem_putmem` and its warp and block forms): blocking, so `src`
 * may be reused on return; the stores are delivered once a [`ferroccl_fence`] (same
 * PE), [`ferroccl_quiet`] or barrier orders them. Ends with the group's barrier.
 * `InvalidArgument` (nothing done) when the range is not in the heap or `pe` not
 * reachable.
 *
 * # Safety
 * `heap` points to the handle the host filled; `src` holds `bytes` readable bytes not
 * overlapping the destination; every thread of the group calls it with the same
 * arguments; no conflicting access to the destination.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_putmem_block(const ferroccl_heap *heap,
                                      void *dst,
                                      const void *src,
                                      size_t bytes,
                                      uint32_t pe);

/**
 * Copies `bytes` bytes from PE `pe`'s copy of the symmetric `src` to `dst` (any
 * global memory; `nvshmem_getmem` and its warp and block forms): blocking, `dst`
 * holds the data on return for every thread of the group. The loads are not ordered
 * after earlier accesses: a wait or barrier before the call orders them.
 * `InvalidArgument` as [`ferroccl_putmem`].
 *
 * # Safety
 * As [`ferroccl_putmem`], `dst` holding `bytes` writable bytes.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_getmem(const ferroccl_heap *heap,
                                void *dst,
                                const void *src,
                                size_t bytes,
                                uint32_t pe);

/**
 * Copies `bytes` bytes from PE `pe`'s copy of the symmetric `src` to `dst` (any
 * global memory; `nvshmem_getmem` and its warp and block forms): blocking, `dst`
 * holds the data on return for every thread of the group. The loads are not ordered
 * after earlier accesses: a wait or barrier before the call orders them.
 * `InvalidArgument` as [`ferroccl_putmem`].
 *
 * # Safety
 * As [`ferroccl_putmem`], `dst` holding `bytes` writable bytes.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_getmem_warp(const ferroccl_heap *heap,
                                     void *dst,
                                     const void *src,
                                     size_t bytes,
                                     uint32_t pe);

/**
 * Copies `bytes` bytes from PE `pe`'s copy of the symmetric `src` to `dst` (any
 * global memory; `nvshmem_getmem` and its warp and block forms): blocking, `dst`
 * holds the data on return for every thread of the group. The loads are not ordered
 * after earlier accesses: a wait or barrier before the call orders them.
 * `InvalidArgument` as [`ferroccl_putmem`].
 *
 * # Safety
 * As [`ferroccl_putmem`], `dst` holding `bytes` writable bytes.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_getmem_block(const ferroccl_heap *heap,
                                      void *dst,
                                      const void *src,
                                      size_t bytes,
                                      uint32_t pe);

/**
 * [`ferroccl_putmem`], then PE `pe`'s copy of the signal `sig` updated by `op`
 * (0: set, 1: add) with `value` (`nvshmem_putmem_signal`): the data is ordered
 * before the update (a fence between them), so a PE whose
 * [`ferroccl_signal_wait_until`] sees the update reads the data. `InvalidArgument`
 * (nothing done) as `ferroccl_putmem`, or for an unknown `op` or a `sig` not an
 * aligned word of the heap.
 *
 * # Safety
 * As [`ferroccl_putmem`]; `sig` is accessed only atomically (signal updates, waits).
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_putmem_signal(const ferroccl_heap *heap,
                                       void *dst,
                                       const void *src,
                                       size_t bytes,
                                       uint64_t *sig,
                                       uint64_t value,
                                       uint32_t op,
                                       uint32_t pe);

/**
 * [`ferroccl_putmem`], then PE `pe`'s copy of the signal `sig` updated by `op`
 * (0: set, 1: add) with `value` (`nvshmem_putmem_signal`): the data is ordered
 * before the update (a fence between them), so a PE whose
 * [`ferroccl_signal_wait_until`] sees the update reads the data. `InvalidArgument`
 * (nothing done) as `ferroccl_putmem`, or for an unknown `op` or a `sig` not an
 * aligned word of the heap.
 *
 * # Safety
 * As [`ferroccl_putmem`]; `sig` is accessed only atomically (signal updates, waits).
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_putmem_signal_warp(const ferroccl_heap *heap,
                                            void *dst,
                                            const void *src,
                                            size_t bytes,
                                            uint64_t *sig,
                                            uint64_t value,
                                            uint32_t op,
                                            uint32_t pe);

/**
 * [`ferroccl_putmem`], then PE `pe`'s copy of the signal `sig` updated by `op`
 * (0: set, 1: add) with `value` (`nvshmem_putmem_signal`): the data is ordered
 * before the update (a fence between them), so a PE whose
 * [`ferroccl_signal_wait_until`] sees the update reads the data. `InvalidArgument`
 * (nothing done) as `ferroccl_putmem`, or for an unknown `op` or a `sig` not an
 * aligned word of the heap.
 *
 * # Safety
 * As [`ferroccl_putmem`]; `sig` is accessed only atomically (signal updates, waits).
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_putmem_signal_block(const ferroccl_heap *heap,
                                             void *dst,
                                             const void *src,
                                             size_t bytes,
                                             uint64_t *sig,
                                             uint64_t value,
                                             uint32_t op,
                                             uint32_t pe);

/**
 * Updates PE `pe`'s copy of the signal `sig` by `op` (0: set, 1: add) with `value`
 * (`nvshmemx_signal_op`): a relaxed system-scope store or add, ordering nothing else (a
 * [`ferroccl_fence`] before it orders earlier puts to `pe` before it).
 * `InvalidArgument` (nothing done) for an unknown `op`, a `sig` not an aligned word of
 * the heap, or `pe` not reachable.
 *
 * # Safety
 * `heap` as [`ferroccl_my_pe`]; `sig` is accessed only atomically.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_signal_op(const ferroccl_heap *heap,
                                   uint64_t *sig,
                                   uint64_t value,
                                   uint32_t op,
                                   uint32_t pe);

/**
 * Waits until this PE's signal `sig` compares with `value` by `cmp` (0: ==, 1: !=,
 * 2: >, 3: >=, 4: <, 5: <=, unsigned) and stores the word seen at `seen` when it is not
 * null (`nvshmem_signal_wait_until`). Polls with acquire loads at system scope: later
 * reads of this PE's heap see what the updating PE published before the update.
 * `Aborted` or `TimedOut` when the abort word is set or the handle's spin budget runs
 * out (never a hang); `InvalidArgument` (no wait) for an unknown `cmp` or a `sig` not an
 * aligned word of this PE's heap.
 *
 * # Safety
 * `heap` as [`ferroccl_my_pe`]; `sig` is accessed only atomically; `seen` is null or
 * writable.
 */
FERROCCL_DEVICE
ferroccl_status ferroccl_signal_wait_until(const ferroccl_heap *heap,
                                           const uint64_t *sig,
                                           uint32_t cmp,
                                           uint64_t value,
                                           uint64_t *seen);

/**
 * Orders this thread's earlier puts, AMOs and signal updates to each PE before its later
 * ones to the same PE (`nvshmem_fence`): one `fence.acq_rel.sys`.
 *
 * # Safety
 * As [`ferroccl_my_pe`].
 */
FERROCCL_DEVICE void ferroccl_fence(const ferroccl_heap *heap);

/**
 * Completes this thread's earlier puts, AMOs and signal updates, to every PE, before its
 * later accesses (`nvshmem_quiet`): one `fence.acq_rel.sys`.
 *
 * # Safety
 * As [`ferroccl_my_pe`].
 */
FERROCCL_DEVICE void ferroccl_quiet(const ferroccl_heap *heap);

/**
 * Waits until every PE's group has arrived; every put, AMO and signal update this
 * PE's group issued before it is complete and seen by every PE before any PE's
 * accesses after it (`nvshmem_barrier_all` and its warp and block forms). `Aborted`
 * or `TimedOut` on every thread of the group when a wait ended early; the heap's
 * barrier state is then no longer agreed between PEs (end the kernel).
 *
 * # Safety
 * `heap` as [`ferroccl_my_pe`]; every thread of the group calls it, every PE calls
 * it as its next barrier, and no other group of this PE is in a barrier meanwhile.
 */
FERROCCL_DEVICE ferroccl_status ferroccl_barrier_all(const ferroccl_heap *heap);

/**
 * Waits until every PE's group has arrived; every put, AMO and signal update this
 * PE's group issued before it is complete and seen by every PE before any PE's
 * accesses after it (`nvshmem_barrier_all` and its warp and block forms). `Aborted`
 * or `TimedOut` on every thread of the group when a wait ended early; the heap's
 * barrier state is then no longer agreed between PEs (end the kernel).
 *
 * # Safety
 * `heap` as [`ferroccl_my_pe`]; every thread of the group calls it, every PE calls
 * it as its next barrier, and no other group of this PE is in a barrier meanwhile.
 */
FERROCCL_DEVICE ferroccl_status ferroccl_barrier_all_warp(const ferroccl_heap *heap);

/**
 * Waits until every PE's group has arrived; every put, AMO and signal update this
 * PE's group issued before it is complete and seen by every PE before any PE's
 * accesses after it (`nvshmem_barrier_all` and its warp and block forms). `Aborted`
 * or `TimedOut` on every thread of the group when a wait ended early; the heap's
 * barrier state is then no longer agreed between PEs (end the kernel).
 *
 * # Safety
 * `heap` as [`ferroccl_my_pe`]; every thread of the group calls it, every PE calls
 * it as its next barrier, and no other group of this PE is in a barrier meanwhile.
 */
FERROCCL_DEVICE ferroccl_status ferroccl_barrier_all_block(const ferroccl_heap *heap);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* FERROCCL_DEVICE_H */
