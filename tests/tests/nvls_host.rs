//! NVLS (NCCL's: scatter, reduce and gather warp groups over multicast connections,
//! NvlsMinPolling) on the host twin, through the software multicast: the real device code
//! on CPU threads, forced on communicators of 2 to 8 ranks. All-reduce, reduce-scatter
//! and all-gather × every type × operator, in and out of place, counts 0, 1, odd, prime
//! and several chunks, random floats compared bit for bit with a reference that reduces
//! in rank order (every channel's statistics say NVLS ran, on every channel); back-to-back
//! calls without host synchronisation; a rank held back (the heads' NvlsMinPolling waits
//! for it); a rank that never comes and an abort, in every group; the calls and
//! communicators NVLS cannot run, refused on the host; NVLS in a weak-memory world.

use std::time::{Duration, Instant};

use device_rt::abi::WaitSite;
use device_rt::algo::{AlgorithmChoice, CollFunction, Unfit};
use device_rt::arch::{Site, WeakMemory};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::work::WorkItem;
use ferroccl_testkit::coll::check::{Prepared, run_back_to_back, run_case};
use ferroccl_testkit::coll::expect::{CollCase, Inputs};
use ferroccl_testkit::coll::group::RankGroup;
use ferroccl_testkit::coll::shot::{Expected, plan_of, run_planned};
use ferroccl_testkit::coll::twin::TwinGroup;
use host_shim::Error;
use host_shim::comm::wiring::Shape;

const TIMEOUT: Duration = Duration::from_secs(120);

/// Threads a channel: NVLS all-reduce's three groups of two warps each.
const THREADS: u32 = 192;

/// The functions NVLS runs.
const NVLS_FUNCTIONS: [CollFunction; 3] = [CollFunction::AllReduce, CollFunction::ReduceScatter, CollFunction::AllGather];

/// `nranks` ranks of `nchannels` channels forcing NVLS, FIFO steps of 4 KiB (so a few
/// thousand elements take several chunks), statistics kept.
fn shape(nranks: u32, nchannels: u32) -> Shape {
    Shape {
        nranks,
        nchannels,
        ring_step_bytes: 4096,
        p2p_step_bytes: 4096,
        direct: false,
        stats: true,
        paired: false,
        staging_bytes: 0,
        algorithm: AlgorithmChoice::Nvls,
        nvls_multicast: false,
    }
}

/// A case of random floats whose sums show the order (integers: random values).
fn case(function: CollFunction, dtype: DataType, op: RedOpKind, count: usize, in_place: bool) -> CollCase {
    CollCase { function, dtype, op, count, root: 0, in_place, inputs: Inputs::OrderSensitive }
}

/// Runs `cases` on a communicator of `shape` (in `memory`'s weak-memory world if given),
/// one at a time: every result exact on every rank, NVLS run on every channel.
fn try_cases(shape: Shape, memory: Option<WeakMemory>, budget: Duration, cases: &[CollCase]) -> Result<(), String> {
    let g = TwinGroup::start_in(shape, THREADS, budget, memory).map_err(|e| e.to_string())?;
    run_planned(g, cases, TIMEOUT, |case| {
        let plan = plan_of(case, shape.staging(), shape.algorithm).expect("NVLS runs every case of its functions");
        Some(Expected { plan, ring_channels: shape.collective_channels(), shot_from: 0 })
    })
}

/// The counts of the matrix: empty, one, odd, prime, and several chunks of every
/// channel (4 KiB steps) for every element size.
const COUNTS: [usize; 5] = [0, 1, 7, 1021, 9_001];

/// The matrix on `nranks` ranks: every function × type of `dtypes` × operator (where the
/// function reduces: sum, prod, min, max, premulsum, avg), in and out of place by turns;
/// the counts turn with the case (each combination gets `per` of [`COUNTS`]).
fn matrix(dtypes: &[DataType], per: usize) -> Vec<CollCase> {
    let mut cases = Vec::new();
    let mut k = 0usize;
    for function in NVLS_FUNCTIONS {
        for &dtype in dtypes {
            let ops: &[RedOpKind] = if function.reduces() { &RedOpKind::ALL } else { &[RedOpKind::Sum] };
            for &op in ops {
                for i in 0..per {
                    let count = COUNTS[(k + i) % COUNTS.len()];
                    cases.push(case(function, dtype, op, count, (k + i).is_multiple_of(2)));
                }
                k += 1;
            }
        }
    }
    cases
}

