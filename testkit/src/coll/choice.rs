//! Which algorithm a collective must take: the choice rules docs/architecture.md states
//! (its tables of the algorithm by function, size and rank count, and the text around
//! them), written out here on their own, not taken from the device's planner
//! (`device_rt::algo::plan`). The expected results are reduced in the order of the
//! algorithm stated here ([`super::expect::ReduceOrder`]), and where the channels keep
//! statistics the call must have run this algorithm and no other
//! ([`super::check::run_case`]): a planner that takes another algorithm than documented
//! fails the matrix.

use device_rt::algo::{Algorithm, AlgorithmChoice, CollFunction};
use host_shim::comm::wiring::Shape;

use super::expect::CollCase;

/// How a group hands a collective to its ranks, as far as the choice depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The channels the call spreads over (`RankGroup::plan_channels`).
    pub channels: u32,
    /// The call channels a stream-ordered call's LL run may take (`RankGroup::ll_channels`;
    /// 0: the path never takes LL).
    pub ll_channels: u32,
}

/// One row of the documented table (ranks 2 to 8), in bytes as it counts them: the
/// largest buffer of one rank (all_reduce's, broadcast's and reduce's input, all_gather's
/// output, reduce_scatter's input).
struct Row {
    ll_all_reduce: u64,
    ll_gather_scatter: u64,
    all_reduce_one_shot: u64,
    all_reduce_two_shot: u64,
    all_gather_one_shot: u64,
    reduce_scatter_one_shot: u64,
    rooted_one_shot: u64,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// docs/architecture.md, "On more ranks the same table applies with these rows": 2, 3, 4
/// ranks, then 5 to 8 (provisional, one row for all four).
const ROWS: [Row; 4] = [
    Row { ll_all_reduce: MIB, ll_gather_scatter: 2 * MIB, all_reduce_one_shot: 8 * MIB, all_reduce_two_shot: 32 * MIB, all_gather_one_shot: 64 * MIB, reduce_scatter_one_shot: 32 * MIB, rooted_one_shot: 256 * KIB },
    Row { ll_all_reduce: 256 * KIB, ll_gather_scatter: MIB, all_reduce_one_shot: 2 * MIB, all_reduce_two_shot: 32 * MIB, all_gather_one_shot: 16 * MIB, reduce_scatter_one_shot: 16 * MIB, rooted_one_shot: 256 * KIB },
    Row { ll_all_reduce: 256 * KIB, ll_gather_scatter: MIB, all_reduce_one_shot: MIB, all_reduce_two_shot: 32 * MIB, all_gather_one_shot: 32 * MIB, reduce_scatter_one_shot: 32 * MIB, rooted_one_shot: 256 * KIB },
    Row { ll_all_reduce: 256 * KIB, ll_gather_scatter: MIB, all_reduce_one_shot: 256 * KIB, all_reduce_two_shot: 8 * MIB, all_gather_one_shot: MIB, reduce_scatter_one_shot: MIB, rooted_one_shot: 256 * KIB },
];

/// The most ranks with one-shot/two-shot, LL and NVLS ("9 and more: ring").
const MOST_RANKS: u32 = 8;

/// The most channels a one-shot/two-shot plan takes ("at most 63").
const SHOT_CHANNELS_MOST: u32 = 63;

/// An LL CTA's packet share of each rank's block ("20 KiB"): a call takes LL only where
/// the call channels' CTAs hold its block.
const LL_SHARE_BYTES: u64 = 20 * KIB;

/// The documented row for `nranks` (2 to 8).
fn row(nranks: u32) -> &'static Row {
    &ROWS[(nranks.clamp(2, 5) - 2) as usize]
}

