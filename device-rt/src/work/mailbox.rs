//! The stream-ordered path's submitter: one thread of a tiny kernel launched on the user's
//! stream writes an item into the loop's mailbox, publishes it, and waits until the loop
//! has run it (see the `queue` module for the protocol and the ordering of each access).

use super::item::WorkItem;
use super::queue::{LoopState, MAILBOX_CLOSED, MAILBOX_PENDING, QueueHeader, mailbox_generation};
use crate::abi::{LoopError, WaitSite};
use crate::arch::{self, AtomicWord, Site};
use crate::spin::{Interrupted, SpinGuard};

/// How a [`submit_to_mailbox`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// The loop ran the item (every channel's writes are visible to the submitter).
    Done,
    /// The loop had left (before or while the item waited): nothing more runs.
    Closed,
    /// The host set the abort flag while the item waited.
    Aborted,
    /// The loop did not answer within [`submit_budget_ns`]: the submitter recorded a
    /// `LoopError::Timeout` at [`WaitSite::MailboxSubmit`] (unless an error was recorded
    /// first) and set the abort flag, so the loop leaves and the host's next call fails.
    TimedOut,
}

/// Changes the mailbox state word with a 64-bit compare-and-swap loop
/// (`atom.acq_rel.gpu.cas.b64`: the mailbox is in device memory and only threads of its
/// GPU, the loop's and the submitter's, touch it), each attempt the protocol step `site`:
/// `update(old)` gives the new value, or `None` to leave the word as it is. Returns the
/// value the last attempt found.
///
/// # Safety
/// `word` is the aligned `state` of a live mailbox in global memory, which every thread
/// accesses only through `arch`'s 64-bit operations.
#[inline(always)]
pub(crate) unsafe fn update_state(word: *mut u64, site: Site, update: impl Fn(u64) -> Option<u64>) -> u64 {
    // SAFETY: the caller's contract: an aligned `u64` accessed only through `arch`.
    let mut old = unsafe { arch::ld_relaxed_gpu_global(word) };
    loop {
        let Some(new) = update(old) else { return old };
        arch::site(site);
        // SAFETY: as above.
        let found = unsafe { u64::atomic_cas_acq_rel_gpu(word, old, new) };
        if found == old {
            return old;
        }
        old = found;
    }
}

/// How long a submitter waits for its item, given the loop's spin budget: a quarter longer,
/// so that a loop stuck in one of the item's waits (a peer's flag or data that never come)
/// records that wait's timeout, which names it, before the submitter records its own; the
/// submitter's timeout is left for a loop that never answers.
pub const fn submit_budget_ns(spin_budget_ns: u64) -> u64 {
    spin_budget_ns.saturating_add(spin_budget_ns / 4)
}

