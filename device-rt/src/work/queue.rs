//! The memory a rank's work loop shares with its host: the queue header and ring (in
//! host-mapped memory, written by the host, polled by the device), and the loop's own
//! state with the stream mailbox (in device memory).
//!
//! Protocol (ring, the direct host path): the host writes item `seq` into slot
//! `(seq - 1) % capacity` as a [`RingSlot`], every word with a release store: each 8-byte
//! word carries 4 bytes of the item and the slot's flag (`seq`'s low 32 bits), so a slot
//! is whole exactly when every flag is `seq`'s, whatever order its words arrive in. There
//! is no doorbell: each channel (CTA) polls the next slot itself with acquire loads (or
//! reads a backlog of slots, then `fence.acq_rel.sys`), so what the host wrote before a
//! slot is visible once the slot is taken; it runs its share and stores
//! `cta_completed[channel] = seq` with `st.release.sys` (relaxed when the items completed
//! wrote nothing). The rank has completed `seq` when
//! every channel has; a slot may be rewritten once every channel has completed the item
//! that used it (backpressure).
//!
//! Protocol (ring route of a stream-ordered call): where the host finds the caller's
//! stream idle (every earlier operation done) and the loop has one channel, it writes
//! the item into the ring as above (no kernel launch), watches `cta_completed` briefly
//! and, where the item has not completed by then, enqueues a `cuStreamWaitValue32`
//! (cyclic `>=`) on `LoopState::stream_done`, a 32-bit word, for the low 32 bits of the
//! item's `seq`. The channel stores `stream_done = seq` (its low 32 bits, one 32-bit
//! store: the stream's 32-bit read and the channel's store are accesses of the same
//! size) with its completion (after the same
//! `fence.acq_rel.sys` when the items wrote memory, so the stream's later work sees
//! their writes); a channel that leaves the loop for any reason but sleep stores its
//! last completion plus [`STREAM_DONE_RELEASE`] (release), so that a stream never waits
//! for an item the loop will not run (the host then finds the loop's error).
//!
//! Protocol (mailbox, the stream-ordered path): `mailbox.state` is one 64-bit word: the
//! flag bits [`MAILBOX_PENDING`] and [`MAILBOX_CLOSED`] in its low byte and the item's
//! generation (items completed through the mailbox) above it ([`mailbox_generation`]),
//! so one load tells a channel both whether an item waits and whose it is, and one
//! atomic add changes either. Every PTX access to the word is a 64-bit access (mixed-size
//! accesses do not synchronize in the PTX memory model). The mailbox is device memory
//! that only the GPU's own threads (the loop's channels and the submitter) access, so every
//! access below is at GPU scope. The host launches a one-thread call kernel on its stream
//! (`submit_to_mailbox`); the accesses, in order:
//! - submitter: the item's eight words into `mailbox.item`, relaxed 64-bit (volatile)
//!   stores (harmless when the loop has left: nobody reads them then).
//! - submitter: PENDING by one 64-bit `atom.acq_rel.gpu.add` of [`MAILBOX_PENDING`]; its
//!   release half orders the item's stores before PENDING. The value it returns names
//!   the generation the item gets; CLOSED in it: the submitter subtracts its PENDING again
//!   (nothing takes an item from a closed word, see below) and returns.
//! - channel (lane 0 of warp 0): one 64-bit acquire load of `state`; PENDING set, CLOSED
//!   clear and a generation other than the one this channel completed last: the item is
//!   this generation's. The acquire orders the item's reads (then the warp's barrier
//!   hands it on) after the submitter's release.
//! - channel: runs the item once per generation; `fence.acq_rel.sys` if the item may have
//!   written memory (host-mapped memory included), then an acq_rel arrival count (the
//!   item's channels: the resident ones and, for a collective that spreads over them, the
//!   call kernel's call channels, which arrive the same way; see `call_kernel`); the
//!   last channel to arrive (the only one, in a one-channel item) completes the item by
//!   one 64-bit acq_rel atomic add of [`MAILBOX_COMPLETE`]: the generation goes up by
//!   one and PENDING is cleared in the same access (CLOSED, a bit the add leaves alone, is
//!   kept), releasing every channel's work.
//! - submitter: spins on 64-bit acquire loads of `state` until the generation has moved
//!   past its item's or CLOSED is set (acquire: the item's writes are visible to the
//!   submitter, so to what follows its kernel on the stream), checking the host's abort
//!   flag and a spin budget a quarter longer than the loop's waits' ([`SpinGuard`],
//!   `submit_budget_ns`: a loop stuck in a wait of the item records that wait's timeout
//!   first); past it the submitter records a `Timeout` at `WaitSite::MailboxSubmit` and
//!   sets the abort flag (release), so the loop leaves and the host's next call fails: a
//!   timeout is never silent.
//! - a channel that leaves the loop for any reason sets CLOSED by a 64-bit acq_rel CAS
//!   loop (an atomic OR), so a waiting submitter is released and later submissions return
//!   at once; no channel takes an item from a closed word.
//!
//! Protocol (sleep): a loop of one channel whose `sleep_after_ns` is non-zero leaves the
//! GPU after polling that long with nothing to do, so that an idle communicator holds
//! no SM, and the host launches it again with the next item. `QueueHeader::awake` is
//! the handshake (Dekker's: each side stores, fences, then reads the other's word, so at
//! least one sees the other):
//! - loop (lane 0 of the polling channel): stores LEAVING (relaxed, system scope),
//!   `fence.sc.sys`, then reads `submits`, `pinned`, the next ring slot's first word,
//!   `submits_seen` (acquire) and then the mailbox state. A submission announced that no
//!   longer needing the loop has not counted (`submits` above `submits_seen`: every call
//!   kernel counts itself once its item is PENDING, or at once when it runs its item
//!   alone), a pinned loop, a ring slot or a pending mailbox item: it stores AWAKE
//!   (release) and polls on. (A submission counted after its PENDING add: the acquire of
//!   the count orders the mailbox read after that add, so its item is seen pending or
//!   completed.) Otherwise it stores ASLEEP (release: its ring completions, published
//!   before, come first) and its kernel ends, keeping its state (a relaunched loop resumes
//!   after the ring items its channel completed; no mailbox item is pending).
//! - host, for a submission: adds one to `submits` (a locked read-modify-write, a full
//!   fence on the host) before the launch; for a ring item: its slot's release stores then
//!   a sequentially consistent fence. Then it reads `awake`: AWAKE, the loop will see the
//!   work; LEAVING, it waits for the loop's answer; ASLEEP, it swaps ASLEEP for AWAKE
//!   (compare-and-swap: one host thread wins) and the winner launches the loop again on
//!   the loop's stream (after the old kernel's end) before the call kernel is launched.
//! - a call kernel captured in a CUDA graph sets `pinned` first (its replays do not pass
//!   through the host), so such a loop never sleeps again.
//!
//! The submitter runs while the loop's CTAs hold their SMs: the communicator leaves room
//! for its one CTA (see host-shim's residency check).
//!
//! [`SpinGuard`]: crate::spin::SpinGuard

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::item::WorkItem;
use super::placement::ChannelPlacement;
use crate::abi::{MAX_CHANNELS, MAX_GROUPS, PrimsShared};

