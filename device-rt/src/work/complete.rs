//! Completion and statistics: ring completions (published in batches), a mailbox item's
//! completion once every channel of it has arrived, the loop's first error, a channel's
//! statistics, and the channel leaving the loop (the mailbox closed, the streams released,
//! the last channel out telling the host).

use super::channel::Channel;
use super::item::WorkKind;
use super::mailbox::update_state;
use super::queue::{LoopState, MAILBOX_CLOSED, MAILBOX_COMPLETE, STREAM_DONE_RELEASE};
use crate::abi::LoopError;
use crate::arch::{self, AtomicWord, Site};
use crate::conn::ChannelStats;

/// Thread 0's ring completions not yet published: the last item completed (0: none),
/// and whether any item since the last publication may have written memory.
#[derive(Default)]
pub(super) struct Unpublished {
    seq: u64,
    wrote: bool,
}

impl Unpublished {
    /// Records ring item `seq`, of `kind`, as completed.
    pub(super) fn complete(&mut self, seq: u64, kind: WorkKind) {
        self.seq = seq;
        self.wrote |= writes_memory(kind);
    }

    /// Publishes the completions recorded, if any (see [`publish_ring`]).
    ///
    /// # Safety
    /// As [`publish_ring`].
    pub(super) unsafe fn publish(&mut self, a: &Channel) {
        if self.seq != 0 {
            // SAFETY: `publish_ring`'s contract is this function's, which the caller keeps.
            unsafe { publish_ring(a, self.seq, self.wrote) };
            *self = Self::default();
        }
    }
}

/// True for items whose work may have written memory that the host or a later item reads.
pub(super) fn writes_memory(kind: WorkKind) -> bool {
    matches!(kind, WorkKind::ReduceCopy | WorkKind::Call | WorkKind::Collective)
}

/// Ring items between two completion stores at most.
pub(super) const PUBLISH_EVERY: u64 = 16;

/// True for items that may wait on something outside the loop.
pub(super) fn may_block(kind: WorkKind) -> bool {
    matches!(kind, WorkKind::Barrier | WorkKind::Call | WorkKind::Collective)
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
    // `stream_done` an aligned `u32` of the loop state that only a loop's one channel writes
    // (thread 0), both through `arch`.
    unsafe {
        arch::st_relaxed_sys_global(slot, seq);
        if a.count == 1 {
            // The low 32 bits: what a stream's 32-bit wait compares.
            arch::st_relaxed_sys_global(&raw mut (*a.state).stream_done, seq as u32);
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
pub(super) unsafe fn count_dispatch(a: &Channel, mine: *mut ChannelStats) {
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
    // SAFETY: this channel's `cta_completed` entry (the host-mapped header's), an aligned
    // `u64`, and the loop state's `stream_done`, an aligned `u32`, that only this thread
    // writes (`publish_ring`).
    unsafe {
        let completed = arch::ld_volatile_global((&raw const (*a.header).cta_completed).cast::<u64>());
        arch::st_release_sys_global(&raw mut (*a.state).stream_done, (completed as u32).wrapping_add(STREAM_DONE_RELEASE));
    }
}

/// Leaves the loop: closes the mailbox (a stream waiting on it continues) and counts
/// this channel out; the last channel out tells the host, after every channel's
/// completions (acq_rel count, then a release store).
///
/// # Safety
/// `a` is this CTA's [`Channel`]; thread 0 of the CTA alone calls this, once, as the
/// channel leaves.
pub(super) unsafe fn leave(a: &Channel) {
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