/// The algorithm `case` must take on a communicator of `shape` handed over by `route`:
/// `Ok(None)` where a collective has one way only (point-to-point; every function on one
/// rank: a local copy), which no algorithm's statistics count; `Err` saying why where the
/// communicator's forced algorithm cannot run it (the host must refuse it).
///
/// The rules (docs/architecture.md): a forced algorithm runs every call it can; two-shot
/// is all_reduce's alone, NVLS all_reduce's, reduce_scatter's and all_gather's on 2 to 8
/// ranks, one-shot and two-shot need staging (2 to 8 ranks) that holds the call. The
/// device's own choice: a stream-ordered call with call channels takes LL (a one-shot, as
/// counted) up to the LL column where its block fits the call channels' packet shares;
/// else the table's row; a one-shot/two-shot choice that the staging cannot hold falls
/// back to the ring.
pub fn stated_algorithm(case: &CollCase, shape: &Shape, route: Route) -> Result<Option<Algorithm>, String> {
    let nranks = shape.nranks;
    if case.function == CollFunction::SendRecv || nranks == 1 {
        return Ok(None);
    }
    let shot = |algorithm: Algorithm| -> Result<Algorithm, String> { staged(case, shape, route).map(|()| algorithm) };
    let algorithm = match shape.algorithm {
        AlgorithmChoice::Ring => Algorithm::Ring,
        AlgorithmChoice::OneShot => shot(Algorithm::OneShot)?,
        AlgorithmChoice::TwoShot if case.function == CollFunction::AllReduce => shot(Algorithm::TwoShot)?,
        AlgorithmChoice::TwoShot => return Err("two-shot is all_reduce's alone".into()),
        AlgorithmChoice::Nvls if !matches!(case.function, CollFunction::AllReduce | CollFunction::ReduceScatter | CollFunction::AllGather) => {
            return Err("NVLS is all_reduce's, reduce_scatter's and all_gather's alone".into());
        }
        AlgorithmChoice::Nvls if nranks > MOST_RANKS => return Err(format!("NVLS runs on 2 to {MOST_RANKS} ranks")),
        AlgorithmChoice::Nvls => Algorithm::Nvls,
        AlgorithmChoice::Auto if takes_ll(case, shape, route) => Algorithm::OneShot,
        AlgorithmChoice::Auto => match by_size(case, nranks) {
            Algorithm::Ring => Algorithm::Ring,
            chosen => shot(chosen).unwrap_or(Algorithm::Ring),
        },
    };
    Ok(Some(algorithm))
}

/// The table's choice by size for `case` on `nranks` ranks (2 or more).
fn by_size(case: &CollCase, nranks: u32) -> Algorithm {
    if nranks > MOST_RANKS {
        return Algorithm::Ring;
    }
    let (r, bytes) = (row(nranks), table_bytes(case, nranks));
    match case.function {
        CollFunction::AllReduce if bytes <= r.all_reduce_one_shot => Algorithm::OneShot,
        CollFunction::AllReduce if bytes <= r.all_reduce_two_shot => Algorithm::TwoShot,
        CollFunction::AllGather if bytes <= r.all_gather_one_shot => Algorithm::OneShot,
        CollFunction::ReduceScatter if bytes <= r.reduce_scatter_one_shot => Algorithm::OneShot,
        CollFunction::Broadcast | CollFunction::Reduce if bytes <= r.rooted_one_shot => Algorithm::OneShot,
        _ => Algorithm::Ring,
    }
}

/// The bytes the table counts for `case`: the largest buffer of one rank.
fn table_bytes(case: &CollCase, nranks: u32) -> u64 {
    let block = case.count as u64 * case.dtype.size() as u64;
    match case.function {
        CollFunction::AllGather | CollFunction::ReduceScatter => block * u64::from(nranks),
        _ => block,
    }
}

/// Whether a call the device chooses for takes LL: a stream-ordered call with call
/// channels, on a communicator with staging and unpaired channels of 2 to 8 ranks, of
/// all_reduce, all_gather or reduce_scatter of 1 element or more and at most the LL
/// column's bytes, whose block (in 8-byte lines) the call channels' packet shares hold.
fn takes_ll(case: &CollCase, shape: &Shape, route: Route) -> bool {
    let nranks = shape.nranks;
    if route.ll_channels == 0 || shape.staging_bytes == 0 || shape.paired || !(2..=MOST_RANKS).contains(&nranks) || case.count == 0 {
        return false;
    }
    let r = row(nranks);
    let most = match case.function {
        CollFunction::AllReduce => r.ll_all_reduce,
        CollFunction::AllGather | CollFunction::ReduceScatter => r.ll_gather_scatter,
        _ => return false,
    };
    let block = case.count as u64 * case.dtype.size() as u64;
    table_bytes(case, nranks) <= most && block.next_multiple_of(8) <= LL_SHARE_BYTES * u64::from(route.ll_channels)
}