/// A bit of `Mailbox::state`: an item is waiting.
pub const MAILBOX_PENDING: u64 = 1;
/// A bit of `Mailbox::state`: the loop has left; nothing more will run.
pub const MAILBOX_CLOSED: u64 = 4;
/// `Mailbox::state`'s generation counts in units of this (the flags take the low byte).
pub const MAILBOX_GENERATION_ONE: u64 = 1 << 8;
/// What the last channel adds to `Mailbox::state` to complete the pending item: one more
/// generation, PENDING cleared (the carry out of the PENDING bit), CLOSED untouched.
pub const MAILBOX_COMPLETE: u64 = MAILBOX_GENERATION_ONE - MAILBOX_PENDING;

/// The generation in a value of `Mailbox::state`: how many items the mailbox completed.
#[inline(always)]
pub const fn mailbox_generation(state: u64) -> u64 {
    state / MAILBOX_GENERATION_ONE
}

/// Words of a [`RingSlot`].
pub const SLOT_WORDS: usize = 2 * core::mem::size_of::<WorkItem>() / 8;

/// One slot of the ring: a [`WorkItem`] spread over 16 words, word `i` holding the item's
/// 32-bit piece `i` in its low half and the slot's flag ([`RingSlot::flag`]) in its high
/// half. Each word is written and read as one 8-byte access (single-copy atomic on both
/// sides), so a reader that finds every flag right has the whole item, with no ordering
/// between the words. 128 bytes: one line, one PCIe read.
#[repr(C, align(128))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RingSlot {
    pub words: [u64; SLOT_WORDS],
}

