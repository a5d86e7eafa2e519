//! Block-scope collectives over the symmetric heap, as the runtime runs them: all-reduce
//! one-shot (every PE reads every PE's input) and two-shot (reduce-scatter, then each PE
//! puts its reduced block to the others), reduce-scatter and all-gather. Every PE's
//! results have the same bits: sums are added in PE order.

use core::ffi::c_void;
use core::mem::size_of;

use super::Status;
use super::heap::per_group;
use crate::abi::ShmemHandle;
use crate::dtype::{Bf16, F16};
use crate::redop::Elem;
use crate::shmem::{Block, Group, Shmem};

/// Whether `bytes` from `addr` lie in every PE's heap, mapped here.
fn in_every_heap(sh: Shmem, addr: u64, bytes: u64) -> bool {
    (0..sh.n_pes()).all(|pe| sh.reaches(addr, bytes, pe))
}

/// Whether `[a, a + a_bytes)` and `[b, b + b_bytes)` share a byte.
fn overlap(a: u64, a_bytes: u64, b: u64, b_bytes: u64) -> bool {
    a < b.saturating_add(b_bytes) && b < a.saturating_add(a_bytes)
}

/// The checks every reduction here shares: `T`-aligned buffers whose extents
/// (`dst_count`, `src_count` elements) are in range and do not overlap; the heap view.
///
/// # Safety
/// `heap` points to the handle the host filled.
unsafe fn checked<T: Elem>(heap: *const ShmemHandle, dst: u64, dst_count: usize, src: u64, src_count: usize) -> Option<Shmem> {
    // SAFETY: the caller's contract.
    let sh = unsafe { Shmem::new(heap) };
    let size = size_of::<T>() as u64;
    let dst_bytes = (dst_count as u64).checked_mul(size)?;
    let src_bytes = (src_count as u64).checked_mul(size)?;
    let aligned = dst.is_multiple_of(size) && src.is_multiple_of(size);
    (aligned && !overlap(dst, dst_bytes, src, src_bytes)).then_some(sh)
}

/// One-shot sum all-reduce of `count` elements.
///
/// # Safety
/// As [`Shmem::sum_reduce`], `heap` the host's handle.
unsafe fn all_reduce_sum<G: Group, T: Elem>(heap: *const ShmemHandle, dst: *mut T, src: *const T, count: usize) -> Status {
    // SAFETY: the caller's contract.
    let Some(sh) = (unsafe { checked::<T>(heap, dst as u64, count, src as u64, count) }) else { return Status::InvalidArgument };
    let bytes = (count * size_of::<T>()) as u64;
    if !in_every_heap(sh, dst as u64, bytes) || !in_every_heap(sh, src as u64, bytes) {
        return Status::InvalidArgument;
    }
    // SAFETY: both buffers checked; the rest is the caller's contract.
    Status::from(unsafe { sh.sum_reduce::<G, T>(dst, src, count) })
}

/// Two-shot sum all-reduce of `count` elements, a multiple of the PEs.
///
/// # Safety
/// As [`Shmem::sum_reduce_two_shot`], `heap` the host's handle.
unsafe fn all_reduce_two_shot_sum<G: Group, T: Elem>(heap: *const ShmemHandle, dst: *mut T, src: *const T, count: usize) -> Status {
    // SAFETY: the caller's contract.
    let Some(sh) = (unsafe { checked::<T>(heap, dst as u64, count, src as u64, count) }) else { return Status::InvalidArgument };
    let bytes = (count * size_of::<T>()) as u64;
    if !count.is_multiple_of(sh.n_pes() as usize) || !in_every_heap(sh, dst as u64, bytes) || !in_every_heap(sh, src as u64, bytes) {
        return Status::InvalidArgument;
    }
    // SAFETY: as in `all_reduce_sum`.
    Status::from(unsafe { sh.sum_reduce_two_shot::<G, T>(dst, src, count) })
}

/// Sum reduce-scatter: `count` elements out of `n_pes · count`.
///
/// # Safety
/// As [`Shmem::sum_reduce_scatter`], `heap` the host's handle.
unsafe fn reduce_scatter_sum<G: Group, T: Elem>(heap: *const ShmemHandle, dst: *mut T, src: *const T, count: usize) -> Status {
    // SAFETY: the caller's contract.
    let n_pes = unsafe { Shmem::new(heap) }.n_pes() as usize;
    let Some(src_count) = count.checked_mul(n_pes) else { return Status::InvalidArgument };
    // SAFETY: the caller's contract.
    let Some(sh) = (unsafe { checked::<T>(heap, dst as u64, count, src as u64, src_count) }) else { return Status::InvalidArgument };
    if !in_every_heap(sh, src as u64, (src_count * size_of::<T>()) as u64) {
        return Status::InvalidArgument;
    }
    // SAFETY: `src` checked, `dst` apart from it; the rest is the caller's contract.
    Status::from(unsafe { sh.sum_reduce_scatter::<G, T>(dst, src, count) })
}

