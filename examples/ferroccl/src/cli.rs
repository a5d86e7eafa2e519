//! The command line, declared with clap's derive API: `ferroccl --help` and every
//! subcommand's `--help` come from the doc comments below.

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::algo::{AlgorithmChoice, CollFunction};
use ferroccl_testkit::coll::group::SubmitPath;
use host_shim::work::Placement;

use crate::collbench::{BENCH_FUNCTIONS, BENCH_OPS, BenchArgs};

/// ferroccl: a GPU communication runtime's command. Device info, GPU self-tests, the
/// collective correctness matrix, and benchmarks against NCCL.
#[derive(Debug, Parser)]
#[command(name = "ferroccl", version, arg_required_else_help = true)]
#[command(after_help = "Environment:\n  FERROCCL_LOG=error|warn|info|debug|trace   diagnostics on stderr (default: warn; \
                        env_logger filters such as host_shim=debug also work)")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the command line `args` (the program's name first), as clap's
    /// `try_parse_from` does, and records which of `bench`'s sweep flags it gave
    /// ([`BenchCmd::given`]). The command's own parser: use it, not `try_parse_from`.
    pub fn parse_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Self::command().try_get_matches_from(args)?;
        let mut cli = Self::from_arg_matches(&matches)?;
        if let (Command::Bench(bench), Some(m)) = (&mut cli.command, matches.subcommand_matches("bench")) {
            bench.given = SweepGiven::of(m);
        }
        Ok(cli)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List CUDA devices and what they support
    Info,
    /// Run the GPU self-tests: one line per test, then "N passed, N failed"
    Test(TestArgs),
    /// The collective correctness matrix (every function × type × operator) on N ranks
    /// spread over the devices, checked bit for bit
    ///
    /// Without a GPU it runs on the host twin (the device code on CPU threads) and says
    /// so: 2 ranks and --big 24576 by default (about 20 s on 2 cores); options about GPUs
    /// (--devices, --sms, --heap), resident or sleeping channels (--resident,
    /// --resident-threads, --sleep-after) and --path stream are refused there, as is --big
    /// above 1048576.
    Coll(CollArgs),
    /// nccl-tests' table (size, count, type, redop, root, time, algbw, busbw, #wrong; out
    /// of place and in place) for all_reduce, all_gather, reduce_scatter, broadcast,
    /// reduce
    ///
    /// With --nccl also NCCL on the same GPUs (measured first, before ferroccl's loops
    /// hold the GPUs) and the busbw ratio; with --stats lines per row on where the
    /// channels' time went. `bench reduce_copy`, `bench work_loop` and `bench footprint`
    /// are the single-GPU benchmarks; `bench shmem` the symmetric heap's, on two GPUs.
    ///
    /// Without a GPU it runs on the host twin (the device code on CPU threads; its times
    /// are not GPU speeds) and says so: 2 ranks, -b 8 -e 64K -n 5 -w 1 unless given (about
    /// 10 s on 2 cores). There it refuses, before running anything, -e above 16M (a sweep
    /// to 16M takes about a minute there, to 1G hours: refused, not cut short), --nccl,
    /// --timing graph, --heap, --devices, --sms, --resident, --resident-threads,
    /// --sleep-after and --path stream.
    Bench(BenchCmd),
    /// Print the embedded PTX module
    Ptx,
    /// Start a program as N PEs, one process each (as NVSHMEM's `nvshmrun` launches PEs): PE i gets
    /// FERROCCL_PE=i, FERROCCL_N_PES=N, FERROCCL_DEVICE and a fresh FERROCCL_BOOTSTRAP
    /// rendezvous; once a PE fails the others get --grace, then are killed
    Run(RunArgs),
}

/// `ferroccl run`.
#[derive(Debug, Args, PartialEq)]
pub struct RunArgs {
    /// PEs (processes) to start
    #[arg(short = 'n', long = "pes", value_name = "N")]
    pub pes: usize,
    /// Each PE's device (comma-separated ordinals; default: PE i on device i)
    #[arg(long, value_delimiter = ',')]
    pub devices: Vec<usize>,
    /// How long the other PEs may run once one has failed
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "30s")]
    pub grace: std::time::Duration,
    /// The program and its arguments
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "PROGRAM")]
    pub program: Vec<String>,
}

/// `ferroccl test`.
#[derive(Debug, Args, PartialEq)]
pub struct TestArgs {
    /// The device to run on
    #[arg(short = 'd', long, value_name = "N", default_value_t = 0)]
    pub device: usize,
    /// Run only the tests whose name contains FILTER
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
    /// The negative control: the message-passing tests publish with no fence, over many
    /// launches, and fail where the GPU shows the consumer stale data (a run of
    /// `ferroccl test --remove-fence message_passing` that fails shows the tests can see a
    /// missing fence)
    #[arg(long)]
    pub remove_fence: bool,
}

