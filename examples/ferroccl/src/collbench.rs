//! `ferroccl` collective benchmark in the style of nccl-tests (`all_reduce_perf` and its
//! siblings): sweeps message sizes, times each collective out of place and in place on a
//! [`RankGroup`], checks it bit for bit, and prints nccl-tests' table, optionally next to
//! a [`Baseline`] (NCCL) measured with the same arguments.
//!
//! Conventions follow nccl-tests:
//! - a size of the sweep (`-b` to `-e`) is the whole buffer: the receive buffer of
//!   all_gather, the send buffer of reduce_scatter, the (single) buffer of the others;
//!   the element count of a row is NCCL's count (per rank for all_gather and
//!   reduce_scatter);
//! - times are wall-clock microseconds per iteration; `algbw` is the size column in
//!   bytes divided by that time, in GB/s (10⁹ bytes per second); `busbw` is `algbw`
//!   times the function's bus factor (nccl-tests' PERFORMANCE.md, see [`bus_factor`]).

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use serde::{Serialize, Serializer};

use device_rt::conn::ChannelStats;
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::algo::{Algorithm, CollFunction};
use device_rt::work::WorkItem;

use crate::cli::{dtype_parser, function_parser, op_parser, parse_check, parse_size};
use ferroccl_testkit::coll::check::run_case;
use ferroccl_testkit::coll::expect::{CollCase, Inputs};
use ferroccl_testkit::coll::group::{Buffer, RankGroup, Submitted, all_stats, sum_stats};
use host_shim::bootstrap::Bootstrap;
use host_shim::{Error, Result};

/// Limit of every wait on the group, and of each correctness check.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Sizes (in bytes, of the sweep) from which the `*_busbw_vs_nccl_ge64M` fields of
/// [`rows_json`] take their minimum.
const LARGE_BYTES: usize = 64 << 20;

/// The functions the benchmark runs, in the order it runs them when none is named.
pub const BENCH_FUNCTIONS: [CollFunction; 5] =
    [CollFunction::AllReduce, CollFunction::AllGather, CollFunction::ReduceScatter, CollFunction::Broadcast, CollFunction::Reduce];

/// The operators `-o` accepts (nccl-tests' names; `avg` is [`RedOpKind::SumPostDiv`]).
pub const BENCH_OPS: [RedOpKind; 5] = [RedOpKind::Sum, RedOpKind::Prod, RedOpKind::Max, RedOpKind::Min, RedOpKind::SumPostDiv];

/// Calls a row's ferroccl timing submits in one [`CallTiming::Graph`] capture per rank.
pub const GRAPH_CALLS: usize = 20;

/// Sizes up to which the `small_*` fields of [`rows_json`] compare times.
const SMALL_BYTES: usize = 256 << 10;

/// Sizes from which `busbw_vs_nccl_min_512K_1G` of [`rows_json`] compares bandwidths.
const MID_BYTES: usize = 512 << 10;

/// How a row's calls are timed (each on ferroccl and on the baseline alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallTiming {
    /// `iters` calls on every rank back to back, then one wait (nccl-tests' way).
    BackToBack,
    /// Each call waited for (its stream synchronized) before the next: what one call
    /// costs a caller that needs its result at once.
    Sync,
    /// [`GRAPH_CALLS`] calls captured in a CUDA graph per rank, the graphs replayed
    /// `iters` times back to back (the stream path; GPUs only): per call.
    Graph,
}

/// The benchmark's arguments: nccl-tests' flags, and the collectives to run (the
/// command line's `ferroccl bench`, see [`crate::cli`]).
#[derive(Clone, Debug, PartialEq, clap::Args)]
pub struct BenchArgs {
    /// Smallest size of the sweep, in bytes (K/M/G suffixes: powers of 2¹⁰); 8 on the host
    /// twin unless given
    #[arg(short = 'b', long = "minbytes", value_name = "BYTES", value_parser = parse_size, default_value = "32M")]
    pub min_bytes: usize,
    /// Largest size of the sweep, in bytes (K/M/G suffixes: powers of 2¹⁰); 64K on the host
    /// twin unless given, which refuses more than 16M
    #[arg(short = 'e', long = "maxbytes", value_name = "BYTES", value_parser = parse_size, default_value = "32M")]
    pub max_bytes: usize,
    /// Each size of the sweep is the previous one times this, at least 2
    #[arg(short = 'f', long = "stepfactor", value_name = "F", default_value_t = 2)]
    pub step_factor: usize,
    /// Element type (nccl-tests' names)
    #[arg(short = 'd', long = "datatype", value_name = "TYPE", value_parser = dtype_parser(), default_value = "float")]
    pub dtype: DataType,
    /// Reduction operator (nccl-tests' names; avg is sum then division by the rank count)
    #[arg(short = 'o', long = "op", value_parser = op_parser(), default_value = "sum")]
    pub op: RedOpKind,
    /// Check every row's results before timing it
    #[arg(short = 'c', long = "check", value_name = "0|1", value_parser = parse_check, default_value = "1", action = clap::ArgAction::Set)]
    pub check: bool,
    /// Timed iterations per row and placement, at least 1; 5 on the host twin unless given
    #[arg(short = 'n', long = "iters", value_name = "N", default_value_t = 20)]
    pub iters: usize,
    /// Untimed iterations before them; 1 on the host twin unless given
    #[arg(short = 'w', long = "warmup_iters", value_name = "N", default_value_t = 5)]
    pub warmup: usize,
    /// Root of broadcast and reduce
    #[arg(short = 'r', long = "root", value_name = "ROOT", default_value_t = 0)]
    pub root: u32,
    /// The collectives, in the order they run (a repeated name runs once)
    #[arg(value_name = "COLLECTIVE", value_parser = function_parser(),
          default_values = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"])]
    pub functions: Vec<CollFunction>,
    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// How calls are timed, each way a table of its own: back-to-back (nccl-tests'),
    /// sync (each call waited for), graph (20 calls per CUDA graph, replayed; GPUs only:
    /// refused on the host twin)
    #[arg(long, value_name = "HOW", value_delimiter = ',', default_value = "back-to-back")]
    pub timing: Vec<CallTiming>,
    /// Sync and graph timings stop at this size (bytes; K/M/G suffixes)
    #[arg(long = "latency-maxbytes", value_name = "BYTES", value_parser = parse_size, default_value = "1M")]
    pub latency_max_bytes: usize,
    /// Rounds per row, at least 1: ferroccl and the baseline take turns (ferroccl first in
    /// even rounds, the baseline in odd ones), and each placement's time is the median of
    /// its rounds, their fastest and slowest beside it; 1 on the host twin unless given
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub repeats: usize,
}

impl Default for BenchArgs {
    /// nccl-tests' defaults (one size, 32 MiB), for all five collectives.
    fn default() -> Self {
        Self {
            min_bytes: 32 << 20,
            max_bytes: 32 << 20,
            step_factor: 2,
            dtype: DataType::F32,
            op: RedOpKind::Sum,
            check: true,
            iters: 20,
            warmup: 5,
            root: 0,
            functions: BENCH_FUNCTIONS.to_vec(),
            json: None,
            timing: vec![CallTiming::BackToBack],
            latency_max_bytes: 1 << 20,
            repeats: 5,
        }
    }
}

impl BenchArgs {
    /// These arguments with every collective and every timing named once (its first
    /// place kept; graph timing last: a captured call pins ferroccl's loops awake for good,
    /// and the other timings and the baseline's live ones need them able to sleep),
    /// validated.
    pub fn normalized(mut self) -> Result<Self> {
        once_each(&mut self.functions);
        once_each(&mut self.timing);
        self.timing.sort_by_key(|&t| t == CallTiming::Graph);
        self.validate()?;
        Ok(self)
    }

    /// The sizes timed `timing`'s way: [`sizes`], only up to `latency_max_bytes` for
    /// sync and graph timings.
    fn sizes_for(&self, timing: CallTiming) -> Vec<usize> {
        let mut all = sizes(self);
        if timing != CallTiming::BackToBack {
            all.retain(|&s| s <= self.latency_max_bytes);
        }
        all
    }

    /// Refuses arguments that make no sweep or no timing.
    fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidArgument(why));
        if self.min_bytes == 0 {
            return bad("the smallest size (-b) must be at least 1 byte".into());
        }
        if self.min_bytes > self.max_bytes {
            return bad(format!("the smallest size (-b {}) is larger than the largest (-e {})", self.min_bytes, self.max_bytes));
        }
        if self.step_factor < 2 {
            return bad(format!("the step factor (-f {}) must be at least 2", self.step_factor));
        }
        if self.iters == 0 {
            return bad("at least one timed iteration (-n) is needed".into());
        }
        if self.repeats == 0 {
            return bad("at least one round per row (--repeats) is needed".into());
        }
        if self.functions.is_empty() {
            return bad("no collective to run".into());
        }
        if self.timing.is_empty() {
            return bad("no timing (--timing) to run".into());
        }
        if let Some(f) = self.functions.iter().find(|f| !BENCH_FUNCTIONS.contains(f)) {
            return bad(format!("{} is not a benchmarked collective", f.name()));
        }
        if !BENCH_OPS.contains(&self.op) {
            return bad(format!("operator {} is not supported by the benchmark", self.op.name()));
        }
        Ok(())
    }
}

/// Keeps the first of every repeated value of `v`, in order.
fn once_each<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut seen = Vec::new();
    v.retain(|x| {
        let first = !seen.contains(x);
        seen.push(*x);
        first
    });
}

/// An [`Error::InvalidArgument`] saying `why`.
fn invalid(why: String) -> Error {
    Error::InvalidArgument(why)
}

/// The sizes of the sweep, in bytes, ascending: `min_bytes`, then each previous size
/// times `step_factor`, while at most `max_bytes` (nccl-tests' loop). Empty when the
/// arguments make no sweep (smallest size 0 or above the largest, step factor below 2):
/// [`run_with_baseline`] refuses those.
pub fn sizes(args: &BenchArgs) -> Vec<usize> {
    let mut out = Vec::new();
    if args.min_bytes == 0 || args.step_factor < 2 {
        return out;
    }
    let mut size = Some(args.min_bytes);
    while let Some(s) = size.filter(|&s| s <= args.max_bytes) {
        out.push(s);
        size = s.checked_mul(args.step_factor);
    }
    out
}

/// NCCL's count for one size of the sweep (`bytes`, the whole buffer): elements per rank
/// for all_gather and reduce_scatter (`bytes / size / nranks`), elements of the buffer
/// for the others (`bytes / size`). Rounds down; 0 when the size holds no element (or
/// `nranks` is 0).
pub fn count_for(function: CollFunction, dtype: DataType, bytes: usize, nranks: u32) -> usize {
    let elements = bytes / dtype.size();
    match function {
        CollFunction::AllGather | CollFunction::ReduceScatter => elements.checked_div(nranks as usize).unwrap_or(0),
        _ => elements,
    }
}

