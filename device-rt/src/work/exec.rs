//! The persistent work loop: one launch per rank for the rank's lifetime; each CTA is a
//! channel (or, launched with a placement, leaves at once unless it claims one; see
//! `placement`). Warp 0 of each channel polls the ring and the mailbox, copies the next
//! items into shared memory, and a barrier hands it to every thread; the item is validated,
//! dispatched through a `match` into monomorphized functions, and completed (a release
//! store; relaxed when nothing was written). Errors, aborts and timeouts end the loop with
//! a recorded status, never a hang.

use core::mem::size_of;

use super::item::{BadItem, DeviceFunction, WorkItem, WorkKind};
use super::placement::elect_channel;
use super::queue::{ITEM_CACHE, LoopShared, LoopState, MAILBOX_DONE, MAILBOX_PENDING, QueueHeader, RingSlot};
use crate::abi::{LoopError, WaitSite};
use crate::algo::{Coll, CollCtx, CollFunction, run_collective};
use crate::arch::{self, AtomicWord, WARP_SIZE};
use crate::conn::CommDevice;
use crate::copy::reduce_copy_grid;
use crate::dtype::{Bf16, DataType, F16};
use crate::redop::{RedOpKind, Sum};
use crate::spin::{ABORT_CHECK_NS, Interrupted, SpinGuard, spin_until};

/// What the loop was launched with.
#[derive(Clone, Copy, Debug)]
pub struct LoopArgs {
    /// Host-mapped queue header.
    pub header: *mut QueueHeader,
    /// Host-mapped ring of `capacity` slots.
    pub ring: *const RingSlot,
    /// Slots in the ring.
    pub capacity: u64,
    /// Device-memory loop state (mailbox, counters).
    pub state: *mut LoopState,
    /// How long any wait inside an item may spin.
    pub spin_budget_ns: u64,
    /// The rank's communicator (device memory), or null for a loop without one.
    pub comm: *const CommDevice,
}

/// One channel's view of its loop: the launch arguments and which channel it is.
#[derive(Clone, Copy, Debug)]
struct Channel {
    args: LoopArgs,
    /// This CTA's channel.
    index: u32,
    /// The loop's channels.
    count: u32,
}

impl core::ops::Deref for Channel {
    type Target = LoopArgs;

    fn deref(&self) -> &LoopArgs {
        &self.args
    }
}

/// What thread 0's poll found.
const VERDICT_RING: u64 = 1;
const VERDICT_MAILBOX: u64 = 2;
const VERDICT_ABORT: u64 = 3;
const VERDICT_PEER_FAILED: u64 = 4;

/// Why an item stopped the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// This channel hit an error: record it (the first recorded error wins).
    Error(LoopError, u32),
    /// Another channel already recorded an error: leave quietly.
    PeerFailed,
}

/// `wait_result` when a wait ended because another channel failed.
const WAIT_PEER_FAILED: u64 = u64::MAX;

/// Where the current item came from, for completion.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Ring(u64),
    Mailbox(u64),
}

