//! The sleep handshake of a loop of one channel (`device_rt::work`'s `queue` module,
//! "Protocol (sleep)"), checked by loom: every interleaving of the loop's steps with the
//! host's and the call kernel's, and the weak-memory outcomes of C11 that loom explores,
//! within a preemption bound.
//!
//! The model is a transcription of the protocol's steps, in the order each side takes
//! them, on the same words, with the same orderings:
//! - the loop (`device_rt::work`, `fetch.rs`): each fetch looks at the mailbox first
//!   (`poll_next_slot`'s priority window, over at once here), then polls the ring slot
//!   (`read_slot_piece`: an acquire load), the mailbox (`look_elsewhere`: an acquire load;
//!   then the abort flag) and, idle, tries to sleep (`try_sleep`) in any round: the sleep
//!   time only says when it tries, and the model tries at every point (a bounded number
//!   of times while a host runs: [`SLEEP_TRIES`]). `try_sleep`:
//!   LEAVING by a relaxed store, `fence.sc.sys`, relaxed loads of `submits`, `pinned` and
//!   the next slot's first word, an acquire load of `submits_seen`, a relaxed load of the
//!   mailbox state, the device's own decision on them ([`SleepReads::idle`], the function
//!   the loop calls), and ASLEEP or AWAKE by a release store. A ring item's completion is
//!   a release store of `cta_completed` (from which a launch after a sleep resumes); a
//!   mailbox item's, an acq_rel add of `MAILBOX_COMPLETE`.
//! - the host (host-shim's `queue.rs`): a stream-ordered submission (`announce_submit`)
//!   adds one to `submits`, a ring item (`enqueue`) stores its slot's words with release
//!   then fences, a capture pins the loop (`pinned`); then `wake`: loads `awake`; AWAKE
//!   returns, LEAVING spins, ASLEEP swaps in AWAKE by a compare-and-swap whose winner
//!   launches the loop again.
//! - the call kernel (`mailbox.rs`): `submit_to_mailbox` publishes PENDING by an acq_rel
//!   add, then `count_submit` adds one to `submits_seen` (acq_rel); a call kernel that
//!   runs its item alone only counts.
//!
//! The host's sequentially consistent accesses are written `SeqCst` as in host-shim; loom
//! regards such accesses as acquire/release only (its README), so each read-modify-write
//! of the host's that the protocol relies on as a full fence (`submits`' add, `pinned`'s
//! swap: locked instructions) is followed by the `fence(SeqCst)` it is on the host; the
//! ring's store is followed by `enqueue`'s own `fence(SeqCst)`.
//!
//! Checked, in every execution: no work is lost (every ring item and mailbox item
//! announced runs, by a loop that was running or one the host launched again); the host
//! never launches the loop while a launch has not stored ASLEEP (never two loops); a loop
//! that ends asleep has no work pending (the last check: everything ran and the loop is
//! asleep); a loop pinned before the host's wake returned never sleeps after it. Negative
//! controls: with the loop's fence removed, its LEAVING stored after its reads, the host's
//! wake before its count, the call kernel's count before its PENDING, or the loop's read of
//! the count relaxed, loom must find an execution that loses work.

use std::panic::{AssertUnwindSafe, catch_unwind};

use device_rt::work::{LOOP_ASLEEP, LOOP_AWAKE, LOOP_LEAVING, MAILBOX_CLOSED, MAILBOX_COMPLETE, MAILBOX_PENDING, RingSlot, SleepReads, mailbox_generation};
use loom::sync::Arc;
use loom::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use loom::sync::atomic::{AtomicBool, AtomicU64, fence};
use loom::thread;