/// nccl-tests' size column for `count`: the larger of one rank's input and output
/// buffers, in bytes (the sweep's size rounded down to whole elements, and for
/// all_gather and reduce_scatter to whole per-rank blocks).
pub fn row_bytes(function: CollFunction, dtype: DataType, count: usize, nranks: u32) -> usize {
    let case = CollCase { function, dtype, op: RedOpKind::Sum, count, root: 0, in_place: false, inputs: Inputs::Exact };
    let (input, output) = case.extents(nranks);
    input.max(output) * dtype.size()
}

/// The factor from algorithm bandwidth to bus bandwidth (nccl-tests' PERFORMANCE.md):
/// all_reduce 2(n−1)/n, reduce_scatter and all_gather (n−1)/n, broadcast and reduce 1
/// (0 for SendRecv, which the benchmark does not run, and for 0 ranks).
pub fn bus_factor(function: CollFunction, nranks: u32) -> f64 {
    if nranks == 0 {
        return 0.0;
    }
    let n = f64::from(nranks);
    match function {
        CollFunction::AllReduce => 2.0 * (n - 1.0) / n,
        CollFunction::ReduceScatter | CollFunction::AllGather => (n - 1.0) / n,
        CollFunction::Broadcast | CollFunction::Reduce => 1.0,
        CollFunction::SendRecv => 0.0,
    }
}

/// True for the functions whose root the table shows (others print −1).
fn has_root(function: CollFunction) -> bool {
    matches!(function, CollFunction::Broadcast | CollFunction::Reduce)
}

/// One placement (out of place or in place) of one row, over its rounds. Serialized with
/// these field names; a number that is not finite becomes `null` (serde_json's rule: JSON
/// has no NaN).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Timing {
    /// Wall-clock time per iteration, in microseconds: the median of the rounds' (the mean
    /// of the middle two for an even number of rounds).
    pub time_us: f64,
    /// The row's `bytes` divided by `time_us`, in GB/s (10⁹ bytes per second).
    pub algbw: f64,
    /// `algbw` times [`bus_factor`], in GB/s.
    pub busbw: f64,
    /// The fastest round's time per iteration, in microseconds.
    pub min_us: f64,
    /// The slowest round's time per iteration, in microseconds.
    pub max_us: f64,
    /// How many checked calls were wrong: 0 or 1 (this is not nccl-tests' count of wrong
    /// elements: one check runs the call once on every rank and stops at the first wrong
    /// element). `None` when not checked (`-c 0`, and for a baseline).
    pub wrong: Option<usize>,
}

impl Timing {
    /// The timing of `bytes` for a function with bus factor `factor` over rounds that
    /// took `rounds_us` per iteration each (NaN times for no round).
    fn of_rounds(rounds_us: &[f64], bytes: usize, factor: f64, wrong: Option<usize>) -> Self {
        let time_us = median(rounds_us);
        let algbw = bytes as f64 / time_us / 1e3;
        let min_us = rounds_us.iter().copied().reduce(f64::min).unwrap_or(f64::NAN);
        let max_us = rounds_us.iter().copied().reduce(f64::max).unwrap_or(f64::NAN);
        Self { time_us, algbw, busbw: algbw * factor, min_us, max_us, wrong }
    }
}

/// The median of `values` (the mean of the middle two for an even count; NaN for none).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// One mode of the baseline (NCCL on plain buffers, on symmetric windows) in one row.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModeTimings {
    /// The mode's name ([`Baseline::modes`]).
    pub mode: String,
    pub oop: Timing,
    pub ip: Timing,
}

/// One line of the table: one function at one size. Serialized field by field, the
/// function, type and operator by their nccl-tests names.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    #[serde(serialize_with = "function_name")]
    pub function: CollFunction,
    /// How the row's calls were timed.
    pub timing: CallTiming,
    /// The size of the sweep ([`sizes`]) this row measures, in bytes.
    pub size: usize,
    /// The size column: [`row_bytes`] of `count`, in bytes (what `algbw` divides).
    pub bytes: usize,
    /// NCCL's count ([`count_for`]).
    pub count: usize,
    #[serde(serialize_with = "dtype_name")]
    pub dtype: DataType,
    /// The requested operator; functions that do not reduce ignore it (the table prints
    /// `none` for them, as nccl-tests does).
    #[serde(serialize_with = "op_name")]
    pub op: RedOpKind,
    /// Broadcast and reduce: the root; −1 for the other functions.
    pub root: i64,
    /// ferroccl, out of place.
    pub oop: Timing,
    /// ferroccl, in place.
    pub ip: Timing,
    /// The rounds each placement's timings are of (`--repeats`).
    pub rounds: usize,
    /// The baseline out of place, when one was given: its fastest mode's (lowest median).
    pub baseline_oop: Option<Timing>,
    /// The baseline in place, when one was given: its fastest mode's.
    pub baseline_ip: Option<Timing>,
    /// The mode `baseline_oop` is of.
    pub baseline_mode_oop: Option<String>,
    /// The mode `baseline_ip` is of.
    pub baseline_mode_ip: Option<String>,
    /// Every mode of the baseline, in [`Baseline::modes`]' order (empty without one).
    pub baseline_modes: Vec<ModeTimings>,
    /// With a baseline: whether it ran with none of ferroccl's loops on the GPUs (each
    /// of its live timings after every rank's loop had gone to sleep, or timed before the
    /// loops started); `false` where a loop could not sleep (one kept awake by its
    /// configuration).
    pub baseline_alone: Option<bool>,
}

impl Row {
    /// ferroccl's bus bandwidth over the baseline's, out of place and in place (`None`
    /// without a baseline).
    pub fn ratios(&self) -> Option<(f64, f64)> {
        Some((self.oop.busbw / self.baseline_oop?.busbw, self.ip.busbw / self.baseline_ip?.busbw))
    }
}

/// One timing a baseline is asked for: `case` on every rank (its inputs are the
/// baseline's own), `warmup` untimed calls, then `iters` calls as `timing` says.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselineCall {
    pub case: CollCase,
    pub timing: CallTiming,
    pub warmup: usize,
    pub iters: usize,
}

/// Another implementation to compare with (NCCL), timed the same way, wall-clock time per
/// call. It must run as many ranks as the group it is compared with.
pub trait Baseline {
    /// What runs, in words (for reports).
    fn name(&self) -> String;

    /// The ways it is timed, at least one (NCCL: on plain buffers, and on symmetric
    /// windows where NCCL offers them); every row times each, and compares with the
    /// fastest.
    fn modes(&self) -> Vec<String>;

    /// Whether `timing`'s calls are timed when asked (so ferroccl's loops must have left
    /// the GPUs first), not ahead of time.
    fn timed_live(&self, _timing: CallTiming) -> bool {
        true
    }

    /// Microseconds per call of `call` in mode `mode` (an index into [`Baseline::modes`]),
    /// in the row's round `round`.
    fn time_us(&mut self, mode: usize, round: usize, call: &BaselineCall) -> Result<f64>;
}

/// Runs the benchmark on `g` and prints its table to `out`, with no baseline and no
/// progress bar; see [`run_with_baseline`] (the tests' shorthand).
#[cfg(test)]
pub fn run(g: &mut dyn RankGroup, args: &BenchArgs, out: &mut dyn Write) -> Result<Vec<Row>> {
    run_with_baseline(g, args, None, out, &ProgressBar::hidden())
}

/// Runs the benchmark on `g`: for each function of `args` in order, a header, then one
/// row per size of [`sizes`] whose count is not 0, printed to `out` as soon as it is
/// measured. Per row: the check (with `args.check`) and the timing out of place, then
/// in place, then the baseline's out of place and in place. Buffers for the timings are
/// allocated once, up front, for the largest row (each check allocates and frees its
/// own in [`run_case`]), and freed when the run succeeds (after an error they stay
/// allocated: work may still be using them). Returns the rows in print order. The JSON
/// file of `args.json` is not written here (see [`rows_json`]). `progress` counts the
/// rows (its length is set here); the table is written while it is suspended, so a
/// bar drawn on the same terminal never mixes with it.
pub fn run_with_baseline(
    g: &mut dyn RankGroup,
    args: &BenchArgs,
    baseline: Option<&mut dyn Baseline>,
    out: &mut dyn Write,
    progress: &ProgressBar,
) -> Result<Vec<Row>> {
    args.validate()?;
    let nranks = g.nranks();
    if nranks == 0 {
        return Err(invalid("the group has no rank".into()));
    }
    if args.root >= nranks && args.functions.iter().any(|&f| has_root(f)) {
        return Err(invalid(format!("root {} is not a rank of a {nranks}-rank group", args.root)));
    }
    let mark = g.mark();
    let rows = sweep(g, args, baseline, out, progress)?;
    progress.finish_and_clear();
    g.release(mark);
    Ok(rows)
}