/// The communicator's placement and shape, shared by `coll` and `bench`; every flag left
/// out keeps the subcommand's default.
#[derive(Debug, Args, Clone, PartialEq, Default)]
pub struct CommArgs {
    /// Device ordinals the ranks are placed on, round-robin [coll: 0; bench: every GPU;
    /// refused on the host twin]
    #[arg(long, value_name = "0,1,...", value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// Number of ranks [default: one per device; bench: at least 2; 2 on the host twin]
    #[arg(long, value_name = "N")]
    pub ranks: Option<usize>,
    /// Channels per rank [coll: 4; bench: 64 on GPUs (fewer where the devices hold fewer for their ranks); 2 on the host twin]
    #[arg(long, value_name = "N")]
    pub channels: Option<u32>,
    /// Of the channels, how many stay resident on the GPU for the loop's lifetime; the
    /// others are call channels, brought up by the stream-ordered calls that spread over
    /// them [default: 1 on the stream path; every channel on the direct path]
    #[arg(long, value_name = "N")]
    pub resident: Option<u32>,
    /// Threads of each resident channel (call channels run --threads) [default: as
    /// --threads]
    #[arg(long, value_name = "N")]
    pub resident_threads: Option<u32>,
    /// Threads per channel [default: 256 on GPUs; 128 on the host twin]
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// Ring step in bytes, K/M/G suffixes allowed [default: 256K; 64K on the host twin]
    #[arg(long, value_name = "BYTES", value_parser = parse_size_u64)]
    pub step: Option<u64>,
    /// On which SMs the channels run: the hardware's choice, one per TPC from SM 2, or one
    /// SM id per channel [default: tpcs]
    #[arg(long, value_name = "hardware|tpcs|ID,ID,...", value_parser = parse_placement)]
    pub sms: Option<Placement>,
    /// The channels work in pairs (collectives on the first half; a two-rank
    /// reduce_scatter sends on the first half and reduces on the second) [default: false]
    #[arg(long, value_name = "true|false")]
    pub paired: Option<bool>,
    /// Ring senders write straight into the next rank's output where the algorithm
    /// allows and that output is `cuMemAlloc` memory (NCCL's direct operations); false:
    /// every send through the FIFO [default: true]
    #[arg(long, value_name = "true|false")]
    pub direct: Option<bool>,
    /// Every rank's buffers in a symmetric heap of the ranks (one allocation each, the
    /// same offsets on every rank), the communicator on it (`Comm::from_heap`): out-of-place
    /// two-shot all_reduces read their inputs in place, staging nothing (GPUs only)
    #[arg(long)]
    pub heap: bool,
    /// The algorithm of every collective: the device's choice by size (auto), or one
    /// forced: the ring or one-shot for every collective, two-shot for all_reduce (the
    /// others refused) [default: auto]
    #[arg(long, value_name = "ALGO", value_parser = algorithm_parser())]
    pub algo: Option<AlgorithmChoice>,
    /// Staging bytes per rank for the one-shot/two-shot algorithms (the largest call they
    /// take), K/M/G suffixes allowed [default: 48M on GPUs, 1M on the host twin]
    #[arg(long, value_name = "BYTES", value_parser = parse_size_u64)]
    pub staging: Option<u64>,
    /// How long an idle loop of one resident channel polls before it leaves the GPU
    /// until the next call (a duration, e.g. 1ms, or `never`) [default: 1ms]
    #[arg(long, value_name = "DURATION|never", value_parser = parse_sleep_after)]
    pub sleep_after: Option<SleepAfter>,
    /// How items reach the ranks' loops: `typed` (the communicator's typed calls,
    /// `Comm::all_reduce` and its siblings, on cudarc slices: what a Rust user's call
    /// costs; GPUs only), `stream` (the same call kernel on each rank's stream, the item
    /// handed over by address; GPUs only) or `direct` (the host queue) [coll: direct;
    /// bench: typed on GPUs, direct on the host twin]
    #[arg(long, value_name = "typed|stream|direct", value_parser = parse_path)]
    pub path: Option<SubmitPath>,
}

/// `--sleep-after`: a loop's sleep time in whole microseconds, or none (`never`); small,
/// so that the commands' arguments stay small.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SleepAfter(pub Option<std::num::NonZeroU32>);

impl SleepAfter {
    /// The sleep time, `None` for never.
    pub fn duration(self) -> Option<std::time::Duration> {
        self.0.map(|us| std::time::Duration::from_micros(u64::from(us.get())))
    }
}

