//! One rank of a communicator whose ranks are processes, on the host twin (the device code
//! on CPU threads, the connection blocks shared-memory files): start it with
//! `ferroccl run -n N twin-rank --id HEX` (or `testkit::launch`), the id made once by the
//! launching side (`CommId::new`, its bytes in hex), as NCCL programs hand out their
//! unique id. The ranks meet and agree through `host_shim::comm::join` (what
//! `Comm::init_rank` runs on GPUs), then run all_reduce, all_gather, reduce_scatter,
//! broadcast and a send/recv ring (f32 sums, several sizes) through each rank's queue and
//! check every output against the values every rank can compute.
//!
//! Exit status: 0 all checked; 2 a host call failed (the error is printed: a rank that
//! never arrived or failed, a configuration that differs); 3 this rank left on purpose
//! (`--absent`, `--die-in`, `--abort`); 4 a wrong result.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use device_rt::algo::{AlgorithmChoice, CollFunction, NO_PEER};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::work::WorkItem;
use ferroccl_testkit::coll::group::RankGroup;
use ferroccl_testkit::coll::twin::TwinGroup;
use ferroccl_testkit::shmem::TwinHeap;
use ferroccl_tests::outcome::{Fail, exit};
use host_shim::bootstrap::{Bootstrap, PeEnv};
use host_shim::comm::{CommId, join};
use host_shim::comm::wiring::Shape;

#[derive(Parser, Debug)]
struct Args {
    /// The communicator's id, its 128 bytes in hex
    #[arg(long)]
    id: String,
    /// This rank exits (status 3) before it meets the others
    #[arg(long, value_name = "RANK")]
    absent: Option<u32>,
    /// This rank exits (status 3) once it has enqueued its part of the first all_reduce,
    /// without waiting for it: its peers are in the call
    #[arg(long, value_name = "RANK")]
    die_in: Option<u32>,
    /// Ranks of this process, each on a thread of its own: process `p` holds ranks
    /// `p × K` to `p × K + K - 1` of `N × K` (one rank per process by default)
    #[arg(long, value_name = "K", default_value_t = 1)]
    ranks_here: u32,
    /// This rank aborts its communicator (and exits, status 3) once its first all_reduce
    /// has completed: the others' next call fails, naming it
    #[arg(long, value_name = "RANK")]
    abort: Option<u32>,
    /// Then, with every process a PE of a symmetric heap, an all_reduce of a communicator
    /// on the heap (two-shot) whose inputs lie in the heap: read in place by every rank
    /// (one rank per process only)
    #[arg(long)]
    heap: bool,
    /// Channel threads (every rank must be given the same)
    #[arg(long, default_value_t = 128)]
    threads: u32,
    /// This rank's channels get 32 threads more than the others': every rank's init fails
    #[arg(long, value_name = "RANK")]
    odd: Option<u32>,
    /// Then split into two communicators (even and odd ranks, each ordered by descending
    /// rank) and check an all_reduce on each
    #[arg(long)]
    split: bool,
    /// The spin budget of every wait, and of the meeting
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "60s")]
    budget: Duration,
}

fn main() -> ExitCode {
    exit("twin-rank", run(&Args::parse()))
}

/// The communicator's shape: two channels, small FIFO steps (many steps even for small
/// calls), one-shot and two-shot staging, no direct writes.
fn shape(nranks: u32) -> Shape {
    Shape {
        nranks,
        nchannels: 2,
        ring_step_bytes: 4096,
        p2p_step_bytes: 4096,
        direct: false,
        stats: false,
        paired: false,
        staging_bytes: 1 << 16,
        algorithm: AlgorithmChoice::Auto,
        nvls_multicast: false,
    }
}

/// Element `i` of rank `r`'s input: small integers, exact in f32 sums.
fn input(r: u32, i: usize) -> f32 {
    (r as usize * 1000 + i % 997) as f32
}

