//! The one-shot/two-shot collectives (one-shot and two-shot all-reduce; one-shot
//! all-gather, reduce-scatter, broadcast and reduce) and the device's choice between them
//! and the ring, on the host twin:
//! the real device code on CPU threads, 2 to 8 ranks, every result compared bit for bit
//! with a reference that reduces in rank order (random floats wherever the plan is
//! one-shot or two-shot), which algorithm ran on how many channels checked from the
//! channels' statistics; back-to-back calls with no host synchronisation; a missing rank,
//! an abort, and calls a forced algorithm cannot run.

use std::time::{Duration, Instant};

use device_rt::abi::WaitSite;
use device_rt::arch::{Site, WeakMemory};
use device_rt::algo::{Algorithm, AlgorithmChoice, CollFunction, Plan, Unfit, push_fits};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::work::WorkItem;
use ferroccl_testkit::coll::check::{Prepared, run_back_to_back, run_case};
use ferroccl_testkit::coll::expect::{CollCase, Inputs};
use ferroccl_testkit::coll::group::{RankGroup, all_stats};
use ferroccl_testkit::coll::shot::{Expected, matrix, plan_of, run_planned};
use ferroccl_testkit::coll::twin::TwinGroup;
use host_shim::Error;
use host_shim::comm::scalar_arg;
use host_shim::comm::wiring::Shape;

const TIMEOUT: Duration = Duration::from_secs(120);

/// `nranks` ranks of 2 channels (4, paired, on 2 ranks: collectives spread over 2) with
/// `staging_bytes` of staging, asking for `algorithm`, statistics kept.
fn shape(nranks: u32, algorithm: AlgorithmChoice, staging_bytes: u64) -> Shape {
    let paired = nranks == 2;
    Shape {
        nranks,
        nchannels: if paired { 4 } else { 2 },
        ring_step_bytes: 64 << 10,
        p2p_step_bytes: 4096,
        direct: false,
        stats: true,
        paired,
        staging_bytes,
        algorithm,
        nvls_multicast: false,
    }
}

/// Runs `cases` on a communicator of `shape`, one at a time: every result exact on every
/// rank, every case run as the device's plan says.
fn run_cases(shape: Shape, cases: &[CollCase]) {
    if let Err(why) = try_cases(shape, None, &[], cases) {
        panic!("{why}");
    }
}

/// As [`run_cases`], in `memory`'s weak-memory world if given, the outputs of `unmapped`
/// ranks not mapped for their peers (the others' are where the shape is direct); `Err`
/// says what went wrong.
fn try_cases(shape: Shape, memory: Option<WeakMemory>, unmapped: &[u32], cases: &[CollCase]) -> Result<(), String> {
    let mut g = TwinGroup::start_in(shape, 128, Duration::from_secs(60), memory).map_err(|e| e.to_string())?;
    g.set_unmapped_outputs(unmapped);
    run_planned(g, cases, TIMEOUT, |case| {
        let plan = plan_of(case, shape.staging(), shape.algorithm).expect("the matrix holds runnable cases only");
        let paired_reduce_scatter = shape.paired && shape.nranks == 2 && case.function == CollFunction::ReduceScatter;
        let ring_channels = if paired_reduce_scatter { shape.nchannels } else { shape.collective_channels() };
        Some(Expected { plan, ring_channels, shot_from: 0 })
    })
}

/// `choice`'s matrix on 2 to 8 ranks: the grid spread over the rank counts (`grid`), the
/// threshold cases (up to `max_bytes`) on every one.
fn run_matrix(choice: AlgorithmChoice, staging_bytes: u64, max_bytes: usize, grid: bool) {
    for nranks in 2..=8 {
        let shape = shape(nranks, choice, staging_bytes);
        let part = if grid { (nranks as usize - 2, 7) } else { (0, usize::MAX) };
        let mut cases = matrix(shape.staging(), choice, part);
        cases.retain(|c| {
            let (input, output) = c.extents(nranks);
            input.max(output) * c.dtype.size() <= max_bytes
        });
        let started = Instant::now();
        run_cases(shape, &cases);
        println!("{} on {nranks} ranks: {} cases in {:.1} s", choice.name(), cases.len(), started.elapsed().as_secs_f64());
    }
}

