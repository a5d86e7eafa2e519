//! `ferroccl`: the command-line face of the runtime.
//!
//! - `ferroccl info`: devices, compute capability, SMs, peer access, multicast support.
//! - `ferroccl test [--device N] [FILTER]`: the GPU self-tests; exits non-zero on failure.
//! - `ferroccl ptx`: prints the embedded PTX module (for ptxas, linking, inspection).

use std::process::ExitCode;

use host_shim::{Error, device, selftest};

const USAGE: &str = "usage: ferroccl <command>

commands:
  info                        list CUDA devices and what they support
  test [--device N] [FILTER]  run the GPU self-tests (those whose name contains FILTER)
  ptx                         print the embedded PTX module

environment:
  FERROCCL_LOG=error|warn|info|debug|trace   diagnostics on stderr (default: warn)";

fn main() -> ExitCode {
    init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("info") if args.len() == 1 => info(),
        Some("test") => test(&args[1..]),
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
    let mut ordinal = 0usize;
    let mut filter = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--device" | "-d" => {
                let v = it.next().ok_or_else(|| Error::InvalidArgument("--device needs a number".into()))?;
                ordinal = v.parse().map_err(|_| Error::InvalidArgument(format!("--device {v}: not a number")))?;
            }
            f if filter.is_none() && !f.starts_with('-') => filter = Some(f),
            other => return Err(Error::InvalidArgument(format!("unexpected argument {other:?}\n{USAGE}"))),
        }
    }
    let fixture = selftest::Fixture::new(ordinal)?;
    let name = device::list()?.into_iter().nth(ordinal).map(|d| d.name).unwrap_or_default();
    println!("ferroccl self-tests on device {ordinal} ({name})");
    let results = selftest::run(&fixture, filter, |r| match &r.outcome {
        Ok(()) => println!("test {} ... ok ({:.1} ms)", r.name, r.elapsed.as_secs_f64() * 1e3),
        Err(f) => println!("test {} ... FAILED: {f}", r.name),
    });
    let failed = results.iter().filter(|r| r.outcome.is_err()).count();
    println!("{} passed, {failed} failed", results.len() - failed);
    Ok(if failed == 0 && !results.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
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