/// [`run_with_baseline`] on validated arguments.
fn sweep(
    g: &mut dyn RankGroup,
    args: &BenchArgs,
    mut baseline: Option<&mut dyn Baseline>,
    out: &mut dyn Write,
    progress: &ProgressBar,
) -> Result<Vec<Row>> {
    let nranks = g.nranks();
    progress.set_length(row_count(args, nranks) as u64);
    let largest = largest_bytes(args, nranks);
    // Indexed from the first rank the group drives.
    let buffers: Vec<(Buffer, Buffer)> =
        g.local_ranks().map(|rank| Ok((g.alloc(rank, largest.max(1))?, g.alloc(rank, largest.max(1))?))).collect::<Result<_>>()?;
    let mut rows = Vec::new();
    for &timing in &args.timing {
        for &function in &args.functions {
            let group = g.describe();
            progress.suspend(|| print_header(out, function, timing, &group, baseline.as_deref().map(Baseline::name), args))?;
            for size in args.sizes_for(timing) {
                let count = count_for(function, args.dtype, size, nranks);
                if count == 0 {
                    continue;
                }
                progress.set_message(format!("{} {size} B {timing:?}", function.name()));
                let root = if has_root(function) { args.root } else { 0 };
                let bytes = row_bytes(function, args.dtype, count, nranks);
                let factor = bus_factor(function, nranks);
                let stats_before = all_stats(g)?;
                let case = |in_place| CollCase { function, dtype: args.dtype, op: args.op, count, root, in_place, inputs: Inputs::Exact };
                let call = |in_place| BaselineCall { case: case(in_place), timing, warmup: args.warmup, iters: args.iters };
                let modes = baseline.as_deref().map_or_else(Vec::new, Baseline::modes);
                // Per placement (out of place, in place): ferroccl's rounds, the baseline's
                // per mode.
                let mut ours: [Vec<f64>; 2] = Default::default();
                let mut wrong: [Option<usize>; 2] = [None, None];
                let mut theirs: Vec<[Vec<f64>; 2]> = vec![Default::default(); modes.len()];
                let mut alone = true;
                let mut unfit = None;
                'rounds: for round in 0..args.repeats {
                    let ferroccl_first = round % 2 == 0;
                    for ferroccl_turn in [ferroccl_first, !ferroccl_first] {
                        if ferroccl_turn {
                            for (p, in_place) in [false, true].into_iter().enumerate() {
                                match time_placement(g, &case(in_place), &buffers, size, args, timing, round == 0 && args.check) {
                                    // A size the communicator's forced algorithm cannot run
                                    // is refused before anything is enqueued (the first call
                                    // of the row): the row is left out, with a line saying why.
                                    Err(e @ Error::AlgorithmUnfit { .. }) if round == 0 && !in_place => {
                                        unfit = Some(e);
                                        break 'rounds;
                                    }
                                    measured => {
                                        let (us, checked) = measured?;
                                        ours[p].push(us);
                                        wrong[p] = wrong[p].or(checked);
                                    }
                                }
                            }
                        } else if let Some(b) = baseline.as_deref_mut() {
                            alone &= baseline_turn(g, b, round, &call, &mut theirs)?;
                        }
                    }
                }
                if let Some(e) = unfit {
                    progress.suspend(|| writeln!(out, "# {size} B: not run: {e}").map_err(write_error))?;
                    progress.inc(1);
                    continue;
                }
                let stats = stats_before.zip(all_stats(g)?).map(|(before, after)| {
                    after.iter().zip(&before).map(|(a, b)| a.since(b)).collect::<Vec<_>>()
                });
                let timing_of = |rounds: &[f64], wrong| Timing::of_rounds(rounds, bytes, factor, wrong);
                let baseline_modes: Vec<ModeTimings> = modes
                    .into_iter()
                    .zip(&theirs)
                    .map(|(mode, [oop, ip])| ModeTimings { mode, oop: timing_of(oop, None), ip: timing_of(ip, None) })
                    .collect();
                let fastest = |placement: fn(&ModeTimings) -> Timing| {
                    baseline_modes.iter().min_by(|a, b| placement(a).time_us.total_cmp(&placement(b).time_us)).map(|m| (placement(m), m.mode.clone()))
                };
                let (baseline_oop, baseline_mode_oop) = fastest(|m| m.oop).unzip();
                let (baseline_ip, baseline_mode_ip) = fastest(|m| m.ip).unzip();
                let row = Row {
                    function,
                    timing,
                    size,
                    bytes,
                    count,
                    dtype: args.dtype,
                    op: args.op,
                    root: if has_root(function) { i64::from(args.root) } else { -1 },
                    oop: timing_of(&ours[0], wrong[0]),
                    ip: timing_of(&ours[1], wrong[1]),
                    rounds: args.repeats,
                    baseline_oop,
                    baseline_ip,
                    baseline_mode_oop,
                    baseline_mode_ip,
                    baseline_modes,
                    baseline_alone: baseline.is_some().then_some(alone),
                };
                let mut lines = vec![format_row(&row)];
                lines.extend(rounds_line(&row));
                if let Some(stats) = stats {
                    lines.extend([stats_line(&sum_stats(&stats)), spread_line(&stats, nranks), placement_line(&stats, nranks)]);
                    lines.extend(dispatch_line(&stats, nranks));
                }
                progress.suspend(|| lines.iter().try_for_each(|line| writeln!(out, "{line}").and_then(|()| out.flush())).map_err(write_error))?;
                progress.inc(1);
                rows.push(row);
            }
        }
    }
    Ok(rows)
}

/// One round of `case` on ferroccl: with `check_first`, first a check of its results (the
/// wrong calls summed over the processes); then a barrier of the processes and its timing
/// ([`time_ferroccl`]), the mean over the processes. Returns the time and the wrong count.
fn time_placement(
    g: &mut dyn RankGroup,
    case: &CollCase,
    buffers: &[(Buffer, Buffer)],
    size: usize,
    args: &BenchArgs,
    timing: CallTiming,
    check_first: bool,
) -> Result<(f64, Option<usize>)> {
    // Every process checks its own ranks; the row counts them all.
    let wrong = if check_first {
        let here = check(g, case, size)?;
        Some(gather(g.processes(), here as f64)?.iter().sum::<f64>() as usize)
    } else {
        None
    };
    barrier(g.processes())?;
    let us = time_ferroccl(g, case, buffers, timing, args.warmup, args.iters)?;
    Ok((mean(g.processes(), us)?, wrong))
}

/// One round of the baseline: every mode, out of place then in place (`call` makes the
/// placement's call), each time after a barrier, the mean over the processes pushed onto
/// `theirs[mode][placement]`. A live timing first waits for ferroccl's loops to leave the
/// GPUs; returns whether they had (true for timings made ahead of time).
fn baseline_turn(g: &mut dyn RankGroup, b: &mut dyn Baseline, round: usize, call: &dyn Fn(bool) -> BaselineCall, theirs: &mut [[Vec<f64>; 2]]) -> Result<bool> {
    let alone = if b.timed_live(call(false).timing) { loops_asleep_everywhere(g)? } else { true };
    for (mode, rounds) in theirs.iter_mut().enumerate() {
        for (p, in_place) in [false, true].into_iter().enumerate() {
            barrier(g.processes())?;
            let us = b.time_us(mode, round, &call(in_place))?;
            rounds[p].push(mean(g.processes(), us)?);
        }
    }
    Ok(alone)
}

/// How long a process waits for its ranks' loops to sleep before the baseline's timing
/// goes ahead beside them (a loop sleeps 1 ms after its last call on the default
/// communicator).
const SLEEP_WAIT: Duration = Duration::from_millis(200);

/// Whether no loop of any process's ranks holds its GPU: each process waits up to
/// [`SLEEP_WAIT`] for its own ([`RankGroup::loops_asleep`]), then the processes agree.
fn loops_asleep_everywhere(g: &mut dyn RankGroup) -> Result<bool> {
    let here = g.loops_asleep(SLEEP_WAIT)?;
    Ok(gather(g.processes(), f64::from(u8::from(here)))?.iter().all(|&v| v == 1.0))
}

/// The line under a row of several rounds (or one whose baseline ran beside awake loops):
/// each side's fastest and slowest round, out of place | in place, and whether the
/// baseline ran beside ferroccl's awake loops.
fn rounds_line(row: &Row) -> Option<String> {
    if row.rounds < 2 && row.baseline_alone != Some(false) {
        return None;
    }
    let spread = |oop: &Timing, ip: &Timing| {
        let us = |t: f64| format_time(t).trim().to_owned();
        format!("{}-{} | {}-{}", us(oop.min_us), us(oop.max_us), us(ip.min_us), us(ip.max_us))
    };
    let mut line = format!("#   {} rounds, fastest-slowest us: ferroccl {}", row.rounds, spread(&row.oop, &row.ip));
    for m in &row.baseline_modes {
        let _ = write!(line, "; baseline {} {}", m.mode, spread(&m.oop, &m.ip));
    }
    if row.baseline_alone == Some(false) {
        line += "; the baseline ran beside ferroccl's awake loops";
    }
    Some(line)
}

/// How many rows the sweep of `args` has on `nranks` ranks (sizes whose count is 0 make
/// no row).
pub fn row_count(args: &BenchArgs, nranks: u32) -> usize {
    args.timing.iter().map(|&t| rows_timed(args, nranks, t)).sum()
}

/// How many rows of the sweep of `args` on `nranks` ranks are timed `timing`'s way.
fn rows_timed(args: &BenchArgs, nranks: u32, timing: CallTiming) -> usize {
    args.functions.iter().map(|&f| args.sizes_for(timing).into_iter().filter(|&s| count_for(f, args.dtype, s, nranks) != 0).count()).sum()
}

/// The largest buffer of one rank the sweep of `args` on `nranks` ranks uses, in bytes
/// (0 for no row).
pub fn largest_bytes(args: &BenchArgs, nranks: u32) -> usize {
    args.functions
        .iter()
        .flat_map(|&f| sizes(args).into_iter().map(move |s| row_bytes(f, args.dtype, count_for(f, args.dtype, s, nranks), nranks)))
        .max()
        .unwrap_or(0)
}

/// Where the channels' time went during one row (warm-up and timed iterations, out of
/// place and in place), summed over every rank and channel, as a comment line.
fn stats_line(s: &ChannelStats) -> String {
    let waits = s.copy_ns + s.wait_data_ns + s.wait_credit_ns;
    let busy = s.busy_ns.max(waits).max(1) as f64;
    let share = |ns: u64| 100.0 * ns as f64 / busy;
    format!(
        "#   channels: {} slices, {:.3} GB; of their busy time copying {:.0}%, waiting for data {:.0}%, for credit {:.0}%, other {:.0}%; {:.2} GB/s per channel while copying",
        s.slices,
        s.bytes as f64 / 1e9,
        share(s.copy_ns),
        share(s.wait_data_ns),
        share(s.wait_credit_ns),
        share(s.busy_ns.saturating_sub(waits)),
        copy_rate(s),
    ) + &format!(
        "; collectives run per channel: ring {}, one-shot {}, two-shot {}, nvls {}",
        s.algorithm_items[Algorithm::Ring as usize],
        s.algorithm_items[Algorithm::OneShot as usize],
        s.algorithm_items[Algorithm::TwoShot as usize],
        s.algorithm_items[Algorithm::Nvls as usize]
    ) + &busy_per_collective(s).map_or(String::new(), |us| format!("; {us:.2} us busy per collective per channel")) + &if s.exchange_ns > 0 {
        format!(" ({:.2} us of it in one-shot/two-shot flag exchanges)", s.exchange_ns as f64 / s.algorithm_items.iter().sum::<u64>().max(1) as f64 / 1e3)
    } else {
        String::new()
    } + &if s.mailbox_items > 0 {
        format!("; stream-ordered items taken {:.2} us after their submission on average", s.dispatch_ns as f64 / s.mailbox_items as f64 / 1e3)
    } else {
        String::new()
    } + &if s.call_kernel_parts > 0 {
        format!("; parts run on the call kernel alone: {}, {:.2} us each from the CTA's start to its end", s.call_kernel_parts, s.call_kernel_ns as f64 / s.call_kernel_parts as f64 / 1e3)
    } else {
        String::new()
    }
}