fn run_matrix(nranks: u32, nchannels: u32, dtypes: &[DataType], per: usize) {
    let cases = matrix(dtypes, per);
    let started = Instant::now();
    if let Err(why) = try_cases(shape(nranks, nchannels), None, Duration::from_secs(60), &cases) {
        panic!("{why}");
    }
    println!("nvls on {nranks} ranks × {nchannels} channels: {} cases in {:.1} s", cases.len(), started.elapsed().as_secs_f64());
}

#[test]
fn nvls_matrix_on_2_ranks() {
    run_matrix(2, 2, &DataType::ALL, 2);
}

#[test]
fn nvls_matrix_on_3_ranks() {
    run_matrix(3, 1, &DataType::ALL, 1);
}

#[test]
fn nvls_matrix_on_4_to_7_ranks() {
    let dtypes = [DataType::F32, DataType::F16, DataType::Bf16, DataType::U8, DataType::I64, DataType::F64];
    for nranks in 4..=7 {
        run_matrix(nranks, 1 + nranks % 2, &dtypes[..3 + nranks as usize % 4], 1);
    }
}

#[test]
fn nvls_matrix_on_8_ranks() {
    run_matrix(8, 1, &[DataType::F32, DataType::Bf16, DataType::I32], 1);
}

/// A burst of NVLS collectives on every rank with no host synchronisation between them
/// (each rank's burst enqueued before the next rank's, so ranks run calls apart): every
/// function, sizes from empty to several chunks, interleaved; every result exact, the
/// same call twice gives the same bits on every rank, and each call ran on every channel.
#[test]
fn back_to_back_calls_need_no_host_synchronisation() {
    let shape = shape(4, 2);
    let mut g = TwinGroup::start(shape, THREADS, Duration::from_secs(60)).unwrap();
    let round = |k: usize| {
        let flip = k % 2 == 1;
        vec![
            case(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 9_001, flip),
            case(CollFunction::ReduceScatter, DataType::F32, RedOpKind::SumPostDiv, 1021, !flip),
            case(CollFunction::AllGather, DataType::F16, RedOpKind::Sum, 3_001, flip),
            case(CollFunction::AllReduce, DataType::Bf16, RedOpKind::Sum, 0, flip),
            case(CollFunction::AllReduce, DataType::F64, RedOpKind::Prod, 7, !flip),
            case(CollFunction::ReduceScatter, DataType::U8, RedOpKind::Max, 20_000, flip),
            case(CollFunction::AllGather, DataType::I64, RedOpKind::Sum, 1, !flip),
        ]
    };
    let cases: Vec<CollCase> = (0..3).flat_map(round).collect();
    // The same seed for the same case of every round: the same inputs, so the same bits.
    let prepared: Vec<Prepared> = cases.iter().enumerate().map(|(i, c)| Prepared::new(&mut g, c, 500 + (i % 7) as u64).unwrap()).collect();
    let wrong = run_back_to_back(&mut g, &prepared, TIMEOUT).unwrap();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Rounds 0 and 2 run the same calls (in and out of place alike).
    for i in 0..7 {
        let (first, again) = (prepared[i].outputs(&mut g).unwrap(), prepared[i + 14].outputs(&mut g).unwrap());
        assert_eq!(first, again, "{}: the same call gives the same bits", cases[i].describe());
        if cases[i].function == CollFunction::AllReduce {
            assert!(first.iter().all(|o| *o == first[0]), "{}: every rank has the same bits", cases[i].describe());
        }
    }
    g.shutdown(TIMEOUT).unwrap();
}

