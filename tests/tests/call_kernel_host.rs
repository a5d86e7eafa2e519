//! Call channels on the host twin: a communicator whose loop keeps one resident channel
//! and brings its other channels up in each stream-ordered call's call kernel
//! (`device_rt::work::serve_call`). The real device code on CPU threads: the matrix
//! (ring, one-shot, two-shot, every function) through the stream twin on 2 to 4 ranks,
//! compared bit for bit with the reference, with the channels that ran each case checked
//! from their statistics (call channels exactly where the plan spreads); the direct path of
//! the same communicator on the resident channel alone; back-to-back calls with no host
//! synchronisation; in a weak-memory world; a rank whose call channels never come (a
//! timeout on every waiting rank, not a hang) and an abort while call channels wait; and a
//! loop with no call channels at all, whose stream-ordered calls only submit to the
//! mailbox.

use std::time::{Duration, Instant};

use device_rt::arch::WeakMemory;
use device_rt::algo::{Algorithm, AlgorithmChoice, CollFunction, Staging, local_channels};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::work::WorkItem;
use ferroccl_testkit::coll::check::{Prepared, run_case};
use ferroccl_testkit::coll::expect::{CollCase, Inputs};
use ferroccl_testkit::coll::group::{RankGroup, SubmitPath, Submitted, all_stats};
use ferroccl_testkit::coll::shot::{Expected, ll_plan_of, matrix, plan_of, run_planned};
use ferroccl_testkit::coll::twin::TwinGroup;
use host_shim::Error;
use host_shim::comm::wiring::Shape;

const TIMEOUT: Duration = Duration::from_secs(120);

/// The device code's spin budget (wall-clock time) in the communicators these tests run
/// their cases on: the same as the host's waits. On CI's 2 cores two of these tests run
/// side by side, each with thousands of CPU threads, and a 60 s budget has run out there
/// (two tests at once, each passing when run again): a thread starved that long is not a
/// hang. A wait that never ends still fails, after this budget.
const SPIN_BUDGET: Duration = TIMEOUT;

/// Channels of every rank: one resident, three call channels.
const CHANNELS: u32 = 4;
const RESIDENT: u32 = 1;

/// Threads of every call-channel CTA.
const THREADS: u32 = 128;

/// `nranks` ranks of [`CHANNELS`] unpaired channels, 1 MiB of staging, `algorithm`,
/// statistics kept.
fn shape(nranks: u32, algorithm: AlgorithmChoice) -> Shape {
    Shape {
        nranks,
        nchannels: CHANNELS,
        ring_step_bytes: 64 << 10,
        p2p_step_bytes: 4096,
        direct: false,
        stats: true,
        paired: false,
        staging_bytes: 1 << 20,
        algorithm,
        nvls_multicast: false,
    }
}

/// Runs `cases` one at a time on a communicator of `shape` whose loops keep `resident`
/// of its [`CHANNELS`] (the others call channels), through `path` (in `memory`'s
/// weak-memory world if given): every result exact on every rank, and every case ran on the
/// channels its plan names: over all four channels on the stream path, over the resident
/// ones alone on the direct path.
fn try_cases(shape: Shape, resident: u32, path: SubmitPath, memory: Option<WeakMemory>, cases: &[CollCase]) -> Result<(), String> {
    let mut g = TwinGroup::start_with_call_channels(shape, resident, THREADS, SPIN_BUDGET, memory).map_err(|e| e.to_string())?;
    g.set_path(path).map_err(|e| e.to_string())?;
    let call_channels = CHANNELS - resident;
    let path_channels = if path == SubmitPath::Stream { CHANNELS } else { resident };
    let staging = Staging { channels: path_channels, ..shape.staging() };
    let ll = path == SubmitPath::Stream && shape.algorithm == AlgorithmChoice::Auto && call_channels > 0;
    run_planned(g, cases, TIMEOUT, |case| {
        let plan = plan_of(case, staging, shape.algorithm)?;
        let plan = ll.then(|| ll_plan_of(case, shape.nranks, call_channels, THREADS)).flatten().unwrap_or(plan);
        // A one-shot/two-shot plan that fits the call channels runs on the call kernel
        // alone, from the first call channel.
        let call_kernel_only = path == SubmitPath::Stream && plan.algorithm != Algorithm::Ring && plan.channels <= call_channels;
        Some(Expected { plan, ring_channels: path_channels, shot_from: if call_kernel_only { resident } else { 0 } })
    })
}