/// `Ok` where the communicator's staging holds `case` for a one-shot/two-shot plan over
/// `route`'s channels: 2 to 8 ranks with staging, and the call's staged elements (its
/// input; reduce_scatter's share of every rank's block) no more than the plan's channels
/// (at most 63) hold, each channel's buffer of `slot_bytes` holding whole 16-byte packs.
fn staged(case: &CollCase, shape: &Shape, route: Route) -> Result<(), String> {
    let slot_bytes = shape.staging().slot_bytes;
    if slot_bytes == 0 || !(2..=MOST_RANKS).contains(&shape.nranks) {
        return Err("the communicator has no staging".into());
    }
    let elt = case.dtype.size() as u64;
    let copies = if case.function == CollFunction::ReduceScatter { u64::from(shape.nranks) } else { 1 };
    let pack = (16 / elt).max(1);
    let per_channel = slot_bytes / (elt * copies) / pack * pack;
    let capacity = per_channel * u64::from(route.channels.min(SHOT_CHANNELS_MOST));
    if case.count as u64 > capacity {
        return Err(format!("{} elements staged, the staging holds {capacity}", case.count));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coll::expect::Inputs;
    use device_rt::algo::ll::ll_runs;
    use device_rt::algo::{Staging, plan};
    use device_rt::dtype::DataType;
    use device_rt::redop::RedOpKind;

    fn shape(nranks: u32, nchannels: u32, staging_bytes: u64, algorithm: AlgorithmChoice) -> Shape {
        Shape { nranks, nchannels, ring_step_bytes: 4096, p2p_step_bytes: 4096, direct: false, stats: false, paired: false, staging_bytes, algorithm, nvls_multicast: false }
    }

    /// The device's plan (and, for a stream call with call channels, its LL path) of
    /// `case`, as the runtime makes it: what the statement must agree with.
    fn planned(case: &CollCase, shape: &Shape, route: Route) -> Result<Option<Algorithm>, ()> {
        if case.function == CollFunction::SendRecv || shape.nranks == 1 {
            return Ok(None);
        }
        let elt = case.dtype.size() as u64;
        let ll = shape.algorithm == AlgorithmChoice::Auto
            && shape.staging_bytes > 0
            && (2..=8).contains(&shape.nranks)
            && ll_runs(case.function, elt, case.count as u64, shape.nranks, route.ll_channels, 128).is_some();
        if ll {
            return Ok(Some(Algorithm::OneShot));
        }
        let staging = Staging { channels: route.channels, ..shape.staging() };
        plan(case.function, elt, case.count as u64, staging, shape.algorithm).map(|p| Some(p.algorithm)).map_err(|_| ())
    }

    /// Counts on both sides of every documented size and of the staging's capacity.
    fn counts(function: CollFunction, elt: u64, nranks: u32, capacity_bytes: u64) -> Vec<usize> {
        let per = elt * if matches!(function, CollFunction::AllGather | CollFunction::ReduceScatter) { u64::from(nranks) } else { 1 };
        let r = row(nranks);
        let mut edges = vec![r.ll_all_reduce, r.ll_gather_scatter, r.all_reduce_one_shot, r.all_reduce_two_shot, r.all_gather_one_shot, r.reduce_scatter_one_shot, r.rooted_one_shot, capacity_bytes, capacity_bytes * u64::from(nranks), LL_SHARE_BYTES, 3 * LL_SHARE_BYTES];
        edges.extend([0, 1, 7, 1021].map(|c| c * per));
        edges.into_iter().flat_map(|bytes| [bytes / per, bytes / per + 1, (bytes / per).saturating_sub(1)]).map(|c| c as usize).collect()
    }

    /// The statement and the device's planner agree on both sides of every documented
    /// size, of the staging's capacity and of LL's fit, for every function, element
    /// size, choice and rank count: a threshold of the planner moved away from the
    /// documented one fails here first.
    #[test]
    fn the_statement_agrees_with_the_planner_at_every_edge() {
        let functions = [CollFunction::AllReduce, CollFunction::ReduceScatter, CollFunction::AllGather, CollFunction::Broadcast, CollFunction::Reduce, CollFunction::SendRecv];
        let choices = [AlgorithmChoice::Auto, AlgorithmChoice::Ring, AlgorithmChoice::OneShot, AlgorithmChoice::TwoShot, AlgorithmChoice::Nvls];
        let mut compared = 0;
        for nranks in 1..=9 {
            for (nchannels, staging_bytes) in [(4, 1 << 20), (64, 48 << 20), (2, 0)] {
                for choice in choices {
                    let shape = shape(nranks, nchannels, staging_bytes, choice);
                    for route in [Route { channels: nchannels, ll_channels: 0 }, Route { channels: nchannels, ll_channels: nchannels - 1 }, Route { channels: 1, ll_channels: 0 }] {
                        for function in functions {
                            for dtype in [DataType::U8, DataType::F16, DataType::F32, DataType::F64] {
                                let capacity = shape.staging().slot_bytes * u64::from(route.channels.min(SHOT_CHANNELS_MOST));
                                for count in counts(function, dtype.size() as u64, nranks, capacity) {
                                    let case = CollCase { function, dtype, op: RedOpKind::Sum, count, root: 0, in_place: false, inputs: Inputs::Exact };
                                    let stated = stated_algorithm(&case, &shape, route).map_err(|_| ());
                                    assert_eq!(stated, planned(&case, &shape, route), "{} on {nranks} ranks, {choice:?}, {route:?}, staging {staging_bytes}", case.describe());
                                    compared += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(compared > 10_000, "{compared} cases compared");
    }
}
