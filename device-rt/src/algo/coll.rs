//! What every algorithm is given and shares: one collective as the loop hands it over
//! ([`Coll`]), where it runs ([`CollCtx`]), and the chunking both ends of a connection
//! compute alike.
//!
//! Device code (compiled for nvptx64 or the host twin). It must never choose an
//! algorithm (that is `dispatch`, above the algorithms) nor import from `work`.

use super::function::CollFunction;
use super::select::{AlgorithmChoice, Staging};
use crate::abi::{PrimsShared, ShmemHandle};
use crate::arch;
use crate::conn::{ChannelConns, ChannelStats, CommDevice, MAX_RANKS, NvlsConns, StagingConns};
use crate::prims::{GroupCtx, div_up};

/// One collective as the loop hands it to an algorithm.
#[derive(Clone, Copy, Debug)]
pub struct Coll {
    pub function: CollFunction,
    /// Elements per rank (NCCL's count: all-gather's send count, reduce-scatter's
    /// receive count); for SendRecv, the elements sent.
    pub count: u64,
    /// Elements received (SendRecv only).
    pub recv_count: u64,
    /// Input and output buffers (byte addresses).
    pub input: u64,
    pub output: u64,
    /// The output is mapped for every peer (the work item's `ITEM_OUTPUT_PEER_MAPPED`): on
    /// connections that allow direct operations, the previous rank may write into it.
    pub output_peer_mapped: bool,
    /// The operator's argument.
    pub red_arg: u64,
    /// Broadcast and Reduce: the root rank.
    pub root: u32,
    /// SendRecv: the peer sent to and the peer received from ([`super::NO_PEER`]: none).
    pub send_peer: u32,
    pub recv_peer: u32,
}

/// Where a collective runs: this rank's communicator and this channel.
#[derive(Clone, Copy)]
pub struct CollCtx {
    pub rank: u32,
    pub nranks: u32,
    pub ring_index: u32,
    /// `[u32; MAX_RANKS]` in the communicator's memory: the ring seen from this rank.
    pub ring_ranks: *const u32,
    /// Channels a collective spreads over: the loop's, or with paired channels the first
    /// half of them ([`CommDevice::pairs`]).
    pub nchannels: u32,
    pub channel_index: u32,
    /// [`CommDevice::pairs`].
    pub pairs: u32,
    /// This channel's ring connections.
    pub channel: *mut ChannelConns,
    /// This channel's point-to-point connections, one per peer.
    pub p2p: *mut ChannelConns,
    /// Bytes per FIFO step (the same on every connection of the rank).
    pub step_bytes: u64,
    /// The whole CTA as one group.
    pub group: GroupCtx,
    /// This channel's part of the one-shot/two-shot algorithms' memory, or null: the
    /// communicator has none, or this channel is not one a collective spreads over.
    pub staging: *mut StagingConns,
    /// [`CommDevice::staging_slot_bytes`]: 0 when the communicator has no staging (the
    /// same on every channel).
    pub staging_slot_bytes: u64,
    /// The algorithm the communicator asks for.
    pub algorithm: AlgorithmChoice,
    /// This channel's NVLS connections, or null: the communicator has none, or this
    /// channel is not one a collective spreads over.
    pub nvls: *mut NvlsConns,
    /// This rank's `ShmemHandle` when the communicator is on a symmetric heap (PE `p` is
    /// rank `p`), else null: the two-shot all-reduce reads inputs in the heap in place.
    pub heap: *const ShmemHandle,
}

impl CollCtx {
    /// The rank `j` places after this one in the ring (`j < nranks`).
    pub fn ring_rank(&self, j: u32) -> u32 {
        // SAFETY: `ring_ranks` holds MAX_RANKS entries (the constructor's contract).
        unsafe { self.ring_ranks.add(j as usize % MAX_RANKS).read() }
    }

    /// What the communicator has for the one-shot/two-shot algorithms.
    pub fn staging(&self) -> Staging {
        Staging { nranks: self.nranks, channels: self.nchannels, slot_bytes: self.staging_slot_bytes }
    }