fn parse_sleep_after(s: &str) -> Result<SleepAfter, String> {
    if s == "never" {
        return Ok(SleepAfter(None));
    }
    let d = humantime::parse_duration(s).map_err(|e| e.to_string())?;
    match u32::try_from(d.as_micros()).ok().and_then(std::num::NonZeroU32::new) {
        Some(us) if d.subsec_nanos() % 1000 == 0 => Ok(SleepAfter(Some(us))),
        _ => Err(format!("a sleep time is whole microseconds, 1µs to {}s (or `never`), not {s}", u32::MAX / 1_000_000)),
    }
}

fn parse_path(s: &str) -> Result<SubmitPath, String> {
    s.parse().map_err(|e: host_shim::Error| e.to_string())
}

/// `ferroccl coll`.
#[derive(Debug, Args, PartialEq)]
pub struct CollArgs {
    #[command(flatten)]
    pub comm: CommArgs,
    /// Element count of the matrix's large case of every function and type [default:
    /// 3145728 on GPUs; 24576 on the host twin, which takes at most 1048576]
    #[arg(long, value_name = "N")]
    pub big: Option<usize>,
    /// Run only the cases whose description contains FILTER
    #[arg(value_name = "FILTER")]
    pub filter: Option<String>,
    /// Run the ranks as N processes, one GPU each (`--devices`, or 0 to N-1; on the host
    /// twin, N processes of CPU threads), each checking its own rank's outputs; the first
    /// prints the progress and the total of wrong cases
    #[arg(long, value_name = "N")]
    pub procs: Option<usize>,
    /// The communicator's id in hex: set by `--procs` for the processes it starts
    #[arg(long, hide = true, value_name = "HEX")]
    pub comm_id: Option<String>,
}

/// `ferroccl bench`: the collective sweep, or one of the single-GPU benchmarks.
#[derive(Debug, Args, PartialEq)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchCmd {
    #[command(subcommand)]
    pub single: Option<SingleGpuBench>,
    #[command(flatten)]
    pub sweep: BenchArgs,
    #[command(flatten)]
    pub comm: CommArgs,
    /// Per row, where the channels' time went (copying, waiting for data, for credit),
    /// which channel was busiest and slowest, and every channel's SM and copy rate
    #[arg(long)]
    pub stats: bool,
    /// Also time NCCL on the same GPUs and print the busbw ratio (needs the `nccl`
    /// feature)
    #[arg(long)]
    pub nccl: bool,
    /// Run the ranks as N processes, one GPU each (`--devices`, or 0 to N-1; on the host
    /// twin, N processes of CPU threads), each timing its own rank's calls; every time is
    /// the mean over the processes, as nccl-tests reports its ranks'. With `--nccl`, NCCL
    /// runs one rank per process too (`ncclCommInitRank`)
    #[arg(long, value_name = "N")]
    pub procs: Option<usize>,
    /// The communicator's id in hex: set by `--procs` for the processes it starts
    #[arg(long, hide = true, value_name = "HEX")]
    pub comm_id: Option<String>,
    /// Which of the sweep's flags the command line gave (set by [`Cli::parse_args`]).
    #[arg(skip)]
    pub given: SweepGiven,
}

/// Which of `bench`'s sweep flags the command line gave: on the host twin the others take
/// the twin's defaults (`crate::twin::bench_sweep`), not nccl-tests' (meant for GPUs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepGiven {
    /// `-b`.
    pub min_bytes: bool,
    /// `-e`.
    pub max_bytes: bool,
    /// `-n`.
    pub iters: bool,
    /// `-w`.
    pub warmup: bool,
    /// `--repeats`.
    pub repeats: bool,
}

impl SweepGiven {
    /// The flags `bench`'s matches `m` got from the command line.
    fn of(m: &ArgMatches) -> Self {
        let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
        Self { min_bytes: given("min_bytes"), max_bytes: given("max_bytes"), iters: given("iters"), warmup: given("warmup"), repeats: given("repeats") }
    }
}