#[test]
fn one_shot_matrix_on_2_to_8_ranks() {
    run_matrix(AlgorithmChoice::OneShot, 1 << 20, 1 << 20, true);
}

#[test]
fn two_shot_matrix_on_2_to_8_ranks() {
    run_matrix(AlgorithmChoice::TwoShot, 1 << 20, 1 << 20, true);
}

/// Two-shot on communicators that allow direct writes: each rank pushes its reduced
/// block straight into the output of every peer that published its output, through the
/// peer's staging to the others, and copies out of its staging only where it published
/// none. All outputs published on 2 and 5 ranks; on 3 ranks all but rank 2's; on 4 ranks
/// those of ranks 0 and 3 only (so every pair of ranks meets both ways, one way, or not
/// at all). The two-shot matrix, spread over the four, every case exact on every rank.
#[test]
fn two_shot_pushes_into_the_outputs_peers_may_write() {
    let forms: [(u32, &[u32]); 4] = [(2, &[]), (3, &[2]), (4, &[1, 2]), (5, &[])];
    for (k, &(nranks, unmapped)) in forms.iter().enumerate() {
        let shape = Shape { direct: true, ..shape(nranks, AlgorithmChoice::TwoShot, 1 << 20) };
        let mut cases = matrix(shape.staging(), AlgorithmChoice::TwoShot, (k, forms.len()));
        cases.retain(|c| c.extents(nranks).0.max(c.extents(nranks).1) * c.dtype.size() <= 1 << 20);
        if let Err(why) = try_cases(shape, None, unmapped, &cases) {
            panic!("{nranks} ranks, outputs of {unmapped:?} unmapped: {why}");
        }
    }
}

/// The automatic choice at every threshold of its plan on 2 to 8 ranks. Its grid (counts
/// up to 1021) is the one-shot matrix's, case for case, planned as one-shot's (checked
/// here for every rank count), so it runs only with `FERROCCL_FULL_MATRIX=1` (CI's time:
/// docs/tuning.md, the automatic choice's grid).
#[test]
fn automatic_choice_matrix_on_2_to_8_ranks() {
    for nranks in 2..=8 {
        let staging = shape(nranks, AlgorithmChoice::Auto, 1 << 20).staging();
        let one_shot = matrix(staging, AlgorithmChoice::OneShot, (0, 1));
        let grid: Vec<CollCase> = matrix(staging, AlgorithmChoice::Auto, (0, 1)).into_iter().filter(|c| c.count <= 1021).collect();
        assert!(!grid.is_empty());
        for case in &grid {
            assert!(one_shot.contains(case), "{nranks} ranks: {} is not in the one-shot matrix", case.describe());
            assert_eq!(plan_of(case, staging, AlgorithmChoice::Auto), plan_of(case, staging, AlgorithmChoice::OneShot), "{nranks} ranks: {}", case.describe());
        }
    }
    run_matrix(AlgorithmChoice::Auto, 1 << 20, 2 << 20, ferroccl_testkit::coll::full_matrix());
}