/// The words the loop, the host and the call kernel share (named as in `QueueHeader`,
/// `LoopState` and the ring), and the model's own records.
#[derive(Default)]
struct Words {
    // `QueueHeader`.
    abort: AtomicU64,
    submits: AtomicU64,
    pinned: AtomicU64,
    /// LOOP_AWAKE (0) at first, as `QueueHeader::new` has it.
    awake: AtomicU64,
    /// The one channel's last completed ring item.
    cta_completed: AtomicU64,
    // `LoopState`.
    submits_seen: AtomicU64,
    mailbox_state: AtomicU64,
    /// The first word of the ring's one slot (a ring of capacity 1: item `seq` in it).
    slot_word: AtomicU64,
    // The model's records, not the protocol's.
    /// Items the loop ran (ring and mailbox).
    ran: AtomicU64,
    /// A launch has started and not yet stored ASLEEP.
    running: AtomicBool,
    /// Launches the host asked for (the first counts as one).
    launches: AtomicU64,
    /// Every host step is over: no more launches will be asked for.
    hosts_done: AtomicBool,
}

/// The protocol as written, or one step broken (a negative control).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Faithful,
    /// `try_sleep` without its `fence.sc.sys`.
    LoopWithoutFence,
    /// `try_sleep` stores LEAVING after its reads (and its fence).
    LeavingAfterReads,
    /// The host wakes the loop before it counts its submission.
    WakeBeforeCount,
    /// The call kernel counts itself before its PENDING add.
    CountBeforePending,
    /// `try_sleep` reads `submits_seen` relaxed, not acquire.
    SeenReadRelaxed,
}

/// How often a launch tries to sleep between two items while a host still runs. The
/// loop tries once per sleep time, without end; loom, which explores every value a load
/// may return, would then explore a host whose `wake` reads each of the loop's LEAVING
/// stores in turn, for ever. Once every host is done, a launch tries as often as it polls.
const SLEEP_TRIES: u32 = 2;

/// One launch of the loop until it leaves: `true` when it left to sleep, `false` on the
/// abort flag.
fn launch(w: &Words, v: Variant) -> bool {
    // `channel_loop`: a launch resumes after the ring items its channel completed.
    let mut next_seq = w.cta_completed.load(Relaxed) + 1;
    let mut mailbox_done = u64::MAX;
    'fetch: loop {
        let mut tries = 0;
        if take_mailbox(w, &mut mailbox_done) {
            continue 'fetch;
        }
        loop {
            // `read_slot_piece`, `take_slots`: the slot is whole when its flag is the item's.
            if (w.slot_word.load(Acquire) >> 32) as u32 == RingSlot::flag(next_seq) {
                w.ran.fetch_add(1, Relaxed);
                w.cta_completed.store(next_seq, Release);
                next_seq += 1;
                continue 'fetch;
            }
            if take_mailbox(w, &mut mailbox_done) {
                continue 'fetch;
            }
            // `look_elsewhere`'s spin guard.
            if w.abort.load(Relaxed) != 0 {
                return false;
            }
            if tries < SLEEP_TRIES || w.hosts_done.load(Acquire) {
                tries += 1;
                if try_sleep(w, next_seq, v) {
                    return true;
                }
            }
            thread::yield_now();
        }
    }
}

/// `look_elsewhere` and the item's run: a pending item of another generation than the one
/// this launch completed last is run and completed (`complete_mailbox`).
fn take_mailbox(w: &Words, done: &mut u64) -> bool {
    let state = w.mailbox_state.load(Acquire);
    let generation = mailbox_generation(state);
    if state & (MAILBOX_PENDING | MAILBOX_CLOSED) != MAILBOX_PENDING || generation == *done {
        return false;
    }
    w.ran.fetch_add(1, Relaxed);
    w.mailbox_state.fetch_add(MAILBOX_COMPLETE, AcqRel);
    *done = generation;
    true
}

/// `try_sleep`.
fn try_sleep(w: &Words, next_seq: u64, v: Variant) -> bool {
    if v != Variant::LeavingAfterReads {
        w.awake.store(LOOP_LEAVING, Relaxed);
    }
    if v != Variant::LoopWithoutFence {
        fence(SeqCst);
    }
    let seen_order = if v == Variant::SeenReadRelaxed { Relaxed } else { Acquire };
    let reads = SleepReads {
        submits: w.submits.load(Relaxed),
        pinned: w.pinned.load(Relaxed),
        ring_word: w.slot_word.load(Relaxed),
        submits_seen: w.submits_seen.load(seen_order),
        mailbox: w.mailbox_state.load(Relaxed),
    };
    if v == Variant::LeavingAfterReads {
        w.awake.store(LOOP_LEAVING, Relaxed);
    }
    let idle = reads.idle(next_seq);
    if idle {
        // The model's record, before the release that ends the launch.
        w.running.store(false, Relaxed);
    }
    w.awake.store(if idle { LOOP_ASLEEP } else { LOOP_AWAKE }, Release);
    idle
}