/// The one-shot/two-shot matrix of `choice` (spread over the rank counts by `part`), its
/// cases up to 512 KiB, plus a ring case large enough to fill every channel.
fn cases(shape: Shape, choice: AlgorithmChoice, part: (usize, usize)) -> Vec<CollCase> {
    let mut cases = matrix(shape.staging(), choice, part);
    cases.retain(|c| {
        let (input, output) = c.extents(shape.nranks);
        input.max(output) * c.dtype.size() <= 512 << 10
    });
    if choice != AlgorithmChoice::OneShot && choice != AlgorithmChoice::TwoShot {
        let big = CollCase { function: CollFunction::AllReduce, dtype: DataType::F32, op: RedOpKind::Sum, count: 300_000, root: 0, in_place: false, inputs: Inputs::OrderSensitive };
        cases.push(big.clone());
        cases.push(CollCase { function: CollFunction::AllGather, count: 70_001, inputs: Inputs::Exact, ..big });
    }
    cases
}

/// A one-rank communicator with call channels: every collective is a local copy on one
/// channel per 64 KiB (`device_rt::algo::local_channels`); one that fits the call channels
/// runs on the call kernel alone, on that many call channels from the first (each counts
/// one part), a larger one through the mailbox. Every fourth case of the one-rank matrix
/// and every large one (70 000 elements: up to 547 KiB, more than the three call channels'
/// 192 KiB for the wider types), every result exact.
#[test]
fn one_rank_collectives_run_on_the_channels_their_bytes_need() {
    let shape = shape(1, AlgorithmChoice::Auto);
    let mut g = TwinGroup::start_with_call_channels(shape, RESIDENT, THREADS, SPIN_BUDGET, None).unwrap();
    g.set_path(SubmitPath::Stream).unwrap();
    let call_channels = CHANNELS - RESIDENT;
    let cases = ferroccl_testkit::coll::check::matrix(1, 70_000);
    let (mut call_kernel_only, mut mailbox) = (0, 0);
    for (k, case) in cases.iter().enumerate().filter(|(k, c)| k % 4 == 0 || c.count == 70_000) {
        let channels = local_channels(case.dtype.size() as u64, case.count as u64, CHANNELS);
        let before = all_stats(&mut g).unwrap().unwrap();
        assert_eq!(run_case(&mut g, case, k as u64, TIMEOUT).unwrap(), None, "{}", case.describe());
        let after = all_stats(&mut g).unwrap().unwrap();
        let on_call_channels = channels <= call_channels;
        for (channel, (a, b)) in after.iter().zip(&before).enumerate() {
            let want = u64::from(on_call_channels && (RESIDENT..RESIDENT + channels).contains(&(channel as u32)));
            assert_eq!(a.call_kernel_parts - b.call_kernel_parts, want, "channel {channel}: {} on {channels} channel(s)", case.describe());
        }
        if on_call_channels { call_kernel_only += 1 } else { mailbox += 1 }
    }
    assert!(call_kernel_only > 50 && mailbox > 0, "{call_kernel_only} cases on the call kernel alone, {mailbox} through the mailbox");
    g.shutdown(TIMEOUT).unwrap();
}

/// Every algorithm choice on 2 ranks; the automatic choice and two-shot on 3; the
/// automatic choice on 4 (CI's time: each rank count adds a few hundred call kernels of
/// CPU threads).
#[test]
fn stream_path_with_call_channels_is_exact_and_spreads_as_planned_on_2_to_4_ranks() {
    use AlgorithmChoice::{Auto, OneShot, Ring, TwoShot};
    for (nranks, choices) in [(2, &[Auto, Ring, OneShot, TwoShot][..]), (3, &[Auto, TwoShot][..]), (4, &[Auto][..])] {
        for (k, &choice) in choices.iter().enumerate() {
            let shape = shape(nranks, choice);
            let cases = cases(shape, choice, ((nranks as usize - 2) * 4 + k, 12));
            let started = Instant::now();
            if let Err(why) = try_cases(shape, RESIDENT, SubmitPath::Stream, None, &cases) {
                panic!("{why}");
            }
            println!("{} on {nranks} ranks, stream path: {} cases in {:.1} s", choice.name(), cases.len(), started.elapsed().as_secs_f64());
        }
    }
}

