//! Connections between ranks, shared by host and device: the step FIFO a sender and a
//! receiver share (NCCL's `ncclConnInfo`), a channel's ring connections, and the
//! communicator's device-side description.
//!
//! Protocol (Simple): a connection has `NCCL_STEPS` slots of `step_bytes` in the
//! receiver's memory. The sender waits until `head + NCCL_STEPS >= step + k` (credits),
//! writes slot `step % NCCL_STEPS`, then advances `tail` (a system-scope fence, then a
//! relaxed store). The receiver waits until `tail >= step + k`, reads the slot, and
//! advances `head`. `head` lives in the sender's memory, `tail` in the receiver's, so
//! each side polls local memory and writes remote memory. Both sides keep their step
//! between operations in their own copy of the `ConnInfo` (its `step` field).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Slots in a connection's FIFO.
pub const NCCL_STEPS: u64 = 8;

/// Most ranks a communicator may have.
pub const MAX_RANKS: usize = 32;

/// Most ranks the one-shot/two-shot algorithms run on: every rank reads every
/// rank's staging buffer, one source of one reduction per rank.
pub const MAX_SHOT_RANKS: usize = 8;

/// `ConnInfo::flags`: `head` and `tail` are multicast handles (NCCL's NVLS `recv[0]` and
/// `send[0]`): the word this end polls is read as the smallest value over every device
/// (NCCL's `NvlsMinPolling`), the word it posts is stored to every device.
pub const CONN_NVLS_MIN_POLL: u32 = 1;

/// `ConnInfo::flags`: the ends may exchange user-buffer addresses through `ptr_exchange`
/// (NCCL's direct operations: the sender writes straight into the receiver's output).
pub const CONN_DIRECT: u32 = 2;

/// One end of a connection (NCCL's `ncclConnInfo`), in the device memory of the rank
/// that uses it. Addresses are generic device addresses (peer access enabled).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ConnInfo {
    /// The FIFO: `NCCL_STEPS` slots of `step_bytes`, in the receiver's memory.
    pub buff: u64,
    /// The receiver's count of consumed steps (credits), a `u64` in the sender's memory.
    pub head: u64,
    /// The sender's count of filled steps, a `u64` in the receiver's memory.
    pub tail: u64,
    /// 0, or `[u64; NCCL_STEPS]` in the receiver's memory: per slot, the bytes the
    /// sender stored, its operation count on the connection and [`SIZE_LAST`] on the
    /// last step of an operation. The receiver checks each entry against what it
    /// expects (point-to-point connections: mismatched counts are an error, never data
    /// read by the next operation).
    pub sizes_fifo: u64,
    /// 0, or `[u64; NCCL_STEPS]`: per slot, the byte offset of its data in `buff`
    /// (instead of `slot × step_bytes`), written by the buffer's owner before the step
    /// is posted.
    pub offs_fifo: u64,
    /// Bytes per slot: a multiple of [`STEP_ALIGN`].
    pub step_bytes: u64,
    /// This end's step between operations (device only; starts at 0).
    pub step: u64,
    /// `CONN_*` bits.
    pub flags: u32,
    /// Operations this end has run on the connection (device only; starts at 0).
    pub ops: u32,
    /// With `CONN_DIRECT`: a `u64` in the sender's memory where the receiver publishes
    /// its output buffer's address for a direct operation (NCCL's `ptrExchange`); the
    /// sender takes it and sets it back to 0.
    pub ptr_exchange: u64,
    /// Zero.
    pub reserved: u64,
}

static_assertions::const_assert_eq!(core::mem::size_of::<ConnInfo>(), 80);
static_assertions::const_assert_eq!(core::mem::offset_of!(ConnInfo, ptr_exchange), 64);
static_assertions::const_assert_eq!(core::mem::offset_of!(ConnInfo, step_bytes), 40);
static_assertions::const_assert_eq!(core::mem::offset_of!(ConnInfo, step), 48);

/// `sizes_fifo` entries: set on the last step of an operation.
pub const SIZE_LAST: u64 = 1 << 63;

/// `step_bytes` must be a multiple of this (chunks are rounded to it).
pub const STEP_ALIGN: u64 = 4096;

/// A channel's two ring connections: to the next rank, and from the previous one.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ChannelConns {
    /// Sends to `ring_ranks[1]`.
    pub send: ConnInfo,
    /// Receives from `ring_ranks[nranks - 1]`.
    pub recv: ConnInfo,
}

