//! The collective correctness matrix: every function × type × operator, counts 0, 1, odd,
//! prime and several chunks, in place and out of place, with inputs that are exact in
//! any order (small integers, also as floats), checked bit for bit on every rank. Runs on
//! any [`RankGroup`]: GPUs or the host twin.

use std::time::Duration;

use device_rt::algo::{Algorithm, CollFunction, NO_PEER};
use device_rt::conn::ChannelStats;
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::work::WorkItem;

use super::choice::{Route, stated_algorithm};
use super::expect::{CollCase, Inputs, ReduceOrder};
use super::group::{Buffer, RankGroup, all_stats};
use host_shim::Result;
use crate::reference::Rng;

/// Bytes written into output buffers before a call, so parts a collective must not
/// write are checked too.
const SENTINEL: u8 = 0xA5;

/// The matrix for `nranks` ranks: counts 0, 1, 7, 1021 for every function × type ×
/// operator (operators only where the function reduces), and `big_count` (several chunks
/// on every channel) for every function × type with Sum, all with inputs exact in any
/// order; then random normal floats for every reducing function × float type: count 1021
/// with every operator, `big_count` with Sum and PreMulSum (checked bit for bit against
/// the reference in the algorithm's order, and against the f64 bound). Roots, shifts and
/// in-place vary from case to case.
pub fn matrix(nranks: u32, big_count: usize) -> Vec<CollCase> {
    let functions =
        [CollFunction::AllReduce, CollFunction::ReduceScatter, CollFunction::AllGather, CollFunction::Broadcast, CollFunction::Reduce];
    let mut cases = Vec::new();
    let mut k = 0u32;
    let mut push = |function: CollFunction, dtype: DataType, op: RedOpKind, count: usize, inputs: Inputs, cases: &mut Vec<CollCase>| {
        k += 1;
        let sendrecv = function == CollFunction::SendRecv;
        cases.push(CollCase {
            function,
            dtype,
            op,
            count,
            root: if sendrecv { 1 + k % (nranks - 1).max(1) } else { k % nranks },
            in_place: !sendrecv && k.is_multiple_of(2),
            inputs,
        });
    };
    for function in functions.into_iter().chain([CollFunction::SendRecv].into_iter().filter(|_| nranks > 1)) {
        for dtype in DataType::ALL {
            let ops: &[RedOpKind] = if function.reduces() { &RedOpKind::ALL } else { &[RedOpKind::Sum] };
            for &op in ops {
                for count in [0, 1, 7, 1021] {
                    push(function, dtype, op, count, Inputs::Exact, &mut cases);
                }
            }
            push(function, dtype, RedOpKind::Sum, big_count, Inputs::Exact, &mut cases);
        }
    }
    for function in [CollFunction::AllReduce, CollFunction::ReduceScatter, CollFunction::Reduce] {
        for dtype in DataType::ALL.into_iter().filter(|d| d.is_float()) {
            for op in RedOpKind::ALL {
                push(function, dtype, op, 1021, Inputs::Normal, &mut cases);
            }
            for op in [RedOpKind::Sum, RedOpKind::PreMulSum] {
                push(function, dtype, op, big_count, Inputs::Normal, &mut cases);
            }
        }
    }
    cases
}

/// Enqueues every one of `prepared` on every rank of `g` through its direct path, back to
/// back with no host synchronisation between them, waits for each rank's last, and
/// returns what came out wrong (empty: every call right on every rank).
pub fn run_back_to_back(g: &mut dyn RankGroup, prepared: &[Prepared], timeout: Duration) -> Result<Vec<String>> {
    let mut last = Vec::new();
    for rank in g.local_ranks() {
        let mut ticket = None;
        for p in prepared {
            ticket = Some(g.enqueue(rank, p.item(rank))?);
        }
        last.push((rank, ticket));
    }
    for (rank, ticket) in last {
        if let Some(ticket) = ticket {
            g.wait(rank, ticket, timeout)?;
        }
    }
    prepared.iter().filter_map(|p| p.verify(g).transpose()).collect()
}

/// Runs `case` once on every rank of `g` (through the group's path) and compares every
/// rank's output with the reference, reduced in the order of the algorithm the documented
/// choice rules give the case ([`stated_algorithm`]); where the communicator keeps
/// statistics, also checks that every rank ran that algorithm and no other
/// ([`Prepared::check_algorithm_ran`]). `Ok(None)`: correct; `Ok(Some(what))`: wrong
/// results, another algorithm, or a call the documented rules refuse that ran; `Err`: the
/// call failed.
pub fn run_case(g: &mut dyn RankGroup, case: &CollCase, seed: u64, timeout: Duration) -> Result<Option<String>> {
    let mark = g.mark();
    let outcome = run_case_in(g, case, seed, timeout);
    g.release(mark);
    outcome
}