/// A loop without call channels: each stream-ordered call only submits to the mailbox (on
/// GPUs `ferroccl_call_kernel_alone`: one CTA whose thread 0 submits), and the loop's own
/// channels run every case; 2 and 3 ranks, the automatic choice.
#[test]
fn stream_path_without_call_channels_submits_alone_and_is_exact() {
    for nranks in [2, 3] {
        let shape = shape(nranks, AlgorithmChoice::Auto);
        let cases = cases(shape, AlgorithmChoice::Auto, (nranks as usize + 4, 12));
        if let Err(why) = try_cases(shape, CHANNELS, SubmitPath::Stream, None, &cases) {
            panic!("{nranks} ranks: {why}");
        }
    }
}

#[test]
fn the_direct_path_of_a_communicator_with_call_channels_stays_on_its_resident_channel() {
    let shape = shape(3, AlgorithmChoice::Auto);
    let cases = cases(shape, AlgorithmChoice::Auto, (0, 6));
    if let Err(why) = try_cases(shape, RESIDENT, SubmitPath::Direct, None, &cases) {
        panic!("{why}");
    }
}

#[test]
fn call_channels_in_a_weak_memory_world() {
    for seed in 1..=3 {
        let shape = shape(2, AlgorithmChoice::Auto);
        let cases = cases(shape, AlgorithmChoice::Auto, (seed as usize, 24));
        if let Err(why) = try_cases(shape, RESIDENT, SubmitPath::Stream, Some(WeakMemory::new(seed)), &cases) {
            panic!("seed {seed}: {why}");
        }
    }
}

/// A burst of stream-ordered calls on every rank with no host synchronisation between
/// them (each rank's whole burst is submitted before the next rank's): ring calls over
/// every call channel and one-shot/two-shot calls on the resident channel or a few call
/// channels, interleaved; every result exact.
#[test]
fn back_to_back_stream_calls_need_no_host_synchronisation() {
    let shape = shape(3, AlgorithmChoice::Auto);
    burst_without_host_synchronisation(TwinGroup::start_with_call_channels(shape, RESIDENT, THREADS, SPIN_BUDGET, None).unwrap(), shape);
}

/// The same burst with call kernels that overlap the one before them, as on a GPU that
/// holds two call kernels per rank: each call kernel starts while the one before it runs
/// and plans its item, then waits for it (`after_previous_grid`); every result exact.
#[test]
fn overlapping_call_kernels_need_no_host_synchronisation() {
    let shape = shape(3, AlgorithmChoice::Auto);
    burst_without_host_synchronisation(TwinGroup::start_with_overlapping_call_kernels(shape, RESIDENT, THREADS, SPIN_BUDGET, None).unwrap(), shape);
}

/// The burst of [`back_to_back_stream_calls_need_no_host_synchronisation`] on `g`, a
/// group of `shape` with call channels.
fn burst_without_host_synchronisation(mut g: TwinGroup, shape: Shape) {
    let case = |function, count, in_place| CollCase { function, dtype: DataType::F32, op: RedOpKind::Sum, count, root: 1, in_place, inputs: Inputs::OrderSensitive };
    let mut burst = Vec::new();
    for k in 0..3 {
        let flip = k % 2 == 1;
        burst.extend([
            case(CollFunction::AllReduce, 1021, flip),
            case(CollFunction::AllReduce, 300_000, !flip),
            case(CollFunction::AllReduce, 40_000, flip),
            case(CollFunction::ReduceScatter, 30_003, !flip),
            case(CollFunction::AllGather, 70_001, flip),
            case(CollFunction::Broadcast, 5, !flip),
        ]);
    }
    let prepared: Vec<Prepared> = burst.iter().enumerate().map(|(i, c)| Prepared::new(&mut g, c, i as u64).unwrap()).collect();
    let mut last = Vec::new();
    for rank in 0..shape.nranks {
        let mut submitted = None;
        for p in &prepared {
            submitted = Some(g.submit(rank, p.item(rank)).unwrap());
        }
        last.push(submitted.unwrap());
    }
    for (rank, submitted) in last.into_iter().enumerate() {
        g.wait_submitted(rank as u32, submitted, TIMEOUT).unwrap();
    }
    for (p, c) in prepared.iter().zip(&burst) {
        assert_eq!(p.verify(&mut g).unwrap(), None, "{}", c.describe());
    }
    g.shutdown(TIMEOUT).unwrap();
}

