//! The persistent work loop: one launch per rank for the rank's lifetime; each CTA is a
//! resident channel (or, launched with a placement, leaves at once unless it claims one;
//! see `placement`). A communicator's call channels run in call kernels instead (see
//! `call_kernel`); a mailbox collective's completion counts them. Warp 0 of each channel
//! polls the ring and the mailbox, copies the next items into shared memory, and a barrier
//! hands it to every thread; the item is validated, dispatched through a `match` into
//! monomorphized functions, and completed (a release
//! store; relaxed when nothing was written). Errors, aborts and timeouts end the loop with
//! a recorded status, never a hang.

use core::mem::size_of;

use super::item::{BadItem, DeviceFunction, ITEM_OUTPUT_PEER_MAPPED, WorkItem, WorkKind};
use super::placement::elect_channel;
use super::mailbox::update_state;
use super::participation::mailbox_participation;
use super::queue::{ITEM_CACHE, LOOP_ASLEEP, LOOP_AWAKE, LOOP_LEAVING, LoopShared, LoopState, MAILBOX_CLOSED, MAILBOX_COMPLETE, MAILBOX_PENDING, QueueHeader, RingSlot, STREAM_DONE_RELEASE, mailbox_generation};
use crate::abi::{LoopError, ShmemHandle, WaitSite};
use crate::algo::{Coll, CollCtx, CollFunction, Plan, plan_collective, run_collective};
use crate::arch::{self, AtomicWord, Site, WARP_SIZE};
use crate::conn::{ChannelStats, CommDevice};
use crate::copy::reduce_copy_grid;
use crate::dtype::{Bf16, DataType, F16};
use crate::redop::{RedOpKind, Sum};
use crate::shmem::{Block, Shmem};
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
///
/// Built only by [`work_loop`] and by a call channel (`call_kernel`), so its contract holds
/// for every `Channel`: `header` is the host-mapped `QueueHeader` and `ring` the `capacity`
/// host-mapped slots (a call channel never reads the ring), `state` the loop's `LoopState`
/// and `comm` null or the rank's `CommDevice` (both device memory), all valid for the
/// launch; and `index < count <= MAX_CHANNELS`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Channel {
    pub(super) args: LoopArgs,
    /// This CTA's channel.
    pub(super) index: u32,
    /// The channels the current item spreads over: the loop's own (resident) channels,
    /// or for a mailbox collective of a communicator with call channels, all of the
    /// communicator's (see `call_kernel`).
    pub(super) count: u32,
}

impl core::ops::Deref for Channel {
    type Target = LoopArgs;

    fn deref(&self) -> &LoopArgs {
        &self.args
    }
}

/// What warp 0's fetch needs to know of the mailbox: the generation this channel
/// completed last, and until when (on lane 0's clock) the polling channel looks only at
/// the mailbox.
#[derive(Clone, Copy)]
struct MailboxView {
    done: u64,
    priority_until_ns: u64,
}

/// The mailbox's priority window: how long, after a mailbox item, the polling channel
/// looks only at the mailbox. A stream-ordered call that follows within this time is seen
/// within a device-memory read, not behind a host read of the ring (about 1.5 µs); a ring
/// item enqueued meanwhile waits at most this long.
const MAILBOX_PRIORITY_NS: u64 = 20_000;

/// The poll's outcome: what the loop does next (`LoopShared::poll_outcome`).
const NEXT_RING: u64 = 1;
const NEXT_MAILBOX: u64 = 2;
const NEXT_ABORT: u64 = 3;
const NEXT_PEER_FAILED: u64 = 4;
/// The idle loop left to sleep (see [`try_sleep`]): its kernel ends, its state kept.
const NEXT_SLEEP: u64 = 5;

/// Why an item stopped the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
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
    // SAFETY: this function's contract.
    unsafe { loop_body::<false>(args) }
}

/// [`work_loop`] that also runs the symmetric heap's functions
/// ([`DeviceFunction::is_shmem`]): the heap's loops. A kernel entry of its own, so that the
/// collectives' loop keeps its registers (with the heap's code in it, the loop spilled).
///
/// # Safety
/// As [`work_loop`].
pub unsafe fn shmem_work_loop(args: LoopArgs) {
    // SAFETY: this function's contract.
    unsafe { loop_body::<true>(args) }
}