/// The channels' busy time over the collectives they took part in (µs), when they took
/// part in any: about how long one channel runs one collective (channels outside a
/// one-shot/two-shot plan add their near-zero busy time), the part of a call's time the
/// algorithm takes.
fn busy_per_collective(s: &ChannelStats) -> Option<f64> {
    let items: u64 = s.algorithm_items.iter().sum();
    (items > 0).then(|| s.busy_ns as f64 / items as f64 / 1e3)
}

/// How evenly the channels worked during one row, as a comment line: the busiest and
/// the idlest channel (time spent running collectives), and the slowest and fastest
/// copier, each with its rank, channel and SM. `channels` holds every rank's channels,
/// rank by rank.
fn spread_line(channels: &[ChannelStats], nranks: u32) -> String {
    let per_rank = (channels.len() / nranks.max(1) as usize).max(1);
    let name = |i: usize, s: &ChannelStats| format!("rank {} channel {} (SM {})", i / per_rank, i % per_rank, sm_text(s));
    let busy: Vec<(usize, &ChannelStats)> = channels.iter().enumerate().filter(|(_, s)| s.copy_ns > 0).collect();
    let by_busy = |a: &&(usize, &ChannelStats), b: &&(usize, &ChannelStats)| a.1.busy_ns.cmp(&b.1.busy_ns);
    let by_rate = |a: &&(usize, &ChannelStats), b: &&(usize, &ChannelStats)| copy_rate(a.1).total_cmp(&copy_rate(b.1));
    let (Some(&most), Some(&least), Some(&slow), Some(&fast)) =
        (busy.iter().max_by(by_busy), busy.iter().min_by(by_busy), busy.iter().min_by(by_rate), busy.iter().max_by(by_rate))
    else {
        return "#   no channel copied".to_string();
    };
    let ms = |s: &ChannelStats| s.busy_ns as f64 / 1e6;
    format!(
        "#   busiest: {} {:.2} ms; idlest: {} {:.2} ms; slowest copy: {} {:.2} GB/s; fastest: {} {:.2} GB/s",
        name(most.0, most.1),
        ms(most.1),
        name(least.0, least.1),
        ms(least.1),
        name(slow.0, slow.1),
        copy_rate(slow.1),
        name(fast.0, fast.1),
        copy_rate(fast.1),
    )
}

/// Every channel's mean wait from a stream-ordered item's submission to taking it during
/// one row, rank by rank, as a comment line (µs), when any channel took one.
fn dispatch_line(channels: &[ChannelStats], nranks: u32) -> Option<String> {
    let per_rank = (channels.len() / nranks.max(1) as usize).max(1);
    if channels.iter().all(|s| s.mailbox_items == 0) {
        return None;
    }
    let mean = |s: &ChannelStats| if s.mailbox_items == 0 { "?".to_string() } else { format!("{:.1}", s.dispatch_ns as f64 / s.mailbox_items as f64 / 1e3) };
    let ranks: Vec<String> = channels
        .chunks(per_rank)
        .enumerate()
        .map(|(rank, chans)| format!("rank {rank}: {}", chans.iter().map(mean).collect::<Vec<_>>().join(" ")))
        .collect();
    Some(format!("#   taken after submission (us, by channel) | {}", ranks.join(" | ")))
}

/// Every channel's SM and copy rate during one row, rank by rank, as a comment line
/// (`SM:GB/s`; `?` for a channel that copied nothing), to see how placement and speed go
/// together.
fn placement_line(channels: &[ChannelStats], nranks: u32) -> String {
    let per_rank = (channels.len() / nranks.max(1) as usize).max(1);
    let mut line = String::from("#   placement (SM:GB/s)");
    for (i, s) in channels.iter().enumerate() {
        if i % per_rank == 0 {
            line += &format!(" | rank {}:", i / per_rank);
        }
        let rate = if s.copy_ns == 0 { "?".to_string() } else { format!("{:.1}", copy_rate(s)) };
        line += &format!(" {}:{rate}", sm_text(s));
    }
    line
}

/// Bytes per nanosecond (GB/s) of `s`'s slices while they were copied.
fn copy_rate(s: &ChannelStats) -> f64 {
    s.bytes as f64 / s.copy_ns.max(1) as f64
}

/// The SM `s`'s channel last ran on, or `?` when none was recorded.
fn sm_text(s: &ChannelStats) -> String {
    s.sm.checked_sub(1).map_or("?".to_string(), |sm| sm.to_string())
}

/// A baseline whose graph rows are timed ahead of time, before ferroccl's loops start
/// (every mode and round of each): a call captured in a graph pins ferroccl's loops awake
/// for good, and NCCL must neither be timed beside them nor reach a device-wide wait
/// (its setup synchronizes devices and frees memory, which would wait for a pinned loop
/// forever). Every other timing goes to the baseline live.
pub struct Premeasured<B> {
    live: B,
    /// (mode, round, function, count, in place) → microseconds per call.
    graph_us: std::collections::BTreeMap<(usize, usize, u32, usize, bool), f64>,
}

impl<B: Baseline> Premeasured<B> {
    /// Times `live`'s graph rows of the sweep of `args` on `nranks` ranks; `progress`
    /// counts the rows. With `processes` (a baseline rank per process), every time is the
    /// mean of every process's, each measured after a barrier.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub fn measure(mut live: B, args: &BenchArgs, nranks: u32, mut processes: Option<&mut Bootstrap>, progress: &ProgressBar) -> Result<Self> {
        args.validate()?;
        let mut graph_us = std::collections::BTreeMap::new();
        let timing = CallTiming::Graph;
        if args.timing.contains(&timing) {
            progress.set_length(rows_timed(args, nranks, timing) as u64);
            let modes = live.modes().len();
            for &function in &args.functions {
                for size in args.sizes_for(timing) {
                    let count = count_for(function, args.dtype, size, nranks);
                    if count == 0 {
                        continue;
                    }
                    let root = if has_root(function) { args.root } else { 0 };
                    progress.set_message(format!("{} {size} B {timing:?}", function.name()));
                    for round in 0..args.repeats {
                        for mode in 0..modes {
                            for in_place in [false, true] {
                                let case = CollCase { function, dtype: args.dtype, op: args.op, count, root, in_place, inputs: Inputs::Exact };
                                let call = BaselineCall { case, timing, warmup: args.warmup, iters: args.iters };
                                barrier(processes.as_deref_mut())?;
                                let us = live.time_us(mode, round, &call)?;
                                graph_us.insert((mode, round, function as u32, count, in_place), mean(processes.as_deref_mut(), us)?);
                            }
                        }
                    }
                    progress.inc(1);
                }
            }
        }
        progress.finish_and_clear();
        Ok(Self { live, graph_us })
    }
}

impl<B: Baseline> Baseline for Premeasured<B> {
    fn name(&self) -> String {
        self.live.name()
    }

    fn modes(&self) -> Vec<String> {
        self.live.modes()
    }

    fn timed_live(&self, timing: CallTiming) -> bool {
        timing != CallTiming::Graph && self.live.timed_live(timing)
    }

    fn time_us(&mut self, mode: usize, round: usize, call: &BaselineCall) -> Result<f64> {
        if call.timing != CallTiming::Graph {
            return self.live.time_us(mode, round, call);
        }
        let case = &call.case;
        self.graph_us.get(&(mode, round, case.function as u32, case.count, case.in_place)).copied().ok_or_else(|| {
            invalid(format!("{} with {} elements (graph, round {round}) was not measured ahead of time", case.function.name(), case.count))
        })
    }
}

/// Waits for every process of a benchmark across processes (nothing to wait for in one).
fn barrier(processes: Option<&mut Bootstrap>) -> Result<()> {
    processes.map_or(Ok(()), Bootstrap::barrier)
}

/// Every process's `value`, through `processes` (just `value` in one process).
fn gather(processes: Option<&mut Bootstrap>, value: f64) -> Result<Vec<f64>> {
    let Some(p) = processes else { return Ok(vec![value]) };
    let parts = p.all_gather("a benchmark figure", &value.to_le_bytes(), &[])?;
    parts.iter().map(|part| part.bytes.as_slice().try_into().map(f64::from_le_bytes).map_err(|_| Error::Bootstrap("a malformed benchmark figure".into()))).collect()
}

/// The mean over the processes of each one's time per call (as nccl-tests reports its
/// ranks' times by default).
fn mean(processes: Option<&mut Bootstrap>, us: f64) -> Result<f64> {
    let all = gather(processes, us)?;
    Ok(all.iter().sum::<f64>() / all.len() as f64)
}

/// An error writing the table to the caller's writer.
fn write_error(e: std::io::Error) -> Error {
    invalid(format!("writing the benchmark table: {e}"))
}

/// Runs `case` once through [`run_case`]: 0 when every rank's output is exact, 1 when
/// not (what was wrong goes to the log).
fn check(g: &mut dyn RankGroup, case: &CollCase, size: usize) -> Result<usize> {
    let seed = size as u64 ^ (u64::from(case.in_place) << 63);
    Ok(match run_case(g, case, seed, TIMEOUT)? {
        None => 0,
        Some(what) => {
            log::warn!("collbench: wrong results: {what}");
            1
        }
    })
}

/// The work item of rank `rank` for `case` on its `(input, output)` buffers; in place,
/// both sides are in `output` at NCCL's in-place offsets (as [`run_case`] places them).
fn bench_item(case: &CollCase, nranks: u32, rank: u32, (input, output): (Buffer, Buffer)) -> WorkItem {
    let block = (case.in_place_offset(rank) * case.dtype.size()) as u64;
    let (src, dst) = match (case.in_place, case.function) {
        (false, _) => (input.addr, output.addr),
        (true, CollFunction::AllGather) => (output.addr + block, output.addr),
        (true, CollFunction::ReduceScatter) => (output.addr, output.addr + block),
        (true, _) => (output.addr, output.addr),
    };
    WorkItem::collective(case.function, case.dtype, case.op, case.op_arg(nranks), src, dst, case.count as u64, u64::from(case.root))
}