/// Submits `item` to the loop's mailbox and waits until the loop has run it, has left, the
/// host aborts, or [`submit_budget_ns`] of `spin_budget_ns` passes (then records a timeout
/// and sets the abort flag: see [`SubmitOutcome::TimedOut`]). One thread runs this. A
/// closed mailbox returns at once (its item words written, nothing run).
///
/// Ordering (the `queue` module's protocol), every access at GPU scope (the mailbox is in
/// device memory, used by this GPU's threads alone; what peers wrote into the item's
/// buffers reached the loop's channels through their own system-scope acquires, and
/// causality order is transitive): the item's words and the publication time are
/// relaxed (volatile) 64-bit stores; PENDING is published by one 64-bit acq_rel atomic
/// add, which orders the item before it; the wait is a 64-bit acquire load that sees the
/// generation move on (or CLOSED), after which every write of the item is visible to this
/// thread (and, once this kernel ends, to the work that follows it on its stream).
///
/// # Safety
/// `state` is the live `LoopState` of a loop launched on `header` (device memory, and
/// host-mapped memory readable and writable by the device); the caller is the only
/// submitter of this mailbox until this returns (the host's one-stream rule), and `item`
/// passed the host's validation.
pub unsafe fn submit_to_mailbox(state: *mut LoopState, header: *mut QueueHeader, item: WorkItem, spin_budget_ns: u64) -> SubmitOutcome {
    // SAFETY: `state` is a live `LoopState` (the caller's contract); only addresses are taken.
    let (word, slot) = unsafe { (&raw mut (*state).mailbox.state, (&raw mut (*state).mailbox.item).cast::<u64>()) };
    for (w, value) in item.to_words().into_iter().enumerate() {
        // SAFETY: `w < 8`: an aligned word of the mailbox item (64 bytes), which no channel
        // reads while no item is pending (the last channel's completion came after every
        // channel's reads of the previous item), and which only this submitter writes.
        unsafe { arch::st_volatile_global(slot.add(w), value) };
    }
    // SAFETY: `submitted_ns` is an aligned word of the live mailbox, written only by the
    // submitter while no item is pending (as the item's words).
    unsafe { arch::st_volatile_global(&raw mut (*state).mailbox.submitted_ns, arch::globaltimer_ns()) };
    arch::site(Site::MailboxPublish);
    // SAFETY: `state` is the mailbox's aligned `u64`, accessed only through `arch`'s 64-bit
    // operations.
    let before = unsafe { u64::atomic_add_acq_rel_gpu(word, MAILBOX_PENDING) };
    // SAFETY: `state` is a live `LoopState` (the caller's contract).
    unsafe { count_submit(state) };
    if before & MAILBOX_CLOSED != 0 {
        // Take the PENDING back, so submissions to a closed mailbox never carry into CLOSED
        // (no channel takes an item from a closed word, and only this submitter adds
        // PENDING). SAFETY: as for the add.
        unsafe { u64::atomic_add_acq_rel_gpu(word, MAILBOX_PENDING.wrapping_neg()) };
        return SubmitOutcome::Closed;
    }
    let generation = mailbox_generation(before);
    // SAFETY: `abort` is an aligned `u64` of the live host-mapped header (the caller's
    // contract), read by the guard with volatile loads.
    let mut guard = unsafe { SpinGuard::new(&raw const (*header).abort, submit_budget_ns(spin_budget_ns)) };
    loop {
        // SAFETY: as for the add.
        let now = unsafe { arch::ld_acquire_gpu_global(word) };
        if mailbox_generation(now) != generation {
            return SubmitOutcome::Done;
        }
        if now & MAILBOX_CLOSED != 0 {
            return SubmitOutcome::Closed;
        }
        match guard.tick() {
            Ok(()) => {}
            Err(Interrupted::Aborted) => return SubmitOutcome::Aborted,
            Err(Interrupted::TimedOut) => {
                // SAFETY: the caller's contract: `state` and `header` are the loop's live state
                // and header.
                unsafe { record_timeout(state, header) };
                return SubmitOutcome::TimedOut;
            }
        }
    }
}

/// Counts a call kernel that no longer needs the loop (its item pending in the mailbox, or
/// run by the call kernel alone): what an idle loop compares with the host's count of
/// submissions before it sleeps (the `queue` module's sleep protocol). One per call kernel,
/// by its first thread.
///
/// Ordering: a GPU-scope acq_rel add, after the submission's PENDING add (release: a loop
/// that acquires the count sees the item pending, or completed).
///
/// # Safety
/// `state` is a live `LoopState`.
pub(super) unsafe fn count_submit(state: *mut LoopState) {
    // SAFETY: `submits_seen` is an aligned `u64` of the live loop state, changed only by
    // `arch` atomics.
    unsafe { u64::atomic_add_acq_rel_gpu(&raw mut (*state).submits_seen, 1) };
}

/// Makes a submission's timeout visible: claims the loop's error (as a channel does) and
/// records a `Timeout` at [`WaitSite::MailboxSubmit`], then sets the abort flag (release),
/// so every channel leaves and the host's next call reports the error.
///
/// # Safety
/// As [`submit_to_mailbox`].
unsafe fn record_timeout(state: *mut LoopState, header: *mut QueueHeader) {
    // SAFETY: `error_claimed` is an aligned `u64` of the live loop state, changed only by
    // `arch` atomics.
    if unsafe { u64::atomic_cas_acq_rel_sys(&raw mut (*state).error_claimed, 0, 1) } == 0 {
        // SAFETY: `error_seq` and `status` are aligned words of the live host-mapped header,
        // written only by whoever won the claim above.
        unsafe {
            arch::st_volatile_global(&raw mut (*header).error_seq, 0);
            arch::st_release_sys_global(&raw mut (*header).status, LoopError::Timeout.status(WaitSite::MailboxSubmit as u32));
        }
    }
    // SAFETY: `abort` is an aligned `u64` of the live host-mapped header; any non-zero value
    // asks the loop to leave.
    unsafe { arch::st_release_sys_global(&raw mut (*header).abort, 1) };
}
