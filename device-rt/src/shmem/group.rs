//! Who calls a collective operation: one thread, one warp, or one CTA (NVSHMEM's plain,
//! `_warp` and `_block` variants), as a type.

use crate::arch::{self, FULL_MASK, WARP_SIZE};

/// The threads that call one operation together, all with the same arguments: they
/// split its work by [`Group::rank`] and meet at [`Group::sync`].
pub trait Group {
    /// This thread's index in the group.
    fn rank() -> u32;
    /// Threads in the group.
    fn size() -> u32;
    /// Waits for every thread of the group. Ordering: the memory accesses of every
    /// thread of the group before it are performed, at CTA scope, before any continues
    /// (so one thread's later fence publishes all of them).
    fn sync();
}

/// One thread alone.
pub struct Thread;

/// The 32 lanes of one warp, all active.
pub struct Warp;

/// Every thread of the CTA.
pub struct Block;

impl Group for Thread {
    #[inline(always)]
    fn rank() -> u32 {
        0
    }
    #[inline(always)]
    fn size() -> u32 {
        1
    }
    /// Nothing to wait for: a thread's own accesses are in program order for it.
    #[inline(always)]
    fn sync() {}
}

impl Group for Warp {
    #[inline(always)]
    fn rank() -> u32 {
        arch::lane_id()
    }
    #[inline(always)]
    fn size() -> u32 {
        WARP_SIZE
    }
    /// `bar.warp.sync` over the whole warp.
    #[inline(always)]
    fn sync() {
        arch::warp_sync(FULL_MASK)
    }
}

impl Group for Block {
    #[inline(always)]
    fn rank() -> u32 {
        arch::thread_idx()
    }
    #[inline(always)]
    fn size() -> u32 {
        arch::block_dim()
    }
    /// `barrier.sync 0`: the CTA's barrier (`__syncthreads`).
    #[inline(always)]
    fn sync() {
        arch::barrier_sync_all()
    }
}