/// A burst of collectives on every rank, with no host synchronisation between them (each
/// rank's whole burst is enqueued before the next rank's, so ranks run up to a call
/// apart): one-shot on one and two channels, two-shot, the ring, all_gather,
/// reduce_scatter, broadcast, reduce, empty calls, interleaved three times over. Every result is exact and
/// every call ran as planned: staging reused call after call, never reset, never raced.
#[test]
fn back_to_back_calls_need_no_host_synchronisation() {
    let shape = shape(4, AlgorithmChoice::Auto, 2 << 20);
    let mut g = TwinGroup::start(shape, 128, Duration::from_secs(60)).unwrap();
    let case = |function, dtype, count, in_place| CollCase { function, dtype, op: RedOpKind::Sum, count, root: 1, in_place, inputs: Inputs::OrderSensitive };
    let round = |k: usize| {
        let flip = k % 2 == 1;
        vec![
            case(CollFunction::AllReduce, DataType::F32, 1021, flip),
            case(CollFunction::AllReduce, DataType::F32, 20_000, !flip),
            case(CollFunction::AllReduce, DataType::Bf16, 7, flip),
            case(CollFunction::AllReduce, DataType::F32, 400_000, flip),
            case(CollFunction::AllGather, DataType::F16, 1021, !flip),
            case(CollFunction::AllReduce, DataType::F32, 0, flip),
            case(CollFunction::AllReduce, DataType::F32, 600_000, !flip),
            case(CollFunction::ReduceScatter, DataType::F64, 1021, flip),
            case(CollFunction::Broadcast, DataType::F32, 1021, !flip),
            case(CollFunction::Reduce, DataType::F32, 1021, flip),
            case(CollFunction::Broadcast, DataType::I32, 100_000, flip),
            case(CollFunction::AllReduce, DataType::F64, 3, !flip),
        ]
    };
    let cases: Vec<CollCase> = (0..3).flat_map(round).collect();
    let plans: Vec<_> = cases.iter().map(|c| plan_of(c, shape.staging(), shape.algorithm).unwrap()).collect();
    for algorithm in [Algorithm::Ring, Algorithm::OneShot, Algorithm::TwoShot] {
        assert!(plans.iter().any(|p| p.algorithm == algorithm), "the burst runs {}", algorithm.name());
    }
    assert!(plans.iter().any(|p| p.algorithm == Algorithm::OneShot && p.channels == 2), "and one-shot on two channels");
    let pushes = |(c, p): &(&CollCase, &Plan)| push_fits(c.function, p.algorithm, c.dtype.size() as u64, p.share, shape.nranks, shape.staging().slot_bytes);
    let shot_all_reduces: Vec<_> = cases.iter().zip(&plans).filter(|(c, p)| c.function == CollFunction::AllReduce && p.algorithm.is_shot() && c.count > 0).collect();
    assert!(shot_all_reduces.iter().any(pushes) && !shot_all_reduces.iter().all(pushes), "the burst pushes and pulls all_reduces: {shot_all_reduces:?}");
    let prepared: Vec<Prepared> = cases.iter().enumerate().map(|(i, c)| Prepared::new(&mut g, c, 1000 + i as u64).unwrap()).collect();
    let before = all_stats(&mut g).unwrap().unwrap();
    let wrong = run_back_to_back(&mut g, &prepared, TIMEOUT).unwrap();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let after = all_stats(&mut g).unwrap().unwrap();
    for algorithm in [Algorithm::OneShot, Algorithm::TwoShot] {
        let ran: u64 = after.iter().zip(&before).map(|(a, b)| a.algorithm_items[algorithm as usize] - b.algorithm_items[algorithm as usize]).sum();
        let planned: u64 = plans.iter().filter(|p| p.algorithm == algorithm).map(|p| u64::from(p.channels) * u64::from(shape.nranks)).sum();
        assert_eq!(ran, planned, "{} ran on every channel it planned", algorithm.name());
    }
    g.shutdown(TIMEOUT).unwrap();
}

/// Each one-shot/two-shot algorithm with its functions, as forced.
const SHOTS: [(AlgorithmChoice, CollFunction); 6] = [
    (AlgorithmChoice::OneShot, CollFunction::AllReduce),
    (AlgorithmChoice::TwoShot, CollFunction::AllReduce),
    (AlgorithmChoice::OneShot, CollFunction::AllGather),
    (AlgorithmChoice::OneShot, CollFunction::ReduceScatter),
    (AlgorithmChoice::OneShot, CollFunction::Broadcast),
    (AlgorithmChoice::OneShot, CollFunction::Reduce),
];

/// A one-shot/two-shot call of the tests of waits: on `nranks` ranks forcing `choice`,
/// `count` floats of `function` with `op`.
#[derive(Clone, Copy, Debug)]
struct WaitCase {
    nranks: u32,
    choice: AlgorithmChoice,
    function: CollFunction,
    op: RedOpKind,
    count: usize,
}

