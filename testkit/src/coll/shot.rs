//! The correctness matrix of the one-shot/two-shot algorithms and of the
//! device's choice between them and the ring: the cases, the plan the device must make of
//! each, and the check, from the channels' statistics, that it ran that plan.
//!
//! The inputs are random floats whose sums depend on the order: the reference reduces
//! in the order of the algorithm the device plans (rank order where the plan is one-shot or
//! two-shot, the ring's where it is the ring), so a call that ran another algorithm than
//! planned shows in the bits as well as in the statistics.

use device_rt::algo::ll::{ll_max_bytes, ll_runs};
use device_rt::algo::{Algorithm, AlgorithmChoice, CollFunction, Plan, Staging, THRESHOLDS, plan, push_fits};
use device_rt::conn::{ChannelStats, MAX_SHOT_RANKS};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;

use std::time::Duration;

use super::check::run_case;
use super::expect::{CollCase, Inputs};
use super::group::{RankGroup, all_stats};
use super::twin::TwinGroup;

/// The plan the device makes of `case` on a communicator with `staging` that asks for
/// `choice`, or `None` where a forced algorithm cannot run it (the host refuses it).
pub fn plan_of(case: &CollCase, staging: Staging, choice: AlgorithmChoice) -> Option<Plan> {
    plan(case.function, case.dtype.size() as u64, case.count as u64, staging, choice).ok()
}

/// The plan of `case` where a stream-ordered call takes the LL path
/// (`device_rt::algo::ll`) on a communicator of `nranks` ranks that leaves the
/// algorithm to the device: a one-shot over the LL runs' CTAs of `nthreads` threads
/// from the first of `call_channels` call channels (each counts its run). `None`: the call
/// goes the general way.
pub fn ll_plan_of(case: &CollCase, nranks: u32, call_channels: u32, nthreads: u32) -> Option<Plan> {
    let elt = case.dtype.size() as u64;
    let runs = ll_runs(case.function, elt, case.count as u64, nranks, call_channels, nthreads)?;
    Some(Plan { algorithm: Algorithm::OneShot, channels: runs.ctas, share: runs.lines_per_cta * 8 / elt })
}

/// The functions `choice` runs with a one-shot/two-shot algorithm (every collective but
/// point-to-point; two-shot: all_reduce alone).
fn shot_functions(choice: AlgorithmChoice) -> &'static [CollFunction] {
    match choice {
        AlgorithmChoice::TwoShot => &[CollFunction::AllReduce],
        _ => &[CollFunction::AllReduce, CollFunction::ReduceScatter, CollFunction::AllGather, CollFunction::Broadcast, CollFunction::Reduce],
    }
}

/// Counts of the grid. all_reduce, reduce_scatter and all_gather take every one for every
/// type × operator; broadcast and reduce (the same one-shot code with a root) one per
/// type × operator, by turns.
const GRID_COUNTS: [usize; 4] = [0, 1, 7, 1021];