/// A rank held back: the others' calls cannot complete while it has not scattered (each
/// head's NvlsMinPolling waits for the slowest rank's tail). Ranks 1 and 2 take their
/// item (found in their ring: a state that precedes its run) and have not completed it
/// when rank 0's is enqueued; once it comes every result is exact, for every function.
/// (That they cannot complete without rank 0 at all, whatever the timing, shows in
/// [`a_held_back_rank_that_never_comes_is_a_timeout_of_the_others`].)
#[test]
fn nvls_min_polling_waits_for_a_rank_held_back() {
    let shape = shape(3, 1);
    let mut g = TwinGroup::start(shape, THREADS, Duration::from_secs(60)).unwrap();
    for (i, function) in NVLS_FUNCTIONS.into_iter().enumerate() {
        let p = Prepared::new(&mut g, &case(function, DataType::F32, RedOpKind::Sum, 5_003, false), 70 + i as u64).unwrap();
        let tickets: Vec<_> = (1..3).map(|rank| g.enqueue(rank, p.item(rank)).unwrap()).collect();
        for (rank, &ticket) in (1..3).zip(&tickets) {
            let start = Instant::now();
            while g.ring_items_found(rank) < ticket.0 {
                assert!(start.elapsed() < TIMEOUT, "{}: rank {rank} never took its item", function.name());
                std::thread::yield_now();
            }
            assert!(g.completed(rank) < ticket.0, "{}: rank {rank} finished without rank 0", function.name());
        }
        let held = g.enqueue(0, p.item(0)).unwrap();
        g.wait(0, held, TIMEOUT).unwrap();
        for (rank, ticket) in (1..3).zip(tickets) {
            g.wait(rank, ticket, TIMEOUT).unwrap();
        }
        assert_eq!(p.verify(&mut g).unwrap(), None, "{}", function.name());
    }
    g.shutdown(TIMEOUT).unwrap();
}

/// The held-back rank never comes: ranks 1 and 2 end their call with a timeout at a wait
/// (their spin budget ends it), never with a completion, for every function; rank 0's loop
/// is unaffected.
#[test]
fn a_held_back_rank_that_never_comes_is_a_timeout_of_the_others() {
    for function in NVLS_FUNCTIONS {
        let (mut g, tickets) = enqueue_on(function, 5_003, Duration::from_millis(500), &[1, 2]);
        for (rank, ticket) in (1..3).zip(tickets) {
            let err = g.wait(rank, ticket, TIMEOUT);
            assert!(matches!(err, Err(Error::DeviceTimeout { site: Some(_), seq: 1 })), "{}: rank {rank}: {err:?}", function.name());
        }
        assert!(g.health(0).is_ok(), "{}", function.name());
    }
}

/// Starts 3 ranks forcing NVLS with spin budget `budget` and enqueues `function` on
/// `count` floats on `ranks` only; returns their tickets.
fn enqueue_on(function: CollFunction, count: usize, budget: Duration, ranks: &[u32]) -> (TwinGroup, Vec<host_shim::queue::Ticket>) {
    let mut g = TwinGroup::start(shape(3, 1), THREADS, budget).unwrap();
    let c = case(function, DataType::F32, RedOpKind::Sum, count, false);
    let (input, output) = c.extents(3);
    let mut tickets = Vec::new();
    for &rank in ranks {
        let (src, dst) = (g.alloc(rank, input * 4).unwrap(), g.alloc(rank, output * 4).unwrap());
        let item = WorkItem::collective(function, DataType::F32, RedOpKind::Sum, 0, src.addr, dst.addr, count as u64, 0);
        tickets.push(g.enqueue(rank, item).unwrap());
    }
    (g, tickets)
}

/// Where a rank that never comes stops its peers: (function, count, the wait that times
/// out first in group order). One chunk round: the scatter completes (its FIFO has room)
/// and the gather (all-reduce, all-gather) or reduce (reduce-scatter) waits for data
/// that never comes; many rounds: the scatter (group 0) also runs out of credits, which
/// the absent head never returns.
const ABSENT: [(CollFunction, usize, WaitSite); 6] = [
    (CollFunction::AllReduce, 7, WaitSite::RecvData),
    (CollFunction::AllReduce, 200_000, WaitSite::SendCredit),
    (CollFunction::ReduceScatter, 7, WaitSite::RecvData),
    (CollFunction::ReduceScatter, 200_000, WaitSite::SendCredit),
    (CollFunction::AllGather, 7, WaitSite::RecvData),
    (CollFunction::AllGather, 200_000, WaitSite::RecvData),
];