/// Every one-shot/two-shot algorithm and function in both forms (`algo::shot`'s push form
/// and the pull form), each checked to take the form it is listed for on [`enqueue_on`]'s
/// communicator: each of [`SHOTS`] on 3 ranks with 1021 floats (one-shot all-reduce,
/// all-gather and reduce-scatter and two-shot push, broadcast and reduce pull); those
/// that push also on 2 ranks, and pulling on 3: 16 000 floats (more than the staging
/// holds pushed), or an operator with a pre-op (reduce-scatter pushes whenever it fits).
fn shot_waits() -> Vec<WaitCase> {
    let sum = |nranks, (choice, function): (AlgorithmChoice, CollFunction), count| WaitCase { nranks, choice, function, op: RedOpKind::Sum, count };
    let mut cases: Vec<WaitCase> = SHOTS.into_iter().map(|shot| sum(3, shot, 1021)).collect();
    let pushed = SHOTS.into_iter().filter(|&(_, f)| !matches!(f, CollFunction::Broadcast | CollFunction::Reduce));
    cases.extend(pushed.clone().map(|shot| sum(2, shot, 1021)));
    cases.extend(pushed.map(|shot| match shot.1 {
        CollFunction::ReduceScatter => WaitCase { op: RedOpKind::PreMulSum, ..sum(3, shot, 1021) },
        _ => sum(3, shot, 16_000),
    }));
    for c in &cases {
        let staging = wait_shape(c.nranks, c.choice).staging();
        let plan = plan_of(&CollCase { function: c.function, dtype: DataType::F32, op: c.op, count: c.count, root: 0, in_place: false, inputs: Inputs::Exact }, staging, c.choice).unwrap();
        let room = push_fits(c.function, plan.algorithm, 4, plan.share, c.nranks, staging.slot_bytes);
        let pushes = room && c.op != RedOpKind::PreMulSum;
        assert_eq!(pushes, c.count == 1021 && c.op == RedOpKind::Sum && !matches!(c.function, CollFunction::Broadcast | CollFunction::Reduce), "{c:?} ({plan:?})");
    }
    assert_eq!(cases.len(), 6 + 4 + 4);
    cases
}

/// The communicator of the tests of waits: `nranks` ranks forcing `choice`, 64 KiB of
/// staging.
fn wait_shape(nranks: u32, choice: AlgorithmChoice) -> Shape {
    shape(nranks, choice, 64 << 10)
}

/// Starts `c`'s communicator with spin budget `budget` and enqueues `c`'s call on
/// `ranks` only; returns their tickets.
fn enqueue_on(c: WaitCase, budget: Duration, ranks: &[u32]) -> (TwinGroup, Vec<host_shim::queue::Ticket>) {
    let mut g = TwinGroup::start(wait_shape(c.nranks, c.choice), 128, budget).unwrap();
    let case = CollCase { function: c.function, dtype: DataType::F32, op: c.op, count: c.count, root: 0, in_place: false, inputs: Inputs::Exact };
    let (input, output) = case.extents(c.nranks);
    let mut tickets = Vec::new();
    for &rank in ranks {
        let (src, dst) = (g.alloc(rank, input * 4).unwrap(), g.alloc(rank, output * 4).unwrap());
        let item = WorkItem::collective(c.function, DataType::F32, c.op, scalar_arg(DataType::F32, 1.0), src.addr, dst.addr, c.count as u64, 0);
        tickets.push(g.enqueue(rank, item).unwrap());
    }
    (g, tickets)
}

/// A rank that never joins the collective: its peers end with a timeout at the
/// one-shot/two-shot flag within the spin budget, not a hang, in every one-shot/two-shot
/// algorithm, pushed and pulled;
/// the absent rank's loop is unaffected.
#[test]
fn a_rank_that_never_arrives_is_a_timeout_in_every_shot_algorithm() {
    for c in shot_waits() {
        let present: Vec<u32> = (0..c.nranks - 1).collect();
        let (mut g, tickets) = enqueue_on(c, Duration::from_secs(1), &present);
        for (rank, ticket) in tickets.into_iter().enumerate() {
            let err = g.wait(rank as u32, ticket, TIMEOUT);
            assert!(matches!(err, Err(Error::DeviceTimeout { site: Some(WaitSite::ShotFlag), seq: 1 })), "{c:?}: {err:?}");
        }
        assert!(g.health(c.nranks - 1).is_ok(), "{c:?}");
    }
}

