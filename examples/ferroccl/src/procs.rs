//! `--procs N`: the collective benchmark (`bench`) and the correctness matrix (`coll`) as
//! N processes, one rank (and one GPU) each, as users deploy communicators. The command
//! starts N copies of itself (`testkit::launch`, as `ferroccl run` does) with a fresh
//! communicator id; each builds its rank (`Comm::init_rank` on its GPU, or a host-twin
//! rank without a GPU) and the processes agree through a bootstrap of their own. `bench`:
//! each process times its own calls (a barrier before each timing; every time the mean
//! over the processes, every wrong count their sum), rank 0 prints the table and writes
//! the JSON; NCCL (`--nccl`) runs one rank per process before ferroccl's loops start,
//! timed the same way. `coll`: each process checks its own rank's outputs of every case
//! and prints what it finds wrong; rank 0 prints the progress and the total.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use ferroccl_testkit::coll::expect::CollCase;
use ferroccl_testkit::coll::gpu::GpuGroup;
use ferroccl_testkit::coll::group::{RankGroup, SubmitPath, coordination};
use ferroccl_testkit::coll::twin::TwinGroup;
use ferroccl_testkit::launch;
use host_shim::bootstrap::{Bootstrap, PeEnv};
use host_shim::comm::wiring::Shape;
use host_shim::comm::{CommId, Tuning};
use host_shim::{Error, device};

use crate::cli::{BenchCmd, CollArgs, CommArgs};
use crate::{GPU_BIG, coll_cases, collbench, comm_config, filtered, matrix_arena, no_gpu, progress_bar, run_matrix, twin, utc_now, write_json};

/// How long the processes wait for each other at a barrier (a row's NCCL or ferroccl
/// timing on another process may take this long).
const BARRIER_BUDGET: Duration = Duration::from_secs(600);

/// `bench --procs n`: the starting command, or (with the id it passes) one of its
/// processes.
pub fn bench(args: BenchCmd, n: usize) -> Result<ExitCode, Error> {
    match (&args.comm_id, PeEnv::from_env()?) {
        (Some(hex), Some(env)) => {
            let id = CommId::from_bytes(&from_hex(hex)?)?;
            as_process(args, &id, &env)
        }
        (Some(_), None) => Err(Error::InvalidArgument("--comm-id is for the processes `bench --procs` starts".into())),
        (None, _) => start(&args.comm, n),
    }
}

/// `coll --procs n`: the starting command, or (with the id it passes) one of its
/// processes.
pub fn coll(args: &CollArgs, n: usize) -> Result<ExitCode, Error> {
    match (&args.comm_id, PeEnv::from_env()?) {
        (Some(hex), Some(env)) => {
            let id = CommId::from_bytes(&from_hex(hex)?)?;
            coll_as_process(args, &id, &env)
        }
        (Some(_), None) => Err(Error::InvalidArgument("--comm-id is for the processes `coll --procs` starts".into())),
        (None, _) => {
            if args.comm.heap {
                return Err(Error::InvalidArgument(format!(
                    "--procs {n} with --heap: the matrix's ranks in processes are not on a symmetric heap (run --heap without --procs)"
                )));
            }
            if no_gpu()?.is_some() {
                twin::refuse_coll(args)?;
            }
            start(&args.comm, n)
        }
    }
}

fn from_hex(hex: &str) -> Result<Vec<u8>, Error> {
    hex.as_bytes()
        .chunks(2)
        .map(|d| std::str::from_utf8(d).ok().and_then(|d| u8::from_str_radix(d, 16).ok()))
        .collect::<Option<Vec<u8>>>()
        .ok_or_else(|| Error::InvalidArgument(format!("--comm-id {hex:?} is not hex")))
}