static_assertions::const_assert_eq!(core::mem::size_of::<RingSlot>(), 128);

impl RingSlot {
    /// The flag of item `seq`: its low 32 bits (a slot is reused every `capacity` items,
    /// so a stale slot's flag differs while the capacity is below 2^32; a never-written
    /// slot holds 0, and `seq` starts at 1).
    pub const fn flag(seq: u64) -> u32 {
        seq as u32
    }

    /// The words of `item`'s slot for `seq`.
    pub fn encode(item: &WorkItem, seq: u64) -> [u64; SLOT_WORDS] {
        let pieces: [u32; SLOT_WORDS] = zerocopy::transmute!(*item);
        pieces.map(|piece| u64::from(piece) | u64::from(Self::flag(seq)) << 32)
    }

    /// Two words' item pieces, if both carry `seq`'s flag: 8 bytes of the item.
    pub const fn unflag_pair(words: [u64; 2], seq: u64) -> Option<u64> {
        let flag = Self::flag(seq) as u64;
        if words[0] >> 32 == flag && words[1] >> 32 == flag {
            Some(words[0] & 0xFFFF_FFFF | words[1] << 32)
        } else {
            None
        }
    }
}

impl Default for RingSlot {
    fn default() -> Self {
        Self { words: [0; SLOT_WORDS] }
    }
}

/// What a leaving loop of one channel adds (wrapping) to its last completion in
/// `LoopState::stream_done`: a stream waiting (cyclic 32-bit comparison) for any item
/// up to 2^30 past it goes on, so no stream waits for an item the loop will never run.
pub const STREAM_DONE_RELEASE: u32 = 1 << 30;

/// `QueueHeader::awake`: the loop runs (or the host has relaunched it).
pub const LOOP_AWAKE: u64 = 0;
/// `QueueHeader::awake`: the idle loop is deciding whether to sleep (see the module doc).
pub const LOOP_LEAVING: u64 = 1;
/// `QueueHeader::awake`: the loop has left to sleep; the host relaunches it.
pub const LOOP_ASLEEP: u64 = 2;

/// Host-mapped: written by the host (`abort`, `submits`, `pinned`) and by the device (the
/// rest; `awake` by both, see the module doc).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct QueueHeader {
    /// Non-zero: every channel leaves the loop with `LoopError::Aborted` (host, any
    /// thread, any time).
    pub abort: u64,
    /// Stream-ordered submissions (call kernels) the host has launched outside CUDA graph
    /// captures (host).
    pub submits: u64,
    /// Non-zero: the loop never sleeps (host; set once a call kernel is captured in a
    /// graph, whose replays submit without the host).
    pub pinned: u64,
    host_pad: [u64; 5],
    /// 0 while healthy, else `LoopError as u64 | detail << 32` (device; the first error).
    pub status: u64,
    /// The ring sequence number of the failed item (0 for a mailbox item or none).
    pub error_seq: u64,
    /// Set to the channel count when every channel has left the loop (device).
    pub exited: u64,
    /// [`LOOP_AWAKE`], [`LOOP_LEAVING`] or [`LOOP_ASLEEP`] (device; the host changes
    /// ASLEEP to AWAKE when it relaunches the loop).
    pub awake: u64,
    device_pad: [u64; 4],
    /// Per channel, the last ring item it completed (device, release store).
    pub cta_completed: [u64; MAX_CHANNELS],
}

static_assertions::const_assert_eq!(core::mem::size_of::<QueueHeader>(), 128 + 8 * MAX_CHANNELS);
static_assertions::const_assert_eq!(core::mem::offset_of!(QueueHeader, status), 64);
static_assertions::const_assert_eq!(core::mem::offset_of!(QueueHeader, cta_completed), 128);

impl QueueHeader {
    /// A header with nothing published and nothing completed.
    pub const fn new() -> Self {
        Self {
            abort: 0,
            submits: 0,
            pinned: 0,
            host_pad: [0; 5],
            status: 0,
            error_seq: 0,
            exited: 0,
            awake: LOOP_AWAKE,
            device_pad: [0; 4],
            cta_completed: [0; MAX_CHANNELS],
        }
    }
}