/// Microseconds per call of `case` on every rank of `g`, through the group's path:
/// `warmup` iterations, each waited for, then as `timing` says (host clock):
/// back to back, `iters` iterations submitted (iteration-major, so every rank's queue
/// only ever waits for items whose peers are already submitted) and the last one of
/// every rank waited for; sync, each of `iters` iterations waited for on every rank
/// before the next; graph, [`GRAPH_CALLS`] calls captured per rank, the graphs launched
/// `iters` times back to back (rank-major within a replay) and waited for, per call.
fn time_ferroccl(g: &mut dyn RankGroup, case: &CollCase, buffers: &[(Buffer, Buffer)], timing: CallTiming, warmup: usize, iters: usize) -> Result<f64> {
    let (nranks, local) = (g.nranks(), g.local_ranks());
    let items: Vec<WorkItem> = local.clone().zip(buffers).map(|(rank, &bufs)| bench_item(case, nranks, rank, bufs)).collect();
    let enqueue_all =
        |g: &mut dyn RankGroup| -> Result<Vec<Submitted>> { items.iter().zip(local.clone()).map(|(&item, rank)| g.submit(rank, item)).collect() };
    let wait_all = |g: &mut dyn RankGroup, submitted: Vec<Submitted>| -> Result<()> {
        submitted.into_iter().zip(local.clone()).try_for_each(|(s, rank)| g.wait_submitted(rank, s, TIMEOUT))
    };
    for _ in 0..warmup {
        let tickets = enqueue_all(g)?;
        wait_all(g, tickets)?;
    }
    match timing {
        CallTiming::BackToBack => {
            let start = Instant::now();
            let mut last = Vec::new();
            for _ in 0..iters {
                last = enqueue_all(g)?;
            }
            wait_all(g, last)?;
            Ok(start.elapsed().as_secs_f64() * 1e6 / iters as f64)
        }
        CallTiming::Sync => {
            let start = Instant::now();
            for _ in 0..iters {
                let submitted = enqueue_all(g)?;
                wait_all(g, submitted)?;
            }
            Ok(start.elapsed().as_secs_f64() * 1e6 / iters as f64)
        }
        CallTiming::Graph => {
            let timed = (|| -> Result<f64> {
                let graphs: Vec<usize> = items.iter().zip(local.clone()).map(|(&item, rank)| g.capture(rank, &[item; GRAPH_CALLS])).collect::<Result<_>>()?;
                let replay_all = |g: &mut dyn RankGroup| -> Result<Vec<Submitted>> { graphs.iter().zip(local.clone()).map(|(&graph, rank)| g.replay(rank, graph)).collect() };
                let warm = replay_all(g)?;
                wait_all(g, warm)?;
                let start = Instant::now();
                let mut last = Vec::new();
                for _ in 0..iters {
                    last = replay_all(g)?;
                }
                wait_all(g, last)?;
                Ok(start.elapsed().as_secs_f64() * 1e6 / (iters * GRAPH_CALLS) as f64)
            })();
            g.drop_graphs();
            timed
        }
    }
}

/// A time as nccl-tests prints it: 7 wide, fewer decimals as it grows.
fn format_time(us: f64) -> String {
    match us {
        _ if us >= 10_000.0 => format!("{us:7.0}"),
        _ if us >= 100.0 => format!("{us:7.1}"),
        _ => format!("{us:7.2}"),
    }
}

/// One placement's columns: time, algbw, busbw, #wrong.
fn format_timing(t: &Timing) -> String {
    let wrong = t.wrong.map_or_else(|| "N/A".to_owned(), |w| w.to_string());
    format!("  {}  {:6.2}  {:6.2}  {wrong:>5}", format_time(t.time_us), t.algbw, t.busbw)
}

/// One row of the table, in the header's columns.
fn format_row(row: &Row) -> String {
    let op = if row.function.reduces() { row.op.name() } else { "none" };
    let mut line = format!("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", row.bytes, row.count, row.dtype.name(), op, row.root);
    line += &format_timing(&row.oop);
    line += &format_timing(&row.ip);
    if let (Some(b_oop), Some(b_ip), Some((r_oop, r_ip))) = (row.baseline_oop, row.baseline_ip, row.ratios()) {
        let mode = |m: &Option<String>| m.clone().unwrap_or_default();
        let (m_oop, m_ip) = (mode(&row.baseline_mode_oop), mode(&row.baseline_mode_ip));
        let _ = write!(line, "  {:>10.2}  {r_oop:>7.3}  {m_oop:>9}  {:>10.2}  {r_ip:>7.3}  {m_ip:>9}", b_oop.busbw, b_ip.busbw);
    }
    line
}

/// The header of one function's table (nccl-tests' columns; with a baseline, its bus
/// bandwidth and ferroccl's ratio to it, out of place then in place).
fn print_header(out: &mut dyn Write, function: CollFunction, timing: CallTiming, group: &str, baseline: Option<String>, args: &BenchArgs) -> Result<()> {
    let columns = |a: &str, b: &str, c: &str, d: &str| format!("  {a:>7}  {b:>6}  {c:>6} {d:>6}");
    let versus = |a: &str, b: &str, c: &str| format!("  {a:>10}  {b:>7}  {c:>9}");
    let with_baseline = baseline.is_some();
    let mut lines = vec![format!("# ferroccl {} on {group}", function.name())];
    if let Some(name) = &baseline {
        lines.push(format!("# baseline: {name}"));
    }
    let how = match timing {
        CallTiming::BackToBack => "back to back".to_owned(),
        CallTiming::Sync => "each waited for".to_owned(),
        CallTiming::Graph => format!("of {GRAPH_CALLS} calls in a CUDA graph per rank, time per call"),
    };
    lines.push(format!("# {} iterations {how} after {} warmup, check {}", args.iters, args.warmup, if args.check { "on" } else { "off" }));
    if args.repeats > 1 {
        let turns = if with_baseline { ", ferroccl and the baseline taking turns" } else { "" };
        lines.push(format!("# times: the median of {} rounds{turns}", args.repeats));
    }
    if with_baseline {
        lines.push("# nccl: its fastest mode per placement (median time)".to_owned());
    }
    let mut blocks = format!("#{:51}{:^32}{:^32}", "", "out-of-place", "in-place");
    let mut names = format!("#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}", "size", "count", "type", "redop", "root");
    let mut units = format!("#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}", "(B)", "(elements)", "", "", "");
    for _ in 0..2 {
        names += &columns("time", "algbw", "busbw", "#wrong");
        units += &columns("(us)", "(GB/s)", "(GB/s)", "");
    }
    if with_baseline {
        let _ = write!(blocks, "{:^32}{:^32}", "nccl out-of-place", "nccl in-place");
        for _ in 0..2 {
            names += &versus("nccl_busbw", "ratio", "mode");
            units += &versus("(GB/s)", "", "");
        }
    }
    lines.extend([blocks, names, units]);
    lines.iter().try_for_each(|line| writeln!(out, "{}", line.trim_end())).map_err(write_error)
}

/// The results as a JSON object: `command`, `device`, `date` (`date_utc` as given);
/// the latency summary of all_reduce, all_gather and reduce_scatter, each field present
/// when rows of its kind were measured (`null` without a baseline):
/// `small_time_vs_nccl_le256K`, `small_sync_time_vs_nccl_le256K` and
/// `small_graph_time_vs_nccl_le256K`, the worst ferroccl/baseline time ratio over the
/// sizes ≤ 256 KiB timed back to back, synchronized, in graphs;
/// `allreduce_graph_8B_us` and `allreduce_graph_256K_us`, ferroccl's all_reduce per call
/// in graphs, out of place; `busbw_vs_nccl_min_512K_1G`, the smallest bus-bandwidth
/// ratio over the sizes ≥ 512 KiB timed back to back; then one
/// `<function>_busbw_vs_nccl_ge64M` field per function present (function names without
/// underscores: `allreduce_busbw_vs_nccl_ge64M`, ...) holding the smallest
/// ferroccl/baseline bus-bandwidth ratio over the back-to-back rows of sweep size ≥ 64
/// MiB, out of place and in place (`null` without a baseline or without such a row), and
/// `rows`, every [`Row`] field by name (times in µs, bandwidths in GB/s; `null` for what
/// is absent or not a finite number).
pub fn rows_json(rows: &[Row], command: &str, device: &str, date_utc: &str, processes: usize) -> String {
    let ratio = |function: CollFunction| rows.iter().any(|r| r.function == function).then(|| min_large_ratio(rows, function));
    let small = |timing: CallTiming| rows.iter().any(|r| r.timing == timing).then(|| worst_small_time_ratio(rows, timing));
    let graph_us = |size: usize| {
        rows.iter().find(|r| r.timing == CallTiming::Graph && r.function == CollFunction::AllReduce && r.size == size).map(|r| r.oop.time_us)
    };
    let json = RowsJson {
        command,
        device,
        date: date_utc,
        processes,
        small_time: small(CallTiming::BackToBack),
        small_sync_time: small(CallTiming::Sync),
        small_graph_time: small(CallTiming::Graph),
        allreduce_graph_8b_us: graph_us(8),
        allreduce_graph_256k_us: graph_us(256 << 10),
        busbw_mid_large: rows.iter().any(|r| r.timing == CallTiming::BackToBack && r.size >= MID_BYTES).then(|| min_mid_large_ratio(rows)),
        allreduce: ratio(CollFunction::AllReduce),
        allgather: ratio(CollFunction::AllGather),
        reducescatter: ratio(CollFunction::ReduceScatter),
        broadcast: ratio(CollFunction::Broadcast),
        reduce: ratio(CollFunction::Reduce),
        rows,
    };
    serde_json::to_string_pretty(&json).expect("plain structs serialize") + "\n"
}

/// The body of [`rows_json`]. A ratio field is left out when its function has no row
/// (outer `None`) and `null` when it has no ratio (inner `None`).
#[derive(Serialize)]
struct RowsJson<'a> {
    command: &'a str,
    device: &'a str,
    date: &'a str,
    /// The processes the ranks ran in: 1 (every rank driven by one thread of one
    /// process), or one per rank (`--procs`).
    processes: usize,
    #[serde(rename = "small_time_vs_nccl_le256K", skip_serializing_if = "Option::is_none")]
    small_time: Option<Option<f64>>,
    #[serde(rename = "small_sync_time_vs_nccl_le256K", skip_serializing_if = "Option::is_none")]
    small_sync_time: Option<Option<f64>>,
    #[serde(rename = "small_graph_time_vs_nccl_le256K", skip_serializing_if = "Option::is_none")]
    small_graph_time: Option<Option<f64>>,
    #[serde(rename = "allreduce_graph_8B_us", skip_serializing_if = "Option::is_none")]
    allreduce_graph_8b_us: Option<f64>,
    #[serde(rename = "allreduce_graph_256K_us", skip_serializing_if = "Option::is_none")]
    allreduce_graph_256k_us: Option<f64>,
    #[serde(rename = "busbw_vs_nccl_min_512K_1G", skip_serializing_if = "Option::is_none")]
    busbw_mid_large: Option<Option<f64>>,
    #[serde(rename = "allreduce_busbw_vs_nccl_ge64M", skip_serializing_if = "Option::is_none")]
    allreduce: Option<Option<f64>>,
    #[serde(rename = "allgather_busbw_vs_nccl_ge64M", skip_serializing_if = "Option::is_none")]
    allgather: Option<Option<f64>>,
    #[serde(rename = "reducescatter_busbw_vs_nccl_ge64M", skip_serializing_if = "Option::is_none")]
    reducescatter: Option<Option<f64>>,
    #[serde(rename = "broadcast_busbw_vs_nccl_ge64M", skip_serializing_if = "Option::is_none")]
    broadcast: Option<Option<f64>>,
    #[serde(rename = "reduce_busbw_vs_nccl_ge64M", skip_serializing_if = "Option::is_none")]
    reduce: Option<Option<f64>>,
    rows: &'a [Row],
}