/// Runs the work loop until a Shutdown item, an abort, or an error.
///
/// # Safety
/// `args`' pointers are valid for the launch (the header and ring host-mapped, the state
/// in device memory, zeroed before the launch but for its placement); the CTA has
/// `LOOP_SMEM_BYTES` of dynamic shared memory and a multiple of 32 threads; the loop runs
/// at most `MAX_CHANNELS` channels: the grid, or `state.placement.nchannels` of a larger
/// grid.
pub unsafe fn work_loop(args: LoopArgs) {
    let shared = arch::dyn_smem().cast::<LoopShared>();
    let tid = arch::thread_idx();
    let placement = unsafe { &raw mut (*args.state).placement };
    let Some((index, count)) = (unsafe { elect_channel(placement, &raw const (*args.header).abort, &raw mut (*shared).channel) }) else {
        return;
    };
    let a = Channel { args, index, count };
    let mut next_seq = 1u64;
    let mut mailbox_done = u64::MAX;
    // Warp 0: how many ring slots the next fetch reads (the same in every lane).
    let mut want = 1usize;
    // Items in the shared cache, how many of them have run, and where they came from.
    let (mut cached, mut taken) = (0usize, 0usize);
    let mut mailbox_generation = None;
    // Thread 0: completions not yet published.
    let mut unpublished = Unpublished::default();
    // Thread 0: when it last read the abort flag between items.
    let mut abort_checked_ns = 0u64;
    loop {
        if taken == cached {
            if tid == 0 {
                unsafe { unpublished.publish(&a) };
            }
            if tid < WARP_SIZE {
                unsafe { fetch(&a, next_seq, &mut want, mailbox_done, shared) };
            }
            if tid == 0 {
                unsafe { abort_between_items(&a, &mut abort_checked_ns, shared) };
            }
            arch::barrier_sync_all();
            match unsafe { (&raw const (*shared).verdict).read_volatile() } {
                VERDICT_RING => {
                    cached = unsafe { (&raw const (*shared).count).read_volatile() } as usize;
                    mailbox_generation = None;
                }
                VERDICT_MAILBOX => {
                    cached = 1;
                    mailbox_generation = Some(unsafe { (&raw const (*shared).generation).read_volatile() });
                }
                VERDICT_ABORT => {
                    if tid == 0 {
                        unsafe { record_error(&a, LoopError::Aborted, 0, 0) };
                    }
                    break;
                }
                _ => break,
            }
            taken = 0;
        }
        let item = unsafe { (&raw const (*shared).items).cast::<WorkItem>().add(taken).read_volatile() };
        taken += 1;
        let source = match mailbox_generation {
            Some(generation) => Source::Mailbox(generation),
            None => Source::Ring(next_seq),
        };
        let seq = if let Source::Ring(s) = source { s } else { 0 };
        let kind = match item.validate() {
            Ok(_) if matches!(source, Source::Ring(s) if item.seq != s) => Err(BadItem::WrongSequence),
            other => other,
        };
        let kind = match kind {
            Ok(kind) => kind,
            Err(why) => {
                if tid == 0 {
                    unsafe { record_error(&a, LoopError::BadItem, why as u32, seq) };
                }
                break;
            }
        };
        // An item that may wait for the host must not hide earlier completions from it.
        if tid == 0 && may_block(kind) {
            unsafe { unpublished.publish(&a) };
        }
        let outcome = unsafe { execute(&a, kind, &item, shared) };
        arch::barrier_sync_all();
        match outcome {
            Ok(()) => {}
            Err(Stop::Error(error, detail)) => {
                if tid == 0 {
                    unsafe { record_error(&a, error, detail, seq) };
                }
                break;
            }
            Err(Stop::PeerFailed) => break,
        }
        match source {
            Source::Ring(seq) => {
                // Completions are published in batches (each is a store to host memory):
                // every PUBLISH_EVERY items, before fetching, before an item that may
                // block, and on leaving.
                if tid == 0 {
                    unpublished.complete(seq, kind);
                    if seq % PUBLISH_EVERY == 0 || kind == WorkKind::Shutdown {
                        unsafe { unpublished.publish(&a) };
                    }
                }
                next_seq += 1;
            }
            Source::Mailbox(generation) => {
                if tid == 0 {
                    unsafe { complete_mailbox(&a, generation) };
                }
                mailbox_done = generation;
            }
        }
        if kind == WorkKind::Shutdown {
            break;
        }
    }
    if tid == 0 {
        unsafe { unpublished.publish(&a) };
        unsafe { leave(&a) };
    }
}

/// Thread 0, after warp 0's fetch found work: at most every `ABORT_CHECK_NS`, reads the
/// host's abort flag and turns the verdict into an abort. Items found at once wait for
/// nothing, so no spin guard reads the flag while a burst of them runs: without this an
/// aborted loop would run every item of a burst.
///
/// Ordering: a volatile load of the flag (sees the host's release store eventually, orders
/// nothing); the verdict is lane 0's own store, read back by the same thread.
unsafe fn abort_between_items(a: &Channel, checked_ns: &mut u64, shared: *mut LoopShared) {
    // SAFETY: `shared` is the CTA's loop shared memory; thread 0 wrote the verdict.
    let verdict = unsafe { (&raw const (*shared).verdict).read_volatile() };
    if verdict != VERDICT_RING && verdict != VERDICT_MAILBOX {
        return;
    }
    let now = arch::globaltimer_ns();
    if now.wrapping_sub(*checked_ns) < ABORT_CHECK_NS {
        return;
    }
    *checked_ns = now;
    // SAFETY: the header is valid for the launch (`work_loop`'s contract).
    if unsafe { arch::ld_volatile_global(&raw const (*a.header).abort) } != 0 {
        // SAFETY: as above; thread 0 is lane 0 of warp 0, the verdict's writer.
        unsafe { set_verdict(shared, VERDICT_ABORT, 0, 0) };
    }
}

/// Thread 0's ring completions not yet published: the last item completed (0: none),
/// and whether any item since the last publication may have written memory.
#[derive(Default)]
struct Unpublished {
    seq: u64,
    wrote: bool,
}

