//! `barrier_all` and `sync_all` across every PE, with monotonic arrival counters.
//!
//! Each PE counts the barriers it has completed (`ShmemSync::barrier_epoch` in its own
//! heap). Its `e`-th barrier stores `e` into `arrived[my_pe]` of every peer, then waits
//! until `arrived[p]` in its own heap is at least `e` for every peer `p`. Nothing is ever
//! reset: a PE that leaves barrier `e` and enters `e + 1` only raises its counters, which
//! a peer still waiting in barrier `e` accepts too (`>= e`), so consecutive barriers never
//! race. A PE cannot get two barriers ahead: barrier `e + 1` waits for every peer's `e + 1`.
//! The group splits the peers among its threads (thread `t` announces to and waits for
//! peers `t`, `t + size`, …).
//!
//! Only one group per PE may be in a barrier (or a `sum_reduce`) at a time: the epoch is
//! the PE's, not the group's.

use super::group::Group;
use super::pe::Shmem;
use crate::arch::{self, Site};
use crate::spin::Interrupted;

/// `ShmemSync::barrier_fault`'s low byte: why the wait ended.
const FAULT_ABORTED: u64 = 1;
const FAULT_TIMED_OUT: u64 = 2;

impl Shmem {
    /// Every PE's group has arrived, and every put, AMO and signal update that this PE's
    /// group issued before it is complete and seen by every PE before any PE's accesses
    /// after it (`nvshmem_barrier_all`, `nvshmemx_barrier_all_warp`, `_block`): the
    /// group's barrier, then a quiet (`fence.acq_rel.sys`) by each announcing thread,
    /// the arrivals (relaxed system-scope stores), acquire polls of the peers' arrivals,
    /// and the group's barrier. `Err` on every thread of the group when one of its waits
    /// ended early (abort flag, spin budget).
    ///
    /// # Safety
    /// Every thread of `G` calls it, and every PE calls it (or [`Shmem::sync_all`]) as its
    /// next barrier; no other group of this PE is in a barrier meanwhile.
    #[inline(always)]
    pub unsafe fn barrier_all<G: Group>(self) -> Result<(), Interrupted> {
        // SAFETY: the caller's contract.
        unsafe { self.barrier::<G>(true) }
    }

    /// Every PE's group has arrived (`nvshmem_sync_all` and its group variants): as
    /// [`Shmem::barrier_all`] without the quiet, so it orders arrivals only: earlier puts
    /// are not guaranteed complete (call `quiet` first, or use `barrier_all`).
    ///
    /// # Safety
    /// As [`Shmem::barrier_all`].
    #[inline(always)]
    pub unsafe fn sync_all<G: Group>(self) -> Result<(), Interrupted> {
        // SAFETY: the caller's contract.
        unsafe { self.barrier::<G>(false) }
    }

    /// The barrier, with a quiet before the arrivals when `quiet`.
    ///
    /// # Safety
    /// As [`Shmem::barrier_all`].
    #[inline(always)]
    unsafe fn barrier<G: Group>(self, quiet: bool) -> Result<(), Interrupted> {
        let sync = self.sync_words();
        let (me, n) = (self.my_pe(), self.n_pes());
        // Orders the group's earlier stores before the announcing threads' fences, and the
        // last barrier's epoch store (thread 0) before the loads below.
        G::sync();
        // SAFETY: `sync` is this PE's `ShmemSync` (`Shmem::new`'s contract), its epoch written
        // only by thread 0 of the group in a barrier, after the group's last sync of it.
        let epoch = unsafe { arch::ld_volatile_global(&raw const (*sync).barrier_epoch) } + 1;
        let first = G::rank();
        if quiet && (first..n).step_by(G::size() as usize).any(|p| p != me) {
            arch::site(Site::ShmemBarrierFence);
            arch::fence_acq_rel_sys();
        }
        for p in (first..n).step_by(G::size() as usize).filter(|&p| p != me) {
            // SAFETY: `arrived[me]` is in `sync`, at the head of the heap; in `p`'s heap it is
            // written by this PE only, by this thread of the group in this barrier.
            unsafe { arch::st_relaxed_sys_global(self.remote((&raw const (*sync).arrived[me as usize]) as u64, p) as *mut u64, epoch) };
        }
        let mut outcome = Ok(());
        for p in (first..n).step_by(G::size() as usize).filter(|&p| p != me) {
            // SAFETY: `arrived[p]` in this PE's own heap, written by PE `p` only, atomically.
            let arrived = unsafe { &raw const (*sync).arrived[p as usize] };
            let mut guard = self.guard();
            outcome = loop {
                arch::site(Site::ShmemBarrierPoll);
                // SAFETY: as above.
                if unsafe { arch::ld_acquire_sys_global(arrived) } >= epoch {
                    break Ok(());
                }
                if let Err(why) = guard.tick() {
                    break Err(why);
                }
            };
            if outcome.is_err() {
                break;
            }
        }
        if let Err(why) = outcome {
            let code = match why {
                Interrupted::Aborted => FAULT_ABORTED,
                Interrupted::TimedOut => FAULT_TIMED_OUT,
            };
            // SAFETY: `barrier_fault` in this PE's `ShmemSync`, written by its own threads
            // between the group's syncs of a barrier, read after the last one.
            unsafe { arch::st_volatile_global(&raw mut (*sync).barrier_fault, epoch << 8 | code) };
        }
        // Orders every thread's fault store and acquires before the group's reads below and
        // its accesses after the barrier.
        G::sync();
        // SAFETY: as for the store above.
        let fault = unsafe { arch::ld_volatile_global(&raw const (*sync).barrier_fault) };
        if first == 0 {
            // SAFETY: as for the epoch's load above; every thread of the group loaded it before
            // the sync just passed.
            unsafe { arch::st_volatile_global(&raw mut (*sync).barrier_epoch, epoch) };
        }
        match fault {
            f if f >> 8 != epoch => Ok(()),
            f if f & 0xff == FAULT_ABORTED => Err(Interrupted::Aborted),
            _ => Err(Interrupted::TimedOut),
        }
    }
}