/// An abort ends a one-shot/two-shot wait at once (well within its spin budget), in every
/// one-shot/two-shot algorithm, pushed and pulled.
#[test]
fn an_abort_ends_a_shot_wait() {
    for c in shot_waits() {
        let (mut g, tickets) = enqueue_on(c, Duration::from_secs(60), &[0]);
        std::thread::sleep(Duration::from_millis(50));
        let aborted = Instant::now();
        g.abort_all();
        let err = g.wait(0, tickets[0], TIMEOUT);
        assert!(matches!(err, Err(Error::Aborted)), "{c:?}: {err:?}");
        assert!(aborted.elapsed() < Duration::from_secs(30), "{c:?}: {:?}", aborted.elapsed());
    }
}

/// A call the forced algorithm cannot run (larger than the staging, or a function
/// without that algorithm) is refused on the host, before anything is enqueued: the
/// next call runs as the first item. A communicator that cannot stage is refused when
/// it would force a one-shot/two-shot algorithm.
#[test]
fn calls_a_forced_algorithm_cannot_run_are_refused_before_enqueue() {
    let mut g = TwinGroup::start(shape(3, AlgorithmChoice::OneShot, 64 << 10), 128, Duration::from_secs(60)).unwrap();
    let buf = g.alloc(0, 1 << 20).unwrap();
    let item = |function, count| WorkItem::collective(function, DataType::F32, RedOpKind::Sum, 0, buf.addr, buf.addr, count, 0);
    // 2 channels × 32 KiB: 16384 floats fit, one more does not.
    let err = g.enqueue(0, item(CollFunction::AllReduce, 16_385));
    assert!(
        matches!(err, Err(Error::AlgorithmUnfit { algorithm: AlgorithmChoice::OneShot, function: CollFunction::AllReduce, why: Unfit::TooLarge { bytes: 65_540, capacity: 65_536 } })),
        "{err:?}"
    );
    assert!(err.unwrap_err().to_string().contains("65540 bytes"), "the message says why");
    let err = g.enqueue(0, item(CollFunction::ReduceScatter, 5462));
    assert!(matches!(err, Err(Error::AlgorithmUnfit { why: Unfit::TooLarge { .. }, .. })), "3 blocks of 5462 floats: {err:?}");
    let fits = CollCase { function: CollFunction::AllReduce, dtype: DataType::F32, op: RedOpKind::Sum, count: 16_384, root: 0, in_place: true, inputs: Inputs::OrderSensitive };
    assert_eq!(run_case(&mut g, &fits, 1, TIMEOUT).unwrap(), None, "nothing was enqueued before");
    g.shutdown(TIMEOUT).unwrap();

    let mut g = TwinGroup::start(shape(3, AlgorithmChoice::TwoShot, 64 << 10), 128, Duration::from_secs(60)).unwrap();
    let buf = g.alloc(0, 4096).unwrap();
    for function in [CollFunction::AllGather, CollFunction::ReduceScatter, CollFunction::Broadcast, CollFunction::Reduce] {
        let item = WorkItem::collective(function, DataType::F32, RedOpKind::Sum, 0, buf.addr, buf.addr, 8, 0);
        let err = g.enqueue(0, item);
        assert!(matches!(err, Err(Error::AlgorithmUnfit { why: Unfit::NotForFunction, .. })), "{err:?}");
    }
    g.shutdown(TIMEOUT).unwrap();

    for cannot_stage in [shape(9, AlgorithmChoice::OneShot, 1 << 20), shape(3, AlgorithmChoice::TwoShot, 0)] {
        assert!(matches!(TwinGroup::start(cannot_stage, 128, Duration::from_secs(1)), Err(Error::InvalidArgument(_))), "{cannot_stage:?}");
    }
}