impl Unpublished {
    /// Records ring item `seq`, of `kind`, as completed.
    fn complete(&mut self, seq: u64, kind: WorkKind) {
        self.seq = seq;
        self.wrote |= writes_memory(kind);
    }

    /// Publishes the completions recorded, if any (see [`publish_ring`]).
    ///
    /// # Safety
    /// As [`publish_ring`].
    unsafe fn publish(&mut self, a: &Channel) {
        if self.seq != 0 {
            unsafe { publish_ring(a, self.seq, self.wrote) };
            *self = Self::default();
        }
    }
}

/// True for items whose work may have written memory that the host or a later item reads.
fn writes_memory(kind: WorkKind) -> bool {
    matches!(kind, WorkKind::ReduceCopy | WorkKind::Call | WorkKind::Collective)
}

/// Ring items between two completion stores at most.
const PUBLISH_EVERY: u64 = 16;

/// True for items that may wait on something outside the loop.
fn may_block(kind: WorkKind) -> bool {
    matches!(kind, WorkKind::Barrier | WorkKind::Call | WorkKind::Collective)
}

/// The channel whose warp 0 polls the host's ring while the loop is idle; the others wait
/// in device memory until a channel has found the slot they want ([`wait_seen`]). Idle
/// channels reading host memory all the time slowed the NVLink traffic of busy ones.
const POLLING_CHANNEL: u32 = 0;

/// The named barrier warp 0 uses inside [`fetch`].
const FETCH_BARRIER: u32 = 1;

/// 16-byte pieces of one ring slot.
const SLOT_PIECES: usize = size_of::<RingSlot>() / 16;

/// Pieces of `ITEM_CACHE` slots each lane of warp 0 reads.
const PIECES_PER_LANE: usize = ITEM_CACHE * SLOT_PIECES / WARP_SIZE as usize;

/// Every lane of a warp.
const FULL_WARP: u32 = u32::MAX;

/// Warp 0 waits for work and copies it into shared memory: up to `ITEM_CACHE` ring items
/// (see the `queue` module), or the mailbox item. Lane 0 records the verdict, the item
/// count and the mailbox generation. `want` is how many slots the backlog read takes: it
/// doubles while every slot read was whole and falls back to what was found; with nothing
/// found the warp polls the next slot (see [`poll_next_slot`]). A channel other than the
/// [`POLLING_CHANNEL`] first waits until a channel has found the slot whole, then reads
/// every slot found so far.
///
/// Ordering: the backlog read uses volatile loads (each 8-byte word single-copy atomic, a
/// slot taken only when every flag is right), which the SM overlaps, then one
/// `fence.acq_rel.sys`: the host wrote each word with a release store, so everything it
/// wrote before the slots is visible to the CTA after the caller's barrier.
unsafe fn fetch(a: &Channel, next_seq: u64, want: &mut usize, mailbox_done: u64, shared: *mut LoopShared) {
    let lane = arch::lane_id() as usize;
    if a.index != POLLING_CHANNEL {
        match unsafe { wait_seen(a, next_seq, mailbox_done, shared) } {
            Some(seen) => *want = ((seen - next_seq + 1) as usize).min(ITEM_CACHE),
            None => return,
        }
    }
    if *want > 1 {
        let pieces = unsafe { read_slots(a, next_seq, *want, lane) };
        let ready = whole_slots(&pieces, next_seq, lane, *want);
        if ready > 0 {
            arch::fence_acq_rel_sys();
            let items = unsafe { (&raw mut (*shared).items).cast::<u64>() };
            for (k, piece) in pieces.into_iter().enumerate() {
                let p = lane + k * WARP_SIZE as usize;
                if p < ready * SLOT_PIECES {
                    let seq = next_seq + (p / SLOT_PIECES) as u64;
                    if let Some(bytes) = RingSlot::unflag_pair(piece, seq) {
                        unsafe { items.add(p).write_volatile(bytes) };
                    }
                }
            }
            if lane == 0 {
                unsafe { set_verdict(shared, VERDICT_RING, ready as u64, 0) };
                unsafe { note_seen(a, next_seq + ready as u64 - 1) };
            }
            *want = if ready == *want { (2 * ready).min(ITEM_CACHE) } else { ready };
            return;
        }
    }
    *want = if unsafe { poll_next_slot(a, next_seq, mailbox_done, shared) } { 2 } else { 1 };
}