/// The loop; `SHMEM`: it runs the heap's functions (else it refuses them).
///
/// # Safety
/// As [`work_loop`].
#[inline(always)]
unsafe fn loop_body<const SHMEM: bool>(args: LoopArgs) {
    let shared = arch::dyn_smem().cast::<LoopShared>();
    let tid = arch::thread_idx();
    // SAFETY: `args.state` is the loop's `LoopState` in device memory, valid for the launch
    // (this function's contract); only the address of its placement is taken.
    let placement = unsafe { &raw mut (*args.state).placement };
    // SAFETY: the placement is the loop's, valid for the launch; `header.abort` is the host's
    // abort flag in the host-mapped header, readable for the launch; `shared` is this CTA's
    // `LoopShared` (`LOOP_SMEM_BYTES` of dynamic shared memory: this function's contract), so
    // `channel` is this CTA's shared word; every thread of the CTA calls this.
    let Some((index, count)) = (unsafe { elect_channel(placement, &raw const (*args.header).abort, &raw mut (*shared).channel) }) else {
        return;
    };
    let a = Channel { args, index, count };
    // A loop launched again after it slept resumes after the ring items its channel
    // completed (all published before it slept); a new loop's header holds 0.
    // SAFETY: `index < MAX_CHANNELS` (the election's), so the entry is inside the live
    // host-mapped header's `cta_completed`; the loop alone writes it, and no channel of
    // this launch has yet.
    let mut next_seq = unsafe { arch::ld_volatile_global((&raw const (*args.header).cta_completed).cast::<u64>().add(index as usize)) } + 1;
    let mut mailbox_done = u64::MAX;
    // Warp 0 of the polling channel: until when (lane 0's clock) it looks only at the mailbox.
    let mut mailbox_priority_until_ns = 0u64;
    // Warp 0: how many ring slots the next fetch reads (the same in every lane).
    let mut want = 1usize;
    // Items in the shared cache, how many of them have run, and where they came from.
    let (mut cached, mut taken) = (0usize, 0usize);
    let mut mailbox_item = None;
    // Thread 0: completions not yet published.
    let mut unpublished = Unpublished::default();
    // Thread 0: when it last looked for a stop between items (the low half of its clock,
    // enough for intervals of 20 µs), and the word of a look it started and has not judged
    // yet (0: none, or nothing found; see `look_for_stop`).
    let mut abort_checked_ns = 0u32;
    let mut stop_word = 0u64;
    // Thread 0: this channel's statistics, when the communicator keeps them (null: not).
    // SAFETY: `a` was built from this function's arguments (valid for the launch) and an
    // elected channel.
    let stats = if tid == 0 { unsafe { channel_stats(&a) } } else { core::ptr::null_mut() };
    loop {
        if taken == cached {
            if tid == 0 {
                // SAFETY: `a` was built from this function's arguments (valid for the launch)
                // and an elected channel (`index < count <= MAX_CHANNELS`); thread 0 alone
                // publishes completions.
                unsafe { unpublished.publish(&a) };
            }
            if tid == 0 && stop_word == 0 {
                // The look between items, started before the fetch so that its read overlaps
                // the fetch's.
                // SAFETY: `a` is this CTA's channel (as above); thread 0 alone looks.
                stop_word = unsafe { look_for_stop(&a, &mut abort_checked_ns) };
            }
            if tid < WARP_SIZE {
                // SAFETY: `a` is this CTA's channel (as above), `shared` its `LoopShared`, and
                // every lane of warp 0 calls `fetch` with the same `next_seq`, `want` and
                // `mailbox_done` (the priority window's end is only read in lane 0).
                unsafe { fetch(&a, next_seq, &mut want, MailboxView { done: mailbox_done, priority_until_ns: mailbox_priority_until_ns }, shared) };
            }
            if tid == 0 {
                // SAFETY: thread 0, after warp 0's fetch and before the barrier below; `a`
                // and `shared` are this CTA's.
                unsafe { abort_between_items(&a, &mut stop_word, shared) };
            }
            arch::barrier_sync_all();
            // SAFETY: `shared` is this CTA's `LoopShared`; warp 0's lane 0 wrote the poll
            // outcome before the CTA barrier above, and nothing writes it until the next
            // fetch, after every thread's next barrier.
            match unsafe { (&raw const (*shared).poll_outcome).read_volatile() } {
                NEXT_RING => {
                    // SAFETY: as above, for the count lane 0 wrote with the poll outcome.
                    cached = unsafe { (&raw const (*shared).count).read_volatile() } as usize;
                    mailbox_item = None;
                }
                NEXT_MAILBOX => {
                    cached = 1;
                    // SAFETY: as above, for the generation lane 0 wrote with the poll
                    // outcome.
                    mailbox_item = Some(unsafe { (&raw const (*shared).generation).read_volatile() });
                    if !stats.is_null() {
                        // SAFETY: `stats` is this channel's live counters (non-null in thread 0
                        // alone), and `a` this CTA's channel; counted after the barrier that
                        // followed lane 0's acquire of the pending item.
                        unsafe { count_dispatch(&a, stats) };
                    }
                }
                // Asleep: nothing to publish (done before the fetch) and nothing to
                // close; the host launches the loop again with the next item.
                NEXT_SLEEP => return,
                NEXT_ABORT => {
                    if tid == 0 {
                        // SAFETY: `a` is this CTA's channel (valid pointers, as above); thread
                        // 0 alone records.
                        unsafe { record_error(&a, LoopError::Aborted, 0, 0) };
                    }
                    break;
                }
                _ => break,
            }
            taken = 0;
        }
        // SAFETY: `taken < cached <= ITEM_CACHE` (the poll outcome's count is at most the
        // cache), so item `taken` is inside `shared.items`; warp 0 wrote it before the CTA
        // barrier that followed the fetch, and rewrites the cache only in the next fetch,
        // after every thread has read its item and passed the barrier that ends the item.
        let item = unsafe { (&raw const (*shared).items).cast::<WorkItem>().add(taken).read_volatile() };
        taken += 1;
        let source = match mailbox_item {
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
                    // SAFETY: `a` is this CTA's channel; thread 0 alone records.
                    unsafe { record_error(&a, LoopError::BadItem, why as u32, seq) };
                }
                break;
            }
        };
        // An item that may wait for the host must not hide earlier completions from it.
        if tid == 0 && may_block(kind) {
            // SAFETY: `a` is this CTA's channel; thread 0 alone publishes.
            unsafe { unpublished.publish(&a) };
        }
        // A mailbox collective may spread over call channels too (see `call_kernel`).
        let channels = match source {
            // A heap loop has no communicator: its items stay on its own channels.
            Source::Mailbox(_) if SHMEM => a.count,
            // SAFETY: `a.comm` is null or the rank's `CommDevice`, valid for the launch.
            Source::Mailbox(_) => unsafe { mailbox_participation(a.comm, a.count, &item, kind) }.channels,
            Source::Ring(_) => a.count,
        };
        // SAFETY: `a` is this CTA's channel, with the channels the item spreads over (the
        // loop's own, or every channel of the communicator, whose connections cover them),
        // and `shared` its `LoopShared`; `kind` is the item's validated kind, and every thread
        // of the CTA runs it with the same arguments.
        let outcome = unsafe { execute::<SHMEM>(&Channel { count: channels, ..a }, kind, &item, shared) };
        arch::barrier_sync_all();
        match outcome {
            Ok(()) => {}
            Err(Stop::Error(error, detail)) => {
                if tid == 0 {
                    // SAFETY: `a` is this CTA's channel; thread 0 alone records.
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
                        // SAFETY: `a` is this CTA's channel; thread 0 alone publishes.
                        unsafe { unpublished.publish(&a) };
                    }
                }
                next_seq += 1;
            }
            Source::Mailbox(generation) => {
                if tid == 0 {
                    // The participation again, from the item still in the shared cache
                    // (nothing kept live across the item: the loop's registers).
                    let arrivals = if SHMEM {
                        a.count
                    } else {
                        // SAFETY: `taken - 1 < ITEM_CACHE` is the item just run, which warp 0
                        // does not rewrite before the next fetch; `a.comm` is null or the
                        // rank's `CommDevice`, valid for the launch.
                        unsafe {
                            let ran = (&raw const (*shared).items).cast::<WorkItem>().add(taken - 1).read_volatile();
                            mailbox_participation(a.comm, a.count, &ran, kind).arrivals
                        }
                    };
                    // SAFETY: `a` is this CTA's channel; thread 0 alone completes the mailbox
                    // item, once per generation, with the item's participation.
                    unsafe { complete_mailbox(&a, writes_memory(kind), arrivals) };
                    // SAFETY: `a` is this CTA's channel; thread 0 alone looks.
                    stop_word = unsafe { look_for_stop(&a, &mut abort_checked_ns) };
                }
                mailbox_done = generation;
                mailbox_priority_until_ns = arch::globaltimer_ns().wrapping_add(MAILBOX_PRIORITY_NS);
            }
        }
        if kind == WorkKind::Shutdown {
            break;
        }
    }
    if tid == 0 {
        // SAFETY: `a` is this CTA's channel; thread 0 alone publishes.
        unsafe { unpublished.publish(&a) };
        // SAFETY: `a` is this CTA's channel; thread 0 alone leaves, once.
        unsafe { leave(&a) };
    }
}

/// Thread 0, after warp 0's fetch found work: turns the poll outcome into a stop when the
/// word of the last look (`word`, started before the fetch or after the last mailbox item,
/// see [`look_for_stop`]; then cleared) calls for one. Items found at once wait for
/// nothing, so no spin guard reads the flag while a burst of them runs: without this an
/// aborted loop would run every item of a burst.
///
/// Ordering: as [`look_for_stop`]'s; the poll outcome is lane 0's own store, read back by
/// the same thread.
///
/// # Safety
/// Thread 0 of the CTA only, after warp 0's fetch and before the CTA barrier that
/// publishes the poll outcome; `shared` is this CTA's `LoopShared`.
unsafe fn abort_between_items(a: &Channel, word: &mut u64, shared: *mut LoopShared) {
    // SAFETY: `shared` is the CTA's loop shared memory; thread 0 wrote the poll outcome.
    let outcome = unsafe { (&raw const (*shared).poll_outcome).read_volatile() };
    if outcome != NEXT_RING && outcome != NEXT_MAILBOX {
        return;
    }
    let stop = stop_outcome(a, core::mem::take(word));
    if stop != 0 {
        // SAFETY: as above; thread 0 is lane 0 of warp 0, the poll outcome's writer.
        unsafe { set_poll_outcome(shared, stop, 0, 0) };
    }
}

/// Thread 0, between items: at most every `ABORT_CHECK_NS`, starts a look for a stop and
/// returns the word it reads, loaded but not yet used, for [`stop_outcome`] to judge later
/// (0, no stop, when no look is due): the caller's work until then overlaps the read.
/// Only the [`POLLING_CHANNEL`] reads the host's flag (host memory, across PCIe); the
/// others read the loop's error claim in device memory, which that channel sets when it
/// sees the flag (recording `Aborted`). All channels reading the host's flag at once, as
/// they did when an item reached them together, made each wait for the others' reads:
/// with 24 channels a stream-ordered item was taken 15.5-15.9 µs after its submission; with
/// this rule 2.2 µs (H200, same run, 2026-11-23: `bench/results/issue14.md`). The loop
/// looks right after completing a mailbox item, so the read across PCIe overlaps the
/// submitter's wake-up and the next call kernel's launch, and before warp 0's fetch (unless
/// a look after a mailbox item is still to be judged), so that it overlaps the fetch's own
/// read: judged right away after the fetch, as it was, it put 1.4 µs in front of the items
/// found whenever it was due (H200, 2026-12-01: `bench/results/session32.md`).
///
/// Ordering: volatile loads of the flag or the claim (each sees its writer's store
/// eventually, orders nothing).
///
/// # Safety
/// Thread 0 of the CTA only; `a` is this CTA's channel (its queue header and loop state
/// live for the launch).
unsafe fn look_for_stop(a: &Channel, checked_ns: &mut u32) -> u64 {
    // The clock's low half: a look is due every `ABORT_CHECK_NS`, far below its 4.3 s wrap.
    let now = arch::globaltimer_ns() as u32;
    if now.wrapping_sub(*checked_ns) < ABORT_CHECK_NS as u32 {
        return 0;
    }
    *checked_ns = now;
    if a.index == POLLING_CHANNEL {
        // SAFETY: the header is valid for the launch (this function's contract).
        unsafe { arch::ld_volatile_global(&raw const (*a.header).abort) }
    } else {
        // SAFETY: `error_claimed` is an aligned `u64` of the loop state (valid for the launch),
        // changed only by `arch` atomics.
        unsafe { arch::ld_volatile_global(&raw const (*a.state).error_claimed) }
    }
}