static_assertions::const_assert_eq!(core::mem::size_of::<ChannelConns>(), 160);

/// A rank's view of its communicator, in its device memory, read by its work loop.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct CommDevice {
    /// This rank.
    pub rank: u32,
    /// Ranks in the communicator (1..=MAX_RANKS).
    pub nranks: u32,
    /// Channels with connections: the loop's channel count.
    pub nchannels: u32,
    /// This rank's position in the ring.
    pub ring_index: u32,
    /// The ring seen from this rank: `ring_ranks[0]` is this rank, `ring_ranks[1]` the
    /// next, `ring_ranks[nranks - 1]` the previous.
    pub ring_ranks: [u32; MAX_RANKS],
    /// `[ChannelConns; nchannels]`: the ring connections.
    pub channels: u64,
    /// `[[ChannelConns; nranks]; nchannels]`: per channel and peer, the point-to-point
    /// connections (`send` to the peer, `recv` from it; the own rank's entry unused).
    pub p2p: u64,
    /// `[ChannelStats; nchannels]`, or 0: no statistics are kept.
    pub stats: u64,
    /// 0, or `nchannels / 2`: the channels work in pairs. Every function runs on the
    /// first `pairs` channels, except a reduce-scatter on two ranks: channel `c` sends and
    /// channel `pairs + c` receives and reduces, each on its own SM, both through the
    /// connections of channel `pairs + c` (each connection end is used by one channel only).
    pub pairs: u32,
    /// The algorithm the communicator asks for: an `AlgorithmChoice` number (0: the
    /// device chooses by size; otherwise one forced for every collective that has it).
    pub algorithm: u32,
    /// 0, or `[StagingConns; collective channels]` (the first `pairs` channels when they
    /// work in pairs, else all): the one-shot/two-shot algorithms' memory. 0 when the
    /// communicator has none (one rank, more than [`MAX_SHOT_RANKS`], or no staging asked
    /// for).
    pub staging: u64,
    /// Bytes of one of a channel's two staging buffers (a multiple of [`STEP_ALIGN`]); 0
    /// with no staging.
    pub staging_slot_bytes: u64,
    /// 0, or `[NvlsConns; collective channels]`: the NVLS connections (only on a
    /// communicator that forces NVLS, of 2 to [`MAX_NVLS_ARITY`] ranks).
    pub nvls: u64,
    /// 0, or the address of this rank's `ShmemHandle` (a symmetric heap whose PE `p` is
    /// rank `p`): a two-shot all-reduce whose input lies in the heap reads every rank's
    /// input there, at the same offset, instead of staging it (zero copy).
    pub heap: u64,
}

static_assertions::const_assert_eq!(core::mem::size_of::<CommDevice>(), 16 + 4 * MAX_RANKS + 64);
static_assertions::const_assert_eq!(core::mem::offset_of!(CommDevice, nvls), 16 + 4 * MAX_RANKS + 48);
static_assertions::const_assert_eq!(core::mem::offset_of!(CommDevice, channels), 16 + 4 * MAX_RANKS);
static_assertions::const_assert_eq!(core::mem::offset_of!(CommDevice, stats), 16 + 4 * MAX_RANKS + 16);
static_assertions::const_assert_eq!(core::mem::offset_of!(CommDevice, pairs), 16 + 4 * MAX_RANKS + 24);
static_assertions::const_assert_eq!(core::mem::offset_of!(CommDevice, staging), 16 + 4 * MAX_RANKS + 32);

impl CommDevice {
    /// A description with no connections and no staging yet, the device choosing the
    /// algorithms.
    pub const fn new(rank: u32, nranks: u32, nchannels: u32) -> Self {
        Self {
            rank,
            nranks,
            nchannels,
            ring_index: 0,
            ring_ranks: [0; MAX_RANKS],
            channels: 0,
            p2p: 0,
            stats: 0,
            pairs: 0,
            algorithm: 0,
            staging: 0,
            staging_slot_bytes: 0,
            nvls: 0,
            heap: 0,
        }
    }
}