/// Warp 0, with nothing queued: polls slot `next_seq` until it is whole (then copies it
/// into shared memory and returns true), a mailbox item or another channel's error turns
/// up, or the abort flag is set (verdict recorded, false).
///
/// Two reads are in flight, half a round trip apart: lanes 0-7 and lanes 8-15 each read
/// the whole slot (one 16-byte piece per lane), and each half reissues its read when it
/// comes back, so the slot is seen a quarter of a round trip sooner on average than with
/// one read at a time. The first read measures the round trip.
///
/// Ordering: the reads are acquire loads (`ld.acquire.sys`, no fence): each lane's later
/// accesses, and the CTA's after the caller's barrier, see everything the host wrote
/// before the slot's words. The mailbox: lane 0's acquire of its state comes before the
/// warp's named barrier, and every lane's loads of the item after it.
unsafe fn poll_next_slot(a: &Channel, next_seq: u64, mailbox_done: u64, shared: *mut LoopShared) -> bool {
    let lane = arch::lane_id() as usize;
    let mut guard = unsafe { SpinGuard::new(&raw const (*a.header).abort, u64::MAX) };
    let mut round = 0u32;
    let started = arch::globaltimer_ns();
    let mut reads = [unsafe { read_half(a, next_seq, lane, 0) }, [0; 2]];
    if unsafe { take_half(a, reads[0], next_seq, lane, 0, shared) } {
        return true;
    }
    let round_trip = arch::globaltimer_ns().wrapping_sub(started);
    reads[1] = unsafe { read_half(a, next_seq, lane, 1) };
    let second_issued = arch::globaltimer_ns();
    while arch::globaltimer_ns().wrapping_sub(second_issued) < round_trip / 2 {
        arch::spin_pause();
    }
    reads[0] = unsafe { read_half(a, next_seq, lane, 0) };
    let mut turn = 1;
    loop {
        if unsafe { take_half(a, reads[turn], next_seq, lane, turn, shared) } {
            return true;
        }
        reads[turn] = unsafe { read_half(a, next_seq, lane, turn) };
        turn ^= 1;
        let (verdict, generation) = if lane == 0 { unsafe { look_elsewhere(a, mailbox_done, &mut round, &mut guard) } } else { (0, 0) };
        let verdict = broadcast_lane0(verdict);
        if verdict == 0 {
            continue;
        }
        unsafe { take_elsewhere(a, verdict, generation, lane, shared) };
        return false;
    }
}

/// Warp 0 of a channel other than the [`POLLING_CHANNEL`]: waits until a channel has found
/// ring slot `next_seq` whole and returns the highest sequence number found; or, when a
/// mailbox item or another channel's error turns up or the abort flag is set, records the
/// verdict (see [`take_elsewhere`]) and returns None. Only device memory is polled.
///
/// Ordering: `seen_seq` is read relaxed: it only says which slots to read; their contents
/// are then read from host memory and ordered as in [`fetch`].
unsafe fn wait_seen(a: &Channel, next_seq: u64, mailbox_done: u64, shared: *mut LoopShared) -> Option<u64> {
    let lane = arch::lane_id() as usize;
    let mut guard = unsafe { SpinGuard::new(&raw const (*a.header).abort, u64::MAX) };
    let mut round = 0u32;
    loop {
        let (seen, verdict, generation) = if lane == 0 {
            let seen = unsafe { arch::ld_relaxed_gpu_global(&raw const (*a.state).seen_seq) };
            let (verdict, generation) = if seen >= next_seq { (0, 0) } else { unsafe { look_elsewhere(a, mailbox_done, &mut round, &mut guard) } };
            (seen, verdict, generation)
        } else {
            (0, 0, 0)
        };
        let (seen, verdict) = (broadcast_lane0(seen), broadcast_lane0(verdict));
        if seen >= next_seq {
            return Some(seen);
        }
        if verdict != 0 {
            unsafe { take_elsewhere(a, verdict, generation, lane, shared) };
            return None;
        }
        arch::spin_pause();
    }
}

/// Warp 0, when the ring gave nothing and `verdict` (lane 0's `generation` for the
/// mailbox) came from [`look_elsewhere`]: lane 0 records it, and for the mailbox the warp
/// copies its item into shared memory.
///
/// Ordering: the mailbox: lane 0's acquire of its state came before the warp's named
/// barrier, and every lane's loads of the item come after it.
unsafe fn take_elsewhere(a: &Channel, verdict: u64, generation: u64, lane: usize, shared: *mut LoopShared) {
    if lane == 0 {
        unsafe { set_verdict(shared, verdict, u64::from(verdict == VERDICT_MAILBOX), generation) };
    }
    if verdict == VERDICT_MAILBOX {
        arch::barrier_sync(FETCH_BARRIER, WARP_SIZE);
        if lane < size_of::<WorkItem>() / 16 {
            let item = arch::cvta_to_global(unsafe { &raw const (*a.state).mailbox.item }) + 16 * lane as u64;
            let piece = unsafe { arch::ld_cv_global_v2b64(item) };
            unsafe { (&raw mut (*shared).items).cast::<[u64; 2]>().add(lane).write_volatile(piece) };
        }
    }
}