/// The automatic choice's last threshold, two-shot to the ring, on both sides (the
/// matrix above stops at 2 MiB: this one is 32 MiB on 3 ranks, with staging to match).
#[test]
fn automatic_choice_gives_way_to_the_ring_past_two_shot() {
    let shape = Shape { ring_step_bytes: 1 << 20, ..shape(3, AlgorithmChoice::Auto, 33 << 20) };
    let cases: Vec<CollCase> = matrix(shape.staging(), AlgorithmChoice::Auto, (0, usize::MAX))
        .into_iter()
        .filter(|c| c.function == CollFunction::AllReduce && (c.count as u64 * 4) >> 20 == 32)
        .collect();
    let algorithms: Vec<Algorithm> = cases.iter().map(|c| plan_of(c, shape.staging(), shape.algorithm).unwrap().algorithm).collect();
    assert_eq!(algorithms, [Algorithm::TwoShot, Algorithm::Ring], "{cases:?}");
    run_cases(shape, &cases);
}

/// Runs `c`'s function, algorithm and operator on its ranks in `memory`'s weak-memory
/// world, in the form [`shot_waits`] lists it for: random values, at 1021 floats also 7
/// halves and 4099 bytes, in place and not; at 16 000 floats that count alone.
fn shot_in_weak_memory(memory: &WeakMemory, c: WaitCase) -> Result<(), String> {
    let case = |dtype, count, in_place| CollCase { function: c.function, dtype, op: c.op, count, root: 0, in_place, inputs: Inputs::OrderSensitive };
    let cases = match c.count {
        1021 => vec![case(DataType::F32, 1021, false), case(DataType::F16, 7, true), case(DataType::U8, 4099, false)],
        count => vec![case(DataType::F32, count, false)],
    };
    try_cases(wait_shape(c.nranks, c.choice), Some(memory.clone()), &[], &cases)
}

/// Every one-shot/two-shot algorithm and function of [`shot_waits`], pushed and pulled, in
/// a weak-memory world (`arch/weak/`): stores late and out of order, loads stale where PTX
/// allows it; every seed must pass.
#[test]
fn shot_collectives_pass_in_weak_memory() {
    let forms = shot_waits();
    WeakMemory::every_seed_passes(0..2, |memory| forms.iter().try_for_each(|&c| shot_in_weak_memory(memory, c)));
}

/// Two-shot pushing into the peers' outputs in a weak-memory world: 3 ranks, 1021
/// floats, 7 halves and 4099 bytes, in place and not, every output published and then
/// all but rank 1's; every seed must pass.
#[test]
fn direct_two_shot_passes_in_weak_memory() {
    let case = |dtype, count, in_place| CollCase { function: CollFunction::AllReduce, dtype, op: RedOpKind::Sum, count, root: 0, in_place, inputs: Inputs::OrderSensitive };
    let cases = [case(DataType::F32, 1021, false), case(DataType::F16, 7, true), case(DataType::U8, 4099, false), case(DataType::F32, 1021, true)];
    let shape = Shape { direct: true, ..wait_shape(3, AlgorithmChoice::TwoShot) };
    WeakMemory::every_seed_passes(0..2, |memory| [&[][..], &[1]].iter().try_for_each(|unmapped| try_cases(shape, Some(memory.clone()), unmapped, &cases)));
}

/// Negative control: a rank that raises its flag without the fence before it may let a
/// peer read its staging before the data arrived (the pull form: an operator with a
/// pre-op).
#[test]
fn shot_flags_without_their_fence_fail() {
    let run = |memory: &WeakMemory| shot_in_weak_memory(memory, WaitCase { nranks: 3, choice: AlgorithmChoice::OneShot, function: CollFunction::AllReduce, op: RedOpKind::PreMulSum, count: 1021 });
    let (runs, why) = WeakMemory::first_failure(0..8, &[Site::ShotSignalFence], run);
    eprintln!("one-shot/two-shot flags without their fence failed after {runs} run(s): {why}");
}