/// Starts the `n` processes of this command line (its communicator `comm`) and waits for
/// them.
fn start(comm: &CommArgs, n: usize) -> Result<ExitCode, Error> {
    if n < 2 {
        return Err(Error::InvalidArgument(format!("--procs {n}: at least 2 processes")));
    }
    if comm.ranks.is_some_and(|r| r != n) {
        return Err(Error::InvalidArgument(format!("--procs {n} with --ranks {}: one rank per process", comm.ranks.unwrap_or(0))));
    }
    let devices = match (&comm.devices, no_gpu()?) {
        (_, Some(_)) => vec![0; n],
        (Some(devices), None) if devices.len() == n => devices.clone(),
        (Some(devices), None) => return Err(Error::InvalidArgument(format!("--procs {n} with --devices {devices:?}: one device per process"))),
        (None, None) => (0..n).collect(),
    };
    let id: String = CommId::new()?.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let program = std::env::current_exe().map_err(|e| Error::InvalidArgument(format!("finding this program: {e}")))?;
    let argv = std::env::args().skip(1).chain(["--comm-id".to_string(), id]).collect();
    let outcome = launch::run(&launch::Launch { program, args: argv, devices, grace: Duration::from_secs(60) })
        .map_err(|e| Error::InvalidArgument(format!("--procs {n}: {e}")))?;
    if outcome.success() {
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("ferroccl --procs {n}: {outcome}");
    Ok(ExitCode::FAILURE)
}

/// One process: its rank, the sweep, and (rank 0) the table and the JSON.
fn as_process(args: BenchCmd, id: &CommId, env: &PeEnv) -> Result<ExitCode, Error> {
    let twin_why = no_gpu()?;
    if twin_why.is_some() {
        twin::refuse_bench(&args)?;
    }
    let (rank, nranks) = (env.pe as u32, env.n_pes as u32);
    let command = format!("ferroccl {}", std::env::args().skip(1).take_while(|a| a != "--comm-id").collect::<Vec<_>>().join(" "));
    let BenchCmd { sweep, comm, stats, nccl: with_nccl, given, .. } = args;
    let bench_args = if twin_why.is_some() { twin::bench_sweep(sweep, given) } else { sweep }.normalized()?;
    let lead = rank == 0;
    let mut out: Box<dyn Write> = if lead { Box::new(std::io::stdout()) } else { Box::new(std::io::sink()) };
    let bar = |what: &str| if lead { progress_bar(collbench::row_count(&bench_args, nranks), what) } else { ProgressBar::hidden() };
    let (rows, line) = match twin_why {
        Some(why) => {
            let shape = Shape { direct: false, ..twin::shape(&comm, nranks, stats) };
            let mut g = TwinGroup::join_process(id, rank, shape, comm.threads.unwrap_or(twin::DEFAULT_THREADS), twin::SPIN_BUDGET)?;
            if lead {
                println!("# no GPU ({why}): {}", twin::NOTICE);
            }
            let rows = collbench::run_with_baseline(&mut g, &bench_args, None, &mut out, &bar("rows"))?;
            let line = format!("{} rank(s) in as many processes on the host twin: {}", nranks, g.describe());
            g.shutdown(Duration::from_secs(60))?;
            (rows, line)
        }
        None => {
            let path = comm.path.unwrap_or(SubmitPath::Typed);
            let default = Tuning::default().loop_cfg;
            let mut cfg = comm_config(&comm, default.channels + default.call_channels, path);
            cfg.stats = stats;
            let mut processes = coordination(id, rank, nranks, BARRIER_BUDGET)?;
            // NCCL first: its setup must not run while ferroccl's persistent loops hold the GPU.
            let mut nccl = if with_nccl { Some(prepare_nccl(&bench_args, rank, nranks, env.device, &mut processes, &bar("NCCL graph rows"))?) } else { None };
            let arena = 5 * bench_args.max_bytes + (64 << 20);
            let mut g = GpuGroup::join_process(id, rank, nranks, env.device, cfg, arena, processes)?;
            g.set_path(path);
            let name = device::list()?.into_iter().find(|d| d.ordinal == env.device).map_or_else(|| format!("device {}", env.device), |d| d.name);
            let how = if path == SubmitPath::Typed { "typed calls (Comm::all_reduce and its siblings on cudarc slices)" } else { "stream-ordered items" };
            let line = format!("{nranks} processes, one GPU each; rank 0 on [{}] {name}; {}; {how}", env.device, g.describe());
            if lead {
                println!("# ferroccl on {line}");
            }
            let baseline = nccl.as_mut().map(|b| &mut **b as &mut dyn collbench::Baseline);
            let rows = collbench::run_with_baseline(&mut g, &bench_args, baseline, &mut out, &bar("rows"))?;
            g.shutdown(Duration::from_secs(60))?;
            (rows, line)
        }
    };
    if lead && let Some(path) = &bench_args.json {
        write_json(path, collbench::rows_json(&rows, &command, &line, &utc_now(), nranks as usize))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One process of `coll --procs`: its rank, the matrix (this rank's outputs checked), and
/// the processes' total of wrong cases; failure on every process when any is wrong.
fn coll_as_process(args: &CollArgs, id: &CommId, env: &PeEnv) -> Result<ExitCode, Error> {
    let (rank, nranks) = (env.pe as u32, env.n_pes as u32);
    let lead = rank == 0;
    let started = Instant::now();
    let filter = args.filter.as_deref();
    let wrong = match no_gpu()? {
        Some(why) => {
            twin::refuse_coll(args)?;
            let shape = Shape { direct: false, ..twin::shape(&args.comm, nranks, false) };
            let cases = filtered(coll_cases(args.big.unwrap_or(twin::DEFAULT_BIG), &shape), filter);
            let mut g = TwinGroup::join_process(id, rank, shape, args.comm.threads.unwrap_or(twin::DEFAULT_THREADS), twin::SPIN_BUDGET)?;
            if lead {
                println!("# no GPU ({why}): {}", twin::NOTICE);
            }
            let wrong = matrix_as_process(&mut g, &cases, lead, started)?;
            if wrong.is_some() {
                g.shutdown(Duration::from_secs(60))?;
            }
            wrong
        }
        None => {
            let path = args.comm.path.unwrap_or_default();
            // Across processes nothing writes into another's buffers (no direct writes).
            let cfg = Tuning { direct: false, ..comm_config(&args.comm, 4, path) };
            let big = args.big.unwrap_or(GPU_BIG);
            let cases = filtered(coll_cases(big, &cfg.shape(nranks)), filter);
            let processes = coordination(id, rank, nranks, BARRIER_BUDGET)?;
            let mut g = GpuGroup::join_process(id, rank, nranks, env.device, cfg, matrix_arena(&cases, nranks, big), processes)?;
            g.set_path(path);
            let wrong = matrix_as_process(&mut g, &cases, lead, started)?;
            if wrong.is_some() {
                g.shutdown(Duration::from_secs(60))?;
            }
            wrong
        }
    };
    Ok(if wrong == Some(0) { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The matrix `cases` on this process's rank of `g`, then the processes' total of wrong
/// cases (rank 0 prints it); `None` when a case failed to run here (printed): the caller
/// then leaves without a shutdown, which would wait for calls the other ranks are in, and
/// the other processes' calls fail once this process has gone, naming its rank.
fn matrix_as_process(g: &mut dyn RankGroup, cases: &[CollCase], lead: bool, started: Instant) -> Result<Option<u64>, Error> {
    if lead {
        println!("collective matrix: {}, {} processes: {} cases (set up in {:.1} s)", g.describe(), g.nranks(), cases.len(), started.elapsed().as_secs_f64());
    }
    let Some(wrong) = run_matrix(g, cases, started, lead) else {
        return Ok(None);
    };
    let processes = g.processes().ok_or_else(|| Error::InvalidArgument("a rank of processes without their bootstrap".into()))?;
    let counts = processes.all_gather("wrong cases", &(wrong as u64).to_le_bytes(), &[])?;
    let mut total = 0;
    for part in &counts {
        let bytes: [u8; 8] = part.bytes.as_slice().try_into().map_err(|_| Error::InvalidArgument("a process sent no count of wrong cases".into()))?;
        total += u64::from_le_bytes(bytes);
    }
    if lead {
        println!("{} cases, {total} wrong across the {} processes, {:.1} s", cases.len(), g.nranks(), started.elapsed().as_secs_f64());
    }
    Ok(Some(total))
}

#[cfg(feature = "nccl")]
/// This process's rank of NCCL as the baseline (one rank per process), made (its buffers
/// and windows for the sweep's largest row) and its graph rows timed before ferroccl's
/// loop starts.
fn prepare_nccl(args: &collbench::BenchArgs, rank: u32, nranks: u32, ordinal: usize, processes: &mut Bootstrap, bar: &ProgressBar) -> Result<Box<dyn collbench::Baseline>, Error> {
    let nccl = crate::nccl_baseline::NcclBaseline::join(rank, nranks, ordinal, processes, collbench::largest_bytes(args, nranks))?;
    if rank == 0 {
        println!("# baseline set up before ferroccl's loops start (graph rows timed now; the others take turns with ferroccl): {}", collbench::Baseline::name(&nccl));
    }
    Ok(Box::new(collbench::Premeasured::measure(nccl, args, nranks, Some(processes), bar)?))
}

#[cfg(not(feature = "nccl"))]
fn prepare_nccl(_: &collbench::BenchArgs, _: u32, _: u32, _: usize, _: &mut Bootstrap, _: &ProgressBar) -> Result<Box<dyn collbench::Baseline>, Error> {
    Err(Error::InvalidArgument("--nccl needs ferroccl built with the `nccl` feature (cargo build --release -p ferroccl --features nccl)".into()))
}
