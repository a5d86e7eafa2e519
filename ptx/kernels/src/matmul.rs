//! The collective matmuls' one kernel: a lane's wait for a signal word of the symmetric
//! workspace (`device_rt::matmul`), bounded, so that a GEMM or a copy queued behind it on
//! a stream starts once the data it reads has landed or the buffer it writes is free.

use device_rt::abi::ShmemHandle;
use device_rt::shmem::{Cmp, Shmem, SignalOp};
use device_rt::spin::Interrupted;

/// Waits, with one thread, until this PE's `word` is at least `at_least` (acquire at
/// system scope: work queued after the kernel on its stream reads what the writer
/// published before its signal). When the wait ends on the abort flag or the spin
/// budget, `status[0]` becomes 1 (aborted) or 2 (timed out) unless it already holds an
/// error, and the kernel returns (the stream goes on; the host reports the error).
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `word` a symmetric address of a `u64` accessed
/// only atomically; `status` a writable `u32` (host-mapped); one CTA of one thread.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_matmul_wait(handle: *const ShmemHandle, word: *const u64, at_least: u64, status: *mut u32) {
    // SAFETY: this kernel's contract.
    unsafe {
        if let Err(why) = Shmem::new(handle).wait_until(word, Cmp::Ge, at_least) {
            let code = match why {
                Interrupted::Aborted => 1,
                Interrupted::TimedOut => 2,
            };
            if status.read_volatile() == 0 {
                status.write_volatile(code);
            }
        }
    }
}

/// Sets PE `pe`'s copy of the symmetric `word` to `value` with one thread, after a
/// `fence.acq_rel.sys`: everything the stream did before the kernel (GEMMs that read this
/// PE's buffers, copies into `pe`'s) is complete when it starts, and ordered before the
/// store for the PE that sees it.
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `word` a symmetric address of a `u64` accessed
/// only atomically; `pe` a PE whose heap is mapped here; one CTA of one thread.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_matmul_signal(handle: *const ShmemHandle, word: *mut u64, value: u64, pe: u32) {
    device_rt::arch::fence_acq_rel_sys();
    // SAFETY: this kernel's contract.
    unsafe { Shmem::new(handle).signal_op(word, value, SignalOp::Set, pe) };
}