/// Lane 0 of warp 0, having found ring slots up to `last` whole: raises the loop state's
/// `seen_seq` to it (a relaxed atomic max at GPU scope; orders nothing).
unsafe fn note_seen(a: &Channel, last: u64) {
    unsafe { u64::atomic_max_relaxed_gpu(&raw mut (*a.state).seen_seq, last) };
}

/// Lanes `8 × half ..= 8 × half + 7` of warp 0 read their piece of slot `next_seq` with an
/// acquire load (the other lanes get zeros).
unsafe fn read_half(a: &Channel, next_seq: u64, lane: usize, half: usize) -> [u64; 2] {
    if lane / SLOT_PIECES != half {
        return [0; 2];
    }
    let slot = unsafe { a.ring.add(((next_seq - 1) % a.capacity) as usize) };
    unsafe { arch::ld_acquire_sys_global_v2b64(arch::cvta_to_global(slot) + 16 * (lane % SLOT_PIECES) as u64) }
}

/// When the read of `half` (see [`read_half`]) found slot `next_seq` whole: its lanes copy
/// the item into shared memory, lane 0 records the verdict and notes the slot seen, and
/// every lane gets true.
unsafe fn take_half(a: &Channel, piece: [u64; 2], next_seq: u64, lane: usize, half: usize, shared: *mut LoopShared) -> bool {
    let mine = lane / SLOT_PIECES == half;
    let bytes = RingSlot::unflag_pair(piece, next_seq);
    let whole = arch::vote_ballot(FULL_WARP, !mine || bytes.is_some()) == FULL_WARP;
    if !whole {
        return false;
    }
    if let (true, Some(bytes)) = (mine, bytes) {
        unsafe { (&raw mut (*shared).items).cast::<u64>().add(lane % SLOT_PIECES).write_volatile(bytes) };
    }
    if lane == 0 {
        unsafe { set_verdict(shared, VERDICT_RING, 1, 0) };
        unsafe { note_seen(a, next_seq) };
    }
    true
}

/// Every lane of warp 0 reads its pieces of the `want` ring slots from `next_seq` on
/// (piece `p` of the run is lane `p % 32`'s `p / 32`-th), with volatile loads.
unsafe fn read_slots(a: &Channel, next_seq: u64, want: usize, lane: usize) -> [[u64; 2]; PIECES_PER_LANE] {
    let mut pieces = [[0u64; 2]; PIECES_PER_LANE];
    for (k, piece) in pieces.iter_mut().enumerate() {
        let p = lane + k * WARP_SIZE as usize;
        if p < want * SLOT_PIECES {
            let slot = unsafe { a.ring.add(((next_seq - 1 + (p / SLOT_PIECES) as u64) % a.capacity) as usize) };
            *piece = unsafe { arch::ld_volatile_global_v2b64(arch::cvta_to_global(slot) + 16 * (p % SLOT_PIECES) as u64) };
        }
    }
    pieces
}

/// How many of the `read` slots from `next_seq` on are whole, counting from the first
/// (the same in every lane: one ballot per piece row).
fn whole_slots(pieces: &[[u64; 2]; PIECES_PER_LANE], next_seq: u64, lane: usize, read: usize) -> usize {
    const SLOTS_PER_ROW: usize = WARP_SIZE as usize / SLOT_PIECES;
    const SLOT_MASK: u32 = (1 << SLOT_PIECES) - 1;
    let mut whole = 0;
    for (k, piece) in pieces.iter().enumerate() {
        if whole >= read {
            break;
        }
        let p = lane + k * WARP_SIZE as usize;
        let seq = next_seq + (p / SLOT_PIECES) as u64;
        let ok = arch::vote_ballot(FULL_WARP, RingSlot::unflag_pair(*piece, seq).is_some());
        for s in 0..SLOTS_PER_ROW {
            if whole == read || (ok >> (s * SLOT_PIECES)) & SLOT_MASK != SLOT_MASK {
                return whole;
            }
            whole += 1;
        }
    }
    whole
}