/// Small stream-ordered all-reduces, all-gathers and reduce-scatters take the LL path
/// (`device_rt::algo::ll`) when the device chooses: counted once per rank on each call
/// channel of its runs as a one-shot moved as packets, nowhere else; exact, in and out
/// of place, for every element size, with and without a pre- or post-op, on one call
/// channel CTA, on all three (600 floats: 300 lines of 128 threads), with two lines a
/// thread (1000 floats) and with sixteen (12,000 floats; a CTA's slot holds twenty), with
/// lines past a thread's first (`send_rest`, `receive_rest`: batches of four, the last one
/// short) through a pre-op, a post-op and a last line cut short (3001 halves: two lines a
/// thread, 12,003 bytes: four, 2001 doubles: six), on 2, 3 and 5 ranks; a larger all-reduce
/// (more lines than the call channels' slots hold) moves no packets.
/// The communicator allows direct writes, as the default one does, so every call is
/// marked `ITEM_OUTPUT_PEER_MAPPED` as the default communicator's calls are.
#[test]
fn small_stream_collectives_take_the_ll_path() {
    let ll = [
        (DataType::F32, RedOpKind::Sum, 1),
        (DataType::F16, RedOpKind::PreMulSum, 7),
        (DataType::U8, RedOpKind::Max, 13),
        (DataType::F64, RedOpKind::SumPostDiv, 3),
        (DataType::Bf16, RedOpKind::Prod, 512),
        (DataType::I32, RedOpKind::Min, 256),
        (DataType::F32, RedOpKind::Sum, 600),
        (DataType::F32, RedOpKind::Sum, 1000),
        (DataType::F32, RedOpKind::Sum, 12_000),
        (DataType::F16, RedOpKind::PreMulSum, 3001),
        (DataType::U8, RedOpKind::Max, 12_003),
        (DataType::F64, RedOpKind::SumPostDiv, 2001),
    ];
    for nranks in [2, 3, 5] {
        let shape = Shape { direct: true, ..shape(nranks, AlgorithmChoice::Auto) };
        let mut g = TwinGroup::start_with_call_channels(shape, RESIDENT, THREADS, SPIN_BUDGET, None).unwrap();
        g.set_path(SubmitPath::Stream).unwrap();
        let functions = [CollFunction::AllReduce, CollFunction::AllGather, CollFunction::ReduceScatter];
        let cases = functions.into_iter().flat_map(|function| {
            ll.iter().enumerate().map(move |(k, &(dtype, op, count))| {
                let op = if function == CollFunction::AllGather { RedOpKind::Sum } else { op };
                CollCase { function, dtype, op, count, root: 0, in_place: k % 2 == 1, inputs: Inputs::OrderSensitive }
            })
        });
        let larger = CollCase { function: CollFunction::AllReduce, dtype: DataType::F32, op: RedOpKind::Sum, count: 20_000, root: 0, in_place: false, inputs: Inputs::OrderSensitive };
        for case in cases.chain([larger]) {
            let ll_channels = ll_plan_of(&case, nranks, CHANNELS - RESIDENT, THREADS).map_or(0, |p| p.channels);
            assert_eq!(ll_channels == 0, case.count == 20_000, "{nranks} ranks: {} takes the LL path: {}", case.describe(), ll_channels > 0);
            let before = all_stats(&mut g).unwrap().unwrap();
            assert_eq!(run_case(&mut g, &case, 3, TIMEOUT).unwrap(), None, "{nranks} ranks: {}", case.describe());
            let after = all_stats(&mut g).unwrap().unwrap();
            for (i, (a, b)) in after.iter().zip(&before).enumerate() {
                let want = u64::from((RESIDENT..RESIDENT + ll_channels).contains(&(i as u32 % CHANNELS)));
                assert_eq!(a.packet_items - b.packet_items, want, "{nranks} ranks, rank {} channel {}: {}", i as u32 / CHANNELS, i as u32 % CHANNELS, case.describe());
            }
        }
        g.shutdown(TIMEOUT).unwrap();
    }
}

