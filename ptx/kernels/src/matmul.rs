//! The collective matmuls' kernel (`device_rt::matmul`): a copy lane's put by SMs. (A
//! lane's waits and signals are stream memory operations, no kernels: a wait kernel
//! resident beside a GEMM takes an SM from it.)

use device_rt::abi::ShmemHandle;
use device_rt::matmul::lane::put_by_grid;
use device_rt::shmem::{Shmem, Signal, SignalOp};

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
