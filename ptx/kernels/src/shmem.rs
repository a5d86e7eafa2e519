//! The symmetric heap's device API in the PTX module: one small kernel that instantiates
//! its operations, so ptxas checks their instructions (`bar.warp.sync`, the relaxed
//! system-scope atomics, the barrier's polls). A GPU self-test over PEs comes with the
//! host API on streams; `examples/shift --check-api` launches this kernel on GPUs.

use device_rt::abi::ShmemHandle;
use device_rt::shmem::{Block, Cmp, Shmem, Signal, SignalOp, Warp};

/// NVSHMEM's ring shift, by blocks: every PE puts `n` floats of `src` into
/// the next PE's `dst` and raises its `sig` (warp 0 of the block), waits for its own
/// `sig`, sums `dst` over all PEs into `sum`, counts itself in PE 0's `counters[0]` and
/// claims PE 0's `counters[1]` if no PE has, then meets the others at a barrier.
/// `status[0]`: unchanged, or 1 when a wait ended early.
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `src`, `dst` and `sum` are symmetric addresses of
/// `n` floats (`sum` disjoint from `dst`), `sig` of a zeroed `u64`, `counters` of two;
/// `status` a writable `u32`; every PE launches it once, one CTA of whole warps.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_ring_shift(
    handle: *const ShmemHandle,
    src: *const f32,
    dst: *mut f32,
    sum: *mut f32,
    sig: *mut u64,
    counters: *mut u64,
    n: u32,
    status: *mut u32,
) {
    // SAFETY: this kernel's contract gives the handle, the symmetric buffers and their
    // sizes, and that every PE runs it once with one CTA.
    unsafe {
        let sh = Shmem::new(handle);
        let next = (sh.my_pe() + 1) % sh.n_pes();
        if device_rt::arch::warp_idx() == 0 {
            sh.put_signal::<Warp, f32>(dst, src, n as usize, Signal { sig, value: 1, op: SignalOp::Add }, next);
        }
        let waited = match device_rt::arch::thread_idx() {
            0 => sh.wait_until(sig, Cmp::Ge, 1u64).map(|_| ()),
            _ => Ok(()),
        };
        let reduced = sh.sum_reduce::<Block, f32>(sum, dst, n as usize);
        if device_rt::arch::thread_idx() == 0 {
            sh.atomic_fetch_inc(counters, 0);
            sh.atomic_compare_swap(counters.add(1), 0u64, u64::from(sh.my_pe()) + 1, 0);
            sh.quiet();
        }
        let met = sh.barrier_all::<Block>();
        if waited.is_err() || reduced.is_err() || met.is_err() {
            status.write_volatile(1);
        }
    }
}

/// NVSHMEM's `simple_shift` example: this PE's number into the next PE's `destination`
/// (`nvshmem_int_p`), by one thread.
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `destination` a symmetric address of an `i32`.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_simple_shift(handle: *const ShmemHandle, destination: *mut i32) {
    // SAFETY: this kernel's contract gives the handle and the symmetric `i32`.
    unsafe {
        let sh = Shmem::new(handle);
        sh.p(destination, sh.my_pe() as i32, (sh.my_pe() + 1) % sh.n_pes());
    }
}

/// `barrier_all` of every PE for the host (NVSHMEM's `nvshmemx_barrier_all_on_stream`,
/// here a one-CTA launch): every earlier put of this PE complete and visible, every PE
/// arrived. `status[0]` becomes 1 when the wait ended early (abort flag, spin budget).
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `status` a writable `u32`; every PE launches it as
/// its next barrier, one CTA of whole warps.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_barrier_all(handle: *const ShmemHandle, status: *mut u32) {
    // SAFETY: this kernel's contract: every PE runs it once as its next barrier, one CTA.
    unsafe {
        if Shmem::new(handle).barrier_all::<Block>().is_err() && device_rt::arch::thread_idx() == 0 {
            status.write_volatile(1);
        }
    }
}
