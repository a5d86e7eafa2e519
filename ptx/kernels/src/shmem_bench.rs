//! `ferroccl bench shmem`'s kernels: the symmetric heap's put and get bandwidth, put
//! latency per thread, warp and block, the `put_signal` + `wait_until` round trip and
//! `barrier_all`, between PEs on two GPUs. Each is one device-API call in a loop, so that
//! what the host times is that call.
//!
//! The bandwidth kernels are timed by the host (CUDA events around the launch); the
//! others time themselves on the GPU's global timer, from after one untimed round (which
//! also waits out the skew between the PEs' launches) to the end of the last, and write
//! the span to `elapsed_ns`. Kernels with a wait write 1 to their `status` word when a
//! wait ended early (abort flag, spin budget) and stop.

use device_rt::abi::ShmemHandle;
use device_rt::arch;
use device_rt::shmem::{Block, Cmp, Group, Shmem, Signal, SignalOp, Thread, Warp};

/// Every CTA's slice of a bandwidth kernel's message starts at a multiple of this many
/// bytes, so that its copy moves 16-byte packs wherever the buffers allow.
const SLICE_ALIGN: u64 = 16;

/// This CTA's contiguous part of `bytes` split over the grid, as (offset, length): slices
/// of `bytes / grid` rounded up to [`SLICE_ALIGN`], the last one shorter, any past the end
/// empty.
#[inline(always)]
fn cta_slice(bytes: u64) -> (u64, u64) {
    let slice = bytes.div_ceil(u64::from(arch::grid_dim())).next_multiple_of(SLICE_ALIGN);
    let start = (u64::from(arch::block_idx()) * slice).min(bytes);
    (start, slice.min(bytes - start))
}

/// Which way a bandwidth kernel moves its bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// `put` into the peer's `dst`.
    Put,
    /// `get` from the peer's `src`.
    Get,
}

/// Every CTA moves its slice of `bytes` from `src` to `dst` the `way` given (by the
/// block), `iters` times (the same bytes each time), then thread 0 of the CTA calls
/// `quiet` (the move ended with the CTA's barrier, so its fence completes every thread's
/// stores).
///
/// # Safety
/// As [`ferroccl_shmem_bench_put_bw`] (`Way::Put`) or [`ferroccl_shmem_bench_get_bw`]
/// (`Way::Get`).
#[inline(always)]
unsafe fn move_slices(way: Way, handle: *const ShmemHandle, dst: *mut u8, src: *const u8, bytes: u64, iters: u32, peer: u32) {
    let (at, len) = cta_slice(bytes);
    // The slice is the CTA's: every thread of it takes the same branch.
    if len == 0 {
        return;
    }
    // SAFETY: the caller's contract gives the handle and the buffers; `at + len <= bytes`
    // keeps the slice inside both, and its 16-byte aligned start keeps them aligned; every
    // thread of the CTA calls `put` or `get` with the same arguments.
    unsafe {
        let sh = Shmem::new(handle);
        let (dst, src) = (dst.add(at as usize), src.add(at as usize));
        for _ in 0..iters {
            match way {
                Way::Put => sh.put::<Block, u8>(dst, src, len as usize, peer),
                Way::Get => sh.get::<Block, u8>(dst, src, len as usize, peer),
            }
        }
        if arch::thread_idx() == 0 {
            sh.quiet();
        }
    }
}

/// Put bandwidth: every CTA puts its slice of `src`'s `bytes` into PE `peer`'s `dst`
/// (`put` by the block), `iters` times, then `quiet` ([`move_slices`]).
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `dst` a symmetric address of `bytes` writable
/// bytes and `src` `bytes` readable bytes of global memory, both 16-byte aligned, not
/// overlapping; `peer`'s heap is mapped here; nothing else accesses `dst` on `peer`
/// during the launch; CTAs of whole warps.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_bench_put_bw(handle: *const ShmemHandle, dst: *mut u8, src: *const u8, bytes: u64, iters: u32, peer: u32) {
    // SAFETY: this kernel's contract is `move_slices`' for a put.
    unsafe { move_slices(Way::Put, handle, dst, src, bytes, iters, peer) }
}