/// Ranks whose small all-reduces disagree (another count on one rank) stop the LL
/// path on every rank with `RanksDisagree` before any output is written.
#[test]
fn ll_calls_whose_ranks_disagree_stop_before_writing() {
    let mut g = TwinGroup::start_with_call_channels(shape(2, AlgorithmChoice::Auto), RESIDENT, THREADS, SPIN_BUDGET, None).unwrap();
    let mut outputs = Vec::new();
    for (rank, count) in [(0u32, 100u64), (1, 101)] {
        let (src, dst) = (g.alloc(rank, 4 * 101).unwrap(), g.alloc(rank, 4 * 101).unwrap());
        g.submit(rank, WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, src.addr, dst.addr, count, 0)).unwrap();
        outputs.push(dst);
    }
    for rank in 0..2 {
        let err = g.wait_submitted(rank, Submitted::Stream, TIMEOUT);
        assert!(matches!(err, Err(Error::BadWorkItem { reason: device_rt::work::BadItem::RanksDisagree, .. })), "rank {rank}: {err:?}");
    }
    for (rank, dst) in outputs.iter().enumerate() {
        assert!(g.read(*dst, 4 * 101).unwrap().iter().all(|&b| b == 0), "rank {rank}: no output written");
    }
}

/// An all-reduce of `count` floats by `algorithm` submitted on `ranks` of 2 only, with spin
/// budget `budget`: the ring over every call channel (through the mailbox), or a
/// one-shot that runs on the call kernel alone.
fn submit_on(ranks: &[u32], algorithm: AlgorithmChoice, count: u64, budget: Duration) -> TwinGroup {
    let mut g = TwinGroup::start_with_call_channels(shape(2, algorithm), RESIDENT, THREADS, budget, None).unwrap();
    for &rank in ranks {
        let (src, dst) = (g.alloc(rank, 4 * count as usize).unwrap(), g.alloc(rank, 4 * count as usize).unwrap());
        let item = WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, src.addr, dst.addr, count, 0);
        g.submit(rank, item).unwrap();
    }
    g
}

/// The three kinds of stream-ordered call a peer can leave waiting: a ring all-reduce
/// through the loop's mailbox, a small one-shot on the call kernel alone, and an LL one.
const WAITING_CALLS: [(AlgorithmChoice, u64); 3] = [(AlgorithmChoice::Ring, 1 << 20), (AlgorithmChoice::OneShot, 1000), (AlgorithmChoice::Auto, 100)];

/// A peer that never makes the call, for a call through the mailbox and for one on the call
/// kernel alone: the waiting rank's channels end with a timeout within the spin budget (the
/// call kernel returns, the rank's stream drains), never a hang; the absent rank is
/// unaffected.
#[test]
fn a_peer_whose_call_channels_never_come_is_a_timeout_not_a_hang() {
    for (algorithm, count) in WAITING_CALLS {
        let mut g = submit_on(&[0], algorithm, count, Duration::from_millis(500));
        let started = Instant::now();
        let err = g.wait_submitted(0, Submitted::Stream, TIMEOUT);
        assert!(matches!(err, Err(Error::DeviceTimeout { .. })), "{algorithm:?}: {err:?}");
        assert!(started.elapsed() < Duration::from_secs(60), "{algorithm:?}: {:?}", started.elapsed());
        assert!(g.health(1).is_ok());
    }
}

/// An abort while call channels wait for a peer ends the call kernel at once, well within
/// its spin budget, for a call through the mailbox and for one on the call kernel alone.
#[test]
fn an_abort_ends_call_channels_that_wait() {
    for (algorithm, count) in WAITING_CALLS {
        let mut g = submit_on(&[0], algorithm, count, Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(100));
        let aborted = Instant::now();
        g.abort_all();
        let err = g.wait_submitted(0, Submitted::Stream, TIMEOUT);
        assert!(matches!(err, Err(Error::Aborted)), "{algorithm:?}: {err:?}");
        assert!(aborted.elapsed() < Duration::from_secs(30), "{algorithm:?}: {:?}", aborted.elapsed());
    }
}