#[derive(Debug, Subcommand, PartialEq)]
pub enum SingleGpuBench {
    /// reduce_copy (copy, 2- and 8-source sum; f32, bf16) against cuMemcpyDtoD of the
    /// same bytes, in one run
    #[command(name = "reduce_copy")]
    ReduceCopy(ReduceCopyArgs),
    /// The work loop's no-op round trip, device dispatch rate and stream-ordered path
    /// against kernel launches, in one run
    #[command(name = "work_loop")]
    WorkLoop(WorkLoopArgs),
    /// `abort()` in the middle of a burst of in-place all-reduces through the public
    /// `Comm` calls: calls accepted after it (must be 0) and the time until every rank's
    /// stream has drained
    #[command(name = "abort")]
    Abort(AbortArgs),
    /// What a communicator costs other work on its GPU: f32 FMAs, 1 GiB copies and a bf16
    /// cuBLAS GEMM, each filling the GPU, timed before the communicator exists, beside its
    /// idle loops, while it runs all-reduces, and after it has shut down; ratios against
    /// before, in one run
    ///
    /// Needs cuBLAS (libcublas.so or .so.12 on LD_LIBRARY_PATH); set
    /// CUDA_MODULE_LOADING=EAGER (a kernel loaded lazily beside a persistent loop may wait
    /// for it forever).
    #[command(name = "footprint")]
    Footprint(FootprintArgs),
    /// The symmetric heap between two GPUs, one PE each: put and get bandwidth by message
    /// size against cuMemcpyPeerAsync of the same bytes, put latency by one thread, warp
    /// and CTA, the put_signal + wait_until round trip and barrier_all, in one run
    #[command(name = "shmem")]
    Shmem(ShmemArgs),
    /// The host time of one stream-ordered collective call and of the driver calls such a
    /// call can be made of (context switch, pointer check, capture query, kernel launch,
    /// stream memory operations), one rank per device called in turn, in one run
    #[command(name = "dispatch")]
    Dispatch(DispatchArgs),
}

/// `ferroccl bench dispatch`.
#[derive(Debug, Args, PartialEq)]
pub struct DispatchArgs {
    /// The devices, one rank each
    #[arg(long, value_name = "A,B,…", value_delimiter = ',', default_value = "0")]
    pub devices: Vec<usize>,
    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// `ferroccl bench shmem`.
#[derive(Debug, Args, PartialEq)]
pub struct ShmemArgs {
    /// The devices of PE 0 and PE 1
    #[arg(long, value_name = "A,B", value_delimiter = ',', default_value = "0,1")]
    pub devices: Vec<usize>,
    /// The smallest message, K/M/G suffixes allowed
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "8")]
    pub min_bytes: usize,
    /// The largest message (sizes grow by 4 from --min-bytes; this one always runs), K/M/G
    /// suffixes allowed
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "64M")]
    pub max_bytes: usize,
    /// Operations per timed launch (puts, gets, copies, round trips, barriers)
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub iters: u32,
    /// CTAs of the put and get bandwidth kernels [default: PE 0's device's SM count]
    #[arg(long, value_name = "N")]
    pub blocks: Option<u32>,
    /// Threads per CTA of the bandwidth kernels and of the CTA put latency (a multiple of
    /// 32, at most 1024)
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub threads: u32,
    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// `ferroccl bench footprint`.
#[derive(Debug, Args, PartialEq)]
pub struct FootprintArgs {
    /// The device to run on
    #[arg(short = 'd', long, value_name = "N", default_value_t = 0)]
    pub device: usize,
    /// Ranks of the communicator, all on that device
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub ranks: usize,
    /// Channels per rank [default: 64, fewer where the device holds fewer]
    #[arg(long, value_name = "N")]
    pub channels: Option<u32>,
    /// Of the channels, how many stay resident; the others are call channels
    /// [default: 1]
    #[arg(long, value_name = "N")]
    pub resident: Option<u32>,
    /// How long an idle loop of one resident channel polls before it leaves the GPU (a
    /// duration, or `never`: the idle phase then measures a polling loop) [default: 1ms]
    #[arg(long, value_name = "DURATION|never", value_parser = parse_sleep_after)]
    pub sleep_after: Option<SleepAfter>,
    /// Threads of each resident channel (call channels run --threads) [default: as
    /// --threads]
    #[arg(long, value_name = "N")]
    pub resident_threads: Option<u32>,
    /// Threads per channel [default: 256]
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// Bytes per all-reduce (f32) in the busy phase, K/M/G suffixes allowed
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "256M")]
    pub busy_bytes: usize,
    /// Timed runs per kind and phase (after 3 untimed ones)
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub iters: usize,
    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// `ferroccl bench abort`.
#[derive(Debug, Args, PartialEq)]
pub struct AbortArgs {
    /// One rank per listed device (a device may repeat)
    #[arg(long, value_name = "0,1,...", value_delimiter = ',', default_value = "0,1")]
    pub devices: Vec<usize>,
    /// Bytes per all-reduce, K/M/G suffixes allowed
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "64M")]
    pub bytes: usize,
    /// Calls per rank; abort() comes after a quarter of them
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub calls: usize,
}

/// `ferroccl bench reduce_copy`.
#[derive(Debug, Args, PartialEq)]
pub struct ReduceCopyArgs {
    /// The device to run on
    #[arg(short = 'd', long, value_name = "N", default_value_t = 0)]
    pub device: usize,
    /// Bytes per buffer (a non-zero multiple of 16), K/M/G suffixes allowed
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "256M")]
    pub bytes: usize,
    /// Timed iterations per case (after 3 untimed ones)
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub iters: usize,
    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
}