/// Lane 0's `v` in every lane of the warp.
fn broadcast_lane0(v: u64) -> u64 {
    let lo = arch::shfl_idx(FULL_WARP, v as u32, 0);
    let hi = arch::shfl_idx(FULL_WARP, (v >> 32) as u32, 0);
    u64::from(lo) | u64::from(hi) << 32
}

/// Lane 0 of warp 0 writes what [`fetch`] found.
///
/// # Safety
/// `shared` is the CTA's loop shared memory.
unsafe fn set_verdict(shared: *mut LoopShared, verdict: u64, count: u64, generation: u64) {
    unsafe {
        (&raw mut (*shared).verdict).write_volatile(verdict);
        (&raw mut (*shared).count).write_volatile(count);
        (&raw mut (*shared).generation).write_volatile(generation);
    }
}

/// Lane 0 of warp 0, while the ring has nothing: every `MAILBOX_POLL_EVERY` rounds looks
/// for a mailbox item of a generation other than `mailbox_done` and for another
/// channel's error, and counts the round against the abort flag. Returns 0 to keep
/// polling, or a verdict and (for the mailbox) the item's generation.
unsafe fn look_elsewhere(a: &Channel, mailbox_done: u64, round: &mut u32, guard: &mut SpinGuard) -> (u64, u64) {
    let mailbox = unsafe { &raw mut (*a.state).mailbox };
    *round = round.wrapping_add(1);
    if round.is_multiple_of(MAILBOX_POLL_EVERY) {
        // Generation first: it is released after DONE, so a PENDING seen after a new
        // generation belongs to a new item, never to the one just completed.
        let generation = unsafe { arch::ld_acquire_sys_global(&raw const (*mailbox).generation) };
        if generation != mailbox_done {
            // The low half, at the size it is written with (the host's 32-bit stream
            // write, the last channel's 32-bit DONE): mixed-size accesses do not
            // synchronize in the PTX memory model.
            // SAFETY: the loop state is valid for the launch; the low half is 4-byte aligned.
            let state = unsafe { arch::ld_acquire_sys_global((&raw const (*mailbox).state).cast::<u32>()) };
            if u64::from(state) == MAILBOX_PENDING {
                return (VERDICT_MAILBOX, generation);
            }
        }
        if unsafe { arch::ld_volatile_global(&raw const (*a.state).error_claimed) } != 0 {
            return (VERDICT_PEER_FAILED, 0);
        }
    }
    if guard.tick().is_err() {
        return (VERDICT_ABORT, 0);
    }
    (0, 0)
}

/// Polling rounds of the ring between two looks at the mailbox and the error claim.
const MAILBOX_POLL_EVERY: u32 = 4;

/// Runs a validated item with every thread of the CTA.
unsafe fn execute(a: &Channel, kind: WorkKind, item: &WorkItem, shared: *mut LoopShared) -> Result<(), Stop> {
    match kind {
        WorkKind::NoOp | WorkKind::Shutdown => Ok(()),
        WorkKind::ReduceCopy => {
            unsafe { run_reduce_copy(item, (a.index, a.count)) };
            Ok(())
        }
        WorkKind::Barrier => unsafe { channels_barrier(a, shared) },
        WorkKind::Call => unsafe { call(a, item, shared) },
        WorkKind::Collective => unsafe { collective(a, item, shared) },
    }
}

/// Runs a collective item with the rank's communicator, after checking it against the
/// communicator (the host has checked it too).
#[inline(never)]
unsafe fn collective(a: &Channel, item: &WorkItem, shared: *mut LoopShared) -> Result<(), Stop> {
    if a.comm.is_null() {
        return Err(Stop::Error(LoopError::BadItem, BadItem::NoCommunicator as u32));
    }
    let (rank, nranks) = unsafe { ((*a.comm).rank, (*a.comm).nranks) };
    if let Err(why) = item.validate_in_comm(rank, nranks) {
        return Err(Stop::Error(LoopError::BadItem, why as u32));
    }
    // `validate` and `validate_in_comm` guarantee known numbers.
    let (Some(function), Some(dtype), Some(kind)) =
        (CollFunction::from_u32(item.function), DataType::from_u8(item.dtype), RedOpKind::from_u8(item.op))
    else {
        arch::trap()
    };
    let c = Coll {
        function,
        count: item.count,
        recv_count: if function == CollFunction::SendRecv { item.op_arg } else { 0 },
        input: item.src,
        output: item.dst,
        red_arg: item.op_arg,
        root: item.arg as u32,
        send_peer: item.arg as u32,
        recv_peer: (item.arg >> 32) as u32,
    };
    let prims = unsafe { (&raw mut (*shared).prims).cast() };
    let cx = unsafe { CollCtx::new(a.comm, (a.index, a.count), prims, &raw const (*a.header).abort, a.spin_budget_ns) };
    match unsafe { run_collective(&cx, &c, dtype, kind) } {
        Ok(()) => Ok(()),
        Err((error, detail)) => Err(Stop::Error(error, detail)),
    }
}

