//! `ferroccl`: the command-line face of the runtime (`ferroccl --help`; the command line
//! itself is declared in [`cli`]).
//!
//! - `ferroccl info`: devices, compute capability, SMs, peer access, multicast support.
//! - `ferroccl test [--device N] [FILTER]`: the GPU self-tests; exits non-zero on failure.
//! - `ferroccl coll`: the collective correctness matrix on GPUs (host twin without a GPU).
//! - `ferroccl bench`: nccl-tests' table for the collectives (host twin without a GPU);
//!   `bench reduce_copy`, `bench work_loop` and `bench footprint`: the single-GPU benchmarks.
//!   `bench shmem`: the symmetric heap's, between two GPUs.
//! - `ferroccl ptx`: prints the embedded PTX module (for ptxas, linking, inspection).
//! - `ferroccl run -n N PROGRAM…`: starts PROGRAM as N PEs, one process each.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

mod bench;
mod cli;
mod collbench;
mod dispatch;
mod footprint;
#[cfg(feature = "nccl")]
mod nccl_baseline;
mod procs;
mod shmem_bench;
mod twin;

use ferroccl_testkit::coll::abort::abort_during_burst;
use ferroccl_testkit::coll::check;
use ferroccl_testkit::coll::expect::CollCase;
use ferroccl_testkit::coll::shot;
use ferroccl_testkit::coll::gpu::GpuGroup;
use ferroccl_testkit::coll::group::{RankGroup, SubmitPath};
use ferroccl_testkit::coll::twin::TwinGroup;
use ferroccl_testkit::{launch, selftest};
use device_rt::algo::{AlgorithmChoice, plan};
use host_shim::comm::Tuning;
use host_shim::comm::wiring::Shape;
use host_shim::{Error, device};