/// One channel's part of the one-shot/two-shot algorithms' memory (vLLM's custom
/// all-reduce), in the memory of the rank that uses it: where every rank's staging buffers
/// for this channel are, which flags this rank raises on its peers, and which it polls.
///
/// Protocol: a channel's `epoch`-th one-shot/two-shot collective (counted from 1, the same
/// call on every rank because every rank runs the same collectives in the same order and
/// the same channels take part in each) stages into buffer `epoch % 2` and raises flag
/// value `2 × epoch − 1` on every peer once its staged data is written, `2 × epoch` once a
/// two-shot's reduced block is (flags only grow, and a waiter waits for "at least").
/// Flags are written by the peer (remote stores) and polled in local memory, as a ring
/// connection's head and tail. With the first flag of each collective a rank also
/// stores its call's descriptor (a digest of count, function, type, operator, root and
/// where it reads inputs from) in every peer's descriptor slot of that epoch's parity,
/// which the peer compares with its own once it has seen the flag.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct StagingConns {
    /// Per rank `p < nranks`, this one included: this channel's staging in rank `p`'s
    /// memory, two buffers of `CommDevice::staging_slot_bytes` (for even epochs, then for
    /// odd ones), 4096-byte aligned.
    pub staging: [u64; MAX_SHOT_RANKS],
    /// Per peer `p < nranks` (not this rank: 0): the flag this rank raises for `p`, entry
    /// `rank` of `p`'s `flags` for this channel (in `p`'s memory).
    pub signal: [u64; MAX_SHOT_RANKS],
    /// This rank's flags for this channel, `[u64; 5 × nranks]` in its own memory: entry
    /// `p` is raised by rank `p` alone; entries `nranks × (1 + q) + p` are rank `p`'s call
    /// descriptors of epochs of parity `q`, entries `nranks × (3 + q) + p` the outputs it
    /// published in them (`algo::shot`'s direct outputs), written by `p` alone.
    pub flags: u64,
    /// One-shot/two-shot collectives this channel has run (device only; starts at 0).
    pub epoch: u64,
    /// Per rank `p < nranks`, this one included: this channel's packet region in rank
    /// `p`'s memory (see [`PACKET_SLOT_BYTES`]), zeroed when the communicator is made.
    pub packets: [u64; MAX_SHOT_RANKS],
}

static_assertions::const_assert_eq!(core::mem::size_of::<StagingConns>(), 24 * MAX_SHOT_RANKS + 16);
static_assertions::const_assert_eq!(core::mem::offset_of!(StagingConns, flags), 16 * MAX_SHOT_RANKS);
static_assertions::const_assert_eq!(core::mem::offset_of!(StagingConns, packets), 16 * MAX_SHOT_RANKS + 16);

/// Most bytes of one rank's block that one channel of an LL collective carries as
/// packets (NCCL's LL protocol: every 8-byte store carries 4 bytes of data and a 4-byte
/// flag, so a reader that sees the flag has the data, with no fence and no separate
/// flag): the lines of one CTA's run (`algo::ll`), a few 8-byte lines a thread. 20 KiB:
/// a 1 MiB all-reduce on two ranks (`LL_MAX_BYTES`) takes 18 KiB a CTA over 57 of 63
/// call channels of 256 threads, as does a 2 MiB all-gather's 1 MiB block. A channel's
/// packet region then holds `2 × nranks × 40 KiB` of each rank's memory: 5 MiB × nranks
/// over 64 channels.
pub const PACKET_SHARE_BYTES: u64 = 20 << 10;

/// Bytes one sender has in a receiver's packet region for one epoch parity: a line of 16
/// bytes for the call's descriptor, then a line (two packets) per 8 bytes of a share of up
/// to [`PACKET_SHARE_BYTES`]. A channel's packet region in rank `q`'s memory is
/// `[parity: 2][sender: nranks][PACKET_SLOT_BYTES]` ([`packet_region_bytes`]): sender `r`
/// writes its slot of parity `e % 2` in epoch `e`, and `q` alone reads it.
pub const PACKET_SLOT_BYTES: u64 = 16 + 2 * PACKET_SHARE_BYTES;

/// Bytes of one channel's packet region on a communicator of `nranks` ranks.
pub const fn packet_region_bytes(nranks: u32) -> u64 {
    2 * nranks as u64 * PACKET_SLOT_BYTES
}