/// `dst = src` or `dst = src + src2` over this channel's share: share `part.0` of
/// `part.1`.
#[inline(never)]
unsafe fn run_reduce_copy(item: &WorkItem, part: (u32, u32)) {
    let (src, src2, dst, n) = (item.src, item.src2, item.dst, item.count);
    // `validate` guarantees a known type.
    let Some(dtype) = DataType::from_u8(item.dtype) else { arch::trap() };
    unsafe {
        if src2 == 0 {
            // A copy moves bits: any type of the element's size will do.
            match dtype.size() {
                1 => reduce_copy_grid::<Sum<u8>, 1, 1>([src], [dst], n, part),
                2 => reduce_copy_grid::<Sum<F16>, 1, 1>([src], [dst], n, part),
                4 => reduce_copy_grid::<Sum<u32>, 1, 1>([src], [dst], n, part),
                _ => reduce_copy_grid::<Sum<u64>, 1, 1>([src], [dst], n, part),
            }
            return;
        }
        let (s, d) = ([src, src2], [dst]);
        match dtype {
            DataType::I8 => reduce_copy_grid::<Sum<i8>, 2, 1>(s, d, n, part),
            DataType::U8 => reduce_copy_grid::<Sum<u8>, 2, 1>(s, d, n, part),
            DataType::I32 => reduce_copy_grid::<Sum<i32>, 2, 1>(s, d, n, part),
            DataType::U32 => reduce_copy_grid::<Sum<u32>, 2, 1>(s, d, n, part),
            DataType::I64 => reduce_copy_grid::<Sum<i64>, 2, 1>(s, d, n, part),
            DataType::U64 => reduce_copy_grid::<Sum<u64>, 2, 1>(s, d, n, part),
            DataType::F16 => reduce_copy_grid::<Sum<F16>, 2, 1>(s, d, n, part),
            DataType::F32 => reduce_copy_grid::<Sum<f32>, 2, 1>(s, d, n, part),
            DataType::F64 => reduce_copy_grid::<Sum<f64>, 2, 1>(s, d, n, part),
            DataType::Bf16 => reduce_copy_grid::<Sum<Bf16>, 2, 1>(s, d, n, part),
        }
    }
}

/// Thread 0 waits until `ready()`, bounded by the abort flag and the spin budget; every
/// thread of the CTA gets the outcome.
unsafe fn cta_wait(a: &Channel, shared: *mut LoopShared, site: WaitSite, mut ready: impl FnMut() -> bool) -> Result<(), Stop> {
    if arch::thread_idx() == 0 {
        let claimed = unsafe { &raw const (*a.state).error_claimed };
        let mut peer_failed = false;
        let waited = unsafe {
            spin_until(&raw const (*a.header).abort, a.spin_budget_ns, || {
                peer_failed = arch::ld_volatile_global(claimed) != 0;
                peer_failed || ready()
            })
        };
        let outcome = match waited {
            Ok(()) if peer_failed => WAIT_PEER_FAILED,
            Ok(()) => 0,
            Err(Interrupted::Aborted) => LoopError::Aborted.status(0),
            Err(Interrupted::TimedOut) => LoopError::Timeout.status(site as u32),
        };
        unsafe { (&raw mut (*shared).wait_result).write_volatile(outcome) };
    }
    arch::barrier_sync_all();
    match unsafe { (&raw const (*shared).wait_result).read_volatile() } {
        0 => Ok(()),
        WAIT_PEER_FAILED => Err(Stop::PeerFailed),
        s if s as u32 == LoopError::Aborted as u32 => Err(Stop::Error(LoopError::Aborted, 0)),
        s => Err(Stop::Error(LoopError::Timeout, (s >> 32) as u32)),
    }
}