fn bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn run(args: &Args) -> Result<(), Fail> {
    let env = PeEnv::from_env()?.ok_or_else(|| Fail::Host("no rank variables: start me with `ferroccl run -n N twin-rank --id HEX`".into()))?;
    let hex = args.id.as_bytes().chunks(2).map(|d| std::str::from_utf8(d).ok().and_then(|d| u8::from_str_radix(d, 16).ok())).collect::<Option<Vec<u8>>>();
    let id = CommId::from_bytes(&hex.ok_or_else(|| Fail::Host(format!("--id {:?} is not hex", args.id)))?)?;
    let (k, n) = (args.ranks_here.max(1), env.n_pes as u32 * args.ranks_here.max(1));
    if args.heap && k > 1 {
        return Err(Fail::Host("--heap takes one rank per process".into()));
    }
    let first = env.pe as u32 * k;
    std::thread::scope(|s| {
        let ranks: Vec<_> = (first..first + k).map(|me| s.spawn(move || run_rank(args, &id, me, n))).collect();
        ranks.into_iter().map(|r| r.join().unwrap_or_else(|_| Err(Fail::Wrong("a rank's thread panicked".into())))).collect::<Result<Vec<()>, Fail>>()
    })?;
    if args.heap {
        heap_all_reduce(&env, &id.derive(b"heap"), args.threads, args.budget)?;
    }
    Ok(())
}

/// An all_reduce (two-shot) of a communicator on a symmetric heap of the processes,
/// whose inputs lie in the heap (zero copy: every rank reads the others' inputs in
/// place), checked.
fn heap_all_reduce(env: &PeEnv, id: &CommId, threads: u32, budget: Duration) -> Result<(), Fail> {
    let (me, n) = (env.pe as u32, env.n_pes as u32);
    let count = 4000;
    let mut heap = TwinHeap::join(1 << 20, budget, Bootstrap::join_env(env, budget)?)?;
    let shape = Shape { algorithm: AlgorithmChoice::TwoShot, ..shape(n) };
    let mut group = TwinGroup::join_process_on_heap(id, me, shape, threads, budget, heap.handle(me as usize))?;
    let heap_input = heap.malloc(&[count as u64 * 4])?[0];
    heap.write(me as usize, heap_input, &(0..count).map(|i| input(me, i)).collect::<Vec<f32>>());
    let output = group.alloc(me, count * 4)?;
    let ticket = group.enqueue(me, WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, heap_input, output.addr, count as u64, 0))?;
    group.wait(me, ticket, Duration::from_secs(120))?;
    let want: Vec<f32> = (0..count).map(|i| (0..n).map(|r| input(r, i)).sum()).collect();
    check("the heap communicator's all_reduce", count, &floats(&group.read(output, count * 4)?), &want)?;
    println!("rank {me}: all_reduce of inputs in the symmetric heap checked");
    group.shutdown(Duration::from_secs(120))?;
    Ok(())
}

