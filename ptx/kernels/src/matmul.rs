//! The collective matmuls' kernels (`device_rt::matmul`): a lane's bounded wait for a
//! signal word of the symmetric workspace, so that a GEMM or a copy queued behind it on a
//! stream starts once the data it reads has landed or the buffer it writes is free; and a
//! copy lane's put by SMs. (A lane's signal is a stream memory operation, no kernel.)

use device_rt::abi::ShmemHandle;
use device_rt::matmul::lane::put_by_grid;
use device_rt::shmem::{Cmp, Shmem, Signal, SignalOp};
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

/// A copy lane's put by SMs: the grid copies `bytes` (a multiple of 16) from `src` to the
/// symmetric `dst` on PE `pe`, each CTA a slice, and the last CTA to finish sets `pe`'s
/// `word` to `value` (`device_rt::matmul::lane::put_by_grid`).
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `dst` a symmetric range of `bytes`, `src` a range
/// of `bytes` of this PE; `word` a symmetric `u64` accessed only atomically; `arrived` a
/// `u64` of this PE's memory that only launches of this grid size use, one at a time.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "gpu-kernel" fn ferroccl_matmul_put(handle: *const ShmemHandle, dst: u64, src: u64, bytes: u64, word: *mut u64, value: u64, pe: u32, arrived: *mut u64) {
    let signal = Signal { sig: word, value, op: SignalOp::Set };
    // SAFETY: this kernel's contract.
    unsafe { put_by_grid(Shmem::new(handle), dst, src, bytes, signal, pe, arrived) };
}
