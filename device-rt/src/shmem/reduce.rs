//! The team-less sum reduction across every PE, on the device (NVSHMEM's Jacobi example's
//! reduction of the per-PE residuals; `nvshmem_<type>_sum_reduce` over
//! `NVSHMEM_TEAM_WORLD`).

use super::group::Group;
use super::pe::Shmem;
use super::rma::{load_elem, store_elem};
use crate::redop::Elem;
use crate::spin::Interrupted;

impl Shmem {
    /// Every PE's `dest[i]` becomes the sum over PEs of their `source[i]`, `i < n`, added
    /// in PE order (`((s0 + s1) + s2) + …`: the same bits on every PE, floats included).
    ///
    /// A [`Shmem::barrier_all`] (so every PE's source, written before the call and
    /// published by its group's quiet, is complete), then each thread of the group loads
    /// its elements of every PE's source straight from the peers' heaps and stores the sum
    /// locally, then a second `barrier_all` (so no PE changes its source, or reads `dest`,
    /// before every PE has read it). Ordering on return: as `barrier_all`. `Err` on every
    /// thread of the group when a barrier's wait ended early (abort flag, spin budget);
    /// `dest` is then undefined.
    ///
    /// # Safety
    /// `source` and `dest` are symmetric addresses of `n` aligned `T`s that do not overlap;
    /// every PE's heap is mapped here (else the kernel traps); every thread of `G` calls it
    /// with the same arguments and every PE calls it as its next barrier (as
    /// [`Shmem::barrier_all`]).
    #[inline(always)]
    pub unsafe fn sum_reduce<G: Group, T: Elem>(self, dest: *mut T, source: *const T, n: usize) -> Result<(), Interrupted> {
        // SAFETY: the caller's contract.
        unsafe { self.barrier_all::<G>() }?;
        let mut i = G::rank() as usize;
        while i < n {
            // SAFETY: `i < n`: element `i` of `source` is in every PE's heap (the caller's
            // contract; `remote` traps otherwise), complete since the barrier above.
            let at = unsafe { source.add(i) } as u64;
            // SAFETY: as above.
            let mut sum: T = unsafe { load_elem(self.remote(at, 0)) };
            for pe in 1..self.n_pes() {
                // SAFETY: as above.
                sum = T::add(sum, unsafe { load_elem(self.remote(at, pe)) });
            }
            // SAFETY: element `i` of this PE's `dest`, which no other PE accesses and no other
            // thread of the group writes.
            unsafe { store_elem(dest.add(i) as u64, sum) };
            i += G::size() as usize;
        }
        // SAFETY: the caller's contract.
        unsafe { self.barrier_all::<G>() }
    }
}
