//! The all-gather across every PE (`nvshmem_fcollect` over `NVSHMEM_TEAM_WORLD`).

use super::group::Group;
use super::pe::Shmem;
use crate::spin::Interrupted;

impl Shmem {
    /// Block `my_pe` of every PE's `dest` (`bytes` bytes at `dest + my_pe · bytes`)
    /// becomes this PE's `source`: the group puts it into every PE's `dest` (its own
    /// included), then a `barrier_all`, after which every PE's `dest` holds every PE's
    /// block. Ordering on return: as `barrier_all`. `Err` on every thread of the group when
    /// the barrier's wait ended early; `dest` is then undefined.
    ///
    /// # Safety
    /// `dest` is a symmetric address of `n_pes · bytes` writable bytes that no PE reads or
    /// writes from the previous barrier until this one returns, `source` `bytes` readable
    /// bytes (any global memory) outside `dest`; every PE's heap is mapped here (else the
    /// kernel traps); as [`Shmem::barrier_all`] otherwise.
    #[inline(always)]
    pub unsafe fn fcollect<G: Group>(self, dest: *mut u8, source: *const u8, bytes: usize) -> Result<(), Interrupted> {
        // SAFETY: this PE's block of `dest` (the caller's contract).
        let block = unsafe { dest.add(self.my_pe() as usize * bytes) };
        for pe in 0..self.n_pes() {
            // SAFETY: the caller's contract: the block is symmetric and this PE's alone.
            unsafe { self.put::<G, u8>(block, source, bytes, pe) };
        }
        // SAFETY: the caller's contract.
        unsafe { self.barrier_all::<G>() }
    }
}