fn run_case_in(g: &mut dyn RankGroup, case: &CollCase, seed: u64, timeout: Duration) -> Result<Option<String>> {
    let prepared = Prepared::new(g, case, seed)?;
    let before = all_stats(g)?;
    let mut tickets = Vec::new();
    for rank in g.local_ranks() {
        tickets.push((rank, g.submit(rank, prepared.item(rank))?));
    }
    for (rank, submitted) in tickets {
        g.wait_submitted(rank, submitted, timeout)?;
    }
    if let Err(why) = &prepared.algorithm {
        return Ok(Some(format!("{}: ran, where the documented choice rules refuse it ({why})", case.describe())));
    }
    if let (Some(before), Some(after)) = (before, all_stats(g)?)
        && let Err(wrong) = prepared.check_algorithm_ran(&before, &after)
    {
        return Ok(Some(format!("{}: {wrong}", case.describe())));
    }
    prepared.verify(g)
}

/// One case's buffers on every rank the group drives, filled, with what every rank's
/// output must hold once the case has run: [`run_case`] in three steps, for callers that
/// hand several cases to the ranks before waiting for any (allocate every case's buffers
/// first).
pub struct Prepared {
    case: CollCase,
    nranks: u32,
    /// The ranks the group drives.
    local: std::ops::Range<u32>,
    /// Per rank the group drives, from `local.start`: input, output, and the input's
    /// byte offset in its buffer.
    bufs: Vec<(Buffer, Buffer, u64)>,
    /// Each rank's input.
    inputs: Vec<Vec<u8>>,
    expected: Vec<Vec<u8>>,
    /// The algorithm the case must take ([`stated_algorithm`]), or why the communicator
    /// must refuse it.
    algorithm: std::result::Result<Option<Algorithm>, String>,
}

impl Prepared {
    /// Allocates `case`'s buffers on every rank `g` drives and fills them: inputs from
    /// `seed`, outputs with a sentinel. The expected outputs are reduced in the order of
    /// the algorithm the documented choice rules give the case on `g`'s communicator and
    /// path ([`stated_algorithm`]).
    pub fn new(g: &mut dyn RankGroup, case: &CollCase, seed: u64) -> Result<Self> {
        let nranks = g.nranks();
        let size = case.dtype.size();
        let (in_elems, out_elems) = case.extents(nranks);
        let mut rng = Rng::new(seed);
        let inputs: Vec<Vec<u8>> = (0..nranks).map(|_| case.input(in_elems, &mut rng)).collect();
        let local = g.local_ranks();
        let mut bufs: Vec<(Buffer, Buffer, u64)> = Vec::new();
        let mut before = Vec::new();
        // Every rank's output as it starts (the reference needs them all); buffers only
        // for the ranks the group drives.
        for rank in 0..nranks {
            let here = local.contains(&rank);
            let (input, output, in_offset) = if case.in_place {
                let bytes = in_elems.max(out_elems) * size;
                let mut data = vec![SENTINEL; bytes];
                let at = if case.function == CollFunction::AllGather { case.in_place_offset(rank) * size } else { 0 };
                data[at..at + inputs[rank as usize].len()].copy_from_slice(&inputs[rank as usize]);
                let b = if here { Some(g.alloc(rank, bytes.max(1))?) } else { None };
                if let Some(b) = b {
                    g.write(b, &data)?;
                }
                before.push(data);
                (b, b, at as u64)
            } else {
                let data = vec![SENTINEL; out_elems * size];
                let (input, output) = if here { (Some(g.alloc(rank, (in_elems * size).max(1))?), Some(g.alloc(rank, (out_elems * size).max(1))?)) } else { (None, None) };
                if let (Some(input), Some(output)) = (input, output) {
                    g.write(input, &inputs[rank as usize])?;
                    g.write(output, &data)?;
                }
                before.push(data);
                (input, output, 0)
            };
            if let (Some(input), Some(output)) = (input, output) {
                bufs.push((input, output, in_offset));
            }
        }
        let route = Route { channels: g.plan_channels(), ll_channels: g.ll_channels() };
        let algorithm = stated_algorithm(case, &g.shape(), route);
        let order = ReduceOrder::of(algorithm.clone().unwrap_or(None), &g.shape(), route.channels);
        let expected = case.expect(&inputs, &before, order);
        Ok(Self { case: case.clone(), nranks, local, bufs, inputs, expected, algorithm })
    }