    /// The context of channel `channel.0` of `channel.1` in `comm`.
    ///
    /// # Safety
    /// `comm` is a valid communicator description whose connection arrays cover this
    /// channel; `shared` holds `MAX_GROUPS` groups' shared memory.
    pub unsafe fn new(comm: *const CommDevice, channel: (u32, u32), shared: *mut PrimsShared, abort: *const u64, spin_budget_ns: u64) -> Self {
        let (bid, nchannels) = channel;
        // SAFETY: `comm` is a valid, aligned `CommDevice` in device memory (this function's
        // contract), written by the host before the launch and only read while the kernel runs.
        let comm = unsafe { &*comm };
        let channel = (comm.channels as *mut ChannelConns).wrapping_add(bid as usize);
        let stats = if comm.stats == 0 { core::ptr::null_mut() } else { (comm.stats as *mut ChannelStats).wrapping_add(bid as usize) };
        if !stats.is_null() && arch::thread_idx() == 0 {
            // Ordering: relaxed; the host reads it between operations, as the counters.
            // SAFETY: a non-null `stats` is entry `bid` of the communicator's `[ChannelStats;
            // nchannels]`, which covers this channel (this function's contract): an aligned
            // `u64` field in device memory accessed only through `arch`, written here by thread
            // 0 alone.
            unsafe { arch::st_relaxed_sys_global(&raw mut (*stats).sm, u64::from(arch::sm_id()) + 1) };
        }
        let collective_channels = if comm.pairs == 0 { nchannels } else { comm.pairs };
        Self {
            rank: comm.rank,
            nranks: comm.nranks,
            ring_index: comm.ring_index,
            ring_ranks: (&raw const comm.ring_ranks).cast(),
            nchannels: collective_channels,
            channel_index: bid,
            pairs: comm.pairs,
            channel,
            p2p: (comm.p2p as *mut ChannelConns).wrapping_add(bid as usize * comm.nranks as usize),
            // SAFETY: `channel` is entry `bid` of the communicator's `[ChannelConns;
            // nchannels]`, which covers this channel (this function's contract); the host wrote
            // `step_bytes` before the launch and nothing writes it while the kernel runs.
            step_bytes: unsafe { (&raw const (*channel).send.step_bytes).read() },
            group: GroupCtx {
                tid: arch::thread_idx(),
                nthreads: arch::block_dim(),
                group: 0,
                shared,
                abort,
                spin_budget_ns,
                stats,
            },
            staging: if comm.staging == 0 || bid >= collective_channels {
                core::ptr::null_mut()
            } else {
                (comm.staging as *mut StagingConns).wrapping_add(bid as usize)
            },
            staging_slot_bytes: if comm.staging == 0 { 0 } else { comm.staging_slot_bytes },
            // The host writes a choice's number; anything else is read as the device's own
            // choice, which gives correct results whatever it picks.
            algorithm: AlgorithmChoice::from_u32(comm.algorithm).unwrap_or_default(),
            nvls: if comm.nvls == 0 || bid >= collective_channels {
                core::ptr::null_mut()
            } else {
                (comm.nvls as *mut NvlsConns).wrapping_add(bid as usize)
            },
            heap: comm.heap as *const ShmemHandle,
        }
    }

    /// Shared memory of primitives group `group` (`< MAX_GROUPS`): the CTA's group's
    /// (group 0) and the ones after it (SendRecv's send side: group 1; NVLS: up to 3).
    pub fn group_shared(&self, group: u32) -> *mut PrimsShared {
        self.group.shared.wrapping_add(group as usize)
    }
}

/// Chunks start on multiples of this many bytes (full copy hunks, aligned packs).
pub const CHUNK_ALIGN_BYTES: i64 = 4096;

/// The chunk of `remaining` elements of `elt` bytes one round gives each of `parts`
/// parts: at most `chunk` (one chunk of the FIFO), rounded up to whole
/// `CHUNK_ALIGN_BYTES`.
pub(super) fn round_chunk(elt: i64, remaining: i64, parts: i64, chunk: i64) -> i64 {
    let align = (CHUNK_ALIGN_BYTES / elt).max(1);
    (div_up(div_up(remaining, parts), align) * align).min(chunk)
}

/// Calls `f(offset, n)` for this channel's share of each round over `size` elements of
/// `elt` bytes, in order: every round gives each channel at most `chunk` elements. Both
/// ends of a connection compute the same sequence from the same size.
pub(super) fn for_each_chunk(cx: &CollCtx, elt: i64, size: i64, chunk: i64, mut f: impl FnMut(i64, i64)) {
    let nch = i64::from(cx.nchannels);
    let mut grid_offset = 0;
    while grid_offset < size {
        let real = round_chunk(elt, size - grid_offset, nch, chunk);
        let off = grid_offset + i64::from(cx.channel_index) * real;
        f(off, real.min(size - off).max(0));
        grid_offset += nch * chunk;
    }
}