/// Every channel of the loop waits for every other (sense by generation).
///
/// Ordering: the arrival is an acq_rel atomic and the release of the generation a
/// release store, so everything each channel did before the barrier is visible to every
/// channel after it.
unsafe fn channels_barrier(a: &Channel, shared: *mut LoopShared) -> Result<(), Stop> {
    let state = a.state;
    let generation_ptr = unsafe { &raw mut (*state).barrier_generation };
    let mut generation = 0;
    if arch::thread_idx() == 0 {
        generation = unsafe { arch::ld_acquire_sys_global(generation_ptr) };
        let arrived = unsafe { u64::atomic_add_acq_rel_sys(&raw mut (*state).barrier_arrived, 1) } + 1;
        if arrived == u64::from(a.count) {
            unsafe { arch::st_relaxed_sys_global(&raw mut (*state).barrier_arrived, 0) };
            unsafe { arch::st_release_sys_global(generation_ptr, generation + 1) };
        }
    }
    unsafe { cta_wait(a, shared, WaitSite::Barrier, || arch::ld_acquire_sys_global(generation_ptr) != generation) }
}

/// Runs a device function.
unsafe fn call(a: &Channel, item: &WorkItem, shared: *mut LoopShared) -> Result<(), Stop> {
    let Some(function) = DeviceFunction::from_u32(item.function) else { arch::trap() };
    let leader = a.index == 0 && arch::thread_idx() == 0;
    let word = item.arg as *mut u64;
    match function {
        DeviceFunction::Timestamp => {
            if leader {
                unsafe { arch::st_volatile_global(word, arch::globaltimer_ns()) };
            }
            Ok(())
        }
        DeviceFunction::Increment => {
            if leader {
                unsafe { u64::atomic_add_relaxed_sys(word, 1) };
            }
            Ok(())
        }
        DeviceFunction::WaitAtLeast => {
            let want = item.count;
            unsafe { cta_wait(a, shared, WaitSite::Flag, || arch::ld_acquire_sys_global(word) >= want) }
        }
    }
}

/// Publishes that this channel has completed every ring item up to `seq`.
///
/// Ordering: the caller passed a CTA barrier after every thread's work; when `release`,
/// a release store (`fence.acq_rel.sys` first) makes that work visible before the
/// completion is. Items that wrote nothing (no-ops, barriers, shutdown) have nothing to
/// make visible: their completion is a relaxed store, without the fence.
unsafe fn publish_ring(a: &Channel, seq: u64, release: bool) {
    let slot = unsafe { (&raw mut (*a.header).cta_completed).cast::<u64>().add(a.index as usize) };
    unsafe {
        if release {
            arch::st_release_sys_global(slot, seq)
        } else {
            arch::st_relaxed_sys_global(slot, seq)
        }
    }
}

/// Counts this channel done with the mailbox item of `generation`; the last channel
/// marks the item done, then bumps the generation.
///
/// Ordering: as [`publish_ring`], through an acq_rel arrival count and a release store.
unsafe fn complete_mailbox(a: &Channel, generation: u64) {
    let mailbox = unsafe { &raw mut (*a.state).mailbox };
    arch::fence_acq_rel_sys();
    let arrived = unsafe { u64::atomic_add_acq_rel_sys(&raw mut (*mailbox).arrived, 1) } + 1;
    if arrived == u64::from(a.count) {
        unsafe { arch::st_relaxed_sys_global(&raw mut (*mailbox).arrived, 0) };
        unsafe { arch::st_release_sys_global((&raw mut (*mailbox).state).cast::<u32>(), MAILBOX_DONE as u32) };
        // After DONE: a channel that sees the new generation then sees DONE (or the next
        // PENDING), never the completed item's PENDING.
        unsafe { arch::st_release_sys_global(&raw mut (*mailbox).generation, generation + 1) };
    }
}

/// Records the loop's first error: the channel that wins the claim writes the details,
/// then the status (release), so the host never sees a status without its details.
unsafe fn record_error(a: &Channel, error: LoopError, detail: u32, seq: u64) {
    if unsafe { u64::atomic_cas_acq_rel_sys(&raw mut (*a.state).error_claimed, 0, 1) } == 0 {
        unsafe { arch::st_volatile_global(&raw mut (*a.header).error_seq, seq) };
        unsafe { arch::st_release_sys_global(&raw mut (*a.header).status, error.status(detail)) };
    }
}

/// Leaves the loop: closes the mailbox (a stream waiting on it continues) and counts
/// this channel out; the last channel out tells the host, after every channel's
/// completions (acq_rel count, then a release store).
unsafe fn leave(a: &Channel) {
    let state_hi = unsafe { (&raw mut (*a.state).mailbox.state).cast::<u32>().add(1) };
    unsafe { arch::st_release_sys_global(state_hi, 1) };
    let exited = unsafe { u64::atomic_add_acq_rel_sys(&raw mut (*a.state).exited, 1) } + 1;
    if exited == u64::from(a.count) {
        unsafe { arch::st_release_sys_global(&raw mut (*a.header).exited, exited) };
    }
}
