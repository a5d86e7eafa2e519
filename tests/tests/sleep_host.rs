//! A loop that sleeps when idle, on the host twin: a communicator's loop of one resident
//! channel leaves after polling for its sleep time with nothing to do, and the next call
//! launches it again (`device_rt::work`'s sleep handshake with host-shim's
//! `Queue::wake`). The real device code on CPU threads, end to end: results exact across
//! sleeps on the stream path (with and without overlapping call kernels) and on the
//! direct path; a call made while every loop sleeps launches each again, and calls back
//! to back stay exact; a pinned loop (as after a CUDA graph capture) is not launched again;
//! a sleeping loop shuts down, and an aborted one is not launched again. Every check
//! follows a state the test waits for (the loops asleep) or a call's completion; the
//! handshake's races themselves (a call against the loop's decision to sleep, two wakes
//! at once, a pin) are checked by the model of tests/sleep_model.rs.

use std::time::{Duration, Instant};

use device_rt::algo::{AlgorithmChoice, CollFunction};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use ferroccl_testkit::coll::check::{Prepared, run_case};
use ferroccl_testkit::coll::expect::{CollCase, Inputs};
use ferroccl_testkit::coll::group::{RankGroup, SubmitPath, Submitted};
use ferroccl_testkit::coll::twin::TwinGroup;
use host_shim::Error;
use host_shim::comm::wiring::Shape;

const TIMEOUT: Duration = Duration::from_secs(120);
const THREADS: u32 = 128;

/// `nranks` ranks of 4 channels (one resident, three call channels), 1 MiB of staging, the
/// device's choice of algorithm.
fn shape(nranks: u32) -> Shape {
    Shape {
        nranks,
        nchannels: 4,
        ring_step_bytes: 64 << 10,
        p2p_step_bytes: 4096,
        direct: false,
        stats: false,
        paired: false,
        staging_bytes: 1 << 20,
        algorithm: AlgorithmChoice::Auto,
        nvls_multicast: false,
    }
}

/// A case of `function` over `count` floats whose result depends on the reduction order.
fn case(function: CollFunction, count: usize, in_place: bool) -> CollCase {
    CollCase { function, dtype: DataType::F32, op: RedOpKind::Sum, count, root: 1, in_place, inputs: Inputs::OrderSensitive }
}

/// Calls of every path through the loop: LL (small), one-shot/two-shot on the call kernel,
/// the ring over the call channels (through the mailbox), a rooted one.
fn mixed() -> Vec<CollCase> {
    vec![
        case(CollFunction::AllReduce, 100, false),
        case(CollFunction::AllGather, 5_000, true),
        case(CollFunction::AllReduce, 300_000, false),
        case(CollFunction::ReduceScatter, 30_003, false),
        case(CollFunction::Broadcast, 7, true),
    ]
}

