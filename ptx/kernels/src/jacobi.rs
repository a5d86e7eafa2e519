//! NVSHMEM's Jacobi example (`examples/jacobi`): the doors to its device code
//! (`ferroccl-jacobi-device`), a user's kernels in the same PTX module as the runtime.
//! Every kernel takes this PE's `ShmemHandle` first.

use device_rt::abi::ShmemHandle;
use device_rt::shmem::{Block, Shmem};
use ferroccl_jacobi_device as jacobi;

/// Sets this PE's `n` points of `f` (boundaries `t_left`, `t_right`, else 0).
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `f` a symmetric address of `n` floats.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_jacobi_initialize(handle: *const ShmemHandle, f: *mut f32, t_left: f32, t_right: f32, n: u32) {
    // SAFETY: this kernel's contract; every thread of the grid runs it.
    unsafe { jacobi::initialize(Shmem::new(handle), f, t_left, t_right, n) }
}

/// One Jacobi step, one float atomic per point into `*l2`.
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; as `ferroccl_jacobi_device::step_atomic`.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_jacobi_step_atomic(handle: *const ShmemHandle, f_old: *const f32, f: *mut f32, l2: *mut f32, n: u32) {
    // SAFETY: this kernel's contract; every thread of the grid runs it.
    unsafe { jacobi::step_atomic(Shmem::new(handle), f_old, f, l2, n) }
}

/// One Jacobi step, one float atomic per block into `*l2` after a block reduction.
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; as `ferroccl_jacobi_device::step_block_reduce`;
/// blocks of a multiple of 32 threads with `block_dim / 32 × 4` bytes of dynamic shared
/// memory.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_jacobi_step_block_reduce(handle: *const ShmemHandle, f_old: *const f32, f: *mut f32, l2: *mut f32, n: u32) {
    // SAFETY: this kernel's contract (the dynamic shared memory holds one float per warp
    // and nothing else uses it); every thread of the grid runs it.
    unsafe { jacobi::step_block_reduce(Shmem::new(handle), f_old, f, l2, n, device_rt::arch::dyn_smem().cast()) }
}

/// `*sum` becomes the sum over PEs of their `*l2` (in PE order, the same bits on every
/// PE), between two barriers of every PE (`Shmem::sum_reduce`); `*status` becomes 1 if a
/// wait ended early (abort flag, spin budget).
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `sum` and `l2` distinct symmetric addresses of one
/// float; `status` a writable `u32`; every PE launches it once, one CTA of whole warps.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_jacobi_residual_sum(handle: *const ShmemHandle, sum: *mut f32, l2: *const f32, status: *mut u32) {
    // SAFETY: this kernel's contract: every PE runs it once with one CTA, the buffers are
    // symmetric and disjoint.
    unsafe {
        if Shmem::new(handle).sum_reduce::<Block, f32>(sum, l2, 1).is_err() && device_rt::arch::thread_idx() == 0 {
            status.write_volatile(1);
        }
    }
}