/// Get bandwidth: every CTA gets its slice of PE `peer`'s `src` (`bytes` in all) into
/// `dst` (`get` by the block), `iters` times, then `quiet` ([`move_slices`]).
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `src` a symmetric address of `bytes` readable
/// bytes and `dst` `bytes` writable bytes of global memory, both 16-byte aligned, not
/// overlapping; `peer`'s heap is mapped here; nothing writes `src` on `peer` during the
/// launch; CTAs of whole warps.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_bench_get_bw(handle: *const ShmemHandle, dst: *mut u8, src: *const u8, bytes: u64, iters: u32, peer: u32) {
    // SAFETY: this kernel's contract is `move_slices`' for a get.
    unsafe { move_slices(Way::Get, handle, dst, src, bytes, iters, peer) }
}

/// Put latency by the group `G` (NVSHMEM's `shmem_put_latency`): `put` of all `bytes` of
/// `src` into PE `peer`'s `dst`, then `quiet` (by the group's thread 0, after the put's
/// barrier: it completes every thread's stores) and the group's barrier, so that each put
/// is complete before the next starts; one untimed round, then `iters` timed ones.
/// `*elapsed_ns` becomes their span on the global timer (written by thread 0).
///
/// # Safety
/// As [`ferroccl_shmem_bench_put_latency_thread`], every thread of one `G` calling it.
#[inline(always)]
unsafe fn put_latency<G: Group>(handle: *const ShmemHandle, dst: *mut u8, src: *const u8, bytes: u64, iters: u32, peer: u32, elapsed_ns: *mut u64) {
    // SAFETY: the caller's contract gives this PE's handle.
    let sh = unsafe { Shmem::new(handle) };
    let mut start = 0;
    for round in 0..=iters {
        if round == 1 {
            start = arch::globaltimer_ns();
        }
        // SAFETY: the caller's contract gives the buffers and the peer; every thread of `G`
        // calls it with the same arguments.
        unsafe { sh.put::<G, u8>(dst, src, bytes as usize, peer) };
        if G::rank() == 0 {
            sh.quiet();
        }
        G::sync();
    }
    let end = arch::globaltimer_ns();
    if G::rank() == 0 {
        // SAFETY: `elapsed_ns` is a writable `u64` (the caller's contract), written by this
        // thread alone.
        unsafe { elapsed_ns.write_volatile(end - start) };
    }
}

/// [`put_latency`] by one thread (`nvshmem_putmem`).
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `dst` a symmetric address of `bytes` writable
/// bytes and `src` `bytes` readable bytes of global memory, not overlapping; `peer`'s
/// heap is mapped here; nothing else accesses `dst` on `peer` during the launch;
/// `elapsed_ns` a writable `u64`; one CTA of one thread.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_bench_put_latency_thread(handle: *const ShmemHandle, dst: *mut u8, src: *const u8, bytes: u64, iters: u32, peer: u32, elapsed_ns: *mut u64) {
    // SAFETY: this kernel's contract, with its one thread as the group.
    unsafe { put_latency::<Thread>(handle, dst, src, bytes, iters, peer, elapsed_ns) }
}

/// [`put_latency`] by one warp (`nvshmemx_putmem_warp`).
///
/// # Safety
/// As [`ferroccl_shmem_bench_put_latency_thread`], for one CTA of one warp.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_bench_put_latency_warp(handle: *const ShmemHandle, dst: *mut u8, src: *const u8, bytes: u64, iters: u32, peer: u32, elapsed_ns: *mut u64) {
    // SAFETY: this kernel's contract, with its one full warp as the group.
    unsafe { put_latency::<Warp>(handle, dst, src, bytes, iters, peer, elapsed_ns) }
}

/// [`put_latency`] by one CTA (`nvshmemx_putmem_block`).
///
/// # Safety
/// As [`ferroccl_shmem_bench_put_latency_thread`], for one CTA of whole warps.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_bench_put_latency_block(handle: *const ShmemHandle, dst: *mut u8, src: *const u8, bytes: u64, iters: u32, peer: u32, elapsed_ns: *mut u64) {
    // SAFETY: this kernel's contract, with its one CTA as the group.
    unsafe { put_latency::<Block>(handle, dst, src, bytes, iters, peer, elapsed_ns) }
}

