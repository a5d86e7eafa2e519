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
        // SAFETY: the caller's contract, `source` complete on every PE since the barrier.
        unsafe { self.sum_block::<G, T>(dest, source, n) };
        // SAFETY: the caller's contract.
        unsafe { self.barrier_all::<G>() }
    }

    /// Every PE's `dest[i]` becomes the sum over PEs of element `my_pe · n + i` of their
    /// `source`, `i < n`, added in PE order (the bits [`Shmem::sum_reduce`] gives that
    /// element): NCCL's reduce-scatter over the heap. A `barrier_all`, each thread of the
    /// group loading its elements of this PE's block from every PE, local stores, and a
    /// second `barrier_all` (no PE changes its source before every PE has read it).
    /// Ordering on return: as `barrier_all`. `Err` on every thread of the group when a
    /// barrier's wait ended early; `dest` is then undefined.
    ///
    /// # Safety
    /// `source` is a symmetric address of `n_pes · n` aligned `T`s, `dest` holds `n`
    /// writable aligned `T`s (any global memory) outside every PE's `source`; every PE's
    /// heap is mapped here (else the kernel traps); as [`Shmem::barrier_all`] otherwise.
    #[inline(always)]
    pub unsafe fn sum_reduce_scatter<G: Group, T: Elem>(self, dest: *mut T, source: *const T, n: usize) -> Result<(), Interrupted> {
        // SAFETY: the caller's contract.
        unsafe { self.barrier_all::<G>() }?;
        // SAFETY: this PE's block of `source` (the caller's contract).
        let block = unsafe { source.add(self.my_pe() as usize * n) };
        // SAFETY: the block and `dest` as the caller's contract gives them, complete since
        // the barrier.
        unsafe { self.sum_block::<G, T>(dest, block, n) };
        // SAFETY: the caller's contract.
        unsafe { self.barrier_all::<G>() }
    }

    /// [`Shmem::sum_reduce`] in two steps, as two-shot all-reduce runs: each PE sums its
    /// block of `n / n_pes` elements into its own `dest` (as [`Shmem::sum_reduce_scatter`]),
    /// then puts that block into every other PE's `dest`, then a `barrier_all`. The same
    /// bits as `sum_reduce`; three barriers to its two, each PE loading `n` elements to its
    /// `n · n_pes`. Ordering on return and errors: as `sum_reduce`.
    ///
    /// # Safety
    /// As [`Shmem::sum_reduce`], with `n` a multiple of `n_pes` and `dest` also symmetric.
    #[inline(always)]
    pub unsafe fn sum_reduce_two_shot<G: Group, T: Elem>(self, dest: *mut T, source: *const T, n: usize) -> Result<(), Interrupted> {
        let (me, n_pes) = (self.my_pe(), self.n_pes());
        let block = n / n_pes as usize;
        // SAFETY: the caller's contract: this PE's block of `dest` and `source`.
        let (mine, from) = unsafe { (dest.add(me as usize * block), source.add(me as usize * block)) };
        // SAFETY: the caller's contract.
        unsafe { self.barrier_all::<G>() }?;
        // SAFETY: as above, complete since the barrier.
        unsafe { self.sum_block::<G, T>(mine, from, block) };
        for pe in (0..n_pes).filter(|&pe| pe != me) {
            // SAFETY: this PE's block of `dest` in every PE's heap (symmetric, the caller's
            // contract), written by this PE alone.
            unsafe { self.put::<G, T>(mine, mine, block, pe) };
        }
        // SAFETY: the caller's contract.
        unsafe { self.barrier_all::<G>() }
    }

    /// `dest[i]` = the sum over PEs, in PE order, of their `source[i]`, `i < n`, each
    /// thread of the group its elements; then the group's barrier.
    ///
    /// # Safety
    /// `source` is a symmetric address of `n` aligned `T`s complete on every PE, `dest` `n`
    /// writable aligned `T`s that no other thread of any PE accesses meanwhile.
    #[inline(always)]
    unsafe fn sum_block<G: Group, T: Elem>(self, dest: *mut T, source: *const T, n: usize) {
        let mut i = G::rank() as usize;
        while i < n {
            // SAFETY: `i < n`: element `i` of `source` is in every PE's heap (the caller's
            // contract; `remote` traps otherwise).
            let at = unsafe { source.add(i) } as u64;
            // SAFETY: as above.
            let mut sum: T = unsafe { load_elem(self.remote(at, 0)) };
            for pe in 1..self.n_pes() {
                // SAFETY: as above.
                sum = T::add(sum, unsafe { load_elem(self.remote(at, pe)) });
            }
            // SAFETY: element `i` of `dest` (the caller's contract).
            unsafe { store_elem(dest.add(i) as u64, sum) };
            i += G::size() as usize;
        }
        G::sync();
    }
}
