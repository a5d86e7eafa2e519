//! The cuda-interop example's kernel in Rust: what `fused.cu` does in CUDA C++, on the
//! device runtime's Rust API (`device_rt::shmem`) instead of its C functions. A Rust
//! kernel crate needs no linking: it depends on device-rt like any crate, and the
//! compiler inlines what it calls (here it is built into the runtime's own module, its
//! door is `ptx/kernels/src/interop.rs`). The same code runs on the host twin
//! (`tests/twin.rs`), which is how a user's kernel gets unit tests without a GPU.
#![no_std]

use device_rt::arch;
use device_rt::shmem::{Block, Group, Shmem};
use device_rt::spin::Interrupted;

/// `x[i] *= scale`, then every PE's `sum[i]` = the sum over PEs, in PE order, of their
/// scaled `x[i]` (one-shot, between two barriers across every PE), then `sum[i] +=
/// bias[i]`, `i < n`. `Err` where the all-reduce's wait ended early (abort word, spin
/// budget): `sum` is then undefined.
///
/// # Safety
/// `x` and `sum` are symmetric addresses of `n` floats apart from each other, `bias` `n`
/// readable floats; every thread of the CTA calls this, one CTA per PE, and every PE calls
/// it as its next barrier.
pub unsafe fn scale_all_reduce_bias(sh: Shmem, x: *mut f32, sum: *mut f32, bias: *const f32, scale: f32, n: usize) -> Result<(), Interrupted> {
    let (first, stride) = (arch::thread_idx() as usize, arch::block_dim() as usize);
    for i in (first..n).step_by(stride) {
        // SAFETY: `i < n`, this PE's own `x` (the caller's contract), each element by one thread.
        unsafe { x.add(i).write(x.add(i).read() * scale) };
    }
    // The scaled values are read by every PE inside the all-reduce, after its first
    // barrier (the block's barrier, then a system-scope fence by each announcing thread).
    Block::sync();
    // SAFETY: the caller's contract.
    unsafe { sh.sum_reduce::<Block, f32>(sum, x, n) }?;
    for i in (first..n).step_by(stride) {
        // SAFETY: `i < n`; element `i` of `sum` was written by this thread (the reduction
        // splits the elements over the block as this loop does) and `bias` holds `n`.
        unsafe { sum.add(i).write(sum.add(i).read() + bias.add(i).read()) };
    }
    Ok(())
}