/// The matrix on a communicator with `staging` that asks for `choice` (`OneShot`,
/// `TwoShot` or `Auto`): every function the choice runs one-shot or two-shot × every type ×
/// operator (operators only where the function reduces) × the `GRID_COUNTS`, in and out
/// of place by turns, roots by turns; then f32 sums on both sides of every threshold of the
/// plan on this communicator: the table's sizes for its rank count, each algorithm's bytes
/// per channel, and the staging's capacity (a forced algorithm's refused side left out).
/// With `part = (k, m)` only every `m`-th case of the grid from the `k`-th is kept (to
/// spread the grid over several communicators); the threshold cases always are.
pub fn matrix(staging: Staging, choice: AlgorithmChoice, part: (usize, usize)) -> Vec<CollCase> {
    let mut cases = Vec::new();
    let push = |function: CollFunction, dtype: DataType, op: RedOpKind, count: usize, in_place: bool, cases: &mut Vec<CollCase>| {
        let root = (count % staging.nranks.max(1) as usize) as u32;
        let case = CollCase { function, dtype, op, count, root, in_place, inputs: Inputs::OrderSensitive };
        if plan_of(&case, staging, choice).is_some() {
            cases.push(case);
        }
    };
    let mut k = 0usize;
    for &function in shot_functions(choice) {
        for dtype in DataType::ALL {
            let ops: &[RedOpKind] = if function.reduces() { &RedOpKind::ALL } else { &[RedOpKind::Sum] };
            for &op in ops {
                let rooted = matches!(function, CollFunction::Broadcast | CollFunction::Reduce);
                // One count each, turning with `k / 7` (so not with the part `k % 7` picks).
                let counts = if rooted { &GRID_COUNTS[k / 7 % GRID_COUNTS.len()..][..1] } else { &GRID_COUNTS[..] };
                for &count in counts {
                    if k % part.1 == part.0 {
                        push(function, dtype, op, count, (k / part.1).is_multiple_of(2), &mut cases);
                    }
                    k += 1;
                }
            }
        }
    }
    let mut edges: Vec<(CollFunction, usize)> = Vec::new();
    for &function in shot_functions(choice) {
        for bytes in thresholds(function, staging) {
            // The size column counts every rank's block of all_gather and reduce_scatter.
            let per_count = 4 * if function == CollFunction::AllReduce { 1 } else { u64::from(staging.nranks) };
            let count = (bytes / per_count) as usize;
            edges.extend([(function, count), (function, count + 1)].into_iter().filter(|&(_, c)| c > 0));
        }
    }
    edges.sort_by_key(|&(f, c)| (f as u32, c));
    edges.dedup();
    for (i, (function, count)) in edges.into_iter().enumerate() {
        push(function, DataType::F32, RedOpKind::Sum, count, i % 2 == 1, &mut cases);
    }
    cases
}

/// The sizes (bytes of the largest buffer, as [`THRESHOLDS`] counts them) where the plan
/// of `function` on `staging` changes: the table's rows for its rank count and the bytes
/// per channel (none above the staging's capacity, past which every one-shot/two-shot plan
/// gives way to the ring), the capacity, the LL path's most (all_reduce, all_gather,
/// reduce_scatter), and where a one-shot/two-shot plan stops pushing ([`push_edge`]).
fn thresholds(function: CollFunction, staging: Staging) -> Vec<u64> {
    if !staging.available() {
        return Vec::new();
    }
    let row = staging.nranks as usize - 2;
    debug_assert!(row < MAX_SHOT_RANKS - 1);
    let t = &THRESHOLDS;
    let capacity = u64::from(staging.shot_channels()) * staging.slot_bytes;
    let (mut sizes, capacity) = match function {
        CollFunction::AllReduce => (vec![t.all_reduce_one_shot_max[row], t.all_reduce_two_shot_max[row], t.one_shot_bytes_per_channel, t.two_shot_bytes_per_channel], capacity),
        // all_gather stages its input, one rank's block of the output.
        CollFunction::AllGather => (vec![t.all_gather_one_shot_max[row], t.one_shot_bytes_per_channel], capacity * u64::from(staging.nranks)),
        // reduce_scatter stages its whole input.
        CollFunction::ReduceScatter => (vec![t.reduce_scatter_one_shot_max[row], t.one_shot_bytes_per_channel], capacity),
        // broadcast and reduce stage their input.
        _ => (vec![t.rooted_one_shot_max[row], t.one_shot_bytes_per_channel], capacity),
    };
    sizes.retain(|&bytes| bytes <= capacity);
    sizes.push(capacity);
    if matches!(function, CollFunction::AllReduce | CollFunction::AllGather | CollFunction::ReduceScatter) {
        sizes.push(ll_max_bytes(function, staging.nranks));
    }
    let algorithms: &[Algorithm] = if function == CollFunction::AllReduce { &[Algorithm::OneShot, Algorithm::TwoShot] } else { &[Algorithm::OneShot] };
    sizes.extend(algorithms.iter().filter_map(|&algorithm| push_edge(function, algorithm, staging)));
    sizes
}

