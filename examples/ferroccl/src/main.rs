//! `ferroccl`: the command-line face of the runtime.
//!
//! - `ferroccl info`: devices, compute capability, SMs, peer access, multicast support.
//! - `ferroccl test [--device N] [FILTER]`: the GPU self-tests; exits non-zero on failure.
//! - `ferroccl ptx`: prints the embedded PTX module (for ptxas, linking, inspection).

use std::process::ExitCode;

mod bench;
mod collbench;
#[cfg(feature = "nccl")]
mod nccl_baseline;

use ferroccl_testkit::coll::check;
use ferroccl_testkit::coll::gpu::GpuGroup;
use ferroccl_testkit::coll::group::RankGroup;
use ferroccl_testkit::coll::twin::TwinGroup;
use ferroccl_testkit::selftest;
use host_shim::comm::CommConfig;
use host_shim::comm::wiring::Shape;
use host_shim::{Error, device};

use crate::bench::ReduceCopyBench;

const USAGE: &str = "usage: ferroccl <command>

commands:
  info                        list CUDA devices and what they support
  test [--device N] [FILTER]  run the GPU self-tests (those whose name contains FILTER)
  coll [--devices 0,1] [--ranks N] [--channels N] [--threads N] [--step BYTES] [--big N]
       [--sms hardware|tpcs|ID,ID,...] [--paired true|false] [--direct] [FILTER]
                              the collective correctness matrix (every function × type ×
                              operator) on N ranks spread over the devices, bit for bit;
                              --direct: ring senders write straight into the next rank's
                              output where the algorithm allows (NCCL's direct operations);
                              --sms: on which SMs the channels run (the hardware's choice,
                              one per TPC from SM 2, or one SM per channel); --paired: the
                              channels work in pairs (collectives on the first half; a
                              two-rank reduce_scatter sends on the first half and reduces
                              on the second)
  bench [COLLECTIVE...] [-b MIN] [-e MAX] [-f F] [-d TYPE] [-o OP] [-c 0|1] [-n N] [-w N]
        [-r ROOT] [--devices 0,1] [--ranks N] [--channels N] [--threads N] [--step BYTES]
        [--sms hardware|tpcs|ID,ID,...] [--paired true|false] [--direct] [--stats] [--nccl]
        [--json PATH]
                              nccl-tests' table (size, count, type, redop, root, time, algbw,
                              busbw, #wrong; out of place and in place) for all_reduce,
                              all_gather, reduce_scatter, broadcast, reduce; with --nccl also
                              NCCL on the same GPUs and the busbw ratio; with --stats a line
                              per row on where the channels' time went. Without a GPU it
                              runs on the host twin and says so
  bench reduce_copy [--device N] [--bytes N] [--iters N] [--json PATH]
                              reduce_copy (copy, 2- and 8-source sum; f32, bf16) against
                              cuMemcpyDtoD of the same bytes, in one run
  bench work_loop [--device N] [--json PATH]
                              the work loop's no-op round trip, device dispatch rate and
                              stream-ordered path against kernel launches, in one run
  ptx                         print the embedded PTX module

environment:
  FERROCCL_LOG=error|warn|info|debug|trace   diagnostics on stderr (default: warn)";

fn main() -> ExitCode {
    init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("info") if args.len() == 1 => info(),
        Some("test") => test(&args[1..]),
        Some("coll") => coll(&args[1..]),
        Some("bench") if args.get(1).map(String::as_str) == Some("reduce_copy") => bench_reduce_copy(&args[2..]),
        Some("bench") if args.get(1).map(String::as_str) == Some("work_loop") => bench_work_loop(&args[2..]),
        Some("bench") => bench_collectives(&args[1..]),
        Some("ptx") if args.len() == 1 => {
            print!("{}", host_shim::module::PTX);
            Ok(ExitCode::SUCCESS)
        }
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => {
            eprintln!("{USAGE}");
            Ok(ExitCode::from(2))
        }
    };
    result.unwrap_or_else(|e| {
        eprintln!("ferroccl: {e}");
        ExitCode::FAILURE
    })
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

fn test(args: &[String]) -> Result<ExitCode, Error> {
    let Options { device: ordinal, filter, .. } = parse_options(args, &["--device", "FILTER"])?;
    let fixture = selftest::Fixture::new(ordinal)?;
    let name = device::list()?.into_iter().nth(ordinal).map(|d| d.name).unwrap_or_default();
    println!("ferroccl self-tests on device {ordinal} ({name})");
    let results = selftest::run(&fixture, filter.as_deref(), |r| match &r.outcome {
        Ok(()) => println!("test {} ... ok ({:.1} ms)", r.name, r.elapsed.as_secs_f64() * 1e3),
        Err(f) => println!("test {} ... FAILED: {f}", r.name),
    });
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    println!("{} passed, {failed} failed", results.len() - failed);
    Ok(if failed == 0 && !results.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Parses a comma-separated list of device ordinals.
fn parse_devices(list: &str) -> Result<Vec<usize>, Error> {
    list.split(',')
        .map(|d| d.trim().parse::<usize>().map_err(|_| Error::InvalidArgument(format!("--devices {list}: not a list of ordinals"))))
        .collect()
}

/// The value of `flag` in `args`, parsed, or `default`.
fn flag_value<T: std::str::FromStr>(args: &[String], flag: &str, default: T) -> Result<T, Error> {
    match args.iter().position(|a| a == flag) {
        None => Ok(default),
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| Error::InvalidArgument(format!("{flag} needs a valid value\n{USAGE}"))),
    }
}

fn coll(args: &[String]) -> Result<ExitCode, Error> {
    const FLAGS: [&str; 8] = ["--devices", "--ranks", "--channels", "--threads", "--step", "--big", "--sms", "--paired"];
    let mut filter = None;
    let mut i = 0;
    while i < args.len() {
        if FLAGS.contains(&args[i].as_str()) {
            i += 2;
        } else if args[i] == "--direct" {
            i += 1;
        } else if args[i].starts_with('-') || filter.is_some() {
            return Err(Error::InvalidArgument(format!("unexpected argument {:?}\n{USAGE}", args[i])));
        } else {
            filter = Some(args[i].clone());
            i += 1;
        }
    }
    let devices = parse_devices(&flag_value(args, "--devices", "0".to_owned())?)?;
    let nranks: usize = flag_value(args, "--ranks", devices.len())?;
    let mut cfg = CommConfig::default();
    cfg.loop_cfg.channels = flag_value(args, "--channels", 4)?;
    cfg.loop_cfg.threads = flag_value(args, "--threads", cfg.loop_cfg.threads)?;
    cfg.loop_cfg.placement = flag_value(args, "--sms", cfg.loop_cfg.placement)?;
    cfg.ring_step_bytes = flag_value(args, "--step", cfg.ring_step_bytes)?;
    cfg.direct = args.iter().any(|a| a == "--direct");
    cfg.paired = flag_value(args, "--paired", cfg.paired)?;
    let big: usize = flag_value(args, "--big", 3 << 20)?;
    let ordinals: Vec<usize> = (0..nranks).map(|r| devices[r % devices.len()]).collect();
    let cases: Vec<_> = check::matrix(nranks as u32, big)
        .into_iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.describe().contains(f)))
        .collect();
    let (_, out_elems) = cases.iter().map(|c| c.extents(nranks as u32)).max_by_key(|e| e.0.max(e.1)).unwrap_or((0, 0));
    let arena = 4 * (out_elems.max(big * nranks) * 8 + (1 << 20));
    let started = std::time::Instant::now();
    let mut g = GpuGroup::new(&ordinals, cfg, arena)?;
    println!("collective matrix: {} on {}: {} cases (set up in {:.1} s)", nranks, g.describe(), cases.len(), started.elapsed().as_secs_f64());
    let mut wrong = 0;
    for (k, case) in cases.iter().enumerate() {
        match check::run_case(&mut g, case, k as u64, std::time::Duration::from_secs(60)) {
            Ok(None) => {}
            Ok(Some(what)) => {
                wrong += 1;
                println!("WRONG {what}");
            }
            Err(e) => {
                println!("FAILED {}: {e}", case.describe());
                return Ok(ExitCode::FAILURE);
            }
        }
        if (k + 1) % 100 == 0 {
            println!("  {}/{} cases, {} wrong, {:.1} s", k + 1, cases.len(), wrong, started.elapsed().as_secs_f64());
        }
    }
    println!("{} cases, {} wrong, {:.1} s", cases.len(), wrong, started.elapsed().as_secs_f64());
    g.shutdown(std::time::Duration::from_secs(30))?;
    Ok(if wrong == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Splits `args` into ferroccl's communicator flags (`--devices`, `--ranks`,
/// `--channels`, `--threads`, `--step`, `--sms`, `--paired`, with values; `--direct`, `--stats`,
/// `--nccl`) and
/// the rest.
fn split_comm_flags(args: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut ours, mut rest) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--devices" | "--ranks" | "--channels" | "--threads" | "--step" | "--sms" | "--paired" => {
                ours.push(a.clone());
                ours.extend(it.next().cloned());
            }
            "--direct" | "--stats" | "--nccl" => ours.push(a.clone()),
            _ => rest.push(a.clone()),
        }
    }
    (ours, rest)
}