/// Negative control: a rank that pushes its share into its peers' memory and raises its
/// flag without the fence before it may let a peer read its own staging before the
/// pushed data arrived.
#[test]
fn pushed_flags_without_their_fence_fail() {
    let run = |memory: &WeakMemory| shot_in_weak_memory(memory, WaitCase { nranks: 3, choice: AlgorithmChoice::OneShot, function: CollFunction::AllReduce, op: RedOpKind::Sum, count: 1021 });
    let (runs, why) = WeakMemory::first_failure(0..8, &[Site::ShotSignalFence], run);
    eprintln!("pushed flags without their fence failed after {runs} run(s): {why}");
}

/// Negative control: a rank that polls its peers' flags with relaxed loads may read their
/// staging as it was.
#[test]
fn shot_flags_polled_without_acquire_fail() {
    let run = |memory: &WeakMemory| shot_in_weak_memory(memory, WaitCase { nranks: 3, choice: AlgorithmChoice::TwoShot, function: CollFunction::AllReduce, op: RedOpKind::Sum, count: 1021 });
    let (runs, why) = WeakMemory::first_failure(0..8, &[Site::ShotFlagPoll], run);
    eprintln!("one-shot/two-shot flags polled without acquire failed after {runs} run(s): {why}");
}

/// Random normal `f32`s for rank `rank` of call `call`.
fn heap_values(rank: usize, call: usize, n: usize) -> Vec<f32> {
    let mut rng = ferroccl_testkit::reference::Rng::new(0x4ea9 + 131 * call as u64 + rank as u64);
    let bytes = ferroccl_testkit::reference::normal_elements(DataType::F32, n, &mut rng);
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// A communicator of `nranks` ranks asking for `choice` on a twin symmetric heap of as
/// many PEs (rank `r` is PE `r`).
fn on_heap(nranks: u32, choice: AlgorithmChoice, budget: Duration) -> (ferroccl_testkit::shmem::TwinHeap, TwinGroup) {
    let heap = ferroccl_testkit::shmem::TwinHeap::new(nranks as usize, 8 << 20, budget, None).unwrap();
    let handles: Vec<u64> = (0..nranks as usize).map(|pe| heap.handle(pe)).collect();
    let g = TwinGroup::start_on_heap(shape(nranks, choice, 2 << 20), 128, budget, &handles).unwrap();
    (heap, g)
}

/// Inputs in the symmetric heap (zero copy): on a communicator on a heap,
/// out-of-place f32 all-reduces of heap allocations (one-shot and two-shot forced, and
/// the automatic choice; 2, 3 and 5 ranks; counts from 1 to past the one-shot threshold:
/// two-shot reads the inputs in place, one-shot stages them)
/// run back to back with no host synchronisation, each rank's inputs random; every
/// result is the rank-order sum bit for bit on every rank, and each ran the algorithm
/// planned. That the heap's inputs are read in place, not staged, is shown by
/// `ranks_whose_heap_inputs_disagree_stop_before_reading`.
#[test]
fn all_reduce_reads_heap_inputs_in_place() {
    const COUNTS: [usize; 6] = [1, 7, 1021, 20_000, 100_003, 300_007];
    for nranks in [2u32, 3, 5] {
        for choice in [AlgorithmChoice::OneShot, AlgorithmChoice::TwoShot, AlgorithmChoice::Auto] {
            let (mut heap, mut g) = on_heap(nranks, choice, Duration::from_secs(60));
            let n = nranks as usize;
            let mut calls = Vec::new();
            for (call, &count) in COUNTS.iter().enumerate() {
                let src = heap.malloc(&vec![4 * count as u64; n]).unwrap();
                let mut dsts = Vec::new();
                for (rank, &at) in src.iter().enumerate() {
                    heap.write(rank, at, &heap_values(rank, call, count));
                    dsts.push(g.alloc(rank as u32, 4 * count).unwrap());
                }
                calls.push((count, src, dsts));
            }
            let mut last = vec![None; n];
            for (count, src, dsts) in &calls {
                for rank in 0..n {
                    let item = WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, src[rank], dsts[rank].addr, *count as u64, 0);
                    last[rank] = Some(g.enqueue(rank as u32, item).unwrap());
                }
            }
            for (rank, ticket) in last.into_iter().enumerate() {
                g.wait(rank as u32, ticket.unwrap(), TIMEOUT).unwrap();
            }
            for (call, (count, _, dsts)) in calls.iter().enumerate() {
                let inputs: Vec<Vec<f32>> = (0..n).map(|r| heap_values(r, call, *count)).collect();
                let want: Vec<u32> = (0..*count).map(|i| (1..n).fold(inputs[0][i], |a, r| a + inputs[r][i]).to_bits()).collect();
                for (rank, dst) in dsts.iter().enumerate() {
                    let got: Vec<u32> = g.read(*dst, 4 * count).unwrap().chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
                    assert_eq!(got, want, "{} ranks, {}, {count} floats: rank {rank}'s sums, bit for bit", nranks, choice.name());
                }
            }
            g.shutdown(TIMEOUT).unwrap();
            println!("{nranks} ranks, {}: {} calls on heap inputs", choice.name(), COUNTS.len());
        }
    }
}