/// Waits until every rank of `g` sleeps; false if one does not within `limit`.
fn all_asleep(g: &TwinGroup, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if (0..g.nranks()).all(|r| g.asleep(r)) {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

/// Runs `cases` on `g`, one at a time, each exact on every rank.
fn run_all(g: &mut TwinGroup, cases: &[CollCase], seed: u64) {
    for (k, c) in cases.iter().enumerate() {
        assert_eq!(run_case(g, c, seed + k as u64, TIMEOUT).unwrap(), None, "{}", c.describe());
    }
}

/// `nranks` ranks whose loops sleep after 200 µs idle, every loop asleep after two calls,
/// and each rank's launches then.
fn asleep_after_calls(nranks: u32) -> (TwinGroup, Vec<usize>) {
    let mut g = TwinGroup::start_sleeping(shape(nranks), THREADS, Duration::from_secs(60), Duration::from_micros(200), false).unwrap();
    run_all(&mut g, &mixed()[..2], 1);
    assert!(all_asleep(&g, Duration::from_secs(30)));
    let asleep = launches(&g);
    (g, asleep)
}

/// Each rank's launches so far.
fn launches(g: &TwinGroup) -> Vec<usize> {
    (0..g.nranks()).map(|r| g.launches(r)).collect()
}

/// Two rounds of `cases` on `g` with the loops asleep between them: every round exact, every
/// rank's loop asleep after it, and launched again by the next round (a loop may also
/// sleep inside a round, while the host prepares the next case).
fn rounds(g: &mut TwinGroup, cases: &[CollCase], what: &str) {
    let mut before = launches(g);
    for round in 0..2u64 {
        run_all(g, cases, 10 * round);
        assert!(all_asleep(g, Duration::from_secs(30)), "{what}, round {round}: the loops did not sleep");
        let now = launches(g);
        assert!(now.iter().zip(&before).all(|(n, b)| n > b), "{what}, round {round}: launches {before:?} then {now:?}");
        before = now;
    }
}

/// Rounds of calls with the loops asleep between them, on the stream path with plain and
/// with overlapping call kernels.
#[test]
fn an_idle_loop_sleeps_and_the_next_call_launches_it_again() {
    for overlapping in [false, true] {
        let mut g = TwinGroup::start_sleeping(shape(2), THREADS, Duration::from_secs(60), Duration::from_millis(2), overlapping).unwrap();
        assert_eq!(launches(&g), [1, 1]);
        rounds(&mut g, &mixed(), if overlapping { "overlapping call kernels" } else { "plain call kernels" });
        g.shutdown(TIMEOUT).unwrap();
    }
}

/// The direct path (the host's ring) wakes a sleeping loop too, and the relaunched loop
/// resumes at the next ring item; then the stream path on the same loops.
#[test]
fn the_direct_path_wakes_a_sleeping_loop() {
    let mut g = TwinGroup::start_sleeping(shape(3), THREADS, Duration::from_secs(60), Duration::from_millis(2), false).unwrap();
    g.set_path(SubmitPath::Direct).unwrap();
    rounds(&mut g, &mixed()[..3], "direct path");
    g.set_path(SubmitPath::Stream).unwrap();
    rounds(&mut g, &mixed(), "then the stream path");
    g.shutdown(TIMEOUT).unwrap();
}

/// Pairs of calls with no host synchronisation inside each pair, every other pair made
/// once every loop has been seen asleep and the others right after the pair before (the
/// loops may or may not sleep in between): every result exact, and each pair made while
/// the loops slept launched every loop again.
#[test]
fn calls_after_a_sleep_and_back_to_back_are_exact() {
    let mut g = TwinGroup::start_sleeping(shape(2), THREADS, Duration::from_secs(60), Duration::from_micros(50), true).unwrap();
    let cases = [case(CollFunction::AllReduce, 64, false), case(CollFunction::AllReduce, 20_000, true), case(CollFunction::AllGather, 999, false)];
    for k in 0..12u64 {
        let pair = [&cases[k as usize % 3], &cases[(k as usize + 1) % 3]];
        let prepared: Vec<Prepared> = pair.iter().enumerate().map(|(i, c)| Prepared::new(&mut g, c, 2 * k + i as u64).unwrap()).collect();
        let after_sleep = k % 2 == 0;
        if after_sleep {
            assert!(all_asleep(&g, Duration::from_secs(30)), "pair {k}: the loops did not sleep");
        }
        let before = launches(&g);
        for rank in 0..2 {
            for p in &prepared {
                g.submit(rank, p.item(rank)).unwrap();
            }
        }
        for rank in 0..2 {
            g.wait_submitted(rank, Submitted::Stream, TIMEOUT).unwrap();
        }
        for (p, c) in prepared.iter().zip(pair) {
            assert_eq!(p.verify(&mut g).unwrap(), None, "pair {k}: {}", c.describe());
        }
        let now = launches(&g);
        if after_sleep {
            assert!(now.iter().zip(&before).all(|(n, b)| n > b), "pair {k}, made while the loops slept: launches {before:?} then {now:?}");
        }
    }
    g.shutdown(TIMEOUT).unwrap();
}

/// A loop pinned awake (as a call kernel captured in a CUDA graph pins it) that slept is
/// launched again by the pin, and is not launched again after it: once the pin returned,
/// the loop never stores ASLEEP (which the next call would answer with a launch), through
/// every call that follows.
#[test]
fn a_pinned_loop_never_sleeps() {
    let (mut g, asleep) = asleep_after_calls(2);
    g.pin_awake(0).unwrap();
    g.pin_awake(1).unwrap();
    let pinned = launches(&g);
    assert!(pinned.iter().zip(&asleep).all(|(p, a)| *p == a + 1), "the pin launched each loop that slept again: {asleep:?} then {pinned:?}");
    for round in 0..3 {
        run_all(&mut g, &mixed(), 3 + 10 * round);
        assert!((0..2).all(|r| !g.asleep(r)), "round {round}: a pinned loop slept");
        assert_eq!(launches(&g), pinned, "round {round}: a pinned loop was launched again");
    }
    g.shutdown(TIMEOUT).unwrap();
}

/// Calls handed over as a CUDA graph capture hands them (not counted; the loop pinned
/// only by a call that needs it, `device_rt::work::runs_without_loop`): LL calls, which run
/// on the call kernel alone, are exact while every loop sleeps, and launch and pin none,
/// so a sleeping loop stays asleep (and a device-wide synchronize returns); a ring
/// all-reduce, which goes through the mailbox, pins the loops awake, as before, and is
/// exact, and the pinned loops then never sleep.
#[test]
fn captured_calls_pin_the_loop_only_when_they_need_it() {
    let (mut g, asleep) = asleep_after_calls(3);
    g.set_captured(true);
    // Within the LL path's reach on 3 ranks of 3 call channels of 128 threads.
    let loop_free = [case(CollFunction::AllReduce, 100, false), case(CollFunction::AllGather, 5_000, true), case(CollFunction::ReduceScatter, 3_000, false)];
    for round in 0..3 {
        run_all(&mut g, &loop_free, 20 + 10 * round);
        assert!((0..3).all(|r| g.asleep(r)), "round {round}: a captured call that needs no loop woke one");
        assert_eq!(launches(&g), asleep, "round {round}: a captured call that needs no loop launched one");
    }
    run_all(&mut g, &[case(CollFunction::AllReduce, 300_000, false)], 60);
    let pinned = launches(&g);
    assert!(pinned.iter().zip(&asleep).all(|(p, a)| *p == a + 1), "a captured call through the mailbox launched each loop again: {asleep:?} then {pinned:?}");
    run_all(&mut g, &mixed(), 70);
    assert!((0..3).all(|r| !g.asleep(r)), "a loop a captured call pinned slept");
    assert_eq!(launches(&g), pinned, "a pinned loop was launched again");
    g.shutdown(TIMEOUT).unwrap();
}

/// A sleeping loop shuts down (the shutdown item launches it; it then leaves for good);
/// an aborted one is not launched again: the next call fails with `Aborted` at once.
#[test]
fn a_sleeping_loop_shuts_down_and_an_aborted_one_stays_down() {
    let mut g = TwinGroup::start_sleeping(shape(2), THREADS, Duration::from_secs(60), Duration::from_millis(1), false).unwrap();
    run_all(&mut g, &mixed()[..2], 5);
    assert!(all_asleep(&g, Duration::from_secs(30)));
    g.shutdown(TIMEOUT).unwrap();

    let mut g = TwinGroup::start_sleeping(shape(2), THREADS, Duration::from_secs(60), Duration::from_millis(1), false).unwrap();
    run_all(&mut g, &mixed()[..2], 6);
    assert!(all_asleep(&g, Duration::from_secs(30)));
    let asleep = launches(&g);
    g.abort_all();
    let c = case(CollFunction::AllReduce, 64, false);
    let err = run_case(&mut g, &c, 7, TIMEOUT);
    assert!(matches!(err, Err(Error::Aborted)), "{err:?}");
    assert!((0..2).all(|r| g.asleep(r)), "an aborted loop was launched again");
    assert_eq!(launches(&g), asleep);
}