    /// The algorithm the case must take (`None`: none, as point-to-point), or why the
    /// communicator must refuse it.
    pub fn algorithm(&self) -> std::result::Result<Option<Algorithm>, &str> {
        self.algorithm.as_ref().map(|a| *a).map_err(String::as_str)
    }

    /// Checks, from every channel's statistics of every rank before and after the call
    /// alone (`all_stats`: `nranks` blocks of channels), that every rank ran the case with
    /// the algorithm it must take and with no other: that algorithm's items counted on
    /// some channel of every rank (none for a one-shot/two-shot call of no elements, which
    /// no channel takes part in), every other algorithm's on none; nothing at all for a
    /// case without an algorithm.
    pub fn check_algorithm_ran(&self, before: &[ChannelStats], after: &[ChannelStats]) -> std::result::Result<(), String> {
        let stated = self.algorithm.clone()?;
        let channels = before.len() / self.bufs.len().max(1);
        for (at, rank) in self.local.clone().enumerate() {
            let range = at * channels..(at + 1) * channels;
            let ran = |algorithm: Algorithm| -> u64 { after[range.clone()].iter().zip(&before[range.clone()]).map(|(a, b)| a.algorithm_items[algorithm as usize] - b.algorithm_items[algorithm as usize]).sum() };
            for algorithm in Algorithm::ALL {
                let counted = ran(algorithm);
                let must = Some(algorithm) == stated && !(algorithm.is_shot() && self.case.count == 0);
                if (counted > 0) != must {
                    let stated = stated.map_or("none", Algorithm::name);
                    return Err(format!("rank {rank}: {} ran on {counted} channel(s), where the case must take {stated}", algorithm.name()));
                }
            }
        }
        Ok(())
    }

    /// Rank `rank`'s work item.
    pub fn item(&self, rank: u32) -> WorkItem {
        let (case, nranks) = (&self.case, self.nranks);
        let (input, output, in_offset) = self.bufs[(rank - self.local.start) as usize];
        let src = input.addr + in_offset;
        let mut dst = output.addr;
        if case.in_place && case.function == CollFunction::ReduceScatter {
            dst += (case.in_place_offset(rank) * case.dtype.size()) as u64;
        }
        let (arg, op_arg) = match case.function {
            CollFunction::SendRecv => {
                let to = (rank + case.root) % nranks;
                let from = (rank + nranks - case.root % nranks) % nranks;
                (u64::from(to) | u64::from(from) << 32, case.count as u64)
            }
            _ => (u64::from(case.root), case.op_arg(nranks)),
        };
        debug_assert!(case.function != CollFunction::SendRecv || arg as u32 != NO_PEER);
        WorkItem::collective(case.function, case.dtype, case.op, op_arg, src, dst, case.count as u64, arg)
    }

    /// Each rank's input.
    pub fn inputs(&self) -> &[Vec<u8>] {
        &self.inputs
    }

    /// The whole output buffer of each rank the group drives, as it is now.
    pub fn outputs(&self, g: &mut dyn RankGroup) -> Result<Vec<Vec<u8>>> {
        let expected = &self.expected[self.local.start as usize..];
        self.bufs.iter().zip(expected).map(|(&(_, output, _), want)| g.read(output, want.len())).collect()
    }

    /// Compares every rank's output with the reference, once every rank's item has
    /// completed, bit for bit, and random normal floats also with the f64 reference
    /// ([`CollCase::check_f64_bound`]): `None` when all are right, else the first wrong
    /// element.
    pub fn verify(&self, g: &mut dyn RankGroup) -> Result<Option<String>> {
        let size = self.case.dtype.size();
        for (rank, got) in self.local.clone().zip(self.outputs(g)?) {
            let want = &self.expected[rank as usize];
            if let Some(at) = got.iter().zip(want).position(|(a, b)| a != b) {
                let e = at / size.max(1);
                return Ok(Some(format!(
                    "{}: rank {rank} of {}: element {e} is {:02x?}, expected {:02x?}",
                    self.case.describe(),
                    self.nranks,
                    &got[e * size..(e + 1) * size],
                    &want[e * size..(e + 1) * size]
                )));
            }
            if let Err(why) = self.case.check_f64_bound(&self.inputs, rank, &got) {
                return Ok(Some(why));
            }
        }
        Ok(None)
    }
}