use crate::bench::ReduceCopyBench;
use crate::cli::{AbortArgs, BenchCmd, Cli, CollArgs, Command, CommArgs, DispatchArgs, FootprintArgs, ReduceCopyArgs, RunArgs, SingleGpuBench, SleepAfter, TestArgs, WorkLoopArgs};

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::new().filter_or("FERROCCL_LOG", "warn").write_style("FERROCCL_LOG_STYLE")).init();
    let cli = Cli::parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit());
    if let Command::Bench(BenchCmd { single: Some(single), .. }) = &cli.command
        && let Err(e) = needs_gpu(single)
    {
        eprintln!("ferroccl: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Info => info(),
        Command::Test(args) => test(&args),
        Command::Coll(args) => coll(&args),
        Command::Bench(BenchCmd { single: Some(SingleGpuBench::ReduceCopy(args)), .. }) => bench_reduce_copy(&args),
        Command::Bench(BenchCmd { single: Some(SingleGpuBench::WorkLoop(args)), .. }) => bench_work_loop(&args),
        Command::Bench(BenchCmd { single: Some(SingleGpuBench::Abort(args)), .. }) => bench_abort(&args),
        Command::Bench(BenchCmd { single: Some(SingleGpuBench::Footprint(args)), .. }) => bench_footprint(&args),
        Command::Bench(BenchCmd { single: Some(SingleGpuBench::Shmem(args)), .. }) => shmem_bench::run(&args),
        Command::Bench(BenchCmd { single: Some(SingleGpuBench::Dispatch(args)), .. }) => bench_dispatch(&args),
        Command::Bench(args) => bench_collectives(args),
        Command::Ptx => {
            print!("{}", host_shim::module::PTX);
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => run_pes(&args),
    };
    result.unwrap_or_else(|e| {
        eprintln!("ferroccl: {e}");
        ExitCode::FAILURE
    })
}

/// Why this machine has no GPU to run on (no CUDA driver, or a driver that reports no
/// device), or `None` where it has one: `coll` and the collective `bench` then run on the
/// host twin. Any other driver error is returned.
fn no_gpu() -> Result<Option<Error>, Error> {
    match host_shim::init() {
        Ok(_) => Ok(None),
        Err(e @ (Error::NoDriver | Error::NoDevice)) => Ok(Some(e)),
        Err(e) => Err(e),
    }
}

/// The single-GPU benchmarks have no host twin: without a GPU, an error that says so.
fn needs_gpu(single: &SingleGpuBench) -> Result<(), Error> {
    let name = match single {
        SingleGpuBench::ReduceCopy(_) => "reduce_copy",
        SingleGpuBench::WorkLoop(_) => "work_loop",
        SingleGpuBench::Abort(_) => "abort",
        SingleGpuBench::Footprint(_) => "footprint",
        SingleGpuBench::Shmem(_) => "shmem",
        SingleGpuBench::Dispatch(_) => "dispatch",
    };
    match no_gpu()? {
        Some(why) => Err(Error::InvalidArgument(format!(
            "bench {name} runs on GPUs only ({why}); without a GPU, `ferroccl bench` (the collectives) and `ferroccl coll` run on the host twin"
        ))),
        None => Ok(()),
    }
}

/// `ferroccl run`: every PE's process, then the outcome (stderr names each failed PE).
fn run_pes(args: &RunArgs) -> Result<ExitCode, Error> {
    let devices = if args.devices.is_empty() { (0..args.pes).collect() } else { args.devices.clone() };
    if args.pes == 0 || devices.len() != args.pes {
        return Err(Error::InvalidArgument(format!("-n {} with --devices {devices:?}: at least one PE, one device per PE", args.pes)));
    }
    let (program, rest) = args.program.split_first().ok_or_else(|| Error::InvalidArgument("no program to run".into()))?;
    let launch = launch::Launch { program: program.into(), args: rest.to_vec(), devices, grace: args.grace };
    let outcome = launch::run(&launch).map_err(|e| Error::InvalidArgument(format!("ferroccl run: {e}")))?;
    if outcome.success() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("ferroccl run: {outcome}");
    Ok(ExitCode::FAILURE)
}

/// A progress bar of `len` steps on stderr, hidden when stdout is not a terminal (a
/// log or a pipe gets the plain lines only).
fn progress_bar(len: usize, what: &str) -> ProgressBar {
    if !std::io::stdout().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    let template = format!("{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {what} {{msg}} (eta {{eta}})");
    bar.set_style(ProgressStyle::with_template(&template).expect("a valid template"));
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn info() -> Result<ExitCode, Error> {
    let devices = device::list()?;
    let (major, minor) = device::driver_version()?;
    println!("CUDA driver API {major}.{minor}, {} device(s)", devices.len());
    for d in &devices {
        let peers: Vec<String> = d
            .peer_access
            .iter()
            .enumerate()
            .filter(|&(_, &ok)| ok)
            .map(|(j, _)| j.to_string())
            .collect();
        println!(
            "  [{}] {}: sm_{}{}, {} SMs, {:.1} GiB, dyn smem {} KiB, peer access: {}, multicast: {}",
            d.ordinal,
            d.name,
            d.compute_capability.0,
            d.compute_capability.1,
            d.sm_count,
            d.total_memory as f64 / (1u64 << 30) as f64,
            d.max_dynamic_smem / 1024,
            if peers.is_empty() { "none".to_owned() } else { peers.join(",") },
            if d.multicast_supported { "supported (not used unless opted in)" } else { "no" },
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn test(args: &TestArgs) -> Result<ExitCode, Error> {
    let ordinal = args.device;
    let mut fixture = selftest::Fixture::new(ordinal)?;
    fixture.fence_removed = args.remove_fence;
    let name = device::list()?.into_iter().nth(ordinal).map(|d| d.name).unwrap_or_default();
    let control = if args.remove_fence { "; fence removed from the message-passing tests (negative control: they should fail)" } else { "" };
    println!("ferroccl self-tests on device {ordinal} ({name}){control}");
    let results = selftest::run(&fixture, args.filter.as_deref(), |r| match &r.outcome {
        Ok(()) => println!("test {} ... ok ({:.1} ms)", r.name, r.elapsed.as_secs_f64() * 1e3),
        Err(f) => println!("test {} ... FAILED: {f}", r.name),
    });
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    println!("{} passed, {failed} failed", results.len() - failed);
    Ok(if failed == 0 && !results.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The communicator configuration of `comm` on GPUs, for items taking `path`: every flag
/// given replaces [`Tuning::default`]'s value, `channels` when no `--channels` is
/// given (then fitted to the devices, as the default is; a count given is kept or refused); without `--resident`, the default's resident channels on the stream path (the
/// others call channels) and every channel on the direct path (which call channels do not
/// serve).
fn comm_config(comm: &CommArgs, channels: u32, path: SubmitPath) -> Tuning {
    let mut cfg = Tuning::default();
    let total = comm.channels.unwrap_or(channels);
    let resident = comm.resident.unwrap_or(if path.on_stream() { cfg.loop_cfg.channels } else { total });
    (cfg.loop_cfg.channels, cfg.loop_cfg.call_channels) = split_channels(total, resident);
    cfg.loop_cfg.threads = comm.threads.unwrap_or(cfg.loop_cfg.threads);
    cfg.loop_cfg.resident_threads = comm.resident_threads.unwrap_or(cfg.loop_cfg.resident_threads);
    cfg.loop_cfg.placement = comm.sms.unwrap_or(cfg.loop_cfg.placement);
    cfg.loop_cfg.sleep_after = comm.sleep_after.map_or(cfg.loop_cfg.sleep_after, SleepAfter::duration);
    cfg.ring_step_bytes = comm.step.unwrap_or(cfg.ring_step_bytes);
    cfg.direct = comm.direct.unwrap_or(cfg.direct);
    cfg.paired = comm.paired.unwrap_or(cfg.paired);
    cfg.algorithm = comm.algo.unwrap_or(cfg.algorithm);
    cfg.staging_bytes = comm.staging.unwrap_or(cfg.staging_bytes);
    cfg.fit_call_channels = comm.channels.is_none();
    cfg
}

/// `channels` as (resident, call) channels: `resident` of them resident (all when it
/// exceeds them; at least one).
fn split_channels(channels: u32, resident: u32) -> (u32, u32) {
    let resident = resident.clamp(1, channels.max(1));
    (resident, channels.saturating_sub(resident))
}

/// The device of each of `nranks` ranks: `devices` round-robin.
fn rank_devices(devices: &[usize], nranks: usize) -> Result<Vec<usize>, Error> {
    if devices.is_empty() {
        return Err(Error::InvalidArgument("--devices names no device".into()));
    }
    Ok((0..nranks).map(|r| devices[r % devices.len()]).collect())
}

/// The cases `coll` runs on a communicator of `shape`: the ring's matrix (every
/// function, inputs exact in any order, `big` its large count; with NVLS forced, the
/// calls it runs and point-to-point) unless a one-shot/two-shot algorithm is forced,
/// and the one-shot/two-shot algorithms' (random floats wherever the plan is one-shot,
/// two-shot or NVLS, compared with a reduction in rank order; both sides of every
/// threshold) unless the ring is.
fn coll_cases(big: usize, shape: &Shape) -> Vec<CollCase> {
    let staging = shape.staging();
    let runnable = |c: &CollCase| plan(c.function, c.dtype.size() as u64, c.count as u64, staging, shape.algorithm).is_ok();
    let mut cases = match shape.algorithm {
        AlgorithmChoice::OneShot | AlgorithmChoice::TwoShot => Vec::new(),
        _ => check::matrix(shape.nranks, big).into_iter().filter(runnable).collect(),
    };
    if shape.algorithm != AlgorithmChoice::Ring {
        cases.extend(shot::matrix(staging, shape.algorithm, (0, 1)));
    }
    cases
}

/// `coll`'s large count on GPUs without `--big`.
const GPU_BIG: usize = 3 << 20;

fn coll(args: &CollArgs) -> Result<ExitCode, Error> {
    if args.comm.path == Some(SubmitPath::Typed) {
        return Err(Error::InvalidArgument(
            "coll --path typed: the matrix has cases no typed call makes (send/recv, PreMulSum operators, the average of floating-point types as the reference computes it); --path stream runs the same call kernels".into(),
        ));
    }
    if let Some(n) = args.procs {
        return procs::coll(args, n);
    }
    if args.comm_id.is_some() {
        return Err(Error::InvalidArgument("--comm-id is for the processes `coll --procs` starts".into()));
    }
    if let Some(why) = no_gpu()? {
        return coll_on_twin(args, &why);
    }
    let devices = args.comm.devices.clone().unwrap_or_else(|| vec![0]);
    let nranks = args.comm.ranks.unwrap_or(devices.len());
    let path = args.comm.path.unwrap_or_default();
    let cfg = comm_config(&args.comm, 4, path);
    let big = args.big.unwrap_or(GPU_BIG);
    let ordinals = rank_devices(&devices, nranks)?;
    let cases = filtered(coll_cases(big, &cfg.shape(nranks as u32)), args.filter.as_deref());
    let arena = matrix_arena(&cases, nranks as u32, big);
    let started = std::time::Instant::now();
    let mut g = if args.comm.heap { GpuGroup::new_on_heap(&ordinals, cfg, arena)? } else { GpuGroup::new(&ordinals, cfg, arena)? };
    g.set_path(path);
    println!("collective matrix: {} on {}, {path:?} path: {} cases (set up in {:.1} s)", nranks, g.describe(), cases.len(), started.elapsed().as_secs_f64());
    let Some(wrong) = run_matrix(&mut g, &cases, started, true) else {
        return Ok(ExitCode::FAILURE);
    };
    println!("{} cases, {} wrong, {:.1} s ({} stream-ordered calls on the ring route)", cases.len(), wrong, started.elapsed().as_secs_f64(), g.ring_routed());
    g.shutdown(Duration::from_secs(30))?;
    Ok(if wrong == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The bytes of buffers a rank needs for `cases` on `nranks` ranks with `big` their large
/// count (inputs, outputs, alignment, with room to spare).
fn matrix_arena(cases: &[CollCase], nranks: u32, big: usize) -> usize {
    let (_, out_elems) = cases.iter().map(|c| c.extents(nranks)).max_by_key(|e| e.0.max(e.1)).unwrap_or((0, 0));
    4 * (out_elems.max(big * nranks as usize) * 8 + (1 << 20))
}

/// `coll` without a GPU (`why`): the matrix on the host twin, after refusing what the
/// twin cannot do (`twin::refuse_coll`).
fn coll_on_twin(args: &CollArgs, why: &Error) -> Result<ExitCode, Error> {
    twin::refuse_coll(args)?;
    println!("# no GPU ({why}): {}", twin::NOTICE);
    let nranks = args.comm.ranks.unwrap_or(twin::DEFAULT_RANKS);
    let shape = twin::shape(&args.comm, nranks as u32, false);
    let cases = filtered(coll_cases(args.big.unwrap_or(twin::DEFAULT_BIG), &shape), args.filter.as_deref());
    let started = std::time::Instant::now();
    let mut g = TwinGroup::start(shape, args.comm.threads.unwrap_or(twin::DEFAULT_THREADS), twin::SPIN_BUDGET)?;
    println!("collective matrix: {nranks} on {}: {} cases (set up in {:.1} s)", g.describe(), cases.len(), started.elapsed().as_secs_f64());
    let Some(wrong) = run_matrix(&mut g, &cases, started, true) else {
        return Ok(ExitCode::FAILURE);
    };
    println!("{} cases, {} wrong, {:.1} s (on the host twin: CPU threads, not a GPU)", cases.len(), wrong, started.elapsed().as_secs_f64());
    g.shutdown(Duration::from_secs(30))?;
    Ok(if wrong == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The cases whose description contains `filter` (all without one).
fn filtered(cases: Vec<CollCase>, filter: Option<&str>) -> Vec<CollCase> {
    cases.into_iter().filter(|c| filter.is_none_or(|f| c.describe().contains(f))).collect()
}

/// Runs `cases` on `g` in order, printing each wrong one, with (if `progress`) a progress
/// bar, or a line every 100 cases when stdout is not a terminal; the number of wrong
/// cases, or `None` after a case that failed to run (printed; the group is then left as
/// it is).
fn run_matrix(g: &mut dyn RankGroup, cases: &[CollCase], started: std::time::Instant, progress: bool) -> Option<usize> {
    let bar = if progress { progress_bar(cases.len(), "cases") } else { ProgressBar::hidden() };
    let mut wrong = 0;
    for (k, case) in cases.iter().enumerate() {
        bar.set_message(case.describe());
        match check::run_case(g, case, k as u64, Duration::from_secs(60)) {
            Ok(None) => {}
            Ok(Some(what)) => {
                wrong += 1;
                bar.suspend(|| println!("WRONG {what}"));
            }
            Err(e) => {
                bar.abandon();
                println!("FAILED {}: {e}", case.describe());
                return None;
            }
        }
        bar.inc(1);
        // Without a bar (stdout not a terminal), a line every 100 cases.
        if progress && bar.is_hidden() && (k + 1) % 100 == 0 {
            println!("  {}/{} cases, {} wrong, {:.1} s", k + 1, cases.len(), wrong, started.elapsed().as_secs_f64());
        }
    }
    bar.finish_and_clear();
    Some(wrong)
}

fn bench_collectives(args: BenchCmd) -> Result<ExitCode, Error> {
    if let Some(n) = args.procs {
        return procs::bench(args, n);
    }
    if args.comm_id.is_some() {
        return Err(Error::InvalidArgument("--comm-id is for the processes `bench --procs` starts".into()));
    }
    let twin_why = no_gpu()?;
    if twin_why.is_some() {
        twin::refuse_bench(&args)?;
    }
    let BenchCmd { sweep, comm, stats, nccl: with_nccl, given, .. } = args;
    let bench_args = if twin_why.is_some() { twin::bench_sweep(sweep, given) } else { sweep }.normalized()?;
    let command = format!("ferroccl {}", std::env::args().skip(1).collect::<Vec<_>>().join(" "));
    let mut out = std::io::stdout();
    let (rows, device_line) = if let Some(why) = twin_why {
        println!("# no GPU ({why}): {}", twin::NOTICE);
        let started = std::time::Instant::now();
        let nranks = comm.ranks.unwrap_or(twin::DEFAULT_RANKS);
        let shape = twin::shape(&comm, nranks as u32, stats);
        let mut g = TwinGroup::start(shape, comm.threads.unwrap_or(twin::DEFAULT_THREADS), twin::SPIN_BUDGET)?;
        let rows = collbench::run_with_baseline(&mut g, &bench_args, None, &mut out, &progress_bar(collbench::row_count(&bench_args, nranks as u32), "rows"))?;
        let line = g.describe();
        g.shutdown(Duration::from_secs(60))?;
        println!("# {} rows in {:.1} s on the host twin: CPU threads, not a GPU; the times are not GPU speeds", rows.len(), started.elapsed().as_secs_f64());
        (rows, line)
    } else {
        let gpus = device::list()?.len();
        let devices = comm.devices.clone().unwrap_or_else(|| (0..gpus).collect());
        let nranks = comm.ranks.unwrap_or(devices.len().max(2));
        let path = comm.path.unwrap_or(SubmitPath::Typed);
        let default = Tuning::default().loop_cfg;
        let mut cfg = comm_config(&comm, default.channels + default.call_channels, path);
        cfg.stats = stats;
        let ordinals = rank_devices(&devices, nranks)?;
        let arena = 5 * bench_args.max_bytes + (64 << 20);
        // NCCL first: its setup must not run while ferroccl's persistent loops hold the GPUs.
        let mut nccl = if with_nccl { Some(prepare_nccl(&bench_args, &ordinals)?) } else { None };
        let mut g = if comm.heap { GpuGroup::new_on_heap(&ordinals, cfg, arena)? } else { GpuGroup::new(&ordinals, cfg, arena)? };
        g.set_path(path);
        let names: Vec<String> = device::list()?.into_iter().filter(|d| devices.contains(&d.ordinal)).map(|d| format!("[{}] {}", d.ordinal, d.name)).collect();
        let line = format!("{}; {}; {} path", names.join(", "), g.describe(), match path {
            SubmitPath::Typed => "typed calls (Comm::all_reduce and its siblings on cudarc slices, stream-ordered)",
            SubmitPath::Stream => "stream-ordered (items on the ranks' streams)",
            SubmitPath::Direct => "direct host queue",
        });
        println!("# ferroccl on {line}");
        let baseline = nccl.as_mut().map(|b| &mut **b as &mut dyn collbench::Baseline);
        let rows = collbench::run_with_baseline(&mut g, &bench_args, baseline, &mut out, &progress_bar(collbench::row_count(&bench_args, nranks as u32), "rows"))?;
        g.shutdown(Duration::from_secs(60))?;
        (rows, line)
    };
    if let Some(path) = &bench_args.json {
        write_json(path, collbench::rows_json(&rows, &command, &device_line, &utc_now(), 1))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "nccl")]
/// NCCL as the baseline, one rank per GPU of `ordinals`, made (its buffers and windows
/// for the sweep's largest row) and its graph rows timed before ferroccl's loops start.
fn prepare_nccl(args: &collbench::BenchArgs, ordinals: &[usize]) -> Result<Box<dyn collbench::Baseline>, Error> {
    let nranks = ordinals.len() as u32;
    let nccl = crate::nccl_baseline::NcclBaseline::new(ordinals, collbench::largest_bytes(args, nranks))?;
    println!("# baseline set up before ferroccl's loops start (graph rows timed now; the others take turns with ferroccl): {}", collbench::Baseline::name(&nccl));
    Ok(Box::new(collbench::Premeasured::measure(nccl, args, nranks, None, &progress_bar(collbench::row_count(args, nranks), "NCCL graph rows"))?))
}

#[cfg(not(feature = "nccl"))]
fn prepare_nccl(_: &collbench::BenchArgs, _: &[usize]) -> Result<Box<dyn collbench::Baseline>, Error> {
    Err(Error::InvalidArgument("--nccl needs ferroccl built with the `nccl` feature (cargo build --release -p ferroccl --features nccl)".into()))
}

fn bench_reduce_copy(args: &ReduceCopyArgs) -> Result<ExitCode, Error> {
    let ordinal = args.device;
    let cfg = ReduceCopyBench { bytes: args.bytes, iters: args.iters };
    let info = device::list()?
        .into_iter()
        .nth(ordinal)
        .ok_or(Error::NoSuchDevice { ordinal, count: device::list()?.len() })?;
    let fixture = selftest::Fixture::new(ordinal)?;
    println!(
        "reduce_copy benchmark on device {ordinal} ({}, {} SMs): {} MiB per buffer, median of {} runs",
        info.name,
        info.sm_count,
        cfg.bytes >> 20,
        cfg.iters
    );
    let results = bench::reduce_copy(&fixture, &cfg, info.sm_count as u32)?;
    print!("{}", bench::table(&results));
    if let Some(path) = &args.json {
        write_json(path, bench::json(&results, &cfg, &info.name, &utc_now()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_work_loop(args: &WorkLoopArgs) -> Result<ExitCode, Error> {
    let ordinal = args.device;
    let devices = device::list()?;
    let info = devices.get(ordinal).ok_or(Error::NoSuchDevice { ordinal, count: devices.len() })?;
    let fixture = selftest::Fixture::new(ordinal)?;
    if let Some(path) = &args.timeline {
        println!("work loop timeline on device {ordinal} ({})", info.name);
        let shapes: Vec<(u32, usize)> = [1, 2, 4, 8, 16, 32, 64].map(|s| (256, s)).into_iter().chain([32, 64, 128].map(|t| (t, 8))).collect();
        let runs = bench::dispatch_timeline(&fixture, &shapes)?;
        for run in &runs {
            let mut gaps = run.gaps_ns.clone();
            gaps.sort_unstable();
            let at = |q: f64| gaps[((gaps.len() - 1) as f64 * q) as usize];
            println!("{:>4} threads, stamp every {:>2} items: gap p10 {:>6} p50 {:>6} p90 {:>6} max {:>6} ns", run.threads, run.spacing, at(0.1), at(0.5), at(0.9), at(1.0));
        }
        let body = serde_json::json!({ "device": info.name, "date_utc": utc_now(), "runs": runs });
        write_json(path, serde_json::to_string_pretty(&body).map_err(|e| Error::InvalidArgument(e.to_string()))?)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("work loop benchmark on device {ordinal} ({})", info.name);
    let r = bench::work_loop(&fixture)?;
    println!("(a) no-op round trip, 1 channel     {:>9.2} us", r.noop_roundtrip_us);
    println!("    no-op round trip, 4 channels    {:>9.2} us", r.noop_roundtrip_4ch_us);
    println!("    empty kernel launch + sync      {:>9.2} us", r.empty_launch_sync_us);
    println!("    noop_roundtrip_vs_launch        {:>9.3}", r.noop_roundtrip_vs_launch());
    println!("(b) device dispatch, 1 channel      {:>9.3} us/item", r.dispatch_us_per_item);
    println!("    device dispatch, 4 channels     {:>9.3} us/item", r.dispatch_4ch_us_per_item);
    println!("    the same, 1 channel, all queued {:>9.3} us/item", r.dispatch_queued_us_per_item);
    println!("(c) stream-ordered no-op in a graph {:>9.2} us/op", r.stream_ordered_us_per_op);
    println!("    empty kernel launch in a graph  {:>9.2} us/op", r.graph_launch_us_per_op);
    println!("    stream_ordered_vs_graph_launch  {:>9.3}", r.stream_ordered_vs_graph_launch());
    println!("(d) stream-ordered no-op, back to back {:>6.2} us/op", r.stream_back_to_back_us_per_op);
    println!("    of those on the ring route      {:>9.3}", r.stream_back_to_back_ring_share);
    println!("    the same without bursts         {:>9.2} us/op", r.stream_back_to_back_no_burst_us_per_op);
    println!("    stream-ordered no-op + sync     {:>9.2} us", r.stream_roundtrip_us);
    println!("    stream_roundtrip_vs_launch_sync {:>9.3}", r.stream_roundtrip_vs_launch_sync());
    println!("    of those on the ring route      {:>9.3}", r.stream_roundtrip_ring_share);
    println!("    of those waited for by the stream {:>7.3}", r.stream_roundtrip_wait_share);
    println!("    the same, polling cuStreamQuery {:>9.2} us", r.stream_roundtrip_polled_us);
    println!("    call kernel (legacy stream) + sync {:>7.2} us", r.stream_roundtrip_call_kernel_us);
    println!("(e) Comm::all_reduce 8 B, 1 rank: call + sync {:>7.2} us", r.comm.call_sync_us);
    println!("    the same, the loop asleep     {:>9.2} us", r.comm.call_sync_after_sleep_us);
    println!("    empty launch + sync, asleep   {:>9.2} us", r.comm.empty_launch_sync_after_sleep_us);
    println!("    in a graph of {} calls        {:>9.2} us/call", 20, r.comm.graph_us_per_call);
    println!("    host time per call            {:>9.2} us", r.comm.host_enqueue_us_per_call);
    println!("    same, no cudarc event tracking {:>8.2} us", r.comm.host_enqueue_untracked_us_per_call);
    println!("    host time per empty launch    {:>9.2} us", r.comm.empty_launch_host_us_per_call);
    println!("    host_enqueue_untracked_vs_empty_launch {:>5.3}", r.comm.host_enqueue_untracked_vs_empty_launch());
    if let Some(path) = &args.json {
        write_json(path, bench::work_loop_json(&r, &info.name, &utc_now()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_dispatch(args: &DispatchArgs) -> Result<ExitCode, Error> {
    let devices = device::list()?;
    for &ordinal in &args.devices {
        devices.get(ordinal).ok_or(Error::NoSuchDevice { ordinal, count: devices.len() })?;
    }
    let names: Vec<String> = args.devices.iter().map(|&d| format!("[{d}] {}", devices[d].name)).collect();
    println!("dispatch benchmark on {}", names.join(", "));
    let r = dispatch::dispatch(&args.devices)?;
    print!("{}", dispatch::table(&r));
    if let Some(path) = &args.json {
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        write_json(path, dispatch::json(&r, &names.join(", "), &utc_now(), &command))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_footprint(args: &FootprintArgs) -> Result<ExitCode, Error> {
    let ordinal = args.device;
    let devices = device::list()?;
    let info = devices.get(ordinal).ok_or(Error::NoSuchDevice { ordinal, count: devices.len() })?;
    let mut comm = Tuning::default();
    (comm.loop_cfg.channels, comm.loop_cfg.call_channels) =
        split_channels(args.channels.unwrap_or(comm.loop_cfg.channels + comm.loop_cfg.call_channels), args.resident.unwrap_or(comm.loop_cfg.channels));
    comm.loop_cfg.threads = args.threads.unwrap_or(comm.loop_cfg.threads);
    comm.loop_cfg.resident_threads = args.resident_threads.unwrap_or(comm.loop_cfg.resident_threads);
    comm.fit_call_channels = args.channels.is_none();
    comm.loop_cfg.sleep_after = args.sleep_after.map_or(comm.loop_cfg.sleep_after, SleepAfter::duration);
    let cfg = footprint::FootprintBench { ordinal, ranks: args.ranks, comm, busy_bytes: args.busy_bytes, iters: args.iters };
    println!(
        "footprint benchmark on device {ordinal} ({}, {} SMs): {} rank(s) × {} channels ({} resident) × {} threads, loops sleep when idle after {}, busy with {} MiB all-reduces; median of {} runs",
        info.name,
        info.sm_count,
        cfg.ranks,
        comm.loop_cfg.channels + comm.loop_cfg.call_channels,
        comm.loop_cfg.channels,
        comm.loop_cfg.threads,
        match comm.loop_cfg.sleep_after_ns() {
            0 => "never".to_string(),
            ns => format!("{} µs", ns / 1000),
        },
        cfg.busy_bytes >> 20,
        cfg.iters
    );
    let r = footprint::footprint(&cfg)?;
    print!("{}", footprint::table(&r));
    if let Some(path) = &args.json {
        write_json(path, footprint::json(&r, &cfg, &info.name, &utc_now()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_abort(args: &AbortArgs) -> Result<ExitCode, Error> {
    println!("abort during a burst: {} rank(s) on devices {:?}, {} calls of {} bytes each", args.devices.len(), args.devices, args.calls, args.bytes);
    let r = abort_during_burst(&args.devices, args.bytes, args.calls)?;
    println!("calls before abort()        {:>9}", r.calls_before_abort);
    println!("accepted after abort()      {:>9}", r.accepted_after_abort);
    println!("refused after abort()       {:>9}", r.refused_after_abort);
    println!("abort() to streams drained  {:>9.2} ms", r.drain_ms);
    for (rank, e) in r.rank_errors.iter().enumerate() {
        println!("rank {rank}: {}", e.as_deref().unwrap_or("no error"));
    }
    let refused_all = r.refused_after_abort == args.devices.len() * (args.calls - r.calls_before_abort);
    let all_aborted = r.rank_errors.iter().all(|e| e.as_deref() == Some(&*Error::Aborted.to_string()));
    Ok(if r.accepted_after_abort == 0 && refused_all && all_aborted { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Writes `body` to `path`.
fn write_json(path: &Path, body: String) -> Result<(), Error> {
    std::fs::write(path, body).map_err(|e| Error::InvalidArgument(format!("writing {}: {e}", path.display())))?;
    println!("wrote {}", path.display());
    Ok(())
}

/// The current time as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}