/// The smallest ferroccl/baseline bus-bandwidth ratio of `function` over its rows of
/// sweep size ≥ 64 MiB timed back to back that have a baseline, out of place and in
/// place.
fn min_large_ratio(rows: &[Row], function: CollFunction) -> Option<f64> {
    rows.iter()
        .filter(|r| r.timing == CallTiming::BackToBack && r.function == function && r.size >= LARGE_BYTES)
        .filter_map(Row::ratios)
        .flat_map(|(oop, ip)| [oop, ip])
        .reduce(f64::min)
}

/// The collectives the `small_*` and `busbw_vs_nccl_min_512K_1G` fields cover.
const LATENCY_FUNCTIONS: [CollFunction; 3] = [CollFunction::AllReduce, CollFunction::AllGather, CollFunction::ReduceScatter];

/// The largest ferroccl/baseline time ratio over the rows timed `timing`'s way of
/// [`LATENCY_FUNCTIONS`] of sweep size ≤ 256 KiB that have a baseline, out of place and
/// in place.
fn worst_small_time_ratio(rows: &[Row], timing: CallTiming) -> Option<f64> {
    rows.iter()
        .filter(|r| r.timing == timing && LATENCY_FUNCTIONS.contains(&r.function) && r.size <= SMALL_BYTES)
        .filter_map(|r| Some([r.oop.time_us / r.baseline_oop?.time_us, r.ip.time_us / r.baseline_ip?.time_us]))
        .flatten()
        .reduce(f64::max)
}

/// The smallest ferroccl/baseline bus-bandwidth ratio over the back-to-back rows of
/// [`LATENCY_FUNCTIONS`] of sweep size ≥ 512 KiB that have a baseline, out of place and
/// in place.
fn min_mid_large_ratio(rows: &[Row]) -> Option<f64> {
    rows.iter()
        .filter(|r| r.timing == CallTiming::BackToBack && LATENCY_FUNCTIONS.contains(&r.function) && r.size >= MID_BYTES)
        .filter_map(Row::ratios)
        .flat_map(|(oop, ip)| [oop, ip])
        .reduce(f64::min)
}

fn function_name<S: Serializer>(f: &CollFunction, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(f.name())
}

fn dtype_name<S: Serializer>(d: &DataType, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(d.name())
}