/// `Queue::wake`.
fn wake(w: &Words) {
    loop {
        match w.awake.load(SeqCst) {
            LOOP_AWAKE => return,
            LOOP_ASLEEP => {
                if w.awake.compare_exchange(LOOP_ASLEEP, LOOP_AWAKE, SeqCst, SeqCst).is_err() {
                    continue;
                }
                // The relaunch hook: the new launch runs on the loop's stream.
                assert!(!w.running.load(Relaxed), "two loops running: the host launched the loop again while a launch had not stored ASLEEP");
                w.running.store(true, Relaxed);
                w.launches.fetch_add(1, Release);
                return;
            }
            _ => thread::yield_now(),
        }
    }
}

/// What a host thread hands the loop.
#[derive(Clone, Copy, Debug)]
enum Work {
    /// A stream-ordered call: `announce_submit(false)`, then its call kernel submits to
    /// the mailbox.
    StreamCall,
    /// A stream-ordered call whose call kernel runs it alone (LL): it only counts itself.
    CallKernelAlone,
    /// Ring item 1 (`enqueue`).
    RingItem,
    /// A capture (`announce_submit(true)`), then the captured call kernel's replay, which
    /// submits to the mailbox without the host.
    Pin,
}

impl Work {
    /// Items the loop must run for it.
    fn items(self) -> u64 {
        match self {
            Self::CallKernelAlone => 0,
            _ => 1,
        }
    }
}

/// A host thread's steps for `work`, then its call kernel's.
fn host(w: &Words, work: Work, v: Variant) {
    match work {
        Work::StreamCall | Work::CallKernelAlone => {
            if v == Variant::WakeBeforeCount {
                wake(w);
                w.submits.fetch_add(1, SeqCst);
            } else {
                w.submits.fetch_add(1, SeqCst);
                fence(SeqCst);
                wake(w);
            }
        }
        Work::RingItem => {
            w.slot_word.store(u64::from(RingSlot::flag(1)) << 32, Release);
            fence(SeqCst);
            wake(w);
        }
        Work::Pin => {
            w.pinned.swap(1, SeqCst);
            fence(SeqCst);
            wake(w);
        }
    }
    match work {
        Work::StreamCall | Work::Pin if v == Variant::CountBeforePending => {
            w.submits_seen.fetch_add(1, AcqRel);
            w.mailbox_state.fetch_add(MAILBOX_PENDING, AcqRel);
        }
        Work::StreamCall | Work::Pin => {
            w.mailbox_state.fetch_add(MAILBOX_PENDING, AcqRel);
            w.submits_seen.fetch_add(1, AcqRel);
        }
        Work::CallKernelAlone => {
            w.submits_seen.fetch_add(1, AcqRel);
        }
        Work::RingItem => {}
    }
}