/// An in-place all_reduce whose output the next call all-gathers (what a program does
/// with a reduced tensor), two ranks of one resident and three call channels on the
/// stream-ordered path, as the GPU self-test of `init_rank` on threads runs them: in weak
/// memory with call kernels overlapping and not, and with loops that sleep after 1 ms
/// while the host pauses 5 ms between the two calls (the GPU test copies the reduced data
/// back in between); every rank's gathered blocks are the reduced data, exact. (With the
/// twin's `griddepcontrol.wait` not ordering the waiting thread after the launch before
/// it, the overlapping runs gathered unreduced elements in most runs.)
#[test]
fn an_all_gather_of_an_in_place_all_reduce_gathers_the_reduced_data() {
    const N: usize = 1 << 16;
    let two = shape(2, AlgorithmChoice::Auto);
    let input = |rank: u32, i: usize| (rank as usize * N + i % 1000) as f32;
    let sum = |i: usize| (0..two.nranks).map(|rank| input(rank, i)).sum::<f32>();
    // (what, weak-memory seed or sleeping loops, call kernels overlapping)
    let groups = [
        ("weak memory, seed 1", Some(1), false),
        ("weak memory, seed 2", Some(2), false),
        ("weak memory, seed 3, overlapping call kernels", Some(3), true),
        ("weak memory, seed 4, overlapping call kernels", Some(4), true),
        ("weak memory, seed 5, overlapping call kernels", Some(5), true),
        ("sleeping loops", None, false),
        ("sleeping loops, overlapping call kernels", None, true),
    ];
    for (what, seed, overlapping) in groups {
        let mut g = match (seed, overlapping) {
            (Some(seed), false) => TwinGroup::start_with_call_channels(two, RESIDENT, THREADS, SPIN_BUDGET, Some(WeakMemory::new(seed))),
            (Some(seed), true) => TwinGroup::start_with_overlapping_call_kernels(two, RESIDENT, THREADS, SPIN_BUDGET, Some(WeakMemory::new(seed))),
            (None, overlapping) => TwinGroup::start_sleeping(two, THREADS, SPIN_BUDGET, Duration::from_millis(1), overlapping),
        }
        .unwrap();
        let pause = if seed.is_none() { Duration::from_millis(5) } else { Duration::ZERO };
        g.set_path(SubmitPath::Stream).unwrap();
        let mut bufs = Vec::new();
        for rank in 0..two.nranks {
            let buf = g.alloc(rank, N * 4).unwrap();
            g.write(buf, &(0..N).flat_map(|i| input(rank, i).to_le_bytes()).collect::<Vec<u8>>()).unwrap();
            bufs.push((buf, g.alloc(rank, 2 * N * 4).unwrap()));
        }
        let item = |function, src: u64, dst: u64| WorkItem::collective(function, DataType::F32, RedOpKind::Sum, 0, src, dst, N as u64, 0);
        for (rank, &(buf, _)) in (0..).zip(&bufs) {
            g.submit(rank, item(CollFunction::AllReduce, buf.addr, buf.addr)).unwrap();
        }
        std::thread::sleep(pause);
        let mut last = Vec::new();
        for (rank, &(buf, gathered)) in (0..).zip(&bufs) {
            last.push(g.submit(rank, item(CollFunction::AllGather, buf.addr, gathered.addr)).unwrap());
        }
        for (rank, submitted) in (0..).zip(last) {
            g.wait_submitted(rank, submitted, TIMEOUT).unwrap();
            g.health(rank).unwrap();
        }
        for (rank, &(_, gathered)) in (0..).zip(&bufs) {
            let got = g.read(gathered, 2 * N * 4).unwrap();
            let wrong = got.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).enumerate().find(|&(i, v)| v != sum(i % N));
            assert_eq!(wrong, None, "{what}: rank {rank}'s first wrong gathered element (index, value)");
        }
        g.shutdown(TIMEOUT).unwrap();
    }
}