/// The stop a word [`look_for_stop`] read of channel `a` calls for: the host's
/// abort flag on the [`POLLING_CHANNEL`], the loop's error claim on another; 0: none.
fn stop_outcome(a: &Channel, word: u64) -> u64 {
    match (word, a.index == POLLING_CHANNEL) {
        (0, _) => 0,
        (_, true) => NEXT_ABORT,
        (_, false) => NEXT_PEER_FAILED,
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
            // SAFETY: `publish_ring`'s contract is this function's, which the caller keeps.
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

/// Slots one poll reads: one 16-byte piece a lane of warp 0.
const POLL_SLOTS: usize = WARP_SIZE as usize / SLOT_PIECES;

/// Pieces of `ITEM_CACHE` slots each lane of warp 0 reads.
const PIECES_PER_LANE: usize = ITEM_CACHE * SLOT_PIECES / WARP_SIZE as usize;

/// Every lane of a warp.
const FULL_WARP: u32 = u32::MAX;

/// Warp 0 waits for work and copies it into shared memory: up to `ITEM_CACHE` ring items
/// (see the `queue` module), or the mailbox item. Lane 0 records the poll outcome, the item
/// count and the mailbox generation. `want` is how many slots the next read takes: up to
/// [`poll_slots`] the warp polls (see [`poll_next_slot`]: one acquire read of that many
/// slots, no fence); above, a backlog read takes them first. `want` doubles while every
/// slot read was whole and falls back to what was found. A channel other than the
/// [`POLLING_CHANNEL`] first waits until a channel has found the slot whole, then reads
/// every slot found so far.
///
/// Ordering: the backlog read uses volatile loads (each 8-byte word single-copy atomic, a
/// slot taken only when every flag is right), which the SM overlaps, then one
/// `fence.acq_rel.sys`: the host wrote each word with a release store, so everything it
/// wrote before the slots is visible to the CTA after the caller's barrier.
///
/// # Safety
/// `a` is this CTA's [`Channel`] and `shared` is this CTA's `LoopShared`; every lane of
/// warp 0, and no other thread, calls this with the same `next_seq`, `want` and
/// `mailbox.done`.
unsafe fn fetch(a: &Channel, next_seq: u64, want: &mut usize, mailbox: MailboxView, shared: *mut LoopShared) {
    let lane = arch::lane_id() as usize;
    if a.index != POLLING_CHANNEL {
        // SAFETY: `fetch`'s contract: `a` is this CTA's channel, `shared` its `LoopShared`, and
        // the whole warp 0 runs this.
        match unsafe { wait_seen(a, next_seq, mailbox.done, shared) } {
            Some(seen) => *want = ((seen - next_seq + 1) as usize).min(ITEM_CACHE),
            None => return,
        }
    }
    if *want > poll_slots(a) {
        // SAFETY: `a` is this CTA's channel (its ring has `capacity` slots), and every lane of
        // warp 0 calls this.
        let pieces = unsafe { read_slots(a, next_seq, *want, lane) };
        let ready = whole_slots(&pieces, next_seq, lane, *want);
        if ready > 0 {
            arch::site(Site::RingBacklogFence);
            arch::fence_acq_rel_sys();
            // SAFETY: `shared` is this CTA's `LoopShared` (`fetch`'s contract); only the
            // address of its item cache is taken.
            let items = unsafe { (&raw mut (*shared).items).cast::<u64>() };
            for (k, piece) in pieces.into_iter().enumerate() {
                let p = lane + k * WARP_SIZE as usize;
                if p < ready * SLOT_PIECES {
                    let seq = next_seq + (p / SLOT_PIECES) as u64;
                    if let Some(bytes) = RingSlot::unflag_pair(piece, seq) {
                        // SAFETY: `p < ready × SLOT_PIECES <= ITEM_CACHE × 8`, and each piece
                        // fills one `u64` of the `ITEM_CACHE` 64-byte items, so the word is
                        // inside the cache; each `p` belongs to one lane, and the CTA reads the
                        // cache only after the caller's barrier.
                        unsafe { items.add(p).write_volatile(bytes) };
                    }
                }
            }
            if lane == 0 {
                // SAFETY: `shared` is this CTA's `LoopShared`, and lane 0 alone writes the
                // poll outcome; the CTA reads it after the caller's barrier.
                unsafe { set_poll_outcome(shared, NEXT_RING, ready as u64, 0) };
                // SAFETY: `a` is this CTA's channel; lane 0 alone notes.
                unsafe { note_seen(a, next_seq + ready as u64 - 1) };
            }
            *want = if ready == *want { (2 * ready).min(ITEM_CACHE) } else { ready };
            return;
        }
    }
    // SAFETY: `fetch`'s contract: `a` is this CTA's channel, `shared` its `LoopShared`, and the
    // whole warp 0 runs this.
    *want = if unsafe { poll_next_slot(a, next_seq, mailbox, shared) } == POLL_SLOTS { 2 * POLL_SLOTS } else { 1 };
}

/// Warp 0, with nothing queued: polls the [`poll_slots`] slots from `next_seq` on until
/// slot `next_seq` is whole (then copies it and the whole slots after it into shared
/// memory and returns how many), a mailbox item or another channel's error turns up, or
/// the abort flag is set (poll outcome recorded, 0).
///
/// One read at a time: each lane reads one 16-byte piece (lanes 0-7 slot `next_seq`, 8-15
/// the next, …), and the next read leaves as soon as the last is back and the mailbox has
/// been looked at. The read after a slot found is such a poll, not a backlog read (volatile
/// loads, then a fence of about 1 µs when it finds something). Two
/// reads in flight, half a round trip apart (two halves of the warp each reading the
/// slot, a busy wait of half the first read's round trip between them), made the slot
/// seen later, not sooner, on an H200 (2026-11-29, `bench/results/session29.md` §1): a
/// one-warp echo of a host-mapped ring answered a host that queries its stream, writes
/// the slot and spins for the answer in 3.3 µs a round back to back with one read at a
/// time and 7.5 µs with the two; in the loop, a stream-ordered no-op on the ring route +
/// synchronize took 6.3-7.8 µs against 8.3-10.7 (§2).
///
/// Ordering: the reads are acquire loads (`ld.acquire.sys`, no fence): each lane's later
/// accesses, and the CTA's after the caller's barrier, see everything the host wrote
/// before the slot's words. The mailbox: lane 0's acquire of its state comes before the
/// warp's named barrier, and every lane's loads of the item after it.
///
/// # Safety
/// As [`fetch`].
unsafe fn poll_next_slot(a: &Channel, next_seq: u64, mailbox: MailboxView, shared: *mut LoopShared) -> usize {
    let mailbox_done = mailbox.done;
    let lane = arch::lane_id() as usize;
    // SAFETY: `a.header` is the host-mapped header, valid for the launch (`Channel`), so its
    // `abort` flag stays readable while the guard lives (this call).
    let mut guard = unsafe { SpinGuard::new(&raw const (*a.header).abort, u64::MAX) };
    // While the stream-ordered path is busy (until lane 0's `priority_until_ns`), look only
    // at the mailbox: device memory, no round trip to the host that the next call kernel
    // would wait behind. Then at least once.
    loop {
        // SAFETY: `a` is this CTA's channel, `shared` its `LoopShared`, and every lane of warp
        // 0 runs this (`fetch`'s contract).
        if unsafe { look_and_take(a, mailbox_done, &mut guard, lane, shared) } {
            return 0;
        }
        if broadcast_lane0(u64::from(arch::globaltimer_ns() >= mailbox.priority_until_ns)) != 0 {
            break;
        }
    }
    // Lane 0: when the idle loop tries to sleep next (never: u64::MAX).
    // SAFETY: `a` is this CTA's channel; lane 0 alone asks.
    let mut sleep_at = if lane == 0 { unsafe { sleep_deadline(a, arch::globaltimer_ns()) } } else { u64::MAX };
    loop {
        // SAFETY: `a` is this CTA's channel, and every lane of warp 0 runs this with the same
        // `next_seq`.
        let piece = unsafe { read_slot_piece(a, next_seq, lane) };
        // SAFETY: `a` is this CTA's channel, `shared` its `LoopShared`, and every lane of warp 0
        // runs this (it votes).
        let taken = unsafe { take_slots(a, piece, next_seq, lane, shared) };
        if taken > 0 {
            return taken;
        }
        // SAFETY: as for the look above.
        if unsafe { look_and_take(a, mailbox_done, &mut guard, lane, shared) } {
            return 0;
        }
        let asleep = lane == 0 && arch::globaltimer_ns() >= sleep_at && {
            // SAFETY: `a` is this CTA's channel, lane 0 of its warp 0 (the polling channel
            // of a one-channel loop: `sleep_deadline` gave a deadline), with every
            // completion published before this fetch.
            let asleep = unsafe { try_sleep(a, next_seq) };
            // SAFETY: as for `sleep_deadline` above.
            sleep_at = unsafe { sleep_deadline(a, arch::globaltimer_ns()) };
            asleep
        };
        if broadcast_lane0(u64::from(asleep)) != 0 {
            if lane == 0 {
                // SAFETY: `shared` is this CTA's `LoopShared`, lane 0 alone writes the poll
                // outcome.
                unsafe { set_poll_outcome(shared, NEXT_SLEEP, 0, 0) };
            }
            return 0;
        }
    }
}

/// Lane 0 of warp 0: when a loop idle since `since` (lane 0's clock) tries to sleep,
/// or `u64::MAX` for a loop that never sleeps: one of more than one channel (the
/// others would need to leave with it), or whose host set no sleep time.
///
/// Ordering: a volatile load of the host's setting, written before the launch.
///
/// # Safety
/// `a` is this CTA's [`Channel`].
unsafe fn sleep_deadline(a: &Channel, since: u64) -> u64 {
    if a.count != 1 {
        return u64::MAX;
    }
    // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); an aligned `u64` of it.
    match unsafe { arch::ld_volatile_global(&raw const (*a.state).sleep_after_ns) } {
        0 => u64::MAX,
        after => since.saturating_add(after),
    }
}

/// Lane 0 of the polling channel of an idle one-channel loop: the loop's half of the
/// sleep handshake (the `queue` module's protocol). Returns true when the loop has
/// stored ASLEEP and must end its kernel; false when work came (AWAKE stored again).
///
/// Ordering: LEAVING is a relaxed store at system scope, then `fence.sc.sys`, then
/// relaxed loads of the host's `submits` and `pinned` and of the next ring slot's first
/// word, an acquire load of `submits_seen`, then a relaxed load of the mailbox state:
/// against the host's store (its submission count or ring slot),
/// full fence and load of `awake`, one side sees the other. The answer is a release
/// store (ASLEEP after this channel's published completions).
///
/// # Safety
/// `a` is this CTA's [`Channel`], a loop of one channel; lane 0 of its warp 0 calls
/// this, after publishing every ring completion.
#[inline(never)]
unsafe fn try_sleep(a: &Channel, next_seq: u64) -> bool {
    // SAFETY: `a.header` is the live host-mapped header (`Channel`), `awake` an aligned
    // `u64` of it that the host changes only from ASLEEP, which the loop has not stored.
    let awake = unsafe { &raw mut (*a.header).awake };
    // SAFETY: as above.
    unsafe { arch::st_relaxed_sys_global(awake, LOOP_LEAVING) };
    arch::fence_sc_sys();
    // SAFETY: aligned words of the live header, the ring (slot `(next_seq - 1) % capacity`
    // of its `capacity`) and the loop state, all valid for the launch (`Channel`).
    let (submits, pinned, word, seen) = unsafe {
        (
            arch::ld_relaxed_sys_global(&raw const (*a.header).submits),
            arch::ld_relaxed_sys_global(&raw const (*a.header).pinned),
            arch::ld_relaxed_sys_global((&raw const (*a.ring.add(((next_seq - 1) % a.capacity) as usize)).words).cast::<u64>()),
            arch::ld_acquire_gpu_global(&raw const (*a.state).submits_seen),
        )
    };
    // SAFETY: as above; after the acquire of the count (a submission counted itself after
    // its PENDING add).
    let mailbox = unsafe { arch::ld_relaxed_gpu_global(&raw const (*a.state).mailbox.state) };
    let idle = pinned == 0
        && submits == seen
        && mailbox & MAILBOX_PENDING == 0
        && (word >> 32) as u32 != RingSlot::flag(next_seq);
    // SAFETY: as for LEAVING.
    unsafe { arch::st_release_sys_global(awake, if idle { LOOP_ASLEEP } else { LOOP_AWAKE }) };
    idle
}

/// Warp 0: lane 0 looks elsewhere (see [`look_elsewhere`]); when it finds something, the
/// warp takes it (see [`take_elsewhere`]) and every lane gets true.
///
/// # Safety
/// `a` is this CTA's [`Channel`] and `shared` is this CTA's `LoopShared`; every lane of
/// warp 0 calls this with the same `mailbox_done`, `lane` being its lane.
unsafe fn look_and_take(a: &Channel, mailbox_done: u64, guard: &mut SpinGuard, lane: usize, shared: *mut LoopShared) -> bool {
    // SAFETY: `a` is this CTA's channel, and lane 0 alone looks.
    let (outcome, generation) = if lane == 0 { unsafe { look_elsewhere(a, mailbox_done, guard) } } else { (0, 0) };
    let outcome = broadcast_lane0(outcome);
    if outcome == 0 {
        return false;
    }
    // SAFETY: `a` is this CTA's channel, `shared` its `LoopShared`, and every lane of warp 0
    // runs this with lane 0's poll outcome and generation.
    unsafe { take_elsewhere(a, outcome, generation, lane, shared) };
    true
}

/// Warp 0 of a channel other than the [`POLLING_CHANNEL`]: waits until a channel has found
/// ring slot `next_seq` whole and returns the highest sequence number found; or, when a
/// mailbox item or another channel's error turns up or the abort flag is set, records the
/// poll outcome (see [`take_elsewhere`]) and returns None. Only device memory is polled.
///
/// Ordering: `seen_seq` is read relaxed: it only says which slots to read; their contents
/// are then read from host memory and ordered as in [`fetch`].
///
/// # Safety
/// As [`fetch`].
unsafe fn wait_seen(a: &Channel, next_seq: u64, mailbox_done: u64, shared: *mut LoopShared) -> Option<u64> {
    let lane = arch::lane_id() as usize;
    // SAFETY: `a.header` is the host-mapped header, valid for the launch (`Channel`), so its
    // `abort` flag stays readable while the guard lives (this call).
    let mut guard = unsafe { SpinGuard::new(&raw const (*a.header).abort, u64::MAX) };
    loop {
        let (seen, outcome, generation) = if lane == 0 {
            // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); `seen_seq` is an aligned
            // `u64` in it that channels change only through `arch` atomics.
            let seen = unsafe { arch::ld_relaxed_gpu_global(&raw const (*a.state).seen_seq) };
            // SAFETY: `a` is this CTA's channel, and lane 0 alone looks.
            let (outcome, generation) = if seen >= next_seq { (0, 0) } else { unsafe { look_elsewhere(a, mailbox_done, &mut guard) } };
            (seen, outcome, generation)
        } else {
            (0, 0, 0)
        };
        let (seen, outcome) = (broadcast_lane0(seen), broadcast_lane0(outcome));
        if seen >= next_seq {
            return Some(seen);
        }
        if outcome != 0 {
            // SAFETY: `a` is this CTA's channel, `shared` its `LoopShared`, and every lane of
            // warp 0 runs this with lane 0's poll outcome.
            unsafe { take_elsewhere(a, outcome, generation, lane, shared) };
            return None;
        }
        arch::spin_pause();
    }
}

/// Warp 0, when the ring gave nothing and `outcome` (lane 0's `generation` for the
/// mailbox) came from [`look_elsewhere`]: lane 0 records it, and for the mailbox the warp
/// copies its item into shared memory.
///
/// Ordering: the mailbox: lane 0's acquire of its state came before the warp's named
/// barrier, and every lane's loads of the item come after it.
///
/// # Safety
/// `a` is this CTA's [`Channel`] and `shared` is this CTA's `LoopShared`; every lane of
/// warp 0 calls this with the same `outcome` and `generation` (from lane 0's
/// [`look_elsewhere`]), `lane` being its lane.
unsafe fn take_elsewhere(a: &Channel, outcome: u64, generation: u64, lane: usize, shared: *mut LoopShared) {
    if lane == 0 {
        // SAFETY: `shared` is this CTA's `LoopShared` (this function's contract); lane 0 alone
        // writes the poll outcome, and the CTA reads it after the caller's barrier.
        unsafe { set_poll_outcome(shared, outcome, u64::from(outcome == NEXT_MAILBOX), generation) };
    }
    if outcome == NEXT_MAILBOX {
        arch::barrier_sync(FETCH_BARRIER, WARP_SIZE);
        if lane < size_of::<WorkItem>() / 16 {
            // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); only the address of its
            // mailbox item is taken.
            let item = arch::cvta_to_global(unsafe { &raw const (*a.state).mailbox.item }) + 16 * lane as u64;
            // SAFETY: the item is `WorkItem` (64 bytes, 16-byte aligned) in the loop's device
            // memory and `lane < 4`, so this is an aligned 16-byte piece of it; the stream
            // wrote the item before the state that lane 0 acquired before the warp barrier
            // above, and rewrites it only after the loop completes it.
            let piece = unsafe { arch::ld_cv_global_v2b64(item) };
            // SAFETY: `lane < 4`: piece `lane` of the first cached item, inside `shared.items`
            // and aligned; each lane writes its own piece, and the CTA reads them after the
            // caller's barrier.
            unsafe { (&raw mut (*shared).items).cast::<[u64; 2]>().add(lane).write_volatile(piece) };
        }
    }
}

/// Lane 0 of warp 0, having found ring slots up to `last` whole: raises the loop state's
/// `seen_seq` to it (a relaxed atomic max at GPU scope; orders nothing).
///
/// # Safety
/// `a` is this CTA's [`Channel`].
unsafe fn note_seen(a: &Channel, last: u64) {
    // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); `seen_seq` is an aligned `u64`
    // that channels change only through `arch` atomics.
    unsafe { u64::atomic_max_relaxed_gpu(&raw mut (*a.state).seen_seq, last) };
}

/// How many slots a poll of channel `a` reads: [`POLL_SLOTS`] on the [`POLLING_CHANNEL`],
/// whose poll may find a burst the host wrote at once; one on another, which polls only
/// for the slot it knows whole (its reads of four slots made a four-channel loop's round
/// trip about 0.8 µs slower on an H200, `bench/results/session31.md`).
fn poll_slots(a: &Channel) -> usize {
    if a.index == POLLING_CHANNEL { POLL_SLOTS } else { 1 }
}

/// The lanes of warp 0 read their pieces of the [`poll_slots`] slots from `next_seq` on
/// with an acquire load: lane `l` piece `l % 8` of slot `next_seq + l / 8`. On a channel
/// that polls one slot every lane reads slot `next_seq` (one line for the warp), so that
/// lanes 8-31 find their pieces carry another sequence number's flags: never whole.
///
/// # Safety
/// `a` is this CTA's [`Channel`]; `lane` is this thread's lane of warp 0.
unsafe fn read_slot_piece(a: &Channel, next_seq: u64, lane: usize) -> [u64; 2] {
    let ahead = if poll_slots(a) == 1 { 0 } else { lane / SLOT_PIECES };
    // SAFETY: the index is below `capacity`, the ring's slot count (`Channel`); only the
    // address is computed.
    let slot = unsafe { a.ring.add(((next_seq - 1 + ahead as u64) % a.capacity) as usize) };
    arch::site(Site::RingPoll);
    // SAFETY: `slot` is a host-mapped `RingSlot` (128 bytes, 128-byte aligned) and `lane %
    // SLOT_PIECES < 8`, so this is an aligned 16-byte piece of it, which the host writes
    // only with atomic word stores.
    unsafe { arch::ld_acquire_sys_global_v2b64(arch::cvta_to_global(slot) + 16 * (lane % SLOT_PIECES) as u64) }
}

/// When the read (see [`read_slot_piece`]) found slot `next_seq` whole: the lanes of the
/// whole slots from it on copy their items into shared memory, lane 0 records the poll
/// outcome and notes the slots seen, and every lane gets how many (0: slot `next_seq` not
/// whole).
///
/// # Safety
/// `a` is this CTA's [`Channel`] and `shared` is this CTA's `LoopShared`; every lane of
/// warp 0 calls this (it votes), `lane` being its lane.
unsafe fn take_slots(a: &Channel, piece: [u64; 2], next_seq: u64, lane: usize, shared: *mut LoopShared) -> usize {
    let bytes = RingSlot::unflag_pair(piece, next_seq + (lane / SLOT_PIECES) as u64);
    let taken = leading_whole_slots(arch::vote_ballot(FULL_WARP, bytes.is_some()));
    if taken == 0 {
        return 0;
    }
    if let (true, Some(bytes)) = (lane < taken * SLOT_PIECES, bytes) {
        // SAFETY: `lane < 32`: a `u64` of the first `POLL_SLOTS` cached items (piece `lane` of
        // the run is the run's `lane`-th item word), inside `shared.items` (this function's
        // contract); each lane writes its own word, and the CTA reads them after the
        // caller's barrier.
        unsafe { (&raw mut (*shared).items).cast::<u64>().add(lane).write_volatile(bytes) };
    }
    if lane == 0 {
        // SAFETY: `shared` is this CTA's `LoopShared`, and lane 0 alone writes the poll
        // outcome.
        unsafe { set_poll_outcome(shared, NEXT_RING, taken as u64, 0) };
        // SAFETY: `a` is this CTA's channel; lane 0 alone notes.
        unsafe { note_seen(a, next_seq + taken as u64 - 1) };
    }
    taken
}

/// Every lane of warp 0 reads its pieces of the `want` ring slots from `next_seq` on
/// (piece `p` of the run is lane `p % 32`'s `p / 32`-th), with volatile loads.
///
/// # Safety
/// `a` is this CTA's [`Channel`]; `lane` is this thread's lane of warp 0.
unsafe fn read_slots(a: &Channel, next_seq: u64, want: usize, lane: usize) -> [[u64; 2]; PIECES_PER_LANE] {
    let mut pieces = [[0u64; 2]; PIECES_PER_LANE];
    for (k, piece) in pieces.iter_mut().enumerate() {
        let p = lane + k * WARP_SIZE as usize;
        if p < want * SLOT_PIECES {
            // SAFETY: the index is below `capacity`, the ring's slot count (`Channel`); only
            // the address is computed.
            let slot = unsafe { a.ring.add(((next_seq - 1 + (p / SLOT_PIECES) as u64) % a.capacity) as usize) };
            // SAFETY: `slot` is a host-mapped `RingSlot` (128-byte aligned) and `p %
            // SLOT_PIECES < 8`, so this is an aligned 16-byte piece of it, which the host
            // writes only with atomic word stores.
            *piece = unsafe { arch::ld_volatile_global_v2b64(arch::cvta_to_global(slot) + 16 * (p % SLOT_PIECES) as u64) };
        }
    }
    pieces
}

/// How many of the `read` slots from `next_seq` on are whole, counting from the first
/// (the same in every lane: one ballot per piece row).
fn whole_slots(pieces: &[[u64; 2]; PIECES_PER_LANE], next_seq: u64, lane: usize, read: usize) -> usize {
    let mut whole = 0;
    for (k, piece) in pieces.iter().enumerate() {
        if whole >= read {
            break;
        }
        let p = lane + k * WARP_SIZE as usize;
        let seq = next_seq + (p / SLOT_PIECES) as u64;
        let row = leading_whole_slots(arch::vote_ballot(FULL_WARP, RingSlot::unflag_pair(*piece, seq).is_some()));
        whole += row.min(read - whole);
        if row < POLL_SLOTS {
            break;
        }
    }
    whole
}

/// How many of the [`POLL_SLOTS`] slots of one warp-wide row of pieces (`ok`: one ballot
/// bit per lane, the piece whole) are whole, counting from the first.
fn leading_whole_slots(ok: u32) -> usize {
    const SLOT_MASK: u32 = (1 << SLOT_PIECES) - 1;
    (0..POLL_SLOTS).take_while(|s| (ok >> (s * SLOT_PIECES)) & SLOT_MASK == SLOT_MASK).count()
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
unsafe fn set_poll_outcome(shared: *mut LoopShared, outcome: u64, count: u64, generation: u64) {
    // SAFETY: `shared` is this CTA's `LoopShared` (this function's contract): three aligned
    // `u64` fields, written by lane 0 of warp 0 alone and read by the CTA after the caller's
    // barrier.
    unsafe {
        (&raw mut (*shared).poll_outcome).write_volatile(outcome);
        (&raw mut (*shared).count).write_volatile(count);
        (&raw mut (*shared).generation).write_volatile(generation);
    }
}

/// Lane 0 of warp 0, while the ring has nothing: looks for a mailbox item of a
/// generation other than `mailbox_done` and for another channel's error (device memory
/// only: a few hundred ns), and counts the round against the abort flag. Returns 0 to
/// keep polling, or a poll outcome and (for the mailbox) the item's generation.
///
/// # Safety
/// `a` is this CTA's [`Channel`]; lane 0 of warp 0 alone calls this.
unsafe fn look_elsewhere(a: &Channel, mailbox_done: u64, guard: &mut SpinGuard) -> (u64, u64) {
    // The error claim first (a volatile load, which orders nothing), so that both loads
    // are in flight together: the mailbox's acquire would hold back a load after it.
    // SAFETY: `error_claimed` is an aligned `u64` of the loop state, changed only by `arch`
    // atomics.
    let failed = unsafe { arch::ld_volatile_global(&raw const (*a.state).error_claimed) } != 0;
    // One load: the flags and the generation are one word, so a PENDING seen is the
    // generation's that comes with it.
    arch::site(Site::MailboxTake);
    // SAFETY: the loop state is valid for the launch; `state` is an aligned `u64` accessed
    // only through `arch`'s 64-bit operations.
    let state = unsafe { arch::ld_acquire_gpu_global(&raw const (*a.state).mailbox.state) };
    let generation = mailbox_generation(state);
    if state & (MAILBOX_PENDING | MAILBOX_CLOSED) == MAILBOX_PENDING && generation != mailbox_done {
        return (NEXT_MAILBOX, generation);
    }
    if failed {
        return (NEXT_PEER_FAILED, 0);
    }
    if guard.tick().is_err() {
        return (NEXT_ABORT, 0);
    }
    (0, 0)
}

/// Runs a validated item with every thread of the CTA.
///
/// # Safety
/// `a` is this CTA's [`Channel`] and `shared` is this CTA's `LoopShared`; `kind` is
/// `item`'s kind as `validate` returned it; every thread of the CTA calls this with the
/// same arguments.
pub(super) unsafe fn execute<const SHMEM: bool>(a: &Channel, kind: WorkKind, item: &WorkItem, shared: *mut LoopShared) -> Result<(), Stop> {
    match kind {
        WorkKind::NoOp | WorkKind::Shutdown => Ok(()),
        WorkKind::ReduceCopy => {
            // SAFETY: every thread of the CTA runs the validated item, whose buffers hold
            // `count` elements as the host promised when it queued it; `(index, count)` is this
            // channel's share of the grid.
            unsafe { run_reduce_copy(item, (a.index, a.count)) };
            Ok(())
        }
        // SAFETY: `a` is this CTA's channel, `shared` its `LoopShared`, and every thread of the
        // CTA calls this.
        WorkKind::Barrier => unsafe { channels_barrier(a, shared) },
        // SAFETY: as above.
        WorkKind::Call => unsafe { call::<SHMEM>(a, item, shared) },
        // A heap loop has no communicator (and leaves out the collectives' code).
        WorkKind::Collective if SHMEM => Err(Stop::Error(LoopError::BadItem, BadItem::NoCommunicator as u32)),
        // SAFETY: as above.
        WorkKind::Collective => unsafe { collective(a, item, shared, a.index) },
    }
}

/// Runs part `part` of a collective item with the rank's communicator on channel
/// `a.index` (its connections and staging), after checking it against the communicator
/// (the host has checked it too) and planning it. The part is the channel itself, but
/// for an item that runs on the call kernel alone: see [`planned_collective`].
///
/// # Safety
/// As [`execute`], for a Collective item; `part` is `a.index`.
#[inline(never)]
pub(super) unsafe fn collective(a: &Channel, item: &WorkItem, shared: *mut LoopShared, part: u32) -> Result<(), Stop> {
    if a.comm.is_null() {
        return Err(Stop::Error(LoopError::BadItem, BadItem::NoCommunicator as u32));
    }
    // SAFETY: `a.comm` is non-null, so it is the rank's `CommDevice` in device memory, valid
    // for the launch (`work_loop`'s contract), and only read by the loop.
    let (rank, nranks) = unsafe { ((*a.comm).rank, (*a.comm).nranks) };
    if let Err(why) = item.validate_in_comm(rank, nranks) {
        return Err(Stop::Error(LoopError::BadItem, why as u32));
    }
    // SAFETY: as above; `shared` is this CTA's `LoopShared` and the item passed both checks
    // (this function's contract and the check above).
    let (c, cx) = unsafe { part_context(a, item, shared, part) };
    let Ok(plan) = plan_collective(&cx, &c.0, c.1) else {
        return Err(Stop::Error(LoopError::BadItem, BadItem::UnfitAlgorithm as u32));
    };
    // SAFETY: every thread of the CTA runs this with the same arguments; `cx` was built by
    // `CollCtx::new` for this rank's communicator and channel, `c` passed `validate` and
    // `validate_in_comm` (the host also checked that its buffers hold what the function
    // addresses), and `plan` is its plan.
    unsafe { run_part(&cx, c, plan) }
}

/// Runs part `part` of an item that runs on the call kernel alone (`call_kernel`), on call
/// channel `a.index = resident + part`, by `plan`: the plan `call_kernel_only_plan` made
/// after checking the item against the communicator, handed over so that a small call is
/// checked and planned once (on a GPU each is a few hundred dependent scalar
/// instructions on the call's path). Apart from the loop's [`collective`], whose registers
/// a capped loop has none to spare for the plan.
///
/// # Safety
/// As [`execute`], for a Collective item valid against the communicator (non-null);
/// `plan` is its plan, a one-shot/two-shot algorithm of which `part` is a part.
#[inline(never)]
pub(super) unsafe fn planned_collective(a: &Channel, item: &WorkItem, shared: *mut LoopShared, part: u32, plan: Plan) -> Result<(), Stop> {
    // SAFETY: this function's contract is `part_context`'s.
    let (c, cx) = unsafe { part_context(a, item, shared, part) };
    // SAFETY: as in `collective`, with the plan `call_kernel_only_plan` made of the checked
    // item.
    unsafe { run_part(&cx, c, plan) }
}

/// A checked collective item as the algorithms take it (the collective, its element type
/// and operator), and where part `part` of it runs on `a`'s channel.
///
/// # Safety
/// `a` is this CTA's [`Channel`] with a non-null communicator, `shared` this CTA's
/// `LoopShared`; `item` passed `validate` and `validate_in_comm`.
#[inline(always)]
unsafe fn part_context(a: &Channel, item: &WorkItem, shared: *mut LoopShared, part: u32) -> ((Coll, DataType, RedOpKind), CollCtx) {
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
        output_peer_mapped: item.flags & ITEM_OUTPUT_PEER_MAPPED != 0,
        red_arg: item.op_arg,
        root: item.arg as u32,
        send_peer: item.arg as u32,
        recv_peer: (item.arg >> 32) as u32,
    };
    // SAFETY: `shared` is this CTA's `LoopShared`; only the address of its `MAX_GROUPS`
    // primitives groups' shared memory is taken.
    let prims = unsafe { (&raw mut (*shared).prims).cast() };
    // SAFETY: `a.comm` is the rank's valid `CommDevice`, whose connection arrays cover the
    // loop's `count` channels (the host sized them); `prims` holds `MAX_GROUPS` groups' shared
    // memory, and `header.abort` is the host's abort flag, readable for the launch.
    let cx = CollCtx { channel_index: part, ..unsafe { CollCtx::new(a.comm, (a.index, a.count), prims, &raw const (*a.header).abort, a.spin_budget_ns) } };
    ((c, dtype, kind), cx)
}

/// Runs `c` (a collective, its element type and operator) by `plan` where `cx` says.
///
/// # Safety
/// `run_collective`'s contract.
#[inline(always)]
unsafe fn run_part(cx: &CollCtx, c: (Coll, DataType, RedOpKind), plan: Plan) -> Result<(), Stop> {
    // SAFETY: this function's contract.
    match unsafe { run_collective(cx, &c.0, c.1, c.2, plan) } {
        Ok(()) => Ok(()),
        Err((error, detail)) => Err(Stop::Error(error, detail)),
    }
}

/// `dst = src` or `dst = src + src2` over this channel's share: share `part.0` of
/// `part.1`.
///
/// # Safety
/// Every thread of the CTA calls this with the same arguments; `item` is a validated
/// ReduceCopy item, whose buffers hold `count` elements of its type, aligned to it (the
/// host's promise); `part` is this channel's share of the loop's channels.
#[inline(never)]
unsafe fn run_reduce_copy(item: &WorkItem, part: (u32, u32)) {
    let (src, src2, dst, n) = (item.src, item.src2, item.dst, item.count);
    // `validate` guarantees a known type.
    let Some(dtype) = DataType::from_u8(item.dtype) else { arch::trap() };
    // SAFETY: every thread of the CTA (a multiple of 32: `work_loop`'s contract) calls this
    // with the same arguments; the validated item's buffers hold `n` elements of `dtype`,
    // aligned to it (the host's promise when it queued the item); each arm's type has `dtype`'s
    // size.
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
///
/// # Safety
/// `a` is this CTA's [`Channel`] and `shared` is this CTA's `LoopShared`; every thread of
/// the CTA calls this (thread 0 alone calls `ready`).
unsafe fn cta_wait(a: &Channel, shared: *mut LoopShared, site: WaitSite, mut ready: impl FnMut() -> bool) -> Result<(), Stop> {
    if arch::thread_idx() == 0 {
        // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); only the address of
        // `error_claimed` is taken.
        let claimed = unsafe { &raw const (*a.state).error_claimed };
        let mut peer_failed = false;
        // SAFETY: `header.abort` is the host's abort flag, readable for the launch; `claimed`
        // is an aligned `u64` of the loop state changed only by `arch` atomics.
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
        // SAFETY: `shared` is this CTA's `LoopShared`; thread 0 alone writes `wait_result`,
        // before the CTA barrier below.
        unsafe { (&raw mut (*shared).wait_result).write_volatile(outcome) };
    }
    arch::barrier_sync_all();
    // SAFETY: the barrier above orders thread 0's write before every thread's read, and nothing
    // writes `wait_result` again before the next item's barrier.
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
///
/// # Safety
/// As [`cta_wait`].
unsafe fn channels_barrier(a: &Channel, shared: *mut LoopShared) -> Result<(), Stop> {
    let state = a.state;
    // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); only the field's address is
    // taken.
    let generation_ptr = unsafe { &raw mut (*state).barrier_generation };
    let mut generation = 0;
    if arch::thread_idx() == 0 {
        // SAFETY: `barrier_generation` is an aligned `u64` of the loop state, changed only
        // through `arch`.
        generation = unsafe { arch::ld_acquire_sys_global(generation_ptr) };
        // SAFETY: `barrier_arrived` is an aligned `u64` of the loop state, changed only through
        // `arch` atomics.
        let arrived = unsafe { u64::atomic_add_acq_rel_sys(&raw mut (*state).barrier_arrived, 1) } + 1;
        if arrived == u64::from(a.count) {
            // SAFETY: as above; only the last channel to arrive resets it.
            unsafe { arch::st_relaxed_sys_global(&raw mut (*state).barrier_arrived, 0) };
            // SAFETY: as for the load above.
            unsafe { arch::st_release_sys_global(generation_ptr, generation + 1) };
        }
    }
    // SAFETY: `a` is this CTA's channel, `shared` its `LoopShared`, and every thread of the CTA
    // calls this; `generation_ptr` stays valid for the launch.
    unsafe { cta_wait(a, shared, WaitSite::Barrier, || arch::ld_acquire_sys_global(generation_ptr) != generation) }
}

/// Runs a device function.
///
/// # Safety
/// As [`execute`], for a Call item, whose `arg` is the address of an aligned `u64` in
/// device or host-mapped memory that the kernel accesses only through `arch` (the host's
/// promise).
unsafe fn call<const SHMEM: bool>(a: &Channel, item: &WorkItem, shared: *mut LoopShared) -> Result<(), Stop> {
    let Some(function) = DeviceFunction::from_u32(item.function) else { arch::trap() };
    let leader = a.index == 0 && arch::thread_idx() == 0;
    let word = item.arg as *mut u64;
    match function {
        DeviceFunction::Timestamp => {
            if leader {
                // SAFETY: a validated Timestamp item's `arg` is the address of an aligned,
                // writable `u64` in device or host-mapped memory (the host's promise), written
                // only by this leader thread while the item runs.
                unsafe { arch::st_volatile_global(word, arch::globaltimer_ns()) };
            }
            Ok(())
        }
        DeviceFunction::Increment => {
            if leader {
                // SAFETY: a validated Increment item's `arg` is the address of an aligned `u64`
                // in device or host-mapped memory (the host's promise), changed only by
                // atomics.
                unsafe { u64::atomic_add_relaxed_sys(word, 1) };
            }
            Ok(())
        }
        DeviceFunction::WaitAtLeast => {
            let want = item.count;
            // SAFETY: a validated WaitAtLeast item's `arg` is the address of an aligned `u64`
            // in device or host-mapped memory (the host's promise); `a` is this CTA's channel,
            // `shared` its `LoopShared`, and every thread of the CTA calls this.
            unsafe { cta_wait(a, shared, WaitSite::Flag, || arch::ld_acquire_sys_global(word) >= want) }
        }
        DeviceFunction::ShmemBarrierAll | DeviceFunction::ShmemSumReduce if !SHMEM => Err(Stop::Error(LoopError::BadItem, BadItem::NotHeapLoop as u32)),
        DeviceFunction::ShmemBarrierAll | DeviceFunction::ShmemSumReduce if a.index != 0 => Ok(()),
        // SAFETY: a validated shmem item's `arg` is this PE's `ShmemHandle` (the host's
        // promise); every thread of channel 0's CTA calls this.
        DeviceFunction::ShmemBarrierAll | DeviceFunction::ShmemSumReduce => unsafe { shmem_call(function, item) },
    }
}

/// Runs a symmetric-heap function on channel 0's CTA, as one [`Block`] group. A buffer
/// outside the PE's heap is refused ([`BadItem::NotSymmetric`]) before any barrier, so the
/// PEs' barrier state stays agreed only if every PE refuses it too (the host checks it
/// first). Not inlined: the loop's other items keep their registers.
///
/// # Safety
/// `item` is a validated ShmemBarrierAll or ShmemSumReduce item whose `arg` points to
/// this PE's `ShmemHandle` (see [`Shmem::new`]); every thread of the CTA calls this with
/// the same item, and no other group of this PE is in a heap barrier meanwhile.
#[inline(never)]
unsafe fn shmem_call(function: DeviceFunction, item: &WorkItem) -> Result<(), Stop> {
    // SAFETY: this function's contract.
    let shmem = unsafe { Shmem::new(item.arg as *const ShmemHandle) };
    let reduced = match function {
        DeviceFunction::ShmemSumReduce => {
            let Some(dtype) = DataType::from_u8(item.dtype) else { arch::trap() };
            let bytes = item.count * dtype.size() as u64;
            let me = shmem.my_pe();
            let in_heap = |p: u64| item.count == 0 || (!shmem.ptr(p as *const u8, me).is_null() && !shmem.ptr((p + bytes - 1) as *const u8, me).is_null());
            if !in_heap(item.src) || !in_heap(item.dst) {
                return Err(Stop::Error(LoopError::BadItem, BadItem::NotSymmetric as u32));
            }
            // SAFETY: both ranges lie in this PE's heap, hold `count` aligned elements of
            // `dtype` and do not overlap (validated); the rest is this function's contract.
            unsafe { shmem_sum_reduce(shmem, dtype, item.src, item.dst, item.count as usize) }
        }
        // SAFETY: this function's contract.
        _ => unsafe { shmem.barrier_all::<Block>() },
    };
    reduced.map_err(|why| {
        let error = match why {
            Interrupted::Aborted => LoopError::Aborted,
            Interrupted::TimedOut => LoopError::Timeout,
        };
        Stop::Error(error, WaitSite::ShmemBarrier as u32)
    })
}

/// [`Shmem::sum_reduce`] by one block over `count` elements of `dtype`.
///
/// # Safety
/// As [`Shmem::sum_reduce`] with `G = Block`: `src` and `dst` are symmetric, disjoint
/// ranges of `count` aligned elements of `dtype`.
unsafe fn shmem_sum_reduce(shmem: Shmem, dtype: DataType, src: u64, dst: u64, count: usize) -> Result<(), Interrupted> {
    // SAFETY: each arm's type is `dtype`'s, so `sum_reduce`'s contract is this function's.
    unsafe {
        match dtype {
            DataType::I8 => shmem.sum_reduce::<Block, i8>(dst as *mut i8, src as *const i8, count),
            DataType::U8 => shmem.sum_reduce::<Block, u8>(dst as *mut u8, src as *const u8, count),
            DataType::I32 => shmem.sum_reduce::<Block, i32>(dst as *mut i32, src as *const i32, count),
            DataType::U32 => shmem.sum_reduce::<Block, u32>(dst as *mut u32, src as *const u32, count),
            DataType::I64 => shmem.sum_reduce::<Block, i64>(dst as *mut i64, src as *const i64, count),
            DataType::U64 => shmem.sum_reduce::<Block, u64>(dst as *mut u64, src as *const u64, count),
            DataType::F16 => shmem.sum_reduce::<Block, F16>(dst as *mut F16, src as *const F16, count),
            DataType::F32 => shmem.sum_reduce::<Block, f32>(dst as *mut f32, src as *const f32, count),
            DataType::F64 => shmem.sum_reduce::<Block, f64>(dst as *mut f64, src as *const f64, count),
            DataType::Bf16 => shmem.sum_reduce::<Block, Bf16>(dst as *mut Bf16, src as *const Bf16, count),
        }
    }
}

/// Publishes that this channel has completed every ring item up to `seq`: its
/// `cta_completed` entry and, in a loop of one channel, `stream_done` (the ring route of
/// stream-ordered calls waits for it).
///
/// Ordering: the caller passed a CTA barrier after every thread's work; when `release`,
/// a `fence.acq_rel.sys` before the two relaxed system-scope stores makes that work
/// visible before either is (a release pattern for each). Items that wrote nothing
/// (no-ops, barriers, shutdown) have nothing to make visible: their completion is
/// stored without the fence.
///
/// # Safety
/// `a` is this CTA's [`Channel`]; thread 0 of the CTA alone calls this.
unsafe fn publish_ring(a: &Channel, seq: u64, release: bool) {
    // SAFETY: `index < count <= MAX_CHANNELS` (`Channel`), the length of the host-mapped
    // header's `cta_completed`; only the address is computed.
    let slot = unsafe { (&raw mut (*a.header).cta_completed).cast::<u64>().add(a.index as usize) };
    if release {
        arch::site(Site::RingComplete);
        arch::fence_acq_rel_sys();
    }
    // SAFETY: `slot` is this channel's aligned `u64` in the host-mapped header, and
    // `stream_done` an aligned `u64` of the loop state that only a loop's one channel writes
    // (thread 0), both through `arch`.
    unsafe {
        arch::st_relaxed_sys_global(slot, seq);
        if a.count == 1 {
            arch::st_relaxed_sys_global(&raw mut (*a.state).stream_done, seq);
        }
    }
}

/// This channel's `ChannelStats` when the communicator keeps statistics, else null.
///
/// # Safety
/// `a` is this CTA's [`Channel`].
pub(super) unsafe fn channel_stats(a: &Channel) -> *mut ChannelStats {
    if a.comm.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: a non-null `a.comm` is the rank's `CommDevice`, valid for the launch (`Channel`).
    stats_entry(unsafe { (*a.comm).stats }, a.index)
}

/// Channel `index`'s entry of the communicator's `[ChannelStats; nchannels]` at `stats`
/// (`CommDevice::stats`, 0 where none are kept), or null; `index` below its channels.
pub(super) fn stats_entry(stats: u64, index: u32) -> *mut ChannelStats {
    if stats == 0 {
        return core::ptr::null_mut();
    }
    (stats as *mut ChannelStats).wrapping_add(index as usize)
}

/// Counts the mailbox item just taken in this channel's statistics `mine`, with its
/// dispatch latency (now minus the submitter's publication time; both `globaltimer`, one
/// clock for the whole GPU).
///
/// Ordering: `submitted_ns` is a volatile load ordered after the submitter's release by
/// lane 0's acquire of the pending state and the CTA barrier since; the counters are
/// relaxed GPU-scope adds (read by the host between operations).
///
/// # Safety
/// `a` is this CTA's [`Channel`] and `mine` its live `ChannelStats`; thread 0 alone calls
/// this, once per mailbox item taken.
unsafe fn count_dispatch(a: &Channel, mine: *mut ChannelStats) {
    // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); `submitted_ns` is an aligned
    // word of its mailbox.
    let submitted = unsafe { arch::ld_volatile_global(&raw const (*a.state).mailbox.submitted_ns) };
    let waited = arch::globaltimer_ns().saturating_sub(submitted);
    // SAFETY: `mine` is this channel's live counters (the caller's contract), changed only by
    // atomic adds.
    unsafe {
        u64::atomic_add_relaxed_gpu(&raw mut (*mine).mailbox_items, 1);
        u64::atomic_add_relaxed_gpu(&raw mut (*mine).dispatch_ns, waited);
    }
}

/// Counts in this channel's statistics (when kept) a part of a stream-ordered collective
/// that it ran on the call kernel alone, from `entered_ns` (the CTA's start, `globaltimer`)
/// to now.
///
/// Ordering: relaxed GPU-scope adds (read by the host between operations).
///
/// # Safety
/// `mine` is this CTA's channel's `ChannelStats` (`channel_stats`), or null; thread 0
/// alone calls this, once per part.
pub(super) unsafe fn count_call_kernel_part(mine: *mut ChannelStats, entered_ns: u64) {
    if mine.is_null() {
        return;
    }
    let spent = arch::globaltimer_ns().saturating_sub(entered_ns);
    // SAFETY: a non-null `mine` is this channel's live counters, changed only by atomic adds.
    unsafe {
        u64::atomic_add_relaxed_gpu(&raw mut (*mine).call_kernel_parts, 1);
        u64::atomic_add_relaxed_gpu(&raw mut (*mine).call_kernel_ns, spent);
    }
}

/// Counts this channel done with the pending mailbox item, of which `arrivals` channels
/// take part (`participation::mailbox_participation`); the last channel completes it (the
/// next generation, PENDING cleared).
///
/// Ordering: when the item `wrote` memory, a `fence.acq_rel.sys` first (its writes may be
/// in host-mapped memory that the host reads once the submitter's stream is done); then,
/// at GPU scope (the mailbox is device memory that only this GPU's threads use), an
/// acq_rel arrival count (with more than one channel) and the completion by one acq_rel
/// atomic add, which keeps CLOSED.
///
/// # Safety
/// `a` is this CTA's [`Channel`]; thread 0 of the CTA alone calls this, once per mailbox
/// generation, with the same `arrivals` as every channel of the item.
pub(super) unsafe fn complete_mailbox(a: &Channel, wrote: bool, arrivals: u32) {
    // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); only the mailbox's address is
    // taken.
    let mailbox = unsafe { &raw mut (*a.state).mailbox };
    if wrote {
        arch::site(Site::MailboxDoneFence);
        arch::fence_acq_rel_sys();
    }
    // An item of one channel has no one to count.
    let last = arrivals == 1 || {
        arch::site(Site::MailboxArrive);
        // SAFETY: `arrived` is an aligned `u64` of the mailbox in device memory, changed only
        // through `arch`.
        let arrived = unsafe { u64::atomic_add_acq_rel_gpu(&raw mut (*mailbox).arrived, 1) } + 1;
        let last = arrived == u64::from(arrivals);
        if last {
            // SAFETY: as above; only the last channel to arrive resets it.
            unsafe { arch::st_volatile_global(&raw mut (*mailbox).arrived, 0) };
        }
        last
    };
    if last {
        arch::site(Site::MailboxDone);
        // The next generation, PENDING cleared, CLOSED kept: one acq_rel add, which releases
        // every channel's work (theirs reached this one through the arrival count).
        // SAFETY: `state` is the mailbox's aligned `u64`, accessed only through `arch`'s 64-bit
        // operations.
        unsafe { u64::atomic_add_acq_rel_gpu(&raw mut (*mailbox).state, MAILBOX_COMPLETE) };
    }
}

/// Sets the mailbox's CLOSED, keeping the rest of its state (an atomic OR by a 64-bit
/// acq_rel CAS loop): a submitter waiting on it continues, later submissions return at
/// once.
///
/// # Safety
/// `state` is the loop's live `LoopState`.
pub(super) unsafe fn close_mailbox(state: *mut LoopState) {
    // SAFETY: the mailbox's `state` is an aligned `u64` of the live loop state (this
    // function's contract), accessed only through `arch`'s 64-bit operations.
    unsafe { update_state(&raw mut (*state).mailbox.state, Site::MailboxClose, |old| (old & MAILBOX_CLOSED == 0).then_some(old | MAILBOX_CLOSED)) };
}

/// Records the loop's first error: the channel that wins the claim writes the details,
/// then the status (release), so the host never sees a status without its details.
///
/// # Safety
/// `a` is this CTA's [`Channel`]; thread 0 of the CTA alone calls this.
pub(super) unsafe fn record_error(a: &Channel, error: LoopError, detail: u32, seq: u64) {
    // SAFETY: `error_claimed` is an aligned `u64` of the loop state, changed only by `arch`
    // atomics.
    if unsafe { u64::atomic_cas_acq_rel_sys(&raw mut (*a.state).error_claimed, 0, 1) } == 0 {
        // SAFETY: `error_seq` is an aligned `u64` of the host-mapped header, written only by
        // the channel that won the claim above.
        unsafe { arch::st_volatile_global(&raw mut (*a.header).error_seq, seq) };
        // SAFETY: as above, for `status`.
        unsafe { arch::st_release_sys_global(&raw mut (*a.header).status, error.status(detail)) };
    }
}

/// A leaving loop of one channel: stores `stream_done` past every item it will not run
/// (its last completion plus [`STREAM_DONE_RELEASE`]), so that no stream waits for one.
/// Not inlined: the loop's entry keeps its registers.
///
/// Ordering: a release store, after the channel's last completion store.
///
/// # Safety
/// `a` is this CTA's [`Channel`], the loop's only one; thread 0 of the CTA alone calls
/// this, as the channel leaves.
#[inline(never)]
unsafe fn release_streams(a: &Channel) {
    // SAFETY: this channel's `cta_completed` entry (the host-mapped header's) and the loop
    // state's `stream_done`, aligned `u64`s that only this thread writes (`publish_ring`).
    unsafe {
        let completed = arch::ld_volatile_global((&raw const (*a.header).cta_completed).cast::<u64>());
        arch::st_release_sys_global(&raw mut (*a.state).stream_done, completed + STREAM_DONE_RELEASE);
    }
}

/// Leaves the loop: closes the mailbox (a stream waiting on it continues) and counts
/// this channel out; the last channel out tells the host, after every channel's
/// completions (acq_rel count, then a release store).
///
/// # Safety
/// `a` is this CTA's [`Channel`]; thread 0 of the CTA alone calls this, once, as the
/// channel leaves.
unsafe fn leave(a: &Channel) {
    // SAFETY: `a.state` is the loop's `LoopState` (`Channel`).
    unsafe { close_mailbox(a.state) };
    if a.count == 1 {
        // SAFETY: `a` is this CTA's channel, of one channel; thread 0 leaving.
        unsafe { release_streams(a) };
    }
    // SAFETY: `exited` is an aligned `u64` of the loop state, changed only by `arch` atomics.
    let exited = unsafe { u64::atomic_add_acq_rel_sys(&raw mut (*a.state).exited, 1) } + 1;
    if exited == u64::from(a.count) {
        // SAFETY: `exited` is an aligned `u64` of the host-mapped header, written only by the
        // last channel to leave.
        unsafe { arch::st_release_sys_global(&raw mut (*a.header).exited, exited) };
    }
}