/// One execution: a loop launched at the start and the hosts' `works`, each on a thread
/// of its own; the checks above.
fn execution(works: &[Work], v: Variant) {
    let w = Arc::new(Words::default());
    w.running.store(true, Relaxed);
    w.launches.store(1, Relaxed);
    let pinned = works.iter().any(|work| matches!(work, Work::Pin));
    // The loop's stream: each launch after the one before has ended.
    let stream = {
        let w = Arc::clone(&w);
        thread::spawn(move || {
            let mut started = 0;
            loop {
                let last = w.hosts_done.load(Acquire);
                if w.launches.load(Acquire) > started {
                    started += 1;
                    launch(&w, v);
                } else if last {
                    return;
                } else {
                    thread::yield_now();
                }
            }
        })
    };
    let hosts: Vec<_> = works
        .iter()
        .map(|&work| {
            let w = Arc::clone(&w);
            thread::spawn(move || host(&w, work, v))
        })
        .collect();
    for h in hosts {
        h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    }
    if pinned {
        assert_ne!(w.awake.load(Acquire), LOOP_ASLEEP, "a loop pinned before the host's wake returned slept");
        w.abort.store(1, Release);
    }
    w.hosts_done.store(true, Release);
    stream.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    if pinned {
        assert_ne!(w.awake.load(Acquire), LOOP_ASLEEP, "a pinned loop slept");
        return;
    }
    let items: u64 = works.iter().map(|work| work.items()).sum();
    assert_eq!(w.ran.load(Relaxed), items, "work lost: announced, never run, and the loop asleep (awake = {})", w.awake.load(Relaxed));
    assert_eq!(w.awake.load(Relaxed), LOOP_ASLEEP, "the loop stopped without sleeping");
    assert_eq!(w.submits.load(Relaxed), w.submits_seen.load(Relaxed));
}

/// Checks every execution of `works` against a loop, with `v`'s steps, where a thread is
/// preempted (switched away from where it could go on) at most `preemptions` times; a
/// thread that waits (a spin's yield, a join) lets the others run at no cost. Three for one
/// host (two for a pinned loop, which polls on for longer), one for two hosts: a few
/// seconds each (loom is built optimised: the workspace's profile), where one more is
/// minutes. Each negative control is found with one.
fn check(works: &'static [Work], preemptions: usize, v: Variant) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(move || execution(works, v));
}

/// `check` must fail (a negative control): returns what the failing execution said.
fn check_fails(works: &'static [Work], v: Variant) -> String {
    let failed = catch_unwind(AssertUnwindSafe(|| check(works, 3, v))).expect_err("loom found no execution that breaks the protocol");
    ferroccl_testkit::panic_message(failed.as_ref())
}

#[test]
fn a_stream_call_racing_the_loops_sleep_is_never_lost() {
    check(&[Work::StreamCall], 3, Variant::Faithful);
}

#[test]
fn a_ring_item_racing_the_loops_sleep_is_never_lost() {
    check(&[Work::RingItem], 3, Variant::Faithful);
}

/// Two hosts wake the loop at once: one launches it again, never two loops.
#[test]
fn two_wakes_racing_launch_one_loop_and_lose_nothing() {
    check(&[Work::StreamCall, Work::RingItem], 1, Variant::Faithful);
}

/// A call kernel that runs its item alone counts itself: the loop sleeps on after it, and
/// a ring item racing it is not lost.
#[test]
fn a_call_kernel_run_alone_lets_the_loop_sleep() {
    check(&[Work::CallKernelAlone, Work::RingItem], 1, Variant::Faithful);
}

/// A capture pins the loop: once the host's wake returned it never sleeps, and the
/// replay's item, which the host never announced, is not lost.
#[test]
fn a_pinned_loop_never_sleeps_again() {
    check(&[Work::Pin], 2, Variant::Faithful);
}

#[test]
fn without_the_loops_fence_a_call_is_lost() {
    let why = check_fails(&[Work::StreamCall], Variant::LoopWithoutFence);
    assert!(why.contains("work lost"), "{why}");
}

#[test]
fn leaving_stored_after_the_reads_loses_a_ring_item() {
    let why = check_fails(&[Work::RingItem], Variant::LeavingAfterReads);
    assert!(why.contains("work lost"), "{why}");
}

#[test]
fn a_wake_before_the_count_loses_a_call() {
    let why = check_fails(&[Work::StreamCall], Variant::WakeBeforeCount);
    assert!(why.contains("work lost"), "{why}");
}

#[test]
fn a_count_before_pending_loses_a_call() {
    let why = check_fails(&[Work::StreamCall], Variant::CountBeforePending);
    assert!(why.contains("work lost"), "{why}");
}

#[test]
fn the_count_read_without_acquire_loses_a_call() {
    let why = check_fails(&[Work::StreamCall], Variant::SeenReadRelaxed);
    assert!(why.contains("work lost"), "{why}");
}
