//! [NVSHMEM](https://docs.nvidia.com/nvshmem/api/)'s Jacobi example, device side: a 1-D
//! heat equation on `n_pes × n` points split over the PEs of the symmetric heap (`f_old`,
//! `f` and the residual are symmetric), the two boundary points fixed, every other point
//! relaxed to the mean of its neighbours, a neighbour on another PE read with `g()`. Each
//! step also sums the squared change of every point: per thread with one float atomic
//! each (the example's first kernel), or per block with a block reduction
//! (`device_rt::block`, cub's `BlockReduce`) and one atomic per block. Grid-stride loops,
//! so any launch shape covers the points.
//!
//! A user's kernel code: the `extern "gpu-kernel"` doors to these functions are in the
//! PTX module's kernel crate (`ptx/kernels/src/jacobi.rs`); the host program is
//! `examples/jacobi`.
#![no_std]

use device_rt::arch;
use device_rt::block::block_reduce;
use device_rt::redop::{RedOp, Sum};
use device_rt::shmem::Shmem;

/// Sets this PE's `n` points of `f`: the first PE's first point to `t_left`, the last
/// PE's last point to `t_right`, every other point to 0 (the example's `initialize`).
///
/// # Safety
/// `f` is a symmetric address of `n` floats; every thread of the grid calls this.
pub unsafe fn initialize(sh: Shmem, f: *mut f32, t_left: f32, t_right: f32, n: u32) {
    let (me, last) = (sh.my_pe(), sh.n_pes() - 1);
    let mut idx = global_thread();
    while idx < n {
        let v = match idx {
            0 if me == 0 => t_left,
            i if i == n - 1 && me == last => t_right,
            _ => 0.0,
        };
        // SAFETY: `idx < n`, inside this PE's `n` floats of `f` (the caller's contract);
        // each point is written by one thread.
        unsafe { f.add(idx as usize).write(v) };
        idx += grid_threads();
    }
}

/// Relaxes point `idx` (< `n`) of this PE: `f[idx] = (left + right) / 2` from `f_old`,
/// the neighbour across a PE boundary read from that PE with `g()`; returns the squared
/// change, or 0 for a fixed boundary point.
///
/// # Safety
/// As [`step_atomic`], and `idx < n`.
#[inline(always)]
unsafe fn relax(sh: Shmem, f_old: *const f32, f: *mut f32, n: u32, idx: u32) -> f32 {
    let (me, last) = (sh.my_pe(), sh.n_pes() - 1);
    if (me == 0 && idx == 0) || (me == last && idx == n - 1) {
        return 0.0;
    }
    let i = idx as usize;
    // SAFETY: `idx < n`; a neighbour index is read here only when inside `0..n`, else from
    // the neighbouring PE (which exists: the boundary points returned above), at its
    // symmetric copy of `f_old`, complete since the barrier that ended the previous step.
    let (left, right, old) = unsafe {
        let left = if idx == 0 { sh.g(f_old.add(n as usize - 1), me - 1) } else { f_old.add(i - 1).read() };
        let right = if idx == n - 1 { sh.g(f_old, me + 1) } else { f_old.add(i + 1).read() };
        (left, right, f_old.add(i).read())
    };
    let new = 0.5 * (right + left);
    // SAFETY: point `idx` of this PE's `f`, written by this thread only.
    unsafe { f.add(i).write(new) };
    (new - old) * (new - old)
}

/// One Jacobi step over this PE's `n` points, from `f_old` into `f`, adding every point's
/// squared change to `*l2` with one float atomic each (the example's first kernel).
///
/// # Safety
/// `f_old` and `f` are disjoint symmetric addresses of `n` floats (`n ≥ 1`) whose copies
/// on the neighbouring PEs are complete (a barrier since they were written); `l2` is a
/// float in global memory that only float atomics touch while the kernel runs; every
/// thread of the grid calls this.
pub unsafe fn step_atomic(sh: Shmem, f_old: *const f32, f: *mut f32, l2: *mut f32, n: u32) {
    let mut idx = global_thread();
    while idx < n {
        // SAFETY: the caller's contract, and `idx < n`.
        let change = unsafe { relax(sh, f_old, f, n, idx) };
        // SAFETY: `l2` as the caller's contract says.
        unsafe { arch::red_add_relaxed_gpu_f32(l2 as u64, change) };
        idx += grid_threads();
    }
}

/// As [`step_atomic`], each thread summing its points' squared changes, the block
/// reducing those sums (`scratch`: shared memory for one float per warp) and its thread 0
/// adding the block's sum to `*l2` with one atomic.
///
/// # Safety
/// As [`step_atomic`]; the block is a multiple of 32 threads; `scratch` is this CTA's
/// shared memory for `block_dim / 32` floats, used by nothing else during the call.
pub unsafe fn step_block_reduce(sh: Shmem, f_old: *const f32, f: *mut f32, l2: *mut f32, n: u32, scratch: *mut f32) {
    let mut sum = 0.0f32;
    let mut idx = global_thread();
    while idx < n {
        // SAFETY: the caller's contract, and `idx < n`.
        sum += unsafe { relax(sh, f_old, f, n, idx) };
        idx += grid_threads();
    }
    let op = Sum::<f32>::new(0);
    // SAFETY: every thread of the block calls this (the caller's contract: the whole grid
    // calls `step_block_reduce`), the block is a multiple of 32 threads, and `scratch` holds
    // one float per warp for this call alone.
    let block_sum = unsafe { block_reduce(&op, sum, arch::thread_idx(), arch::block_dim(), 1, scratch) };
    if arch::thread_idx() == 0 {
        // SAFETY: `l2` as the caller's contract says.
        unsafe { arch::red_add_relaxed_gpu_f32(l2 as u64, block_sum) };
    }
}

/// This thread's index in the grid.
fn global_thread() -> u32 {
    arch::block_idx() * arch::block_dim() + arch::thread_idx()
}

/// Threads in the grid.
fn grid_threads() -> u32 {
    arch::grid_dim() * arch::block_dim()
}
