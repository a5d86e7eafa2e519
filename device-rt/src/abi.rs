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
/// point-to-point item).
pub const MAX_GROUPS: usize = 2;

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
    /// A stream-ordered post's wait for the loop to run its item (`post_to_mailbox`).
    MailboxPost = 5,
    /// A staged collective's (one-shot, two-shot) wait for a peer's flag: its staged
    /// data, or its reduced block.
    StagedFlag = 6,
}

numbering!(LoopError, u32, from_u32, [BadItem, Aborted, Timeout, PeerMismatch]);
numbering!(WaitSite, u32, from_u32, [Barrier, Flag, RecvData, SendCredit, MailboxPost, StagedFlag]);

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
