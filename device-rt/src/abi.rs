//! What more than one layer of the runtime (and the host) must agree on, at the bottom of
//! the crate so that every import points down: the codes a work loop stops with and
//! where it waited, the shared memory of a primitives group, the limits that size those
//! layouts, and the argument block of the standalone `reduce_copy` kernels.
//!
//! Always compiled (also without `arch`): host-shim decodes the loop's status and fills
//! the argument blocks with these. Every `#[repr(C)]` struct here is checked with
//! `static_assertions` (size, offsets) and derives zerocopy's traits, so both sides read
//! the same bytes.
//!
//! This module must never import from the crate (it is the bottom layer) and never hold
//! code that runs on the device: layouts, numbers and their decoding only.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

// ---------------------------------------------------------------------------------------
// Limits.
// ---------------------------------------------------------------------------------------

/// Channels (CTAs) one work loop may have.
pub const MAX_CHANNELS: usize = 64;

/// Threads per synchronisation group of the primitives; also the most peers on either
/// side of one group.
pub const THREAD_PER_SYNC: u32 = 8;

/// Most receive or send peers of one primitives group.
pub const MAX_ARITY: usize = THREAD_PER_SYNC as usize;

/// Primitives groups that may run at once in one CTA (the send and receive sides of a
/// point-to-point item; NVLS all-reduce's scatter, reduce and gather groups).
pub const MAX_GROUPS: usize = 3;

/// Sources and destinations a standalone `reduce_copy_<dtype>` kernel takes at most.
pub const REDUCE_COPY_MAX_BUFFERS: usize = 8;

// ---------------------------------------------------------------------------------------
// Why a loop stopped.
// ---------------------------------------------------------------------------------------

/// Why a work loop stopped, as `QueueHeader::status` records it (low half).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoopError {
    /// A malformed item; the high half is the work item's `BadItem` number.
    BadItem = 1,
    /// The host set `abort`.
    Aborted = 2,
    /// A wait ran past the loop's spin budget; the high half is its [`WaitSite`].
    Timeout = 3,
    /// A point-to-point peer sent a different count than this rank receives (or data
    /// left over from an earlier operation).
    PeerMismatch = 4,
}

/// Which wait timed out (`LoopError::Timeout`'s detail).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitSite {
    /// A `Barrier` item's wait for the other channels.
    Barrier = 1,
    /// A `WaitAtLeast` call's wait for its flag.
    Flag = 2,
    /// A primitive's wait for a peer's data.
    RecvData = 3,
    /// A primitive's wait for a peer's credits (room in its FIFO).
    SendCredit = 4,
    /// A stream-ordered submission's wait for the loop to run its item
    /// (`submit_to_mailbox`).
    MailboxSubmit = 5,
    /// A one-shot/two-shot collective's wait for a peer's flag: its staged
    /// data, or its reduced block; or an LL collective's wait for a peer's packets.
    ShotFlag = 6,
    /// A symmetric-heap barrier the loop runs (`ShmemBarrierAll`, `ShmemSumReduce`):
    /// waiting for the other PEs' arrivals.
    ShmemBarrier = 7,
    /// An application's device function the loop ran (`DeviceFunction::Application`)
    /// returned a timeout.
    Application = 8,
}

numbering!(LoopError, u32, from_u32, [BadItem, Aborted, Timeout, PeerMismatch]);
numbering!(WaitSite, u32, from_u32, [Barrier, Flag, RecvData, SendCredit, MailboxSubmit, ShotFlag, ShmemBarrier, Application]);

impl LoopError {
    /// `status` for this error with `detail`.
    pub const fn status(self, detail: u32) -> u64 {
        self as u64 | (detail as u64) << 32
    }
}

// ---------------------------------------------------------------------------------------
// Shared memory of a primitives group.
// ---------------------------------------------------------------------------------------

/// What a primitives group shares in shared memory: the slice's source and destination
/// pointers (user buffer first, then one per peer) and why the group stopped, if it did.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct PrimsShared {
    pub srcs: [u64; MAX_ARITY + 1],
    pub dsts: [u64; MAX_ARITY + 1],
    /// 0, or the [`LoopError::status`] that stopped the group.
    pub stopped: u64,
}

static_assertions::const_assert_eq!(core::mem::size_of::<PrimsShared>(), 8 * (2 * (MAX_ARITY + 1) + 1));
static_assertions::const_assert_eq!(core::mem::offset_of!(PrimsShared, stopped), 16 * (MAX_ARITY + 1));

// ---------------------------------------------------------------------------------------
// The standalone reduce_copy kernels' argument block.
// ---------------------------------------------------------------------------------------