impl Default for QueueHeader {
    fn default() -> Self {
        Self::new()
    }
}

/// Where stream-ordered work arrives (device memory; see the module doc).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Mailbox {
    /// The item (its `seq` is ignored).
    pub item: WorkItem,
    /// [`MAILBOX_PENDING`] and [`MAILBOX_CLOSED`], and the generation above them (64-bit
    /// accesses only; see the module doc).
    pub state: u64,
    /// Zero.
    pub pad: u64,
    /// Channels done with the current item.
    pub arrived: u64,
    /// The submitter's clock (`globaltimer`, ns) when it published the current item, for
    /// the channels' dispatch statistics.
    pub submitted_ns: u64,
}

static_assertions::const_assert_eq!(core::mem::size_of::<Mailbox>(), 96);
static_assertions::const_assert_eq!(core::mem::offset_of!(Mailbox, state), 64);

/// The loop's device-memory state: its mailbox, the counters its channels share, and
/// where its channels run.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct LoopState {
    /// The stream-ordered path's mailbox.
    pub mailbox: Mailbox,
    /// Set once by the first channel that records an error (compare-and-swap).
    pub error_claimed: u64,
    /// Channels that have left the loop.
    pub exited: u64,
    /// Channels arrived at the current barrier.
    pub barrier_arrived: u64,
    /// Barriers completed.
    pub barrier_generation: u64,
    /// The highest ring sequence number a channel has found whole (an atomic max at GPU
    /// scope): the channels other than the polling one wait for it instead of reading
    /// host memory.
    pub seen_seq: u64,
    /// How long a one-channel loop polls with nothing to do before it leaves to sleep
    /// (host, before the launch; 0: it never sleeps).
    pub sleep_after_ns: u64,
    /// Call kernels that no longer need the loop: counted by each call kernel's first
    /// thread once its item is pending in the mailbox (or, for an item the call kernel runs
    /// alone, at once), with a GPU-scope acq_rel add (see the sleep protocol).
    pub submits_seen: u64,
    /// A loop of one channel: the low 32 bits of the last ring item it completed, stored
    /// with its `cta_completed` entry; once it has left (not to sleep), that plus
    /// [`STREAM_DONE_RELEASE`] (wrapping). What a stream's `cuStreamWaitValue32` waits for
    /// (compared cyclically) on the ring route of a stream-ordered call (see the module
    /// doc): 32 bits, the size of that wait's read, so that the device's store and the
    /// stream's read are accesses of one size (mixed-size accesses do not synchronize in
    /// the PTX memory model). In device memory: a stream wait that the stream reaches
    /// unmet answers later on a word in host memory (see docs/tuning.md, `stream_done`).
    pub stream_done: u32,
    /// Zero: keeps `placement` where it was.
    pub stream_done_pad: u32,
    /// Which CTA is which channel.
    pub placement: ChannelPlacement,
}

static_assertions::const_assert_eq!(core::mem::size_of::<LoopState>(), 160 + core::mem::size_of::<ChannelPlacement>());
// `cuStreamWaitValue32` reads 4 aligned bytes at `stream_done`.
static_assertions::const_assert_eq!(core::mem::offset_of!(LoopState, stream_done), 152);
static_assertions::const_assert_eq!(core::mem::offset_of!(LoopState, stream_done) % 4, 0);

/// Ring items a channel copies into shared memory at once (one round trip).
pub(crate) const ITEM_CACHE: usize = 32;

/// The loop's shared memory per CTA: the cached items, warp 0's poll outcomes, and the
/// primitives groups' pointers.
#[repr(C)]
pub(crate) struct LoopShared {
    pub(crate) prims: [PrimsShared; MAX_GROUPS],
    pub(crate) items: [WorkItem; ITEM_CACHE],
    pub(crate) poll_outcome: u64,
    pub(crate) count: u64,
    pub(crate) generation: u64,
    pub(crate) wait_result: u64,
    /// The channel election's answer (see `placement`).
    pub(crate) channel: u64,
}

/// Dynamic shared memory the loop kernel must be launched with.
pub const LOOP_SMEM_BYTES: u32 = core::mem::size_of::<LoopShared>() as u32;