/// Declares the block-scope sum collectives of one element type.
macro_rules! sum_collectives {
    ($t:ty, $all_reduce:ident, $two_shot:ident, $reduce_scatter:ident) => {
        per_group! {
            /// Every PE's `dst[i]` becomes the sum over PEs, in PE order, of their
            /// `src[i]`, `i < count`: one-shot (each PE reads every PE's `src`), between
            /// two barriers across every PE. Ordering on return: as a barrier
            /// ([`ferroccl_barrier_all_block`](super::ferroccl_barrier_all_block)).
            /// `Aborted` / `TimedOut` when a wait ended early (then `dst` is undefined and
            /// the kernel should end); `InvalidArgument` (nothing done) when `dst` or
            /// `src` is not a range of every PE's heap, misaligned, or they overlap.
            ///
            /// # Safety
            /// `heap` points to the handle the host filled; `src` and `dst` are symmetric;
            /// every thread of the block calls it with the same arguments, and every PE
            /// calls it as its next barrier.
            all_reduce_sum::<$t>(dst: *mut $t, src: *const $t, count: usize): $all_reduce = Block
        }
        per_group! {
            /// As the one-shot all-reduce of this type, in two shots: each PE sums its
            /// block of `count / n_pes` elements, then puts it to every other PE (three
            /// barriers; each PE loads `count` elements instead of `n_pes · count`).
            /// The same bits. `InvalidArgument` also when `count` is not a multiple of
            /// the PEs.
            ///
            /// # Safety
            /// As the one-shot all-reduce of this type.
            all_reduce_two_shot_sum::<$t>(dst: *mut $t, src: *const $t, count: usize): $two_shot = Block
        }
        per_group! {
            /// `dst[i]` (any global memory) becomes the sum over PEs, in PE order, of
            /// element `my_pe · count + i` of their symmetric `src` (`n_pes · count`
            /// elements), between two barriers across every PE. Errors as the one-shot
            /// all-reduce of this type.
            ///
            /// # Safety
            /// `heap` points to the handle the host filled; `src` is symmetric, `dst` holds
            /// `count` writable elements; every thread of the block calls it with the same
            /// arguments, and every PE calls it as its next barrier.
            reduce_scatter_sum::<$t>(dst: *mut $t, src: *const $t, count: usize): $reduce_scatter = Block
        }
    };
}

sum_collectives!(f32, ferroccl_all_reduce_sum_f32_block, ferroccl_all_reduce_two_shot_sum_f32_block, ferroccl_reduce_scatter_sum_f32_block);
sum_collectives!(f64, ferroccl_all_reduce_sum_f64_block, ferroccl_all_reduce_two_shot_sum_f64_block, ferroccl_reduce_scatter_sum_f64_block);
sum_collectives!(F16, ferroccl_all_reduce_sum_f16_block, ferroccl_all_reduce_two_shot_sum_f16_block, ferroccl_reduce_scatter_sum_f16_block);
sum_collectives!(Bf16, ferroccl_all_reduce_sum_bf16_block, ferroccl_all_reduce_two_shot_sum_bf16_block, ferroccl_reduce_scatter_sum_bf16_block);
sum_collectives!(i32, ferroccl_all_reduce_sum_i32_block, ferroccl_all_reduce_two_shot_sum_i32_block, ferroccl_reduce_scatter_sum_i32_block);
sum_collectives!(u32, ferroccl_all_reduce_sum_u32_block, ferroccl_all_reduce_two_shot_sum_u32_block, ferroccl_reduce_scatter_sum_u32_block);
sum_collectives!(i64, ferroccl_all_reduce_sum_i64_block, ferroccl_all_reduce_two_shot_sum_i64_block, ferroccl_reduce_scatter_sum_i64_block);
sum_collectives!(u64, ferroccl_all_reduce_sum_u64_block, ferroccl_all_reduce_two_shot_sum_u64_block, ferroccl_reduce_scatter_sum_u64_block);

/// All-gather of `bytes` bytes a PE.
///
/// # Safety
/// As [`Shmem::fcollect`], `heap` the host's handle.
unsafe fn all_gather<G: Group>(heap: *const ShmemHandle, dst: *mut c_void, src: *const c_void, bytes: usize) -> Status {
    // SAFETY: the caller's contract.
    let sh = unsafe { Shmem::new(heap) };
    let Some(dst_bytes) = bytes.checked_mul(sh.n_pes() as usize) else { return Status::InvalidArgument };
    if overlap(dst as u64, dst_bytes as u64, src as u64, bytes as u64) || !in_every_heap(sh, dst as u64, dst_bytes as u64) {
        return Status::InvalidArgument;
    }
    // SAFETY: `dst` checked, `src` apart from it; the rest is the caller's contract.
    Status::from(unsafe { sh.fcollect::<G>(dst.cast(), src.cast(), bytes) })
}

per_group! {
    /// Block `p` of every PE's symmetric `dst` (`bytes` bytes at `dst + p · bytes`)
    /// becomes PE `p`'s `src` (any global memory): each PE puts its `src` into every PE's
    /// `dst`, then a barrier across every PE (`nvshmem_fcollect`). Ordering on return: as
    /// a barrier. Errors as the all-reduces; `InvalidArgument` (nothing done) when `dst`
    /// is not a range of every PE's heap or overlaps `src`.
    ///
    /// # Safety
    /// `heap` points to the handle the host filled; no PE reads or writes `dst` from its
    /// previous barrier until this call returns; every thread of the block calls it with
    /// the same arguments, and every PE calls it as its next barrier.
    all_gather(dst: *mut c_void, src: *const c_void, bytes: usize): ferroccl_all_gather_block = Block
}