/// Most heads of NVLS (NCCL's `NCCL_MAX_NVLS_ARITY`): every rank is a head, so NVLS runs
/// on 2 to this many ranks.
pub const MAX_NVLS_ARITY: usize = 8;

/// One channel's NVLS connections (NCCL's `ncclNvlsSetup`), in the memory of the rank
/// that uses them. Every rank is a head (`nHeads = nranks`); head `h` reduces block `h`
/// of every chunk round. Per head `h` and channel, every rank `r` has two regions in its
/// own memory (the "unicast" copies), each `NCCL_STEPS` slots of `step_bytes` with a head
/// and a tail word of its own: `reduce[r][h]` (written by `r`'s scatter, read by head
/// `h`'s reduction) and `broadcast[r][h]` (written by head `h`'s reduction, read by `r`'s
/// gather). A multicast handle names one region on every rank at once: on hardware a
/// multicast address; in the software twin ([`crate::multicast`]'s `SwMulticast`) a
/// `SwMulticastTable` listing every rank's unicast address, in rank order.
///
/// - `up_send[h]` (NCCL's `up[h].send[1]`, "Reduce UC -> MC"): the scatter's end to head
///   `h`: `buff`, `head` and `tail` are this rank's own `reduce[rank][h]`. It waits on its
///   own head word and posts its own tail word.
/// - `down_recv` (`down.recv[0]`, flagged [`CONN_NVLS_MIN_POLL`]): this head's reduction
///   reading `reduce[*][rank]`: `tail` is a multicast handle polled as the smallest of
///   every rank's tail (every rank has scattered the slot), `head` a handle whose post
///   reaches every rank's head word (every scatterer gets the credit).
/// - `down_send` (`down.send[0]`, flagged [`CONN_NVLS_MIN_POLL`]): this head's reduction
///   writing `broadcast[*][rank]`: `head` is polled as the smallest of every rank's head
///   (every gatherer has freed the slot), `tail` posted to every rank.
/// - `up_recv[h]` (`up[h].recv[1]`, "Broadcast MC -> UC"): the gather's end from head
///   `h`: this rank's own `broadcast[rank][h]` and its words.
///
/// A multicast end's data: on hardware `buff` is the multicast address of slot 0 and
/// `offs_fifo` 0 (slot `s` at `buff + s × step_bytes`, as any FIFO); in the software
/// twin `buff` is 0 and `offs_fifo` lists, per slot, the address of a `SwMulticastTable`
/// naming that slot on every rank (so `buff + offs_fifo[s]` is the slot's handle).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct NvlsConns {
    /// The scatter's ends, one per head `h < nranks`.
    pub up_send: [ConnInfo; MAX_NVLS_ARITY],
    /// The gather's ends, one per head `h < nranks`.
    pub up_recv: [ConnInfo; MAX_NVLS_ARITY],
    /// This head's reduction, reading every rank's reduce region (multicast).
    pub down_recv: ConnInfo,
    /// This head's reduction, writing every rank's broadcast region (multicast).
    pub down_send: ConnInfo,
}

static_assertions::const_assert_eq!(core::mem::size_of::<NvlsConns>(), 80 * (2 * MAX_NVLS_ARITY + 2));
static_assertions::const_assert_eq!(core::mem::offset_of!(NvlsConns, down_recv), 160 * MAX_NVLS_ARITY);