/// The bytes (as [`thresholds`] counts them) of the largest f32 `function` forced to
/// `algorithm` whose first channel still pushes on `staging`
/// (`device_rt::algo::push_fits`) where one element more pulls: the push form's edge.
/// `None` where the plan pushes up to the staging's capacity (two ranks) or never.
fn push_edge(function: CollFunction, algorithm: Algorithm, staging: Staging) -> Option<u64> {
    let choice = if algorithm == Algorithm::TwoShot { AlgorithmChoice::TwoShot } else { AlgorithmChoice::OneShot };
    let planned = |count: u64| plan(function, 4, count, staging, choice).ok();
    let pushes = |count: u64| planned(count).is_some_and(|p| push_fits(function, algorithm, 4, p.share, staging.nranks, staging.slot_bytes));
    // The last count `at` holds for, where it holds at `from` and not past `to`.
    let last = |at: &dyn Fn(u64) -> bool, mut from: u64, mut to: u64| {
        while to - from > 1 {
            let mid = from + (to - from) / 2;
            if at(mid) { from = mid } else { to = mid }
        }
        from
    };
    let most = last(&|count| planned(count).is_some(), 1, u64::from(staging.shot_channels()) * staging.slot_bytes / 4 + 1);
    if !pushes(1) || pushes(most) {
        return None;
    }
    let fits = last(&pushes, 1, most);
    let per_count = 4 * if function == CollFunction::AllReduce { 1 } else { u64::from(staging.nranks) };
    Some(fits * per_count)
}

/// Where a case is expected to run: its plan, the channels a ring plan runs on
/// (`ring_channels`: every collective channel; every channel for a two-rank
/// reduce-scatter on paired channels), and the first channel of a one-shot/two-shot plan
/// (`shot_from`: 0, or the first call channel for a stream-ordered item that runs on
/// the call kernel alone, as `device_rt::work::serve_call` places it).
#[derive(Clone, Copy, Debug)]
pub struct Expected {
    pub plan: Plan,
    pub ring_channels: u32,
    pub shot_from: u32,
}

impl Expected {
    /// The channels that take part: `[from, to)`.
    fn channels(&self) -> (u32, u32) {
        match self.plan.algorithm {
            Algorithm::Ring => (0, self.ring_channels),
            _ => (self.shot_from, self.shot_from + self.plan.channels),
        }
    }
}

/// Checks, from every channel of every rank's statistics before and after one case
/// (`all_stats`), that the case ran as `expected` says on each of `nranks` ranks: its
/// algorithm on exactly the channels it names, nothing else anywhere; that
/// one-shot/two-shot flag exchanges were timed (`exchange_ns`) on exactly the channels that
/// ran a one-shot or two-shot; and that a part run on the call kernel alone (a
/// one-shot/two-shot plan from a call channel) was counted (`call_kernel_parts`) on
/// exactly those channels, once.
pub fn check_ran(before: &[ChannelStats], after: &[ChannelStats], expected: Expected, nranks: u32) -> Result<(), String> {
    let channels = before.len() / nranks as usize;
    let plan = expected.plan;
    let ran = |rank: usize, channel: usize, algorithm: Algorithm| {
        let at = rank * channels + channel;
        after[at].algorithm_items[algorithm as usize] - before[at].algorithm_items[algorithm as usize]
    };
    let (from, to) = expected.channels();
    for rank in 0..nranks as usize {
        for channel in 0..channels {
            let took_part = (from..to).contains(&(channel as u32));
            for algorithm in Algorithm::ALL {
                let want = u64::from(algorithm == plan.algorithm && took_part);
                let got = ran(rank, channel, algorithm);
                if got != want {
                    return Err(format!("rank {rank} channel {channel}: {} ran {got} time(s), expected {want} ({expected:?})", algorithm.name()));
                }
            }
            let at = rank * channels + channel;
            let exchanged = after[at].exchange_ns != before[at].exchange_ns;
            let shot_here = plan.algorithm.is_shot() && took_part;
            if exchanged != shot_here {
                return Err(format!("rank {rank} channel {channel}: flag exchanges timed: {exchanged} ({} -> {} ns), a one-shot/two-shot collective ran: {shot_here} ({expected:?})", before[at].exchange_ns, after[at].exchange_ns));
            }
            let packets = after[at].packet_items - before[at].packet_items;
            if packets > u64::from(shot_here && plan.algorithm == Algorithm::OneShot) {
                return Err(format!("rank {rank} channel {channel}: {packets} share(s) moved as packets, where no one-shot ran ({expected:?})"));
            }
            let parts = after[at].call_kernel_parts - before[at].call_kernel_parts;
            let call_kernel_only_here = u64::from(shot_here && expected.shot_from > 0);
            if parts != call_kernel_only_here {
                return Err(format!("rank {rank} channel {channel}: {parts} part(s) counted on the call kernel alone, expected {call_kernel_only_here} ({expected:?})"));
            }
        }
    }
    Ok(())
}

