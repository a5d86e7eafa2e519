//! Ordering operations: `fence` (per target PE) and `quiet` (completion, to every PE).

use super::pe::Shmem;
use crate::arch::{self, Site};

impl Shmem {
    /// `nvshmem_fence`: this thread's puts, AMOs and signal updates before it, to any one
    /// PE, are seen by that PE before those after it, to that PE (blocking accesses, by
    /// the table of module `shmem`). Here one `fence.acq_rel.sys` (which orders them for
    /// every PE, as `quiet` does). A group's operations are this thread's after the
    /// group's barrier that ends them.
    #[inline(always)]
    pub fn fence(self) {
        arch::site(Site::ShmemFence);
        arch::fence_acq_rel_sys();
    }

    /// `nvshmem_quiet`: every put, get, AMO and signal update this thread issued before
    /// it (blocking and non-blocking) is complete, and they are seen by every PE before
    /// this thread's accesses after it (a PE observes that with a wait or test of a word
    /// this thread updates later). Here one `fence.acq_rel.sys`.
    #[inline(always)]
    pub fn quiet(self) {
        arch::site(Site::ShmemQuiet);
        arch::fence_acq_rel_sys();
    }
}