/// Where one channel's primitives spent their time, summed over every operation since
/// the counters were zeroed (device memory, relaxed atomic adds at GPU scope; read by the
/// host between operations). Kept only when the communicator asks for it.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ChannelStats {
    /// Slices moved (each a step or more of one FIFO).
    pub slices: u64,
    /// Bytes of those slices.
    pub bytes: u64,
    /// Nanoseconds from a slice's start (its waits done) to its end (every worker done),
    /// as worker 0 saw them.
    pub copy_ns: u64,
    /// Nanoseconds receive-side waiting threads spent waiting for a peer's data.
    pub wait_data_ns: u64,
    /// Nanoseconds send-side waiting threads spent waiting for a peer's credits.
    pub wait_credit_ns: u64,
    /// Nanoseconds the channel spent running collectives (from the item's start to the
    /// end of its last post, as thread 0 saw them): the rest of its time it was idle.
    pub busy_ns: u64,
    /// Not a counter: 1 + the SM the channel's CTA ran its last collective on (0: none
    /// yet), for telling how channels were placed.
    pub sm: u64,
    /// Stream-ordered items the channel took from the mailbox.
    pub mailbox_items: u64,
    /// Nanoseconds from each of those items' publication (the submitter's clock) to the
    /// channel taking it (its clock after the CTA barrier that hands the item on), summed:
    /// the stream-ordered path's dispatch latency.
    pub dispatch_ns: u64,
    /// Collectives the channel took part in, by the algorithm that ran them (an
    /// `Algorithm` number: ring, one-shot, two-shot, NVLS); a one-shot/two-shot collective
    /// counts on the channels it used only.
    pub algorithm_items: [u64; 4],
    /// Nanoseconds the one-shot/two-shot collectives spent in their flag exchanges, from
    /// the CTA barrier that starts one to the barrier that ends it (thread 0's clock): the
    /// part of `busy_ns` spent publishing staged data and waiting for the peers'.
    pub exchange_ns: u64,
    /// Stream-ordered collectives this (call) channel ran a part of on the call kernel
    /// alone (see `work::call_kernel`).
    pub call_kernel_parts: u64,
    /// Nanoseconds from each of those parts' CTA start (before the item is validated and
    /// planned) to its end (after the CTA barrier that follows the collective), as thread
    /// 0 saw them, summed: with `busy_ns` (the collective itself) it splits a call kernel's
    /// time into its preamble and the collective.
    pub call_kernel_ns: u64,
    /// One-shot all-reduce shares the channel moved as packets (see `algo::shot`); their
    /// waits count in `exchange_ns`.
    pub packet_items: u64,
    /// Padding to whole 64-byte lines (channels' counters never share a line); always 0.
    pub padding: [u64; 7],
}

static_assertions::const_assert_eq!(core::mem::size_of::<ChannelStats>(), 192);

impl ChannelStats {
    /// The sum of `self` and `other`, counter by counter (a sum ran on no one SM: `sm` 0).
    pub fn plus(&self, other: &Self) -> Self {
        Self {
            slices: self.slices + other.slices,
            bytes: self.bytes + other.bytes,
            copy_ns: self.copy_ns + other.copy_ns,
            wait_data_ns: self.wait_data_ns + other.wait_data_ns,
            wait_credit_ns: self.wait_credit_ns + other.wait_credit_ns,
            busy_ns: self.busy_ns + other.busy_ns,
            sm: 0,
            mailbox_items: self.mailbox_items + other.mailbox_items,
            dispatch_ns: self.dispatch_ns + other.dispatch_ns,
            algorithm_items: core::array::from_fn(|a| self.algorithm_items[a] + other.algorithm_items[a]),
            exchange_ns: self.exchange_ns + other.exchange_ns,
            call_kernel_parts: self.call_kernel_parts + other.call_kernel_parts,
            call_kernel_ns: self.call_kernel_ns + other.call_kernel_ns,
            packet_items: self.packet_items + other.packet_items,
            padding: [0; 7],
        }
    }

    /// `self - earlier`, counter by counter (counters only grow), on `self`'s SM.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            slices: self.slices.wrapping_sub(earlier.slices),
            bytes: self.bytes.wrapping_sub(earlier.bytes),
            copy_ns: self.copy_ns.wrapping_sub(earlier.copy_ns),
            wait_data_ns: self.wait_data_ns.wrapping_sub(earlier.wait_data_ns),
            wait_credit_ns: self.wait_credit_ns.wrapping_sub(earlier.wait_credit_ns),
            busy_ns: self.busy_ns.wrapping_sub(earlier.busy_ns),
            sm: self.sm,
            mailbox_items: self.mailbox_items.wrapping_sub(earlier.mailbox_items),
            dispatch_ns: self.dispatch_ns.wrapping_sub(earlier.dispatch_ns),
            algorithm_items: core::array::from_fn(|a| self.algorithm_items[a].wrapping_sub(earlier.algorithm_items[a])),
            exchange_ns: self.exchange_ns.wrapping_sub(earlier.exchange_ns),
            call_kernel_parts: self.call_kernel_parts.wrapping_sub(earlier.call_kernel_parts),
            call_kernel_ns: self.call_kernel_ns.wrapping_sub(earlier.call_kernel_ns),
            packet_items: self.packet_items.wrapping_sub(earlier.packet_items),
            padding: [0; 7],
        }
    }
}