/// `ferroccl bench work_loop`.
#[derive(Debug, Args, PartialEq)]
pub struct WorkLoopArgs {
    /// The device to run on
    #[arg(short = 'd', long, value_name = "N", default_value_t = 0)]
    pub device: usize,
    /// Write the results as JSON to PATH
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Diagnosis instead: the gaps between timestamps among queued items (256 threads, a
    /// stamp every 1-64 items; 32-128 threads, every 8) as JSON to PATH
    #[arg(long, value_name = "PATH", conflicts_with = "json")]
    pub timeline: Option<PathBuf>,
}

/// A byte count: digits, optionally followed by K, M or G (powers of 2¹⁰, either case).
pub fn parse_size(value: &str) -> Result<usize, String> {
    let bytes = parse_size_u64(value)?;
    usize::try_from(bytes).map_err(|_| format!("size {value:?} does not fit in {} bits", usize::BITS))
}

/// A byte count as the `FERROCCL_*` variables take them ([`host_shim::comm::parse_bytes`]).
fn parse_size_u64(value: &str) -> Result<u64, String> {
    host_shim::comm::parse_bytes(value).map_err(|why| format!("size {value:?}: {why}"))
}

/// `--sms`: [`Placement`]'s own parser.
fn parse_placement(value: &str) -> Result<Placement, String> {
    value.parse().map_err(|e: host_shim::Error| e.to_string())
}

/// `-c 0|1`.
pub fn parse_check(value: &str) -> Result<bool, String> {
    match value {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("{value:?}: expected 0 or 1")),
    }
}

/// The benchmarked collectives by nccl-tests' names.
pub fn function_parser() -> impl TypedValueParser<Value = CollFunction> {
    PossibleValuesParser::new(BENCH_FUNCTIONS.map(CollFunction::name))
        .map(|name| BENCH_FUNCTIONS.into_iter().find(|f| f.name() == name).expect("a possible value"))
}

/// Algorithms by their names (auto, ring, one-shot, two-shot, nvls).
pub fn algorithm_parser() -> impl TypedValueParser<Value = AlgorithmChoice> {
    PossibleValuesParser::new(AlgorithmChoice::ALL.map(AlgorithmChoice::name))
        .map(|name| AlgorithmChoice::ALL.into_iter().find(|a| a.name() == name).expect("a possible value"))
}

/// Element types by nccl-tests' names.
pub fn dtype_parser() -> impl TypedValueParser<Value = DataType> {
    PossibleValuesParser::new(DataType::ALL.map(DataType::name))
        .map(|name| DataType::ALL.into_iter().find(|d| d.name() == name).expect("a possible value"))
}

/// The benchmark's operators by nccl-tests' names (`avg` is [`RedOpKind::SumPostDiv`]).
pub fn op_parser() -> impl TypedValueParser<Value = RedOpKind> {
    PossibleValuesParser::new(BENCH_OPS.map(RedOpKind::name))
        .map(|name| BENCH_OPS.into_iter().find(|o| o.name() == name).expect("a possible value"))
}

#[cfg(test)]
pub(crate) mod tests {
    use clap::CommandFactory;

    use super::*;

