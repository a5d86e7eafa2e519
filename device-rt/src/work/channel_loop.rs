//! The persistent work loop: one launch per rank for the rank's lifetime; each CTA is a
//! resident channel (or, launched with a placement, leaves at once unless it claims one;
//! see `placement`). A communicator's call channels run in call kernels instead (see
//! `call_kernel`); a mailbox collective's completion counts them. Warp 0 of each channel
//! polls the ring and the mailbox, copies the next items into shared memory (`fetch`), and
//! a barrier hands it to every thread; the item is validated, dispatched through a `match`
//! into monomorphized functions (`dispatch`), and completed (`complete`: a release store;
//! relaxed when nothing was written). Between items thread 0 looks for a stop (`abort`).
//! Errors, aborts and timeouts end the loop with a recorded status, never a hang.

use super::abort::{abort_between_items, look_for_stop};
use super::channel::{Channel, LoopArgs};
use super::complete::{PUBLISH_EVERY, Unpublished, channel_stats, complete_mailbox, count_dispatch, leave, may_block, record_error, writes_memory};
use super::dispatch::{Stop, execute};
use super::fetch::{MAILBOX_PRIORITY_NS, MailboxView, NEXT_ABORT, NEXT_MAILBOX, NEXT_RING, NEXT_SLEEP, fetch};
use super::item::{BadItem, WorkItem, WorkKind};
use super::participation::mailbox_participation;
use super::placement::elect_channel;
use super::queue::LoopShared;
use crate::abi::LoopError;
use crate::arch::{self, WARP_SIZE};

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
/// ([`DeviceFunction::is_shmem`](super::DeviceFunction::is_shmem)): the heap's loops. A
/// kernel entry of its own, so that the collectives' loop keeps its registers (with the
/// heap's code in it, the loop spilled).
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