fn bench_collectives(args: &[String]) -> Result<ExitCode, Error> {
    let (ours, rest) = split_comm_flags(args);
    let bench_args = collbench::parse_args(&rest)?;
    let with_nccl = ours.iter().any(|a| a == "--nccl");
    let direct = ours.iter().any(|a| a == "--direct");
    let stats = ours.iter().any(|a| a == "--stats");
    let paired = flag_value(&ours, "--paired", CommConfig::default().paired)?;
    let gpus = device::list().map(|l| l.len()).unwrap_or(0);
    let devices = parse_devices(&flag_value(&ours, "--devices", (0..gpus.max(1)).map(|d| d.to_string()).collect::<Vec<_>>().join(","))?)?;
    let nranks: usize = flag_value(&ours, "--ranks", devices.len().max(2))?;
    let command = format!("ferroccl bench {}", args.join(" "));
    let mut out = std::io::stdout();
    let (rows, device_line) = if gpus == 0 {
        println!("# no GPU found: running on the host twin (the device code on CPU threads); times are not GPU figures");
        let shape = Shape { nranks: nranks as u32, nchannels: flag_value(&ours, "--channels", 2)?, ring_step_bytes: 64 << 10, p2p_step_bytes: 16 << 10, direct, stats, paired };
        let mut g = TwinGroup::start(shape, flag_value(&ours, "--threads", 128)?, std::time::Duration::from_secs(60))?;
        let rows = collbench::run(&mut g, &bench_args, &mut out)?;
        let line = g.describe();
        g.shutdown(std::time::Duration::from_secs(60))?;
        (rows, line)
    } else {
        let mut cfg = CommConfig::default();
        cfg.loop_cfg.channels = flag_value(&ours, "--channels", cfg.loop_cfg.channels)?;
        cfg.loop_cfg.threads = flag_value(&ours, "--threads", cfg.loop_cfg.threads)?;
        cfg.loop_cfg.placement = flag_value(&ours, "--sms", cfg.loop_cfg.placement)?;
        cfg.ring_step_bytes = flag_value(&ours, "--step", cfg.ring_step_bytes)?;
        cfg.direct = direct;
        cfg.stats = stats;
        cfg.paired = paired;
        let ordinals: Vec<usize> = (0..nranks).map(|r| devices[r % devices.len()]).collect();
        let arena = 5 * bench_args.max_bytes + (64 << 20);
        // NCCL first: it must not run while ferroccl's persistent loops hold the GPUs.
        let mut nccl = if with_nccl { Some(measure_nccl(&bench_args, &ordinals)?) } else { None };
        let mut g = GpuGroup::new(&ordinals, cfg, arena)?;
        let names: Vec<String> = device::list()?.into_iter().filter(|d| devices.contains(&d.ordinal)).map(|d| format!("[{}] {}", d.ordinal, d.name)).collect();
        let line = format!("{}; {}", names.join(", "), g.describe());
        println!("# ferroccl on {line}");
        let baseline = nccl.as_mut().map(|b| b as &mut dyn collbench::Baseline);
        let rows = collbench::run_with_baseline(&mut g, &bench_args, baseline, &mut out)?;
        g.shutdown(std::time::Duration::from_secs(60))?;
        (rows, line)
    };
    if let Some(path) = &bench_args.json {
        write_json(&path.to_string_lossy(), collbench::rows_json(&rows, &command, &device_line, &utc_now()))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "nccl")]