/// The argument block of the standalone `reduce_copy_<dtype>` kernels (self-tests and
/// the reduce_copy benchmark), in device memory. Each CTA takes a contiguous share of
/// the elements and runs `reduce_copy` on it with all its threads.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ReduceCopyArgs {
    /// Source addresses (`srcs[0]` a `SwMulticastTable` address when `multicast_src`).
    pub srcs: [u64; REDUCE_COPY_MAX_BUFFERS],
    /// Destination addresses (`dsts[0]` a `SwMulticastTable` address when
    /// `multicast_dst`).
    pub dsts: [u64; REDUCE_COPY_MAX_BUFFERS],
    /// Pre-op argument per source (PreMulSum's scalar bits).
    pub pre_op_args: [u64; REDUCE_COPY_MAX_BUFFERS],
    /// Elements per buffer.
    pub n_elts: u64,
    /// The operator's argument (SumPostDiv's divisor).
    pub red_arg: u64,
    /// Sources used (1..=8).
    pub nsrcs: u32,
    /// Destinations used (1..=8).
    pub ndsts: u32,
    /// A `RedOpKind` number.
    pub op: u32,
    /// 1: `srcs[0]` is a software multicast handle (with `op` = Sum only).
    pub multicast_src: u32,
    /// 1: `dsts[0]` is a software multicast handle (with `op` = Sum only).
    pub multicast_dst: u32,
    /// 1: apply the operator's post-op.
    pub post_op: u32,
}

static_assertions::const_assert_eq!(core::mem::size_of::<ReduceCopyArgs>(), 232);
static_assertions::const_assert_eq!(core::mem::offset_of!(ReduceCopyArgs, n_elts), 192);
static_assertions::const_assert_eq!(core::mem::offset_of!(ReduceCopyArgs, post_op), 228);

// ---------------------------------------------------------------------------------------
// The symmetric heap (shmem).
// ---------------------------------------------------------------------------------------

/// Most PEs one symmetric heap may join.
pub const MAX_PES: usize = 32;

/// What a PE's device code knows of the symmetric heap (`device_rt::shmem::Shmem` reads
/// it): filled by the host, in device memory, never written while kernels run.
///
/// Every PE's heap has the same size and layout: a [`ShmemSync`] in its first
/// [`SHMEM_RESERVED_BYTES`], then the allocations. A symmetric address is an address in
/// this PE's own heap (`bases[my_pe] ..+ heap_bytes`); the same offset in `bases[pe]` is
/// PE `pe`'s copy, mapped into this PE's address space.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ShmemHandle {
    /// Every PE's heap as this PE addresses it (0: that PE's heap is not mapped here, so
    /// it is not reachable with loads and stores); entries from `n_pes` on are 0.
    pub bases: [u64; MAX_PES],
    /// Bytes of every PE's heap, the reserved head included.
    pub heap_bytes: u64,
    /// Address of the abort flag (a `u64`, non-zero: stop) every wait reads.
    pub abort: u64,
    /// How long one wait may spin before it gives up, in nanoseconds (`u64::MAX`: never).
    pub spin_budget_ns: u64,
    /// This PE's number, below `n_pes`.
    pub my_pe: u32,
    /// PEs in the heap (1..=[`MAX_PES`]).
    pub n_pes: u32,
}

static_assertions::const_assert_eq!(core::mem::size_of::<ShmemHandle>(), 8 * MAX_PES + 32);
static_assertions::const_assert_eq!(core::mem::offset_of!(ShmemHandle, heap_bytes), 8 * MAX_PES);
static_assertions::const_assert_eq!(core::mem::offset_of!(ShmemHandle, my_pe), 8 * MAX_PES + 24);

impl ShmemHandle {
    /// Where this PE's symmetric address `addr` lies in PE `pe`'s heap as this PE
    /// addresses it: `None` when `addr` is not in this PE's heap or `pe`'s heap is not
    /// mapped here. The device API's and the host's one translation.
    #[inline(always)]
    pub fn translate(&self, addr: u64, pe: u32) -> Option<u64> {
        let offset = addr.wrapping_sub(self.bases[self.my_pe as usize % self.bases.len()]);
        if pe >= self.n_pes || offset >= self.heap_bytes {
            return None;
        }
        match self.bases[pe as usize % self.bases.len()] {
            0 => None,
            base => Some(base + offset),
        }
    }
}

/// The runtime's own words at the head of every PE's heap (zeroed by the host before the
/// first kernel uses the heap): the barrier's state.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ShmemSync {
    /// Barriers this PE has completed (written by this PE only).
    pub barrier_epoch: u64,
    /// `epoch << 8 | why` of a barrier whose wait ended early on this PE, so every thread
    /// of the calling group returns the same error (written by this PE only).
    pub barrier_fault: u64,
    /// `arrived[p]`: the last barrier epoch PE `p` announced here (written by PE `p`).
    pub arrived: [u64; MAX_PES],
}

static_assertions::const_assert_eq!(core::mem::size_of::<ShmemSync>(), 16 + 8 * MAX_PES);
static_assertions::const_assert_eq!(core::mem::offset_of!(ShmemSync, arrived), 16);

/// Bytes at the head of every PE's heap that the runtime keeps ([`ShmemSync`], rounded up
/// so that allocations start 256-byte aligned).
pub const SHMEM_RESERVED_BYTES: u64 = 512;

static_assertions::const_assert!(core::mem::size_of::<ShmemSync>() as u64 <= SHMEM_RESERVED_BYTES);

/// What a function of the device runtime's C surface (`crate::cabi`, for kernels of other
/// runtimes) returns: `ferroccl_status` in C, an `int`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done.
    Success = 0,
    /// A wait ended because the host set the abort word.
    Aborted = 1,
    /// A wait ran past the handle's spin budget.
    TimedOut = 2,
    /// An argument the handle can check was wrong; nothing was done.
    InvalidArgument = 3,
}

static_assertions::const_assert_eq!(core::mem::size_of::<Status>(), 4);
