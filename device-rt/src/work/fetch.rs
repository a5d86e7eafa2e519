//! Warp 0's fetch: polls the host's ring and the loop's mailbox, copies what it finds into
//! shared memory, and records the poll outcome (`NEXT_*`) that the CTA reads after its
//! barrier. Here too: the mailbox's priority window (after a mailbox item the polling
//! channel looks only at the mailbox for a while), the channels other than the polling one
//! waiting in device memory for the slots it found, and the idle loop's half of the sleep
//! handshake.

use core::mem::size_of;

use super::channel::Channel;
use super::item::WorkItem;
use super::queue::{ITEM_CACHE, LOOP_ASLEEP, LOOP_AWAKE, LOOP_LEAVING, LoopShared, MAILBOX_CLOSED, MAILBOX_PENDING, RingSlot, mailbox_generation};
use crate::arch::{self, AtomicWord, Site, WARP_SIZE};
use crate::spin::SpinGuard;

/// What warp 0's fetch needs to know of the mailbox: the generation this channel
/// completed last, and until when (on lane 0's clock) the polling channel looks only at
/// the mailbox.
#[derive(Clone, Copy)]
pub(super) struct MailboxView {
    pub(super) done: u64,
    pub(super) priority_until_ns: u64,
}

/// The mailbox's priority window: how long, after a mailbox item, the polling channel
/// looks only at the mailbox. A stream-ordered call that follows within this time is seen
/// within a device-memory read, not behind a host read of the ring (about 1.5 µs); a ring
/// item enqueued meanwhile waits at most this long (see docs/tuning.md,
/// `MAILBOX_PRIORITY_NS`).
pub(super) const MAILBOX_PRIORITY_NS: u64 = 20_000;

/// The poll's outcome: what the loop does next (`LoopShared::poll_outcome`).
pub(super) const NEXT_RING: u64 = 1;
pub(super) const NEXT_MAILBOX: u64 = 2;
pub(super) const NEXT_ABORT: u64 = 3;
pub(super) const NEXT_PEER_FAILED: u64 = 4;
/// The idle loop left to sleep (see [`try_sleep`]): its kernel ends, its state kept.
pub(super) const NEXT_SLEEP: u64 = 5;

/// The channel whose warp 0 polls the host's ring while the loop is idle; the others wait
/// in device memory until a channel has found the slot they want ([`wait_seen`]). Idle
/// channels reading host memory all the time slowed the NVLink traffic of busy ones.
pub(super) const POLLING_CHANNEL: u32 = 0;

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
pub(super) unsafe fn fetch(a: &Channel, next_seq: u64, want: &mut usize, mailbox: MailboxView, shared: *mut LoopShared) {
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
/// loads, then a fence of about 1 µs when it finds something). Two reads in flight, half a
/// round trip apart (two halves of the warp each reading the slot), made the slot seen
/// later, not sooner (see docs/tuning.md, `poll_next_slot`).
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
    let (submits, pinned, ring_word, submits_seen) = unsafe {
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
    let idle = SleepReads { submits, pinned, ring_word, submits_seen, mailbox }.idle(next_seq);
    // SAFETY: as for LEAVING.
    unsafe { arch::st_release_sys_global(awake, if idle { LOOP_ASLEEP } else { LOOP_AWAKE }) };
    idle
}

/// What the idle loop reads after its fence in the sleep handshake ([`try_sleep`]), and
/// its decision on them: the loop's half of the protocol apart from the accesses (which
/// the sleep handshake's model check transcribes step for step).
#[derive(Clone, Copy, Debug)]
pub struct SleepReads {
    /// The host's count of stream-ordered submissions (`QueueHeader::submits`).
    pub submits: u64,
    /// The host's pin (`QueueHeader::pinned`).
    pub pinned: u64,
    /// The first word of the next ring slot (its flag in the high half).
    pub ring_word: u64,
    /// Call kernels that no longer need the loop (`LoopState::submits_seen`).
    pub submits_seen: u64,
    /// The mailbox's state word.
    pub mailbox: u64,
}

impl SleepReads {
    /// Whether a loop whose next ring item is `next_seq` may sleep on these reads: not
    /// pinned, every submission the host announced counted by its call kernel, no mailbox
    /// item pending, and the next ring slot not begun (its first word not `next_seq`'s).
    pub const fn idle(&self, next_seq: u64) -> bool {
        self.pinned == 0 && self.submits == self.submits_seen && self.mailbox & MAILBOX_PENDING == 0 && (self.ring_word >> 32) as u32 != RingSlot::flag(next_seq)
    }
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
/// for the slot it knows whole: reading more slows a loop of several channels (see
/// docs/tuning.md, `poll_slots`).
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
pub(super) unsafe fn set_poll_outcome(shared: *mut LoopShared, outcome: u64, count: u64, generation: u64) {
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
