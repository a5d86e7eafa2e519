//! Atomic memory operations on a peer's symmetric words (`nvshmem_atomic_*`): one
//! `atom.relaxed.sys` each, atomic with every other AMO and signal update on the word,
//! ordered with nothing else (the table of module `shmem`: AMOs are blocking accesses).

use super::pe::Shmem;
use crate::arch::{self, AtomicWord};

/// The words AMOs, signals and waits work on: `u32` and `u64` (compared unsigned).
pub trait ShmemWord: AtomicWord + PartialOrd {
    /// The word 1 (what `inc` adds).
    const ONE: Self;
}

impl ShmemWord for u32 {
    const ONE: Self = 1;
}

impl ShmemWord for u64 {
    const ONE: Self = 1;
}

impl Shmem {
    /// Adds `v` to PE `pe`'s copy of `dst` (wrapping) and returns the value before
    /// (`nvshmem_atomic_fetch_add`). Ordering: atomic; orders nothing else.
    ///
    /// # Safety
    /// `dst` is an aligned symmetric address of a `W` that is accessed only atomically
    /// (AMOs, signal updates, waits) while others may touch it; `pe`'s heap is mapped here
    /// (else the kernel traps).
    #[inline(always)]
    pub unsafe fn atomic_fetch_add<W: ShmemWord>(self, dst: *mut W, v: W, pe: u32) -> W {
        // SAFETY: the caller's contract; `remote` traps unless the word is in `pe`'s heap.
        unsafe { W::atomic_add_relaxed_sys(self.remote(dst as u64, pe) as *mut W, v) }
    }

    /// [`Shmem::atomic_fetch_add`] without the fetch (`nvshmem_atomic_add`).
    ///
    /// # Safety
    /// As [`Shmem::atomic_fetch_add`].
    #[inline(always)]
    pub unsafe fn atomic_add<W: ShmemWord>(self, dst: *mut W, v: W, pe: u32) {
        // SAFETY: forwarded.
        unsafe { self.atomic_fetch_add(dst, v, pe) };
    }

    /// Adds 1 and returns the value before (`nvshmem_atomic_fetch_inc`).
    ///
    /// # Safety
    /// As [`Shmem::atomic_fetch_add`].
    #[inline(always)]
    pub unsafe fn atomic_fetch_inc<W: ShmemWord>(self, dst: *mut W, pe: u32) -> W {
        // SAFETY: forwarded.
        unsafe { self.atomic_fetch_add(dst, W::ONE, pe) }
    }

    /// Adds 1 (`nvshmem_atomic_inc`).
    ///
    /// # Safety
    /// As [`Shmem::atomic_fetch_add`].
    #[inline(always)]
    pub unsafe fn atomic_inc<W: ShmemWord>(self, dst: *mut W, pe: u32) {
        // SAFETY: forwarded.
        unsafe { self.atomic_fetch_add(dst, W::ONE, pe) };
    }

    /// Stores `value` into PE `pe`'s copy of `dst` if it holds `cond`; returns the value
    /// found (`nvshmem_atomic_compare_swap`). Ordering: atomic; orders nothing else.
    ///
    /// # Safety
    /// As [`Shmem::atomic_fetch_add`].
    #[inline(always)]
    pub unsafe fn atomic_compare_swap<W: ShmemWord>(self, dst: *mut W, cond: W, value: W, pe: u32) -> W {
        // SAFETY: as in `atomic_fetch_add`.
        unsafe { W::atomic_cas_relaxed_sys(self.remote(dst as u64, pe) as *mut W, cond, value) }
    }

    /// Stores `value` into PE `pe`'s copy of `dst` and returns the value before
    /// (`nvshmem_atomic_swap`). Ordering: atomic; orders nothing else.
    ///
    /// # Safety
    /// As [`Shmem::atomic_fetch_add`].
    #[inline(always)]
    pub unsafe fn atomic_swap<W: ShmemWord>(self, dst: *mut W, value: W, pe: u32) -> W {
        // SAFETY: as in `atomic_fetch_add`.
        unsafe { W::atomic_exch_relaxed_sys(self.remote(dst as u64, pe) as *mut W, value) }
    }

    /// Reads PE `pe`'s copy of `src` atomically (`nvshmem_atomic_fetch`): one
    /// `ld.relaxed.sys`. Ordering: orders nothing else.
    ///
    /// # Safety
    /// As [`Shmem::atomic_fetch_add`], for a readable word.
    #[inline(always)]
    pub unsafe fn atomic_fetch<W: ShmemWord>(self, src: *const W, pe: u32) -> W {
        // SAFETY: as in `atomic_fetch_add`.
        unsafe { arch::ld_relaxed_sys_global(self.remote(src as u64, pe) as *const W) }
    }

    /// Stores `value` into PE `pe`'s copy of `dst` atomically (`nvshmem_atomic_set`):
    /// one `st.relaxed.sys`. Ordering: orders nothing else.
    ///
    /// # Safety
    /// As [`Shmem::atomic_fetch_add`].
    #[inline(always)]
    pub unsafe fn atomic_set<W: ShmemWord>(self, dst: *mut W, value: W, pe: u32) {
        // SAFETY: as in `atomic_fetch_add`.
        unsafe { arch::st_relaxed_sys_global(self.remote(dst as u64, pe) as *mut W, value) }
    }
}
