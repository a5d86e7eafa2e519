//! The symmetric heap's point-to-point functions: who am I, where is a peer's copy, put,
//! get, put with signal, signal, wait, fence, quiet, barrier.

use core::ffi::c_void;

use super::Status;
use crate::abi::ShmemHandle;
use crate::shmem::{Block, Cmp, Group, Shmem, Signal, SignalOp, Thread, Warp};

/// Declares one `extern "C"` function per group scope, each `$generic::<Group>` (with
/// the element type, where given) on the same arguments, with the documentation given (which states their safety contract).
macro_rules! per_group {
    ($(#[$doc:meta])* $generic:ident $(::<$elem:ty>)? ($($arg:ident: $ty:ty),*): $($name:ident = $group:ty),+) => {
        per_group!(@each [$(#[$doc])*] [$generic $(::<$elem>)?] ($($arg: $ty),*) [$($name = $group),+]);
    };
    (@each $docs:tt $callee:tt $args:tt [$($name:ident = $group:ty),+]) => {
        $(per_group!(@one $docs $callee $args $name = $group);)+
    };
    (@one [$(#[$doc:meta])*] [$generic:ident $(::<$elem:ty>)?] ($($arg:ident: $ty:ty),*) $name:ident = $group:ty) => {
        $(#[$doc])*
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name(heap: *const ShmemHandle, $($arg: $ty),*) -> Status {
            // SAFETY: forwarded: this function's contract is the generic's.
            unsafe { $generic::<$group $(, $elem)?>(heap, $($arg),*) }
        }
    };
}
pub(super) use per_group;

/// This PE's number (`nvshmem_my_pe`).
///
/// # Safety
/// `heap` points to the handle the host filled, unchanged while kernels use it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferroccl_my_pe(heap: *const ShmemHandle) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { Shmem::new(heap) }.my_pe()
}

/// The number of PEs (`nvshmem_n_pes`).
///
/// # Safety
/// As [`ferroccl_my_pe`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferroccl_n_pes(heap: *const ShmemHandle) -> u32 {
    // SAFETY: the caller's contract.
    unsafe { Shmem::new(heap) }.n_pes()
}

/// PE `pe`'s copy of the symmetric address `addr`, for this thread's loads and stores
/// (`nvshmem_ptr`); null when `addr` is not in this PE's heap or `pe` is not reachable.
/// Ordering: none (no memory access).
///
/// # Safety
/// As [`ferroccl_my_pe`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferroccl_ptr(heap: *const ShmemHandle, addr: *const c_void, pe: u32) -> *mut c_void {
    // SAFETY: the caller's contract.
    unsafe { Shmem::new(heap) }.ptr(addr, pe)
}

/// `bytes` from `src` into PE `pe`'s copy of `dst`.
///
/// # Safety
/// `heap` as [`ferroccl_my_pe`]; `src` holds `bytes` readable bytes that do not overlap
/// `dst`'s copy; every thread of the group calls it with the same arguments.
unsafe fn putmem<G: Group>(heap: *const ShmemHandle, dst: *mut c_void, src: *const c_void, bytes: usize, pe: u32) -> Status {
    // SAFETY: the caller's contract.
    let sh = unsafe { Shmem::new(heap) };
    if !sh.reaches(dst as u64, bytes as u64, pe) {
        return Status::InvalidArgument;
    }
    // SAFETY: the range is in `pe`'s heap, mapped here (checked); the rest is the caller's.
    unsafe { sh.put::<G, u8>(dst.cast(), src.cast(), bytes, pe) };
    Status::Success
}

per_group! {
    /// Copies `bytes` bytes from `src` (any global memory) to PE `pe`'s copy of the
    /// symmetric `dst` (`nvshmem_putmem` and its warp and block forms): blocking, so `src`
    /// may be reused on return; the stores are delivered once a [`ferroccl_fence`] (same
    /// PE), [`ferroccl_quiet`] or barrier orders them. Ends with the group's barrier.
    /// `InvalidArgument` (nothing done) when the range is not in the heap or `pe` not
    /// reachable.
    ///
    /// # Safety
    /// `heap` points to the handle the host filled; `src` holds `bytes` readable bytes not
    /// overlapping the destination; every thread of the group calls it with the same
    /// arguments; no conflicting access to the destination.
    putmem(dst: *mut c_void, src: *const c_void, bytes: usize, pe: u32):
        ferroccl_putmem = Thread, ferroccl_putmem_warp = Warp, ferroccl_putmem_block = Block
}

/// `bytes` from PE `pe`'s copy of `src` into `dst`.
///
/// # Safety
/// As [`putmem`], the roles of `src` and `dst` swapped.
unsafe fn getmem<G: Group>(heap: *const ShmemHandle, dst: *mut c_void, src: *const c_void, bytes: usize, pe: u32) -> Status {
    // SAFETY: the caller's contract.
    let sh = unsafe { Shmem::new(heap) };
    if !sh.reaches(src as u64, bytes as u64, pe) {
        return Status::InvalidArgument;
    }
    // SAFETY: as in `putmem`.
    unsafe { sh.get::<G, u8>(dst.cast(), src.cast(), bytes, pe) };
    Status::Success
}

per_group! {
    /// Copies `bytes` bytes from PE `pe`'s copy of the symmetric `src` to `dst` (any
    /// global memory; `nvshmem_getmem` and its warp and block forms): blocking, `dst`
    /// holds the data on return for every thread of the group. The loads are not ordered
    /// after earlier accesses: a wait or barrier before the call orders them.
    /// `InvalidArgument` as [`ferroccl_putmem`].
    ///
    /// # Safety
    /// As [`ferroccl_putmem`], `dst` holding `bytes` writable bytes.
    getmem(dst: *mut c_void, src: *const c_void, bytes: usize, pe: u32):
        ferroccl_getmem = Thread, ferroccl_getmem_warp = Warp, ferroccl_getmem_block = Block
}

/// The signal update of a C call, if its arguments are valid for PE `pe`.
fn signal_of(sh: Shmem, sig: *mut u64, value: u64, op: u32, pe: u32) -> Option<Signal> {
    let op = SignalOp::from_u32(op)?;
    (sig as u64).is_multiple_of(8).then_some(())?;
    sh.reaches(sig as u64, 8, pe).then_some(Signal { sig, value, op })
}

/// `putmem`, then the signal update.
///
/// # Safety
/// As [`putmem`]; `sig` is accessed only atomically.
#[allow(clippy::too_many_arguments, reason = "NVSHMEM's putmem_signal's arguments and the handle")]
unsafe fn putmem_signal<G: Group>(heap: *const ShmemHandle, dst: *mut c_void, src: *const c_void, bytes: usize, sig: *mut u64, value: u64, op: u32, pe: u32) -> Status {
    // SAFETY: the caller's contract.
    let sh = unsafe { Shmem::new(heap) };
    let Some(signal) = signal_of(sh, sig, value, op, pe) else { return Status::InvalidArgument };
    if !sh.reaches(dst as u64, bytes as u64, pe) {
        return Status::InvalidArgument;
    }
    // SAFETY: both ranges checked; the rest is the caller's contract.
    unsafe { sh.put_signal::<G, u8>(dst.cast(), src.cast(), bytes, signal, pe) };
    Status::Success
}

per_group! {
    /// [`ferroccl_putmem`], then PE `pe`'s copy of the signal `sig` updated by `op`
    /// (0: set, 1: add) with `value` (`nvshmem_putmem_signal`): the data is ordered
    /// before the update (a fence between them), so a PE whose
    /// [`ferroccl_signal_wait_until`] sees the update reads the data. `InvalidArgument`
    /// (nothing done) as `ferroccl_putmem`, or for an unknown `op` or a `sig` not an
    /// aligned word of the heap.
    ///
    /// # Safety
    /// As [`ferroccl_putmem`]; `sig` is accessed only atomically (signal updates, waits).
    #[allow(clippy::too_many_arguments, reason = "NVSHMEM's putmem_signal's arguments and the handle")]
    putmem_signal(dst: *mut c_void, src: *const c_void, bytes: usize, sig: *mut u64, value: u64, op: u32, pe: u32):
        ferroccl_putmem_signal = Thread, ferroccl_putmem_signal_warp = Warp, ferroccl_putmem_signal_block = Block
}

/// Updates PE `pe`'s copy of the signal `sig` by `op` (0: set, 1: add) with `value`
/// (`nvshmemx_signal_op`): a relaxed system-scope store or add, ordering nothing else (a
/// [`ferroccl_fence`] before it orders earlier puts to `pe` before it).
/// `InvalidArgument` (nothing done) for an unknown `op`, a `sig` not an aligned word of
/// the heap, or `pe` not reachable.
///
/// # Safety
/// `heap` as [`ferroccl_my_pe`]; `sig` is accessed only atomically.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferroccl_signal_op(heap: *const ShmemHandle, sig: *mut u64, value: u64, op: u32, pe: u32) -> Status {
    // SAFETY: the caller's contract.
    let sh = unsafe { Shmem::new(heap) };
    let Some(signal) = signal_of(sh, sig, value, op, pe) else { return Status::InvalidArgument };
    // SAFETY: checked; atomic access is the caller's contract.
    unsafe { sh.signal_op(signal.sig, signal.value, signal.op, pe) };
    Status::Success
}

/// Waits until this PE's signal `sig` compares with `value` by `cmp` (0: ==, 1: !=,
/// 2: >, 3: >=, 4: <, 5: <=, unsigned) and stores the word seen at `seen` when it is not
/// null (`nvshmem_signal_wait_until`). Polls with acquire loads at system scope: later
/// reads of this PE's heap see what the updating PE published before the update.
/// `Aborted` or `TimedOut` when the abort word is set or the handle's spin budget runs
/// out (never a hang); `InvalidArgument` (no wait) for an unknown `cmp` or a `sig` not an
/// aligned word of this PE's heap.
///
/// # Safety
/// `heap` as [`ferroccl_my_pe`]; `sig` is accessed only atomically; `seen` is null or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferroccl_signal_wait_until(heap: *const ShmemHandle, sig: *const u64, cmp: u32, value: u64, seen: *mut u64) -> Status {
    // SAFETY: the caller's contract.
    let sh = unsafe { Shmem::new(heap) };
    let Some(cmp) = Cmp::from_u32(cmp) else { return Status::InvalidArgument };
    if !(sig as u64).is_multiple_of(8) || !sh.reaches(sig as u64, 8, sh.my_pe()) {
        return Status::InvalidArgument;
    }
    // SAFETY: checked; atomic access is the caller's contract.
    match unsafe { sh.wait_until(sig, cmp, value) } {
        Ok(word) => {
            if !seen.is_null() {
                // SAFETY: the caller's contract.
                unsafe { seen.write(word) };
            }
            Status::Success
        }
        Err(why) => Status::from(Err(why)),
    }
}

/// Orders this thread's earlier puts, AMOs and signal updates to each PE before its later
/// ones to the same PE (`nvshmem_fence`): one `fence.acq_rel.sys`.
///
/// # Safety
/// As [`ferroccl_my_pe`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferroccl_fence(heap: *const ShmemHandle) {
    // SAFETY: the caller's contract.
    unsafe { Shmem::new(heap) }.fence();
}

/// Completes this thread's earlier puts, AMOs and signal updates, to every PE, before its
/// later accesses (`nvshmem_quiet`): one `fence.acq_rel.sys`.
///
/// # Safety
/// As [`ferroccl_my_pe`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferroccl_quiet(heap: *const ShmemHandle) {
    // SAFETY: the caller's contract.
    unsafe { Shmem::new(heap) }.quiet();
}

/// The barrier across every PE.
///
/// # Safety
/// As [`Shmem::barrier_all`], `heap` as [`ferroccl_my_pe`].
unsafe fn barrier_all<G: Group>(heap: *const ShmemHandle) -> Status {
    // SAFETY: the caller's contract.
    Status::from(unsafe { Shmem::new(heap).barrier_all::<G>() })
}

per_group! {
    /// Waits until every PE's group has arrived; every put, AMO and signal update this
    /// PE's group issued before it is complete and seen by every PE before any PE's
    /// accesses after it (`nvshmem_barrier_all` and its warp and block forms). `Aborted`
    /// or `TimedOut` on every thread of the group when a wait ended early; the heap's
    /// barrier state is then no longer agreed between PEs (end the kernel).
    ///
    /// # Safety
    /// `heap` as [`ferroccl_my_pe`]; every thread of the group calls it, every PE calls
    /// it as its next barrier, and no other group of this PE is in a barrier meanwhile.
    barrier_all():
        ferroccl_barrier_all = Thread, ferroccl_barrier_all_warp = Warp, ferroccl_barrier_all_block = Block
}