/// Ranks whose calls disagree stop, every one, with `RanksDisagree` before reading each
/// other's data: under two-shot, one rank's input in the heap and the other's not (so a
/// rank with a heap input takes another path than one without) and the same allocation
/// at another offset; under one-shot and two-shot, other counts of the same allocation.
/// A rank's in-place call on heap memory stages as any other (its result exact).
#[test]
fn ranks_whose_heap_inputs_disagree_stop_before_reading() {
    for choice in [AlgorithmChoice::OneShot, AlgorithmChoice::TwoShot] {
        let cases: &[&str] = if choice == AlgorithmChoice::TwoShot { &["one outside the heap", "another offset", "another count"] } else { &["another count"] };
        for &case in cases {
            let (mut heap, mut g) = on_heap(2, choice, Duration::from_secs(60));
            const N: usize = 1 << 18;
            let src = heap.malloc(&[4 * N as u64 + 64; 2]).unwrap();
            let outside = g.alloc(1, 4 * N).unwrap();
            let (dst0, dst1) = (g.alloc(0, 4 * N).unwrap(), g.alloc(1, 4 * N).unwrap());
            let (input1, count1) = match case {
                "one outside the heap" => (outside.addr, N as u64),
                "another offset" => (src[1] + 64, N as u64),
                _ => (src[1], N as u64 - 1),
            };
            let t0 = g.enqueue(0, WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, src[0], dst0.addr, N as u64, 0)).unwrap();
            let t1 = g.enqueue(1, WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, input1, dst1.addr, count1, 0)).unwrap();
            for (rank, ticket) in [(0, t0), (1, t1)] {
                let err = g.wait(rank, ticket, TIMEOUT);
                assert!(matches!(err, Err(Error::BadWorkItem { reason: device_rt::work::BadItem::RanksDisagree, .. })), "{} {case}: rank {rank}: {err:?}", choice.name());
            }
        }
        let (mut heap, mut g) = on_heap(3, choice, Duration::from_secs(60));
        let buf = heap.malloc(&[4 * 1021; 3]).unwrap();
        for (rank, &at) in buf.iter().enumerate() {
            heap.write(rank, at, &heap_values(rank, 9, 1021));
        }
        let tickets: Vec<_> = (0..3u32).map(|r| g.enqueue(r, WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, buf[r as usize], buf[r as usize], 1021, 0)).unwrap()).collect();
        for (rank, ticket) in tickets.into_iter().enumerate() {
            g.wait(rank as u32, ticket, TIMEOUT).unwrap();
        }
        let inputs: Vec<Vec<f32>> = (0..3).map(|r| heap_values(r, 9, 1021)).collect();
        let want: Vec<f32> = (0..1021).map(|i| (1..3).fold(inputs[0][i], |a, r| a + inputs[r][i])).collect();
        for (rank, &at) in buf.iter().enumerate() {
            assert_eq!(heap.read::<f32>(rank, at, 1021).iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{} in place, rank {rank}", choice.name());
        }
        g.shutdown(TIMEOUT).unwrap();
    }
}