/// A rank that never joins: its peers end with a timeout at the right wait within the
/// spin budget, not a hang; the absent rank's loop is unaffected.
#[test]
fn a_rank_that_never_arrives_is_a_timeout_in_every_group() {
    for (function, count, site) in ABSENT {
        let (mut g, tickets) = enqueue_on(function, count, Duration::from_millis(500), &[0, 1]);
        for (rank, ticket) in tickets.into_iter().enumerate() {
            let err = g.wait(rank as u32, ticket, TIMEOUT);
            assert!(matches!(err, Err(Error::DeviceTimeout { site: Some(s), seq: 1 }) if s == site), "{} of {count}: {err:?}", function.name());
        }
        assert!(g.health(2).is_ok(), "{}", function.name());
    }
}

/// An abort ends every group's wait at once (well within its spin budget), for every
/// function, with one chunk round and with many.
#[test]
fn an_abort_ends_every_group() {
    for (function, count, _) in ABSENT {
        let (mut g, tickets) = enqueue_on(function, count, Duration::from_secs(60), &[0, 1]);
        std::thread::sleep(Duration::from_millis(50));
        let aborted = Instant::now();
        g.abort_all();
        for (rank, ticket) in tickets.into_iter().enumerate() {
            let err = g.wait(rank as u32, ticket, TIMEOUT);
            assert!(matches!(err, Err(Error::Aborted)), "{} of {count}: {err:?}", function.name());
        }
        assert!(aborted.elapsed() < Duration::from_secs(30), "{}: {:?}", function.name(), aborted.elapsed());
    }
}

/// Functions without NVLS are refused on the host before anything is enqueued (the next
/// call runs as the first item); communicators NVLS cannot run on are refused.
#[test]
fn calls_and_communicators_nvls_cannot_run_are_refused() {
    let mut g = TwinGroup::start(shape(3, 1), THREADS, Duration::from_secs(60)).unwrap();
    let buf = g.alloc(0, 4096).unwrap();
    for function in [CollFunction::Broadcast, CollFunction::Reduce] {
        let item = WorkItem::collective(function, DataType::F32, RedOpKind::Sum, 0, buf.addr, buf.addr, 8, 0);
        let err = g.enqueue(0, item);
        assert!(matches!(err, Err(Error::AlgorithmUnfit { algorithm: AlgorithmChoice::Nvls, why: Unfit::NotForFunction, .. })), "{err:?}");
        assert!(err.unwrap_err().to_string().contains("nvls is not an algorithm of"), "the message says why");
    }
    let fits = case(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 1021, true);
    assert_eq!(run_case(&mut g, &fits, 1, TIMEOUT).unwrap(), None, "nothing was enqueued before");
    g.shutdown(TIMEOUT).unwrap();
    assert!(matches!(TwinGroup::start(shape(9, 1), THREADS, Duration::from_secs(1)), Err(Error::InvalidArgument(_))), "9 ranks");
    assert!(matches!(TwinGroup::start(shape(2, 1), 128, Duration::from_secs(1)), Err(Error::InvalidArgument(_))), "128 threads");
}

/// Every NVLS function on 3 ranks in `memory`'s weak-memory world: random floats, halves
/// and bytes, over several chunks, in place and not.
fn nvls_in_weak_memory(memory: &WeakMemory) -> Result<(), String> {
    let cases: Vec<CollCase> = NVLS_FUNCTIONS
        .into_iter()
        .flat_map(|f| [case(f, DataType::F32, RedOpKind::Sum, 3_001, false), case(f, DataType::F16, RedOpKind::Sum, 7, true), case(f, DataType::U8, RedOpKind::Sum, 4099, false)])
        .collect();
    try_cases(shape(3, 1), Some(memory.clone()), Duration::from_secs(30), &cases)
}

/// NVLS in a weak-memory world (`arch/weak/`): stores late and out of order, loads stale
/// where PTX allows it; every seed must pass.
#[test]
fn nvls_passes_in_weak_memory() {
    WeakMemory::every_seed_passes(0..2, nvls_in_weak_memory);
}

/// Negative control: a scatter or head that posts its tail without the fence before it
/// lets a head (through NvlsMinPolling) or a gatherer read the slot before its data.
#[test]
fn nvls_posts_without_the_send_fence_fail() {
    let (runs, why) = WeakMemory::first_failure(0..8, &[Site::PrimsSendFence], nvls_in_weak_memory);
    eprintln!("NVLS posts without the send fence failed after {runs} run(s): {why}");
}