fn op_name<S: Serializer>(o: &RedOpKind, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(o.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ferroccl bench ARGS` through the command line, normalized and validated.
    fn parse(args: &[&str]) -> std::result::Result<BenchArgs, String> {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["ferroccl", "bench"].iter().chain(args)).map_err(|e| e.to_string())?;
        match cli.command {
            crate::cli::Command::Bench(b) => b.sweep.normalized().map_err(|e| e.to_string()),
            other => Err(format!("{other:?}")),
        }
    }

    #[test]
    fn busy_per_collective_divides_by_the_collectives_run() {
        let mut s = ChannelStats { busy_ns: 3000, ..ChannelStats::default() };
        assert_eq!(busy_per_collective(&s), None);
        s.algorithm_items = [1, 1, 0, 0];
        assert_eq!(busy_per_collective(&s), Some(1.5));
        assert!(stats_line(&s).contains("1.50 us busy per collective"), "{}", stats_line(&s));
        assert!(!stats_line(&s).contains("call kernel alone"), "{}", stats_line(&s));
        (s.call_kernel_parts, s.call_kernel_ns) = (4, 10_000);
        assert!(stats_line(&s).contains("parts run on the call kernel alone: 4, 2.50 us each"), "{}", stats_line(&s));
    }

    #[test]
    fn parse_args_defaults_flags_and_suffixes() {
        assert_eq!(parse(&[]).unwrap(), BenchArgs::default());
        let a = parse(&[
            "-b",
            "8",
            "-e",
            "128M",
            "-f",
            "4",
            "-d",
            "bfloat16",
            "-o",
            "avg",
            "-c",
            "0",
            "-n",
            "7",
            "-w",
            "0",
            "-r",
            "3",
            "--timing",
            "graph,sync,graph",
            "--repeats",
            "3",
            "--latency-maxbytes",
            "64K",
            "reduce",
            "all_gather",
            "reduce",
            "--json",
            "out.json",
        ])
        .unwrap();
        assert_eq!(
            a,
            BenchArgs {
                min_bytes: 8,
                max_bytes: 128 << 20,
                step_factor: 4,
                dtype: DataType::Bf16,
                op: RedOpKind::SumPostDiv,
                check: false,
                iters: 7,
                warmup: 0,
                root: 3,
                functions: vec![CollFunction::Reduce, CollFunction::AllGather],
                json: Some(PathBuf::from("out.json")),
                timing: vec![CallTiming::Sync, CallTiming::Graph],
                latency_max_bytes: 64 << 10,
                repeats: 3,
            }
        );
        assert_eq!(parse(&["-b", "1k", "-e", "1K"]).unwrap().min_bytes, 1024);
        assert_eq!(parse(&["-b", "3m", "-e", "3M"]).unwrap().max_bytes, 3 << 20);
        assert_eq!(parse(&["-b", "2G", "-e", "2g"]).unwrap().min_bytes, 2 << 30);
        assert_eq!(parse(&["--minbytes", "1", "--maxbytes", "2", "--datatype", "uint64"]).unwrap().dtype, DataType::U64);
        assert_eq!(
            parse(&["--stepfactor", "8", "--op", "max", "--check", "0", "--iters", "3", "--warmup_iters", "1", "--root", "1"]).unwrap(),
            BenchArgs { step_factor: 8, op: RedOpKind::Max, check: false, iters: 3, warmup: 1, root: 1, ..BenchArgs::default() }
        );
    }

    #[test]
    fn parse_args_refuses_bad_input() {
        for bad in [
            &["-b"][..],
            &["-b", "12X"],
            &["-b", "K"],
            &["-b", "-5"],
            &["-b", "1.5M"],
            &["-b", "99999999999999999999G"],
            &["-b", "0"],
            &["-b", "1G", "-e", "1M"],
            &["-f", "1"],
            &["-n", "0"],
            &["-n", "many"],
            &["--repeats", "0"],
            &["-d", "float16"],
            &["-o", "premulsum"],
            &["-c", "2"],
            &["-r", "-1"],
            &["-z", "1"],
            &["sendrecv"],
            &["allreduce"],
        ] {
            match parse(bad) {
                Err(why) => assert!(!why.is_empty()),
                Ok(args) => panic!("{bad:?} gave {args:?}"),
            }
        }
    }

    #[test]
    fn sizes_multiply_up_to_the_largest() {
        let args = |min, max, step_factor| BenchArgs { min_bytes: min, max_bytes: max, step_factor, ..BenchArgs::default() };
        assert_eq!(sizes(&args(8, 128, 2)), [8, 16, 32, 64, 128]);
        assert_eq!(sizes(&args(8, 127, 2)), [8, 16, 32, 64]);
        assert_eq!(sizes(&args(1, 1000, 10)), [1, 10, 100, 1000]);
        assert_eq!(sizes(&args(5, 5, 2)), [5]);
        assert_eq!(sizes(&args(1 << 62, usize::MAX, 2)), [1 << 62, 1 << 63]);
        assert!(sizes(&args(9, 8, 2)).is_empty());
        assert!(sizes(&args(0, 8, 2)).is_empty());
        assert!(sizes(&args(1, 8, 1)).is_empty());
    }

    #[test]
    fn bus_factors_follow_nccl_tests() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(bus_factor(CollFunction::AllReduce, 8), 1.75));
        assert!(close(bus_factor(CollFunction::ReduceScatter, 8), 0.875));
        assert!(close(bus_factor(CollFunction::AllGather, 4), 0.75));
        assert!(close(bus_factor(CollFunction::Broadcast, 8), 1.0));
        assert!(close(bus_factor(CollFunction::Reduce, 3), 1.0));
        assert!(close(bus_factor(CollFunction::AllReduce, 1), 0.0));
        let t = Timing::of_rounds(&[10.0], 1 << 20, bus_factor(CollFunction::AllReduce, 2), None);
        assert!(close(t.algbw, 104.8576) && close(t.busbw, 104.8576));
    }

    #[test]
    fn counts_and_sizes_follow_nccl_tests_conventions() {
        assert_eq!(count_for(CollFunction::AllReduce, DataType::F32, 1024, 4), 256);
        assert_eq!(count_for(CollFunction::Broadcast, DataType::F64, 1024, 4), 128);
        assert_eq!(count_for(CollFunction::AllGather, DataType::F32, 1024, 4), 64);
        assert_eq!(count_for(CollFunction::ReduceScatter, DataType::F32, 1024, 3), 85);
        assert_eq!(count_for(CollFunction::AllGather, DataType::F32, 8, 4), 0);
        assert_eq!(count_for(CollFunction::AllReduce, DataType::F32, 3, 1), 0);
        assert_eq!(row_bytes(CollFunction::AllGather, DataType::F32, 64, 4), 1024);
        assert_eq!(row_bytes(CollFunction::ReduceScatter, DataType::F32, 85, 3), 1020);
        assert_eq!(row_bytes(CollFunction::AllReduce, DataType::F32, count_for(CollFunction::AllReduce, DataType::F32, 10, 2), 2), 8);
    }

    fn timing(busbw: f64) -> Timing {
        Timing { time_us: 1.0, algbw: busbw, busbw, min_us: 1.0, max_us: 1.0, wrong: Some(0) }
    }

    fn row(function: CollFunction, size: usize, ours: (f64, f64), nccl: Option<(f64, f64)>) -> Row {
        Row {
            function,
            timing: CallTiming::BackToBack,
            size,
            bytes: size,
            count: size / 4,
            dtype: DataType::F32,
            op: RedOpKind::Sum,
            root: -1,
            oop: timing(ours.0),
            ip: timing(ours.1),
            rounds: 1,
            baseline_oop: nccl.map(|n| timing(n.0)),
            baseline_ip: nccl.map(|n| timing(n.1)),
            baseline_mode_oop: nccl.map(|_| "plain".into()),
            baseline_mode_ip: nccl.map(|_| "plain".into()),
            baseline_modes: nccl.map(|n| ModeTimings { mode: "plain".into(), oop: timing(n.0), ip: timing(n.1) }).into_iter().collect(),
            baseline_alone: nccl.map(|_| true),
        }
    }

    #[test]
    fn json_summarizes_latency_by_timing() {
        let timed = |function, timing, size, ours: (f64, f64), nccl: (f64, f64)| {
            let mut r = row(function, size, (1.0, 1.0), Some((1.0, 1.0)));
            r.timing = timing;
            (r.oop.time_us, r.ip.time_us) = ours;
            (r.baseline_oop.as_mut().unwrap().time_us, r.baseline_ip.as_mut().unwrap().time_us) = nccl;
            r
        };
        use CallTiming::{BackToBack, Graph, Sync};
        let rows = [
            timed(CollFunction::AllReduce, BackToBack, 8, (10.0, 12.0), (20.0, 20.0)),
            timed(CollFunction::AllGather, BackToBack, 256 << 10, (30.0, 10.0), (20.0, 20.0)),
            // Above 256 KiB, and broadcast: not in the small-size ratios however slow.
            timed(CollFunction::ReduceScatter, BackToBack, 512 << 10, (90.0, 90.0), (10.0, 10.0)),
            timed(CollFunction::Broadcast, BackToBack, 8, (90.0, 90.0), (10.0, 10.0)),
            timed(CollFunction::AllReduce, Sync, 8, (7.0, 7.0), (10.0, 10.0)),
            timed(CollFunction::AllReduce, Graph, 8, (4.0, 5.0), (5.0, 5.0)),
            timed(CollFunction::AllReduce, Graph, 256 << 10, (9.0, 9.0), (10.0, 10.0)),
        ];
        let json: serde_json::Value = serde_json::from_str(&rows_json(&rows, "", "", "", 1)).unwrap();
        assert_eq!(json["small_time_vs_nccl_le256K"], 1.5);
        assert_eq!(json["small_sync_time_vs_nccl_le256K"], 0.7);
        assert_eq!(json["small_graph_time_vs_nccl_le256K"], 1.0);
        assert_eq!((&json["allreduce_graph_8B_us"], &json["allreduce_graph_256K_us"]), (&4.0.into(), &9.0.into()));
        // busbw ratios: every row's is 1 (row() gives busbw 1 to both sides).
        assert_eq!(json["busbw_vs_nccl_min_512K_1G"], 1.0);
        let back_to_back_only: serde_json::Value = serde_json::from_str(&rows_json(&rows[..2], "", "", "", 1)).unwrap();
        for absent in ["small_sync_time_vs_nccl_le256K", "small_graph_time_vs_nccl_le256K", "allreduce_graph_8B_us", "busbw_vs_nccl_min_512K_1G"] {
            assert!(back_to_back_only.get(absent).is_none(), "{absent}: {back_to_back_only}");
        }
    }

    #[test]
    fn dispatch_line_gives_each_channels_mean_wait() {
        let took = |items, ns| {
            let mut s = ChannelStats::default();
            (s.mailbox_items, s.dispatch_ns) = (items, ns);
            s
        };
        assert_eq!(dispatch_line(&[ChannelStats::default(); 4], 2), None, "no stream-ordered item: no line");
        let line = dispatch_line(&[took(2, 3_000), took(0, 0), took(4, 60_000), took(1, 2_500)], 2).unwrap();
        assert_eq!(line, "#   taken after submission (us, by channel) | rank 0: 1.5 ? | rank 1: 15.0 2.5");
    }

    #[test]
    fn json_takes_the_smallest_ratio_from_64_mib() {
        let rows = [
            // Below 64 MiB: ignored however bad.
            row(CollFunction::AllReduce, 32 << 20, (1.0, 1.0), Some((100.0, 100.0))),
            row(CollFunction::AllReduce, 64 << 20, (90.0, 80.0), Some((100.0, 100.0))),
            row(CollFunction::AllReduce, 128 << 20, (95.0, 99.0), Some((100.0, 100.0))),
            row(CollFunction::AllGather, 256 << 20, (50.0, 120.0), Some((100.0, 100.0))),
            row(CollFunction::Broadcast, 1 << 20, (50.0, 50.0), Some((100.0, 100.0))),
            row(CollFunction::Reduce, 128 << 20, (50.0, 50.0), None),
        ];
        let text = rows_json(&rows, "ferroccl bench \"coll\"", "2 x H100\n", "2025-01-01T00:00:00Z", 1);
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["allreduce_busbw_vs_nccl_ge64M"], 0.8, "{text}");
        assert_eq!(json["allgather_busbw_vs_nccl_ge64M"], 0.5, "{text}");
        assert!(json["broadcast_busbw_vs_nccl_ge64M"].is_null(), "{text}");
        assert!(json["reduce_busbw_vs_nccl_ge64M"].is_null(), "{text}");
        assert!(json.get("reduce_busbw_vs_nccl_ge64M").is_some(), "{text}");
        assert!(json.get("reducescatter_busbw_vs_nccl_ge64M").is_none(), "{text}");
        assert_eq!(json["command"], "ferroccl bench \"coll\"", "{text}");
        assert_eq!(json["device"], "2 x H100\n", "{text}");
        assert_eq!(json["date"], "2025-01-01T00:00:00Z", "{text}");
        assert_eq!(json["processes"], 1, "{text}");
        let mut keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected = [
            "command",
            "device",
            "date",
            "processes",
            "small_time_vs_nccl_le256K",
            "busbw_vs_nccl_min_512K_1G",
            "allreduce_busbw_vs_nccl_ge64M",
            "allgather_busbw_vs_nccl_ge64M",
            "broadcast_busbw_vs_nccl_ge64M",
            "reduce_busbw_vs_nccl_ge64M",
            "rows",
        ];
        keys.sort_unstable();
        expected.sort_unstable();
        assert_eq!(keys, expected);
        // In the file, the fields keep their order: command, device, date, the ratios in
        // the benchmark's function order, rows.
        let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap();
        assert!(at("command") < at("device") && at("device") < at("date") && at("date") < at("allreduce_busbw_vs_nccl_ge64M"));
        assert!(at("allreduce_busbw_vs_nccl_ge64M") < at("allgather_busbw_vs_nccl_ge64M"));
        assert!(at("broadcast_busbw_vs_nccl_ge64M") < at("reduce_busbw_vs_nccl_ge64M") && at("reduce_busbw_vs_nccl_ge64M") < at("rows"));
        let out_rows = json["rows"].as_array().unwrap();
        assert_eq!(out_rows.len(), rows.len());
        let last = &out_rows[rows.len() - 1];
        assert!(last["baseline_oop"].is_null() && last["baseline_ip"].is_null(), "{text}");
        let first = &out_rows[0];
        let row_keys: Vec<&str> = first.as_object().unwrap().keys().map(String::as_str).collect();
        let mut expected = [
            "function",
            "timing",
            "size",
            "bytes",
            "count",
            "dtype",
            "op",
            "root",
            "oop",
            "ip",
            "rounds",
            "baseline_oop",
            "baseline_ip",
            "baseline_mode_oop",
            "baseline_mode_ip",
            "baseline_modes",
            "baseline_alone",
        ];
        expected.sort_unstable();
        assert_eq!(row_keys, expected);
        assert_eq!((&first["function"], &first["dtype"], &first["op"], &first["root"]), (&"all_reduce".into(), &"float".into(), &"sum".into(), &(-1).into()));
        assert_eq!((&first["size"], &first["timing"]), (&(32 << 20).into(), &"back-to-back".into()));
        assert_eq!(first["oop"], serde_json::json!({"time_us": 1.0, "algbw": 1.0, "busbw": 1.0, "min_us": 1.0, "max_us": 1.0, "wrong": 0}));
        assert_eq!((&first["baseline_mode_oop"], &first["baseline_alone"], &first["baseline_modes"][0]["mode"]), (&"plain".into(), &true.into(), &"plain".into()));
        // JSON has no NaN or infinity: such numbers are null, and so is an unchecked #wrong.
        let odd = Row { oop: Timing { time_us: f64::INFINITY, algbw: f64::NAN, busbw: 0.0, min_us: f64::NAN, max_us: 1.0, wrong: None }, ..rows[0].clone() };
        let json: serde_json::Value = serde_json::from_str(&rows_json(&[odd], "", "", "", 1)).unwrap();
        assert_eq!(json["rows"][0]["oop"], serde_json::json!({"time_us": null, "algbw": null, "busbw": 0.0, "min_us": null, "max_us": 1.0, "wrong": null}));
        assert_eq!(json["rows"][0]["ip"]["time_us"], 1.0);
    }

    /// Under a forced one-shot/two-shot algorithm, the sizes its staging cannot take are
    /// left out of the table with a line saying why; the others are checked and timed.
    #[test]
    fn sizes_a_forced_algorithm_cannot_run_are_left_out() {
        use device_rt::algo::AlgorithmChoice;
        use ferroccl_testkit::coll::twin::TwinGroup;
        use host_shim::comm::wiring::Shape;

        let shape = Shape {
            nranks: 2,
            nchannels: 1,
            ring_step_bytes: 4096,
            p2p_step_bytes: 4096,
            direct: false,
            stats: true,
            paired: false,
            staging_bytes: 8192,
            algorithm: AlgorithmChoice::OneShot,
            nvls_multicast: false,
        };
        let mut g = TwinGroup::start(shape, 128, Duration::from_secs(60)).unwrap();
        let mut table = Vec::new();
        let rows = run(&mut g, &parse(&["-b", "4K", "-e", "16K", "-f", "2", "-n", "2", "-w", "1", "--repeats", "1", "all_reduce"]).unwrap(), &mut table).unwrap();
        g.shutdown(TIMEOUT).unwrap();
        let table = String::from_utf8(table).unwrap();
        assert_eq!(rows.iter().map(|r| r.size).collect::<Vec<_>>(), [4096, 8192], "{table}");
        assert!(rows.iter().all(|r| (r.oop.wrong, r.ip.wrong) == (Some(0), Some(0))), "{table}");
        assert!(table.contains("# 16384 B: not run: the communicator forces one-shot"), "{table}");
        assert!(table.contains("collectives run per channel: ring 0, one-shot "), "{table}");
    }

    /// The whole benchmark on the host twin: every row checked correct, in the order
    /// and with the counts and columns the conventions give, the baseline in its columns.
    #[test]
    fn runs_on_the_host_twin_with_a_baseline() {
        use ferroccl_testkit::coll::twin::TwinGroup;
        use host_shim::comm::wiring::Shape;

        let shape = Shape { nranks: 2, nchannels: 1, ring_step_bytes: 4096, p2p_step_bytes: 4096, direct: true, stats: true, paired: false, staging_bytes: 0, algorithm: device_rt::algo::AlgorithmChoice::Ring, nvls_multicast: false };
        let mut g = TwinGroup::start(shape, 128, Duration::from_secs(60)).unwrap();
        let args = parse(&["-b", "4", "-e", "16K", "-f", "64", "-n", "2", "-w", "1", "-r", "1", "--repeats", "3", "all_gather", "reduce"]).unwrap();
        let mut baseline = FixedBaseline::default();
        let mut table = Vec::new();
        let allocated_before = g.mark();
        let rows = run_with_baseline(&mut g, &args, Some(&mut baseline), &mut table, &ProgressBar::hidden()).unwrap();
        assert_eq!(g.mark(), allocated_before, "the timing buffers are freed");
        let unchecked =
            run(&mut g, &parse(&["-b", "64", "-e", "64", "-c", "0", "-n", "1", "--repeats", "1", "all_reduce"]).unwrap(), &mut Vec::new()).unwrap();
        assert_eq!((unchecked.len(), unchecked[0].oop.wrong, unchecked[0].baseline_ip), (1, None, None));
        let no_such_root = run(&mut g, &parse(&["-r", "2", "broadcast"]).unwrap(), &mut Vec::new());
        assert!(matches!(no_such_root, Err(Error::InvalidArgument(_))), "{no_such_root:?}");
        // Each timing its own table; sync and graph rows stop at --latency-maxbytes.
        let mut timed_table = Vec::new();
        let timed_args = parse(&["-b", "64", "-e", "4K", "-f", "8", "-n", "2", "--repeats", "1", "--timing", "back-to-back,sync", "--latency-maxbytes", "512", "all_reduce"]).unwrap();
        let timed = run(&mut g, &timed_args, &mut timed_table).unwrap();
        let timings: Vec<(CallTiming, usize)> = timed.iter().map(|r| (r.timing, r.size)).collect();
        assert_eq!(timings, [(CallTiming::BackToBack, 64), (CallTiming::BackToBack, 512), (CallTiming::BackToBack, 4096), (CallTiming::Sync, 64), (CallTiming::Sync, 512)]);
        assert_eq!(timed.len(), row_count(&timed_args, 2));
        assert!(timed.iter().all(|r| r.oop.wrong == Some(0) && r.ip.wrong == Some(0)));
        assert!(String::from_utf8(timed_table).unwrap().contains("iterations each waited for"));
        // The twin has no streams: graph timing is refused, and the group still works.
        let graphs = run(&mut g, &parse(&["-b", "64", "-e", "64", "--timing", "graph", "all_reduce"]).unwrap(), &mut Vec::new());
        assert!(matches!(graphs, Err(Error::InvalidState(_))), "{graphs:?}");
        g.shutdown(TIMEOUT).unwrap();
        let table = String::from_utf8(table).unwrap();

        // all_gather of 4 bytes over 2 ranks holds no float per rank: no row.
        let shape_of = |r: &Row| (r.function, r.size, r.count, r.bytes, r.root);
        assert_eq!(
            rows.iter().map(shape_of).collect::<Vec<_>>(),
            [
                (CollFunction::AllGather, 256, 32, 256, -1),
                (CollFunction::AllGather, 16384, 2048, 16384, -1),
                (CollFunction::Reduce, 4, 1, 4, 1),
                (CollFunction::Reduce, 256, 64, 256, 1),
                (CollFunction::Reduce, 16384, 4096, 16384, 1),
            ]
        );
        for r in &rows {
            assert_eq!((r.oop.wrong, r.ip.wrong), (Some(0), Some(0)), "{table}");
            assert!(r.oop.time_us > 0.0 && r.ip.time_us > 0.0);
            assert!(r.oop.min_us <= r.oop.time_us && r.oop.time_us <= r.oop.max_us, "{r:?}");
            // The fastest mode per placement, by the median of its rounds.
            assert_eq!((r.rounds, r.baseline_alone), (3, Some(true)));
            assert_eq!((r.baseline_oop.map(|t| (t.time_us, t.min_us, t.max_us)), r.baseline_mode_oop.as_deref()), (Some((2e6, 1e6, 3e6)), Some("plain")));
            assert_eq!((r.baseline_ip.map(|t| (t.time_us, t.min_us, t.max_us)), r.baseline_mode_ip.as_deref()), (Some((2e6, 1e6, 3e6)), Some("symmetric")));
            let medians: Vec<(&str, f64, f64)> = r.baseline_modes.iter().map(|m| (m.mode.as_str(), m.oop.time_us, m.ip.time_us)).collect();
            assert_eq!(medians, [("plain", 2e6, 4e6), ("symmetric", 3e6, 2e6)]);
        }
        // Every mode, placement and round of every row, round after round.
        assert_eq!(baseline.calls.len(), rows.len() * 3 * 2 * 2);
        assert_eq!(
            baseline.calls[..8],
            [
                (0, 0, CollFunction::AllGather, 32, false),
                (0, 0, CollFunction::AllGather, 32, true),
                (1, 0, CollFunction::AllGather, 32, false),
                (1, 0, CollFunction::AllGather, 32, true),
                (0, 1, CollFunction::AllGather, 32, false),
                (0, 1, CollFunction::AllGather, 32, true),
                (1, 1, CollFunction::AllGather, 32, false),
                (1, 1, CollFunction::AllGather, 32, true),
            ]
        );
        assert_eq!(table.matches("# ferroccl all_gather on ").count(), 1, "{table}");
        assert_eq!(table.matches("# baseline: fixed").count(), 2, "{table}");
        assert_eq!(table.matches("# times: the median of 3 rounds, ferroccl and the baseline taking turns").count(), 2, "{table}");
        assert!(table.contains("nccl_busbw    ratio       mode"), "{table}");
        assert_eq!(table.matches("#   3 rounds, fastest-slowest us: ferroccl ").count(), rows.len(), "{table}");
        assert_eq!(table.matches("; baseline plain 1000000-3000000 | 4000000-4000000; baseline symmetric 3000000-3000000 | 1000000-3000000").count(), rows.len(), "{table}");
        let data: Vec<&str> = table.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(data.len(), rows.len(), "{table}");
        assert_eq!(table.matches("#   channels: ").count(), rows.len(), "a statistics line per row: {table}");
        assert_eq!(table.matches("#   busiest: rank ").count(), rows.len(), "a spread line per row: {table}");
        assert_eq!(table.matches("(SM 0)").count(), 4 * rows.len(), "the twin's channels run on SM 0: {table}");
        assert_eq!(table.matches("#   placement (SM:GB/s) | rank 0: 0:").count(), rows.len(), "a placement line per row: {table}");
        let fields = |line: &str| line.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        // Five row columns, four per placement, six for the baseline.
        assert!(data.iter().all(|l| fields(l).len() == 19), "{table}");
        assert_eq!(fields(data[0])[..5], ["256", "32", "float", "none", "-1"], "{table}");
        assert_eq!(fields(data[2])[..5], ["4", "1", "float", "sum", "1"], "{table}");
        assert_eq!(fields(data[2])[8], "0", "{table}");
        assert_eq!((fields(data[2])[15].as_str(), fields(data[2])[18].as_str()), ("plain", "symmetric"), "{table}");
    }

    /// A baseline of two modes whose times depend on the round (3 rounds): plain out of
    /// place 1, 2, 3 s and in place 4 s; symmetric out of place 3 s and in place 3, 2,
    /// 1 s; each call recorded as (mode, round, function, count, in place).
    #[derive(Default)]
    struct FixedBaseline {
        calls: Vec<(usize, usize, CollFunction, usize, bool)>,
    }

    impl Baseline for FixedBaseline {
        fn name(&self) -> String {
            "fixed".into()
        }
        fn modes(&self) -> Vec<String> {
            vec!["plain".into(), "symmetric".into()]
        }
        fn time_us(&mut self, mode: usize, round: usize, call: &BaselineCall) -> Result<f64> {
            self.calls.push((mode, round, call.case.function, call.case.count, call.case.in_place));
            let seconds = match (mode, call.case.in_place) {
                (0, false) => 1 + round,
                (0, true) => 4,
                (_, false) => 3,
                (_, true) => 3 - round,
            };
            Ok(seconds as f64 * 1e6)
        }
    }

    /// Graph rows are timed ahead of time, every mode and round of each; every other
    /// timing goes to the baseline when asked.
    #[test]
    fn premeasured_times_graph_rows_ahead_and_the_rest_live() {
        let args = parse(&["-b", "64", "-e", "128", "-n", "1", "--repeats", "2", "--timing", "graph,back-to-back", "all_reduce"]).unwrap();
        assert_eq!(args.timing, [CallTiming::BackToBack, CallTiming::Graph], "graph timing runs last");
        let mut pre = Premeasured::measure(FixedBaseline::default(), &args, 2, None, &ProgressBar::hidden()).unwrap();
        // Two sizes, two rounds, two modes, two placements.
        assert_eq!(pre.live.calls.len(), 16);
        assert!(pre.live.calls.iter().all(|&(_, _, f, count, _)| f == CollFunction::AllReduce && [16, 32].contains(&count)));
        assert!(!pre.timed_live(CallTiming::Graph) && pre.timed_live(CallTiming::BackToBack) && pre.timed_live(CallTiming::Sync));
        assert_eq!(pre.modes(), ["plain", "symmetric"]);
        let call = |count, in_place, timing| BaselineCall {
            case: CollCase { function: CollFunction::AllReduce, dtype: DataType::F32, op: RedOpKind::Sum, count, root: 0, in_place, inputs: Inputs::Exact },
            timing,
            warmup: 0,
            iters: 1,
        };
        assert_eq!(pre.time_us(0, 1, &call(32, false, CallTiming::Graph)).unwrap(), 2e6);
        assert_eq!(pre.time_us(1, 1, &call(16, true, CallTiming::Graph)).unwrap(), 2e6);
        assert_eq!(pre.live.calls.len(), 16, "graph rows come from what was measured");
        assert!(pre.time_us(0, 2, &call(32, false, CallTiming::Graph)).is_err(), "no third round was measured");
        assert!(pre.time_us(0, 0, &call(64, false, CallTiming::Graph)).is_err(), "no such row");
        assert_eq!(pre.time_us(0, 0, &call(32, true, CallTiming::BackToBack)).unwrap(), 4e6);
        assert_eq!(pre.live.calls.last(), Some(&(0, 0, CollFunction::AllReduce, 32, true)));
        let no_graph = parse(&["-b", "64", "-e", "128", "all_reduce"]).unwrap();
        assert!(Premeasured::measure(FixedBaseline::default(), &no_graph, 2, None, &ProgressBar::hidden()).unwrap().live.calls.is_empty());
    }

    #[test]
    fn medians_of_odd_and_even_rounds() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        let t = Timing::of_rounds(&[2.0, 8.0, 4.0], 4000, 2.0, Some(0));
        assert_eq!((t.time_us, t.min_us, t.max_us, t.algbw, t.busbw), (4.0, 2.0, 8.0, 1.0, 2.0));
    }
}