/// `put_signal` + `wait_until` ping-pong between PE 0 and PE 1, one thread each: in round
/// `r` PE 0 puts its 8-byte `src` into PE 1's `dst` with the signal `sig` set to `r`, PE 1
/// waits until its `sig` is at least `r` and answers the same way, and PE 0 waits for the
/// answer. The rounds are `first_round + 1 ..= first_round + 1 + iters`: every launch
/// passes the last round of the one before, so the signals only rise. Ordering:
/// `put_signal` fences (`fence.acq_rel.sys`) between the data and the signal's relaxed
/// system-scope store, and `wait_until` polls with acquire loads, so a PE that sees round
/// `r`'s signal sees round `r`'s data. Round `first_round + 1` is untimed; each PE's
/// `*elapsed_ns` becomes the span of the others on the global timer (PE 0's covers
/// `iters` whole round trips). `*status` becomes 1 when a wait ended early; PEs past 1
/// return at once.
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `src` and `dst` symmetric addresses of a `u64`
/// (distinct), `sig` of a `u64` accessed only atomically, below `first_round + 1` on both
/// PEs; PE 1's heap mapped on PE 0's device and PE 0's on PE 1's; `elapsed_ns` a writable
/// `u64` and `status` a writable `u32`; PE 0 and PE 1 launch it at once with the same
/// `first_round` and `iters`, one CTA of one thread.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_bench_signal_pingpong(
    handle: *const ShmemHandle,
    dst: *mut u64,
    src: *const u64,
    sig: *mut u64,
    first_round: u64,
    iters: u32,
    elapsed_ns: *mut u64,
    status: *mut u32,
) {
    // SAFETY: this kernel's contract gives this PE's handle.
    let sh = unsafe { Shmem::new(handle) };
    let me = sh.my_pe();
    if me > 1 {
        return;
    }
    let peer = 1 - me;
    let mut start = 0;
    for round in first_round + 1..=first_round + 1 + u64::from(iters) {
        if round == first_round + 2 {
            start = arch::globaltimer_ns();
        }
        let signal = Signal { sig, value: round, op: SignalOp::Set };
        // SAFETY: this kernel's contract gives the symmetric words and the mapped peer; `dst`
        // on `peer` is written by this thread alone, and read by no one.
        unsafe {
            if me == 0 {
                sh.put_signal::<Thread, u64>(dst, src, 1, signal, peer);
            }
            if sh.wait_until(sig, Cmp::Ge, round).is_err() {
                status.write_volatile(1);
                return;
            }
            if me == 1 {
                sh.put_signal::<Thread, u64>(dst, src, 1, signal, peer);
            }
        }
    }
    let end = arch::globaltimer_ns();
    // SAFETY: `elapsed_ns` is a writable `u64` (this kernel's contract), written by this
    // thread alone.
    unsafe { elapsed_ns.write_volatile(end - start) };
}

/// `barrier_all` by one CTA per PE, `1 + iters` times: the first untimed, then `iters`
/// timed; `*elapsed_ns` becomes their span on the global timer (written by thread 0).
/// `*status` becomes 1 when a wait ended early (then the kernel stops).
///
/// # Safety
/// `handle` is this PE's `ShmemHandle`; `elapsed_ns` a writable `u64` and `status` a
/// writable `u32`; every PE launches it at once, with the same `iters`, as its next
/// barriers, one CTA of whole warps.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_bench_barrier(handle: *const ShmemHandle, iters: u32, elapsed_ns: *mut u64, status: *mut u32) {
    // SAFETY: this kernel's contract gives this PE's handle.
    let sh = unsafe { Shmem::new(handle) };
    let mut start = 0;
    for round in 0..=iters {
        if round == 1 {
            start = arch::globaltimer_ns();
        }
        // SAFETY: this kernel's contract: every PE's one CTA calls it as its next barrier.
        // On `Err` every thread of the CTA leaves (the error is the whole CTA's).
        if unsafe { sh.barrier_all::<Block>() }.is_err() {
            if arch::thread_idx() == 0 {
                // SAFETY: a writable `u32` (this kernel's contract), written by thread 0 alone.
                unsafe { status.write_volatile(1) };
            }
            return;
        }
    }
    let end = arch::globaltimer_ns();
    if arch::thread_idx() == 0 {
        // SAFETY: a writable `u64` (this kernel's contract), written by thread 0 alone.
        unsafe { elapsed_ns.write_volatile(end - start) };
    }
}
