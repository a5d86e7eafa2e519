//! Signals: 64-bit symmetric words updated atomically (`nvshmemx_signal_op`) and the put
//! that raises one once its data is delivered (`nvshmem_put_signal`).

use super::group::Group;
use super::pe::Shmem;
use crate::arch::{self, AtomicWord, Site};
use crate::redop::Elem;

/// How a signal update changes the signal (`NVSHMEM_SIGNAL_SET`, `NVSHMEM_SIGNAL_ADD`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalOp {
    /// The signal becomes the value.
    Set = 0,
    /// The value is added to the signal (wrapping).
    Add = 1,
}

numbering!(SignalOp, u32, from_u32, [Set, Add]);

/// One signal update: the signal `sig` (a symmetric address), changed by `op` with
/// `value`. What [`Shmem::put_signal`] raises after its data.
#[derive(Clone, Copy, Debug)]
pub struct Signal {
    /// The signal: an aligned symmetric address of a `u64` accessed only atomically.
    pub sig: *mut u64,
    /// The operand of `op`.
    pub value: u64,
    /// How the signal changes.
    pub op: SignalOp,
}

impl Shmem {
    /// Updates PE `pe`'s copy of the signal `sig` with `value` by `op`
    /// (`nvshmemx_signal_op`): a relaxed system-scope store (set) or add. Ordering:
    /// atomic with other signal updates and AMOs on `sig`; orders nothing else (a fence
    /// before it orders earlier puts to `pe` before it, as [`Shmem::put_signal`] does).
    ///
    /// # Safety
    /// `sig` is an aligned symmetric address of a `u64` accessed only atomically (signal
    /// updates, AMOs, waits); `pe`'s heap is mapped here (else the kernel traps).
    #[inline(always)]
    pub unsafe fn signal_op(self, sig: *mut u64, value: u64, op: SignalOp, pe: u32) {
        let at = self.remote(sig as u64, pe) as *mut u64;
        // SAFETY: the caller's contract; `remote` traps unless the word is in `pe`'s heap.
        unsafe {
            match op {
                SignalOp::Set => arch::st_relaxed_sys_global(at, value),
                SignalOp::Add => {
                    u64::atomic_add_relaxed_sys(at, value);
                }
            }
        }
    }

    /// This PE's signal `sig` (`nvshmem_signal_fetch`): one acquire load at system
    /// scope, so once it shows an update, this thread's later reads see what the updater
    /// published before it.
    ///
    /// # Safety
    /// `sig` is an aligned symmetric address of a `u64` accessed only atomically.
    #[inline(always)]
    pub unsafe fn signal_fetch(self, sig: *const u64) -> u64 {
        // SAFETY: the caller's contract; `remote` traps unless the word is in this PE's heap.
        unsafe { arch::ld_acquire_sys_global(self.remote(sig as u64, self.my_pe()) as *const u64) }
    }

    /// [`Shmem::put`] of `n` elements to PE `pe`, then the signal update `signal` on
    /// `pe`, delivered after the data (`nvshmem_put_signal` and its group
    /// variants): the group's barrier, then its thread 0's `fence.acq_rel.sys` and signal
    /// update. So a PE that sees the signal with [`Shmem::wait_until`] reads the data.
    /// Blocking: `src` may be reused on return. Ordering of the whole against other
    /// accesses: a blocking put in the table of module `shmem`.
    ///
    /// # Safety
    /// As [`Shmem::put`] and [`Shmem::signal_op`]; the signal outside the data.
    #[inline(always)]
    pub unsafe fn put_signal<G: Group, T: Elem>(self, dst: *mut T, src: *const T, n: usize, signal: Signal, pe: u32) {
        // SAFETY: the caller's contract (every thread of `G` calls it alike).
        unsafe { self.put::<G, T>(dst, src, n, pe) };
        if G::rank() == 0 {
            arch::site(Site::ShmemSignalFence);
            arch::fence_acq_rel_sys();
            // SAFETY: the caller's contract.
            unsafe { self.signal_op(signal.sig, signal.value, signal.op, pe) };
        }
    }

    /// [`Shmem::put_signal`] as a non-blocking one (`nvshmem_put_signal_nbi`): here the
    /// same operations, issued before it returns (the signal still follows the data);
    /// [`Shmem::quiet`] guarantees their completion.
    ///
    /// # Safety
    /// As [`Shmem::put_signal`].
    #[inline(always)]
    pub unsafe fn put_signal_nbi<G: Group, T: Elem>(self, dst: *mut T, src: *const T, n: usize, signal: Signal, pe: u32) {
        // SAFETY: forwarded.
        unsafe { self.put_signal::<G, T>(dst, src, n, signal, pe) }
    }
}
