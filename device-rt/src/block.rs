//! Warp- and block-wide reductions (cub's `BlockReduce`, as
//! [NVSHMEM](https://docs.nvidia.com/nvshmem/api/)'s Jacobi example uses it): combine one
//! value per thread into one value, so a CTA issues one global atomic instead of one per
//! thread.

use core::mem::size_of;

use crate::arch::{self, FULL_MASK, WARP_SIZE};
use crate::pack::BytePack;
use crate::redop::RedOp;

/// `v` from lane `lane_id() ^ lane_mask`, for any element type (one or two 32-bit
/// shuffles). Every lane of the warp must call it.
#[inline(always)]
pub fn shfl_xor_elem<T: crate::redop::Elem>(v: T, lane_mask: u32) -> T {
    let mut p = BytePack::<8>::zeroed();
    p.set_elem(0, v);
    let mut q = BytePack::<8>::zeroed();
    q.set_elem::<u32>(0, arch::shfl_xor(FULL_MASK, p.elem::<u32>(0), lane_mask));
    if size_of::<T>() > 4 {
        q.set_elem::<u32>(1, arch::shfl_xor(FULL_MASK, p.elem::<u32>(1), lane_mask));
    }
    q.elem::<T>(0)
}

/// Reduces `v` over the 32 lanes of this warp with `op` (butterfly: every lane gets the
/// result). Every lane of the warp must call it.
#[inline(always)]
pub fn warp_reduce<Op: RedOp>(op: &Op, mut v: Op::Elt) -> Op::Elt {
    let mut mask = WARP_SIZE / 2;
    while mask > 0 {
        v = op.reduce(v, shfl_xor_elem(v, mask));
        mask /= 2;
    }
    v
}

/// Reduces `v` over threads `0..nthreads` of the CTA (a multiple of 32, all calling it)
/// with `op`; every participant gets the result.
///
/// Each warp reduces with shuffles, lane 0 writes its warp's value to `scratch`, named
/// barrier `barrier_id` (counting `nthreads`) orders those writes before warp 0's reads,
/// every warp then reduces the partials, and a second barrier keeps `scratch` from being
/// reused before everyone has read it.
///
/// # Safety
/// `scratch` points to shared memory for `nthreads / 32` values that no other code uses
/// during the call; `thread` is this thread's index in `0..nthreads`.
#[inline(always)]
pub unsafe fn block_reduce<Op: RedOp>(op: &Op, v: Op::Elt, thread: u32, nthreads: u32, barrier_id: u32, scratch: *mut Op::Elt) -> Op::Elt {
    let warp_value = warp_reduce(op, v);
    let (warp, lane) = (thread / WARP_SIZE, thread % WARP_SIZE);
    let nwarps = nthreads / WARP_SIZE;
    if lane == 0 {
        // SAFETY: `warp < nthreads / 32` because `thread < nthreads` (the caller's contract),
        // so the slot is inside `scratch`, which the caller gives as shared memory for
        // `nthreads / 32` values that nothing else touches during the call; only lane 0 of each
        // warp writes, each to its own slot.
        unsafe { scratch.add(warp as usize).write_volatile(warp_value) };
    }
    arch::barrier_sync(barrier_id, nthreads);
    // SAFETY: slot 0 exists (`nthreads` is a non-zero multiple of 32) and was written by warp
    // 0's lane 0 before the barrier above, which orders that write before this read for every
    // participant.
    let mut total = unsafe { scratch.read_volatile() };
    for w in 1..nwarps {
        // SAFETY: `w < nwarps`, so the slot is in `scratch`; its writer (lane 0 of warp `w`)
        // wrote it before the barrier above, and no thread writes `scratch` again before the
        // barrier below.
        total = op.reduce(total, unsafe { scratch.add(w as usize).read_volatile() });
    }
    arch::barrier_sync(barrier_id, nthreads);
    total
}

/// Each CTA reduces its `block_dim` values of `input` (from `block_idx · block_dim`) with
/// the operator `op` names (Sum, Min or Max) into `out[block_idx]`: the body of the
/// `block_reduce_<dtype>` kernels. Traps on any other operator.
///
/// # Safety
/// `input` holds grid×block values, `out` grid values; the block is a multiple of 32
/// threads, all calling this; dynamic shared memory holds `block_dim / 32` values.
#[inline(always)]
pub unsafe fn block_reduce_args<T: crate::redop::Elem>(input: *const T, out: *mut T, op: u32) {
    use crate::redop::{Max, Min, RedOpKind, Sum};
    let (tid, n) = (arch::thread_idx(), arch::block_dim());
    // SAFETY: the caller's `input` holds grid×block values, and `block_idx · block_dim +
    // thread_idx` is below that.
    let v = unsafe { input.add((arch::block_idx() * n + tid) as usize).read() };
    let scratch = arch::dyn_smem().cast::<T>();
    // SAFETY: every thread of the block calls this (block a multiple of 32 threads: the
    // caller's contract), `tid < n` is its index among them, and `scratch` is this CTA's
    // dynamic shared memory, which holds `block_dim / 32` values (caller's contract), is
    // 16-byte aligned (enough for any element type), and is used by nothing else in this
    // kernel.
    let r = unsafe {
        match crate::copy::op_kind(op) {
            Some(RedOpKind::Sum) => block_reduce(&Sum::<T>::new(0), v, tid, n, 1, scratch),
            Some(RedOpKind::Min) => block_reduce(&Min::<T>::new(0), v, tid, n, 1, scratch),
            Some(RedOpKind::Max) => block_reduce(&Max::<T>::new(0), v, tid, n, 1, scratch),
            _ => arch::trap(),
        }
    };
    if tid == 0 {
        // SAFETY: the caller's `out` holds grid values, `block_idx < grid_dim`, and only thread
        // 0 of each CTA writes, to its own CTA's slot.
        unsafe { out.add(arch::block_idx() as usize).write(r) };
    }
}