fn measure_nccl(args: &collbench::BenchArgs, ordinals: &[usize]) -> Result<collbench::Premeasured, Error> {
    println!("# measuring NCCL first (one rank per GPU: {ordinals:?})");
    let mut nccl = crate::nccl_baseline::NcclBaseline::new(ordinals)?;
    collbench::Premeasured::measure(&mut nccl, args, ordinals.len() as u32)
}

#[cfg(not(feature = "nccl"))]
fn measure_nccl(_: &collbench::BenchArgs, _: &[usize]) -> Result<collbench::Premeasured, Error> {
    Err(Error::InvalidArgument("--nccl needs ferroccl built with the `nccl` feature (cargo build --release --features nccl)".into()))
}

fn bench_reduce_copy(args: &[String]) -> Result<ExitCode, Error> {
    let o = parse_options(args, &["--device", "--bytes", "--iters", "--json"])?;
    let ordinal = o.device;
    let cfg = ReduceCopyBench { bytes: o.bytes.unwrap_or(256 << 20), iters: o.iters.unwrap_or(20) };
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
    if let Some(path) = o.json {
        write_json(&path, bench::json(&results, &cfg, &info.name, &utc_now()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn bench_work_loop(args: &[String]) -> Result<ExitCode, Error> {
    let Options { device: ordinal, json, .. } = parse_options(args, &["--device", "--json"])?;
    let devices = device::list()?;
    let info = devices.get(ordinal).ok_or(Error::NoSuchDevice { ordinal, count: devices.len() })?;
    let fixture = selftest::Fixture::new(ordinal)?;
    println!("work loop benchmark on device {ordinal} ({})", info.name);
    let r = bench::work_loop(&fixture)?;
    println!("(a) no-op round trip, 1 channel     {:>9.2} us", r.noop_roundtrip_us);
    println!("    no-op round trip, 4 channels    {:>9.2} us", r.noop_roundtrip_4ch_us);
    println!("    empty kernel launch + sync      {:>9.2} us", r.empty_launch_sync_us);
    println!("    noop_roundtrip_vs_launch        {:>9.3}", r.noop_roundtrip_vs_launch());
    println!("(b) device dispatch, 1 channel      {:>9.3} us/item", r.dispatch_us_per_item);
    println!("    device dispatch, 4 channels     {:>9.3} us/item", r.dispatch_4ch_us_per_item);
    println!("(c) stream-ordered no-op in a graph {:>9.2} us/op", r.stream_ordered_us_per_op);
    println!("    empty kernel launch in a graph  {:>9.2} us/op", r.graph_launch_us_per_op);
    println!("    stream_ordered_vs_graph_launch  {:>9.3}", r.stream_ordered_vs_graph_launch());
    if let Some(path) = json {
        write_json(&path, bench::work_loop_json(&r, &info.name, &utc_now()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The options a subcommand was given.
#[derive(Default)]
struct Options {
    device: usize,
    json: Option<String>,
    bytes: Option<usize>,
    iters: Option<usize>,
    filter: Option<String>,
}

/// Parses `args` into [`Options`], accepting only the flags in `allowed` (and one
/// positional filter when `allowed` holds "FILTER").
fn parse_options(args: &[String], allowed: &[&str]) -> Result<Options, Error> {
    let mut o = Options::default();
    let mut it = args.iter();
    let bad = |why: String| Error::InvalidArgument(format!("{why}\n{USAGE}"));
    while let Some(arg) = it.next() {
        let flag = if arg == "-d" { "--device" } else { arg.as_str() };
        if !flag.starts_with('-') && allowed.contains(&"FILTER") && o.filter.is_none() {
            o.filter = Some(arg.clone());
            continue;
        }
        if !allowed.contains(&flag) {
            return Err(bad(format!("unexpected argument {arg:?}")));
        }
        let value = it.next().ok_or_else(|| bad(format!("{flag} needs a value")))?;
        let number = || value.parse::<usize>().map_err(|_| bad(format!("{flag} {value}: not a number")));
        match flag {
            "--device" => o.device = number()?,
            "--bytes" => o.bytes = Some(number()?),
            "--iters" => o.iters = Some(number()?),
            _ => o.json = Some(value.clone()),
        }
    }
    Ok(o)
}

/// Writes `body` to `path`.
fn write_json(path: &str, body: String) -> Result<(), Error> {
    std::fs::write(path, body).map_err(|e| Error::InvalidArgument(format!("writing {path}: {e}")))?;
    println!("wrote {path}");
    Ok(())
}

/// The current time as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// A minimal `log` backend: level from `FERROCCL_LOG`, lines on stderr.
fn init_logging() {
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, m: &log::Metadata) -> bool {
            m.level() <= log::max_level()
        }
        fn log(&self, r: &log::Record) {
            if self.enabled(r.metadata()) {
                eprintln!("[{} {}] {}", r.level(), r.target(), r.args());
            }
        }
        fn flush(&self) {}
    }
    static LOGGER: Stderr = Stderr;
    let level = std::env::var("FERROCCL_LOG")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(log::LevelFilter::Warn);
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}