/// Runs `cases` on `g` one at a time, then shuts it down: every result exact on every
/// rank ([`run_case`]), and every case ran where expected ([`check_ran`]): `expected`
/// gives that, or `None` to leave the case out (one the group would refuse). `Err`
/// lists every wrong case, or says why the group failed.
pub fn run_planned(mut g: TwinGroup, cases: &[CollCase], timeout: Duration, mut expected: impl FnMut(&CollCase) -> Option<Expected>) -> Result<(), String> {
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let Some(expect) = expected(case) else { continue };
        let before = all_stats(&mut g).map_err(|e| e.to_string())?.ok_or("the group keeps no statistics")?;
        match run_case(&mut g, case, i as u64, timeout) {
            Ok(None) => {}
            Ok(Some(wrong)) => failures.push(wrong),
            Err(e) => return Err(format!("{} on {}: {e}", case.describe(), g.describe())),
        }
        let after = all_stats(&mut g).map_err(|e| e.to_string())?.ok_or("the group keeps no statistics")?;
        if let Err(wrong) = check_ran(&before, &after, expect, g.nranks()) {
            failures.push(format!("{}: {wrong}", case.describe()));
        }
    }
    if !failures.is_empty() {
        return Err(format!("{} of {} cases wrong on {}:\n{}", failures.len(), cases.len(), g.describe(), failures.join("\n")));
    }
    g.shutdown(timeout).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid covers every type × operator × count of every function the choice runs
    /// one-shot or two-shot, in and out of place, and the edges sit on both sides of each
    /// threshold.
    #[test]
    fn the_matrix_covers_the_grid_and_both_sides_of_every_threshold() {
        let staging = Staging { nranks: 4, channels: 2, slot_bytes: 512 << 10 };
        let all = matrix(staging, AlgorithmChoice::OneShot, (0, 1));
        for dtype in DataType::ALL {
            for op in RedOpKind::ALL {
                for count in [0, 1, 7, 1021] {
                    assert!(all.iter().any(|c| (c.function, c.dtype, c.op, c.count) == (CollFunction::AllReduce, dtype, op, count)));
                }
            }
        }
        assert!(all.iter().any(|c| c.in_place) && all.iter().any(|c| !c.in_place));
        assert!(all.iter().all(|c| c.inputs == Inputs::OrderSensitive), "the order of every reduction shows in the bits");
        let parts: usize = (0..3).map(|k| matrix(staging, AlgorithmChoice::OneShot, (k, 3)).len()).sum();
        let edges = all.iter().filter(|c| c.count > 1021).count();
        assert_eq!(parts, all.len() + 2 * edges, "every grid case in one part, the edges in every part");
        // One-shot's channel threshold, both sides: 1 channel, then 2.
        let per = (THRESHOLDS.one_shot_bytes_per_channel / 4) as usize;
        for (count, channels) in [(per, 1), (per + 1, 2)] {
            let case = all.iter().find(|c| c.function == CollFunction::AllReduce && c.count == count).unwrap();
            assert_eq!(plan_of(case, staging, AlgorithmChoice::OneShot).unwrap().channels, channels);
        }
        // Capacity: the largest call that fits is in; the one past it, refused, is not.
        assert!(all.iter().any(|c| c.function == CollFunction::AllReduce && c.count == (1 << 20) / 4));
        assert!(!all.iter().any(|c| c.function == CollFunction::AllReduce && c.count == (1 << 20) / 4 + 1));
        // Under Auto both sides are in, the far one on the ring.
        let auto = matrix(staging, AlgorithmChoice::Auto, (0, 1));
        let past = auto.iter().find(|c| c.function == CollFunction::AllReduce && c.count == (1 << 20) / 4 + 1).unwrap();
        assert_eq!(plan_of(past, staging, AlgorithmChoice::Auto).unwrap().algorithm, Algorithm::Ring);
        let two = matrix(staging, AlgorithmChoice::TwoShot, (0, 1));
        assert!(two.iter().all(|c| c.function == CollFunction::AllReduce));
    }
}