    /// The command line `line` (split at whitespace), parsed; panics naming it if it does
    /// not parse.
    pub(crate) fn parse(line: &str) -> Cli {
        Cli::parse_args(line.split_whitespace()).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    /// The `bench` command of `line`.
    pub(crate) fn bench(line: &str) -> BenchCmd {
        match parse(line).command {
            Command::Bench(b) => b,
            other => panic!("{line}: {other:?}"),
        }
    }

    /// The `coll` command of `line`.
    pub(crate) fn coll(line: &str) -> CollArgs {
        match parse(line).command {
            Command::Coll(c) => c,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn the_command_is_well_formed_and_every_help_renders() {
        Cli::command().debug_assert();
        fn walk(cmd: &mut clap::Command, path: &str, seen: &mut Vec<String>) {
            let help = cmd.render_long_help().to_string();
            assert!(help.contains("Usage: "), "{path}: {help}");
            seen.push(path.to_owned());
            for sub in cmd.get_subcommands_mut() {
                let name = format!("{path} {}", sub.get_name());
                walk(sub, &name, seen);
            }
        }
        let mut seen = Vec::new();
        let mut cmd = Cli::command();
        cmd.build();
        walk(&mut cmd, "ferroccl", &mut seen);
        for sub in ["info", "test", "coll", "bench", "bench reduce_copy", "bench work_loop", "bench footprint", "bench shmem", "ptx"] {
            assert!(seen.contains(&format!("ferroccl {sub}")), "{seen:?}");
        }
        let bench_help = Cli::command().find_subcommand_mut("bench").unwrap().render_long_help().to_string();
        for flag in ["-b, --minbytes <BYTES>", "-e, --maxbytes <BYTES>", "-f, --stepfactor <F>", "-d, --datatype <TYPE>", "-o, --op <OP>"] {
            assert!(bench_help.contains(flag), "{flag}: {bench_help}");
        }
        for flag in ["-c, --check <0|1>", "-n, --iters <N>", "--paired <true|false>", "--sms <hardware|tpcs|ID,ID,...>"] {
            assert!(bench_help.contains(flag), "{flag}: {bench_help}");
        }
        for flag in ["-w, --warmup_iters", "-r, --root", "--json", "--devices", "--ranks", "--channels", "--threads", "--step"] {
            assert!(bench_help.contains(flag), "{flag}: {bench_help}");
        }
        for flag in ["--sms", "--paired", "--direct <true|false>", "--algo <ALGO>", "--staging <BYTES>", "--stats", "--nccl", "reduce_copy", "work_loop", "all_gather"] {
            assert!(bench_help.contains(flag), "{flag}: {bench_help}");
        }
    }

    /// Command lines as bench/gpu/*.sh and the README give them.
    #[test]
    fn the_scripts_command_lines_parse() {
        let b = bench(
            "ferroccl bench all_reduce all_gather reduce_scatter -b 8 -e 1G -f 2 -c 0 -n 20 -w 5 --devices 0,1 --nccl --json /root/out/ring.json",
        );
        assert_eq!(b.single, None);
        assert_eq!(
            b.sweep,
            BenchArgs {
                min_bytes: 8,
                max_bytes: 1 << 30,
                step_factor: 2,
                check: false,
                iters: 20,
                warmup: 5,
                functions: vec![CollFunction::AllReduce, CollFunction::AllGather, CollFunction::ReduceScatter],
                json: Some(PathBuf::from("/root/out/ring.json")),
                ..BenchArgs::default()
            }
        );
        assert_eq!(b.comm, CommArgs { devices: Some(vec![0, 1]), ..CommArgs::default() });
        assert!(b.nccl && !b.stats);

        let b = bench("ferroccl bench reduce_scatter -b 256M -e 1G -f 4 -c 0 -n 10 -w 3 --devices 0,1 --channels 48 --paired true --stats");
        assert_eq!((b.sweep.min_bytes, b.sweep.step_factor, b.sweep.iters, b.sweep.warmup), (256 << 20, 4, 10, 3));
        assert_eq!(b.comm, CommArgs { devices: Some(vec![0, 1]), channels: Some(48), paired: Some(true), ..CommArgs::default() });
        assert!(b.stats && !b.nccl);

        let b = bench("ferroccl bench all_reduce all_gather -b 1M -e 64M -f 8 --devices 0 --ranks 1 --sms tpcs");
        assert_eq!(b.comm, CommArgs { devices: Some(vec![0]), ranks: Some(1), sms: Some(Placement::Tpcs), ..CommArgs::default() });
        assert!(b.sweep.check, "-c defaults to 1");

        let b = bench("ferroccl bench reduce_scatter all_reduce -b 1G -e 1G -c 0 -n 10 -w 3 --devices 0,1 --channels 4 --sms 0,32,66,98 --threads 256 --step 524288 --direct false --stats");
        assert_eq!(b.comm.sms, Some("0,32,66,98".parse().unwrap()));
        assert_eq!((b.comm.threads, b.comm.step, b.comm.direct), (Some(256), Some(512 << 10), Some(false)));

        // Four ranks on two GPUs, two-shot forced, a larger staging buffer.
        let b = bench("ferroccl bench all_reduce -b 8 -e 64M -f 2 -c 1 -n 20 -w 5 --devices 0,1 --ranks 4 --algo two-shot --staging 64M --json out/a.json");
        assert_eq!((b.comm.algo, b.comm.staging, b.comm.ranks), (Some(AlgorithmChoice::TwoShot), Some(64 << 20), Some(4)));
        let b = bench("ferroccl bench all_reduce -b 4K -e 16M -f 2 -c 0 -n 20 -w 5 --devices 0,1 --channels 8 --algo one-shot --staging 64M --json c.json");
        assert_eq!((b.comm.algo, b.comm.channels), (Some(AlgorithmChoice::OneShot), Some(8)));
        let c = coll("ferroccl coll --devices 0 --ranks 8 --channels 4 --algo auto --path stream");
        assert_eq!((c.comm.algo, c.comm.path), (Some(AlgorithmChoice::Auto), Some(SubmitPath::Stream)));
        assert_eq!(coll("ferroccl coll --algo ring").comm.algo, Some(AlgorithmChoice::Ring));

        let b = bench("ferroccl bench broadcast reduce -d bfloat16 -o avg -r 1 --step 64K");
        assert_eq!((b.sweep.dtype, b.sweep.op, b.sweep.root, b.comm.step), (DataType::Bf16, RedOpKind::SumPostDiv, 1, Some(64 << 10)));
        assert_eq!(bench("ferroccl bench").sweep, BenchArgs::default());

        assert_eq!(
            bench("ferroccl bench reduce_copy --device 0").single,
            Some(SingleGpuBench::ReduceCopy(ReduceCopyArgs { device: 0, bytes: 256 << 20, iters: 20, json: None }))
        );
        assert_eq!(
            bench("ferroccl bench reduce_copy -d 1 --bytes 64M --iters 5 --json rc.json").single,
            Some(SingleGpuBench::ReduceCopy(ReduceCopyArgs { device: 1, bytes: 64 << 20, iters: 5, json: Some("rc.json".into()) }))
        );
        assert_eq!(
            bench("ferroccl bench abort --devices 0,0 --bytes 1M --calls 64").single,
            Some(SingleGpuBench::Abort(AbortArgs { devices: vec![0, 0], bytes: 1 << 20, calls: 64 }))
        );
        assert_eq!(
            bench("ferroccl bench work_loop --json out/work_loop.json").single,
            Some(SingleGpuBench::WorkLoop(WorkLoopArgs { device: 0, json: Some("out/work_loop.json".into()), timeline: None }))
        );
        assert_eq!(
            bench("ferroccl bench work_loop -d 1 --timeline out/timeline.json").single,
            Some(SingleGpuBench::WorkLoop(WorkLoopArgs { device: 1, json: None, timeline: Some("out/timeline.json".into()) }))
        );
        assert!(Cli::try_parse_from("ferroccl bench work_loop --json a.json --timeline b.json".split_whitespace()).is_err(), "--timeline with --json was accepted");
        assert_eq!(
            bench("ferroccl bench footprint").single,
            Some(SingleGpuBench::Footprint(FootprintArgs { device: 0, ranks: 2, channels: None, resident: None, sleep_after: None, resident_threads: None, threads: None, busy_bytes: 256 << 20, iters: 20, json: None }))
        );
        assert_eq!(
            bench("ferroccl bench footprint -d 1 --ranks 1 --channels 8 --resident 1 --sleep-after never --threads 128 --busy-bytes 64M --iters 5 --json out/footprint.json").single,
            Some(SingleGpuBench::Footprint(FootprintArgs {
                device: 1,
                ranks: 1,
                channels: Some(8),
                resident: Some(1),
                sleep_after: Some(SleepAfter(None)),
                resident_threads: None,
                threads: Some(128),
                busy_bytes: 64 << 20,
                iters: 5,
                json: Some("out/footprint.json".into())
            }))
        );

        assert_eq!(
            bench("ferroccl bench shmem").single,
            Some(SingleGpuBench::Shmem(ShmemArgs { devices: vec![0, 1], min_bytes: 8, max_bytes: 64 << 20, iters: 100, blocks: None, threads: 1024, json: None }))
        );
        assert_eq!(
            bench("ferroccl bench shmem --devices 1,0 --min-bytes 1K --max-bytes 1G --iters 20 --blocks 32 --threads 512 --json bench/results/shmem.json").single,
            Some(SingleGpuBench::Shmem(ShmemArgs {
                devices: vec![1, 0],
                min_bytes: 1 << 10,
                max_bytes: 1 << 30,
                iters: 20,
                blocks: Some(32),
                threads: 512,
                json: Some("bench/results/shmem.json".into())
            }))
        );

        let c = coll("ferroccl coll --devices 0,1 --ranks 4 --channels 4 --step 65536 --big 1572864 --paired true");
        assert_eq!(
            c,
            CollArgs {
                comm: CommArgs { devices: Some(vec![0, 1]), ranks: Some(4), channels: Some(4), step: Some(65536), paired: Some(true), ..CommArgs::default() },
                big: Some(1572864),
                filter: None,
                procs: None,
                comm_id: None,
            }
        );
        let c = coll("ferroccl coll --procs 2 --devices 0,1 all_gather");
        assert_eq!((c.procs, c.comm.devices, c.filter.as_deref()), (Some(2), Some(vec![0, 1]), Some("all_gather")));
        let c = coll("ferroccl coll --devices 0,1 --ranks 2 --channels 2 --threads 512 no-such-case");
        assert_eq!((c.comm.threads, c.filter.as_deref(), c.big), (Some(512), Some("no-such-case"), None));
        let c = coll("ferroccl coll --devices 0,1,2,3,4,5,6,7 --ranks 8 --channels 8 --direct true");
        assert_eq!((c.comm.devices.as_ref().map(Vec::len), c.comm.direct), (Some(8), Some(true)));

        assert!(matches!(parse("ferroccl info").command, Command::Info));
        assert!(matches!(parse("ferroccl ptx").command, Command::Ptx));
        let Command::Test(t) = parse("ferroccl test").command else { panic!() };
        assert_eq!(t, TestArgs { device: 0, filter: None, remove_fence: false });
        let Command::Test(t) = parse("ferroccl test --device 1 reduce_copy").command else { panic!() };
        assert_eq!(t, TestArgs { device: 1, filter: Some("reduce_copy".into()), remove_fence: false });
        let Command::Test(t) = parse("ferroccl test --remove-fence message_passing").command else { panic!() };
        assert_eq!(t, TestArgs { device: 0, filter: Some("message_passing".into()), remove_fence: true });
    }

    #[test]
    fn bad_command_lines_are_refused() {
        for bad in [
            "ferroccl",
            "ferroccl info extra",
            "ferroccl ptx --json x",
            "ferroccl test a b",
            "ferroccl coll --paired maybe",
            "ferroccl coll --sms 1,x",
            "ferroccl coll --devices a",
            "ferroccl coll --ranks",
            "ferroccl bench -b",
            "ferroccl bench -b 12X",
            "ferroccl bench -b K",
            "ferroccl bench -b -5",
            "ferroccl bench -b 1.5M",
            "ferroccl bench -b 99999999999999999999G",
            "ferroccl bench -n many",
            "ferroccl bench -d float16",
            "ferroccl bench -o premulsum",
            "ferroccl bench -c 2",
            "ferroccl bench -r -1",
            "ferroccl bench -z 1",
            "ferroccl bench sendrecv",
            "ferroccl bench allreduce",
            "ferroccl bench all_reduce reduce_copy",
            "ferroccl bench reduce_copy -b 8",
            "ferroccl bench work_loop --bytes 8",
            "ferroccl bench footprint --ranks many",
            "ferroccl bench footprint --busy-bytes 1.5M",
            "ferroccl bench footprint --devices 0,1",
            "ferroccl bench footprint --sleep-after 0s",
            "ferroccl bench footprint --sleep-after soon",
            "ferroccl bench footprint --sleep-after 1500ns",
            "ferroccl bench shmem --max-bytes 1.5M",
            "ferroccl bench shmem --devices a,b",
            "ferroccl bench shmem --iters -1",
            "ferroccl bench shmem --ranks 2",
            "ferroccl bench --algo oneshot",
            "ferroccl coll --staging 1.5M",
        ] {
            assert!(Cli::try_parse_from(bad.split_whitespace()).is_err(), "{bad} was accepted");
        }
    }

    /// The sweep flags the command line gave, short or long, are recorded; defaults are
    /// not.
    #[test]
    fn the_sweep_flags_given_are_recorded() {
        assert_eq!(bench("ferroccl bench").given, SweepGiven::default());
        assert_eq!(bench("ferroccl bench all_reduce -f 4 -c 0 --json x.json").given, SweepGiven::default());
        assert_eq!(bench("ferroccl bench -b 8 -n 3").given, SweepGiven { min_bytes: true, iters: true, ..SweepGiven::default() });
        let all = SweepGiven { min_bytes: true, max_bytes: true, iters: true, warmup: true, repeats: true };
        assert_eq!(bench("ferroccl bench --minbytes 32M --maxbytes 32M --iters 20 --warmup_iters 5 --repeats 5").given, all, "given at their defaults still counts");
        assert_eq!(bench("ferroccl bench reduce_copy").given, SweepGiven::default());
    }

    #[test]
    fn the_path_is_typed_stream_or_direct() {
        assert_eq!(bench("ferroccl bench").comm.path, None);
        assert_eq!(bench("ferroccl bench --path typed").comm.path, Some(SubmitPath::Typed));
        assert_eq!(bench("ferroccl bench --path stream").comm.path, Some(SubmitPath::Stream));
        assert_eq!(coll("ferroccl coll --path direct").comm.path, Some(SubmitPath::Direct));
        for bad in ["ferroccl bench --path queue", "ferroccl coll --path"] {
            assert!(Cli::try_parse_from(bad.split_whitespace()).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn sizes_take_k_m_g_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("1k"), Ok(1024));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("3m"), Ok(3 << 20));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2g"), Ok(2 << 30));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        for bad in ["", "K", "-5", "1.5M", "12X", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
