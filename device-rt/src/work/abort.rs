//! The look for a stop between items: thread 0 of each channel reads, at most every
//! `ABORT_CHECK_NS`, the host's abort flag (the polling channel) or the loop's error claim
//! (every other channel), and turns the fetch's poll outcome into a stop when the word it
//! read calls for one. A wait inside an item bounds itself (`SpinGuard`, `spin_until`);
//! this look covers the items that wait for nothing.

use super::channel::Channel;
use super::fetch::{NEXT_ABORT, NEXT_MAILBOX, NEXT_PEER_FAILED, NEXT_RING, POLLING_CHANNEL, set_poll_outcome};
use super::queue::LoopShared;
use crate::arch;
use crate::spin::ABORT_CHECK_NS;

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
pub(super) unsafe fn abort_between_items(a: &Channel, word: &mut u64, shared: *mut LoopShared) {
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
/// sees the flag (recording `Aborted`): all channels reading the host's flag at once, when
/// an item reached them together, made each wait for the others' reads (see
/// docs/tuning.md, `POLLING_CHANNEL`). The loop looks right after completing a mailbox
/// item, so the read across PCIe overlaps the submitter's wake-up and the next call
/// kernel's launch, and before warp 0's fetch (unless a look after a mailbox item is still
/// to be judged), so that it overlaps the fetch's own read instead of putting a PCIe round
/// trip in front of the items found (see docs/tuning.md, `look_for_stop`).
///
/// Ordering: volatile loads of the flag or the claim (each sees its writer's store
/// eventually, orders nothing).
///
/// # Safety
/// Thread 0 of the CTA only; `a` is this CTA's channel (its queue header and loop state
/// live for the launch).
pub(super) unsafe fn look_for_stop(a: &Channel, checked_ns: &mut u32) -> u64 {
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
