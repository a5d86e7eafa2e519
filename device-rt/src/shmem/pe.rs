//! Who this PE is, who its peers are, and where their copies of a symmetric address lie.

use crate::abi::{ShmemHandle, ShmemSync};
use crate::arch;
use crate::spin::SpinGuard;

/// A PE's view of the symmetric heap: its handle, read (never written) by every method.
#[derive(Clone, Copy, Debug)]
pub struct Shmem {
    handle: *const ShmemHandle,
}

impl Shmem {
    /// The view through `handle`.
    ///
    /// # Safety
    /// `handle` points to a `ShmemHandle` that the host filled and nothing writes while
    /// this view is used; its `bases` are the PEs' heaps of `heap_bytes` each, mapped here
    /// (or 0), its own heap starts with a zeroed `ShmemSync`, and `abort` is a readable
    /// `u64` for as long as the view is used. On the host twin, the heaps are accessed
    /// only through `arch`'s functions while kernels run.
    #[inline(always)]
    pub unsafe fn new(handle: *const ShmemHandle) -> Self {
        Self { handle }
    }

    #[inline(always)]
    fn handle(&self) -> &ShmemHandle {
        // SAFETY: `new`'s contract: the handle is valid and unchanged while the view is used.
        unsafe { &*self.handle }
    }

    /// This PE's number (`nvshmem_my_pe`).
    #[inline(always)]
    pub fn my_pe(self) -> u32 {
        self.handle().my_pe
    }

    /// The number of PEs (`nvshmem_n_pes`).
    #[inline(always)]
    pub fn n_pes(self) -> u32 {
        self.handle().n_pes
    }

    /// PE `pe`'s copy of the symmetric address `addr`, as a pointer this thread can load
    /// from and store to (`nvshmem_ptr`); null when `addr` is not in this PE's heap or
    /// `pe`'s heap is not mapped here. For `pe == my_pe`, `addr` itself. Ordering: none
    /// (no memory access).
    #[inline(always)]
    pub fn ptr<T>(self, addr: *const T, pe: u32) -> *mut T {
        match self.translate(addr as u64, pe) {
            Some(at) => at as *mut T,
            None => core::ptr::null_mut(),
        }
    }

    /// Whether `bytes` from the symmetric address `addr` lie in this PE's heap and `pe`'s
    /// heap is mapped here: what an operation on that range of `pe` needs (the operations
    /// trap otherwise). Ordering: none (no memory access).
    #[inline(always)]
    pub fn reaches(self, addr: u64, bytes: u64, pe: u32) -> bool {
        let last = match bytes.checked_sub(1) {
            None => return self.translate(addr, pe).is_some(),
            Some(tail) => addr.checked_add(tail),
        };
        last.is_some_and(|last| self.translate(addr, pe).is_some() && self.translate(last, pe).is_some())
    }

    /// `addr`'s place in `pe`'s heap, if `addr` is symmetric and `pe` reachable
    /// ([`ShmemHandle::translate`]).
    #[inline(always)]
    fn translate(self, addr: u64, pe: u32) -> Option<u64> {
        self.handle().translate(addr, pe)
    }

    /// As [`Shmem::translate`] for an operation that needs the peer: traps when `addr` is
    /// not symmetric or `pe` not reachable (a broken contract of the caller).
    #[inline(always)]
    pub(super) fn remote(self, addr: u64, pe: u32) -> u64 {
        match self.translate(addr, pe) {
            Some(at) => at,
            None => arch::trap(),
        }
    }

    /// The runtime's words at the head of this PE's heap.
    #[inline(always)]
    pub(super) fn sync_words(self) -> *mut ShmemSync {
        let h = self.handle();
        h.bases[h.my_pe as usize % h.bases.len()] as *mut ShmemSync
    }

    /// A spin guard for one wait starting now, with the handle's abort flag and budget.
    #[inline(always)]
    pub(super) fn guard(self) -> SpinGuard {
        let h = self.handle();
        // SAFETY: `new`'s contract keeps `abort` readable while the view is used, and the
        // guard lives within one wait of it.
        unsafe { SpinGuard::new(h.abort as *const u64, h.spin_budget_ns) }
    }
}