/// Rank `me` of `n`: every collective and send/recv at three sizes, checked.
fn run_rank(args: &Args, id: &CommId, me: u32, n: u32) -> Result<(), Fail> {
    if args.absent == Some(me) {
        std::process::exit(3);
    }
    let threads = if args.odd == Some(me) { args.threads + 32 } else { args.threads };
    let mut group = TwinGroup::join_process(id, me, shape(n), threads, args.budget)?;
    let wait = Duration::from_secs(120);
    for count in [1usize, 1000, 40_000] {
        let mine: Vec<f32> = (0..count).map(|i| input(me, i)).collect();
        let block = |r: u32| (0..count).map(move |i| input(r, i));
        let send = group.alloc(me, count * 4 * n as usize)?;
        let recv = group.alloc(me, count * 4 * n as usize)?;
        let call = |group: &mut TwinGroup, function: CollFunction, sent: &[f32], op_arg: u64, arg: u64, out: usize| -> Result<Vec<f32>, Fail> {
            group.write(send, &bytes(sent))?;
            group.write(recv, &vec![0u8; out * 4])?;
            let item = WorkItem::collective(function, DataType::F32, RedOpKind::Sum, op_arg, send.addr, recv.addr, count as u64, arg);
            let ticket = group.enqueue(me, item)?;
            if args.die_in == Some(me) && function == CollFunction::AllReduce {
                std::process::exit(3);
            }
            group.wait(me, ticket, wait)?;
            if args.abort == Some(me) {
                group.abort_all();
                std::process::exit(3);
            }
            Ok(floats(&group.read(recv, out * 4)?))
        };
        let sum: Vec<f32> = (0..count).map(|i| (0..n).map(|r| input(r, i)).sum()).collect();
        check("all_reduce", count, &call(&mut group, CollFunction::AllReduce, &mine, 0, 0, count)?, &sum)?;
        let gathered: Vec<f32> = (0..n).flat_map(block).collect();
        check("all_gather", count, &call(&mut group, CollFunction::AllGather, &mine, 0, 0, count * n as usize)?, &gathered)?;
        let whole: Vec<f32> = (0..count * n as usize).map(|i| input(me, i)).collect();
        let scattered: Vec<f32> = (0..count).map(|i| (0..n).map(|r| input(r, me as usize * count + i)).sum()).collect();
        check("reduce_scatter", count, &call(&mut group, CollFunction::ReduceScatter, &whole, 0, 0, count)?, &scattered)?;
        let root = 1 % n;
        check("broadcast", count, &call(&mut group, CollFunction::Broadcast, &mine, 0, u64::from(root), count)?, &block(root).collect::<Vec<_>>())?;
        let (to, from) = ((me + 1) % n, (me + n - 1) % n);
        let peers = if n == 1 { u64::from(NO_PEER) << 32 | u64::from(NO_PEER) } else { u64::from(from) << 32 | u64::from(to) };
        let want = if n == 1 { vec![0.0; count] } else { block(from).collect() };
        check("send/recv", count, &call(&mut group, CollFunction::SendRecv, &mine, count as u64, peers, count)?, &want)?;
    }
    println!("rank {me} of {n}: all_reduce, all_gather, reduce_scatter, broadcast, send/recv checked");
    if args.split {
        split_and_reduce(id, me, n, threads, args.budget)?;
    }
    group.shutdown(wait)?;
    Ok(())
}

/// The even and the odd ranks split off (key: minus the rank), and each new communicator
/// all_reduces.
fn split_and_reduce(id: &CommId, me: u32, n: u32, threads: u32, budget: Duration) -> Result<(), Fail> {
    let place = join::split(id, 1, n as usize, me as usize, (me % 2) as i32, -(me as i32), budget)?.ok_or_else(|| Fail::Wrong("a colored rank got no place".into()))?;
    let members: Vec<u32> = (0..n).rev().filter(|r| r % 2 == me % 2).collect();
    if (place.nranks, place.rank) != (members.len(), members.iter().position(|&r| r == me).unwrap_or(usize::MAX)) {
        return Err(Fail::Wrong(format!("rank {me} split to rank {} of {}; its color holds ranks {members:?}", place.rank, place.nranks)));
    }
    let mut sub = TwinGroup::join_process(&place.id, place.rank as u32, shape(place.nranks as u32), threads, budget)?;
    let count = 1000;
    let (send, recv) = (sub.alloc(place.rank as u32, count * 4)?, sub.alloc(place.rank as u32, count * 4)?);
    sub.write(send, &bytes(&(0..count).map(|i| input(me, i)).collect::<Vec<_>>()))?;
    let ticket = sub.enqueue(place.rank as u32, WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, send.addr, recv.addr, count as u64, 0))?;
    sub.wait(place.rank as u32, ticket, Duration::from_secs(120))?;
    let want: Vec<f32> = (0..count).map(|i| members.iter().map(|&r| input(r, i)).sum()).collect();
    check("the split communicator's all_reduce", count, &floats(&sub.read(recv, count * 4)?), &want)?;
    println!("rank {me}: rank {} of {} after the split, all_reduce checked", place.rank, place.nranks);
    sub.shutdown(Duration::from_secs(120))?;
    Ok(())
}

fn check(what: &str, count: usize, got: &[f32], want: &[f32]) -> Result<(), Fail> {
    match (0..want.len()).find(|&i| got[i] != want[i]) {
        Some(i) => Err(Fail::Wrong(format!("{what} of {count}: element {i} is {}, want {}", got[i], want[i]))),
        None => Ok(()),
    }
}
