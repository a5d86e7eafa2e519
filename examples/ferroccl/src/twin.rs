//! `coll` and `bench` without a GPU: both run on the host twin (the device code on CPU
//! threads, `ferroccl_testkit::coll::twin`), with defaults of their own (the GPUs' would
//! take hours on a CPU), and refuse what the twin cannot do before they start anything.
//!
//! What the twin honours: `--ranks`, `--channels`, `--threads`, `--step`, `--paired`,
//! `--direct`, `--algo`, `--staging`, `--path direct`, and for `bench` the sweep's flags
//! (`-b -e -f -d -o -c -n -w -r`, `--timing back-to-back,sync`, `--latency-maxbytes`,
//! `--stats`, `--json`), for `coll` `--big` and the filter. What it refuses: everything
//! about GPUs (`--devices`, `--sms`, `--heap`, `--nccl`, `--timing graph`), about a GPU
//! loop's resident and sleeping channels (`--resident`, `--resident-threads`,
//! `--sleep-after`) and about streams (`--path stream`, `--path typed`), and sizes beyond [`MAX_BYTES`]
//! (`-e`) or [`MAX_BIG`] (`--big`).

use std::time::Duration;

use device_rt::algo::AlgorithmChoice;
use host_shim::Error;
use host_shim::comm::wiring::Shape;
use ferroccl_testkit::coll::group::SubmitPath;

use crate::cli::{BenchCmd, CollArgs, CommArgs, SweepGiven};
use crate::collbench::{BenchArgs, CallTiming};

/// The first line `coll` and `bench` print on the twin.
pub const NOTICE: &str = "running on the host twin: the device code on CPU threads, not a GPU; its times are not GPU speeds";

/// `bench`'s sweep on the twin without `-b` and `-e`: 8 B to 64 KiB (five collectives, 14
/// sizes each: 70 rows in about 10 s on 2 cores).
pub const DEFAULT_MIN_BYTES: usize = 8;
/// See [`DEFAULT_MIN_BYTES`].
pub const DEFAULT_MAX_BYTES: usize = 64 << 10;
/// Timed iterations per row on the twin without `-n`.
pub const DEFAULT_ITERS: usize = 5;
/// Untimed iterations per row on the twin without `-w`.
pub const DEFAULT_WARMUP: usize = 1;
/// Rounds per row on the twin without `--repeats` (its times are not GPU speeds: one
/// round says what the twin can).
pub const DEFAULT_REPEATS: usize = 1;

/// The largest size (`-e`) `bench` takes on the twin. The twin moves about 50 MB/s on 2
/// cores: a 16 MiB row takes about 6 s (with `-n 5 -w 1`), the whole default sweep up to
/// it about a minute, and every doubling doubles that (a sweep to 1G: hours). Larger
/// sizes are refused with an error, not cut short, so that the table is what was asked.
pub const MAX_BYTES: usize = 16 << 20;

/// `coll`'s large count (`--big`) on the twin without `--big`: several ring steps of every
/// channel of the twin's default shape (the matrix on 2 ranks in about 20 s on 2 cores).
pub const DEFAULT_BIG: usize = 24 << 10;
/// The largest `--big` `coll` takes on the twin (refused above, as [`MAX_BYTES`] is): the
/// matrix on 2 ranks in about a minute on 2 cores (the GPUs' 3M: several minutes).
pub const MAX_BIG: usize = 1 << 20;

/// Ranks on the twin without `--ranks` (a collective on one rank shows little).
pub const DEFAULT_RANKS: usize = 2;

/// How long a twin rank spins before it reports a hang.
pub const SPIN_BUDGET: Duration = Duration::from_secs(60);

/// Threads per channel on the twin without `--threads`.
pub const DEFAULT_THREADS: u32 = 128;

/// `comm`'s options the twin cannot honour, in words, for `what` (`coll` or `bench`):
/// the first refusal found, as an error that says what to do instead.
pub fn refuse_comm(comm: &CommArgs, what: &str) -> Result<(), Error> {
    let refused = |option: &str, why: &str| Err(Error::InvalidArgument(format!("{what} on the host twin (no GPU here) cannot take {option}: {why}")));
    if comm.devices.is_some() {
        return refused("--devices", "the twin has no devices; give the rank count with --ranks N");
    }
    if comm.sms.is_some() {
        return refused("--sms", "the twin's channels run on CPU threads, not on SMs");
    }
    if comm.heap {
        return refused("--heap", "the symmetric heap is GPU memory");
    }
    if comm.resident.is_some() || comm.resident_threads.is_some() {
        let option = if comm.resident.is_some() { "--resident" } else { "--resident-threads" };
        return refused(option, "every channel of the twin's loops is resident, with --threads threads");
    }
    if comm.sleep_after.is_some() {
        return refused("--sleep-after", "the twin's loops never sleep");
    }
    if let Some(path @ (SubmitPath::Stream | SubmitPath::Typed)) = comm.path {
        let option = if path == SubmitPath::Stream { "--path stream" } else { "--path typed" };
        return refused(option, "the twin has no streams: its ranks take the direct path (--path direct, the default there)");
    }
    Ok(())
}

/// `bench`'s options the twin cannot honour ([`refuse_comm`], `--nccl`, `--timing
/// graph`, `-e` above [`MAX_BYTES`]) as an error; `Ok` where it runs them all.
pub fn refuse_bench(cmd: &BenchCmd) -> Result<(), Error> {
    refuse_comm(&cmd.comm, "bench")?;
    let refused = |option: &str, why: String| Err(Error::InvalidArgument(format!("bench on the host twin (no GPU here) cannot take {option}: {why}")));
    if cmd.nccl {
        return refused("--nccl", "NCCL runs on GPUs only".into());
    }
    if cmd.sweep.timing.contains(&CallTiming::Graph) {
        return refused("--timing graph", "CUDA graphs need a GPU; the twin times back-to-back and sync".into());
    }
    if cmd.given.max_bytes && cmd.sweep.max_bytes > MAX_BYTES {
        return refused(
            &format!("-e {}", size_text(cmd.sweep.max_bytes)),
            format!("the twin takes sizes up to -e {}: larger ones would take very long on CPU threads (run them on a GPU)", size_text(MAX_BYTES)),
        );
    }
    Ok(())
}

/// `bytes` as the command line writes sizes: `1G`, `64K`, `3M`, else plain bytes.
fn size_text(bytes: usize) -> String {
    match bytes {
        0 => "0".into(),
        _ if bytes.is_multiple_of(1 << 30) => format!("{}G", bytes >> 30),
        _ if bytes.is_multiple_of(1 << 20) => format!("{}M", bytes >> 20),
        _ if bytes.is_multiple_of(1 << 10) => format!("{}K", bytes >> 10),
        _ => bytes.to_string(),
    }
}

/// `coll`'s options the twin cannot honour ([`refuse_comm`], `--big` above [`MAX_BIG`]).
pub fn refuse_coll(args: &CollArgs) -> Result<(), Error> {
    refuse_comm(&args.comm, "coll")?;
    match args.big {
        Some(big) if big > MAX_BIG => Err(Error::InvalidArgument(format!(
            "coll on the host twin (no GPU here) cannot take --big {big}: the twin takes up to --big {MAX_BIG} elements; more would take very long on CPU threads"
        ))),
        _ => Ok(()),
    }
}

/// `sweep` with the twin's defaults for the flags the command line did not give
/// (`given`): [`DEFAULT_MIN_BYTES`] without `-b`, [`DEFAULT_MAX_BYTES`] without `-e`,
/// [`DEFAULT_ITERS`] without `-n`, [`DEFAULT_WARMUP`] without `-w`, [`DEFAULT_REPEATS`]
/// without `--repeats`.
pub fn bench_sweep(mut sweep: BenchArgs, given: SweepGiven) -> BenchArgs {
    if !given.min_bytes {
        sweep.min_bytes = DEFAULT_MIN_BYTES;
    }
    if !given.max_bytes {
        sweep.max_bytes = DEFAULT_MAX_BYTES;
    }
    if !given.iters {
        sweep.iters = DEFAULT_ITERS;
    }
    if !given.warmup {
        sweep.warmup = DEFAULT_WARMUP;
    }
    if !given.repeats {
        sweep.repeats = DEFAULT_REPEATS;
    }
    sweep
}

/// The twin communicator's shape for `comm` on `nranks` ranks: every flag given, else the
/// twin's defaults (2 channels, 64 KiB ring steps, 16 KiB point-to-point steps, direct,
/// unpaired, 1 MiB of staging, the device's choice of algorithm).
pub fn shape(comm: &CommArgs, nranks: u32, stats: bool) -> Shape {
    Shape {
        nranks,
        nchannels: comm.channels.unwrap_or(2),
        ring_step_bytes: comm.step.unwrap_or(64 << 10),
        p2p_step_bytes: 16 << 10,
        direct: comm.direct.unwrap_or(true),
        stats,
        paired: comm.paired.unwrap_or(false),
        staging_bytes: comm.staging.unwrap_or(1 << 20),
        algorithm: comm.algo.unwrap_or(AlgorithmChoice::Auto),
        nvls_multicast: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::{bench, coll};

    /// Every option the twin cannot honour is refused, naming the option; nothing else is.
    #[test]
    fn options_the_twin_cannot_honour_are_refused_by_name() {
        for (line, option) in [
            ("ferroccl bench --nccl", "--nccl"),
            ("ferroccl bench all_reduce -b 8 -e 64 --nccl", "--nccl"),
            ("ferroccl bench --heap", "--heap"),
            ("ferroccl bench --timing graph", "--timing graph"),
            ("ferroccl bench --timing back-to-back,graph", "--timing graph"),
            ("ferroccl bench --path stream", "--path stream"),
            ("ferroccl bench --path typed", "--path typed"),
            ("ferroccl bench --devices 0,1", "--devices"),
            ("ferroccl bench --sms tpcs", "--sms"),
            ("ferroccl bench --resident 1", "--resident"),
            ("ferroccl bench --resident-threads 128", "--resident-threads"),
            ("ferroccl bench --sleep-after never", "--sleep-after"),
            ("ferroccl bench -e 1G", "-e 1G"),
            ("ferroccl bench -b 8 -e 32M", "-e 32M"),
            ("ferroccl bench -e 16777217", "-e 16777217"),
        ] {
            let err = refuse_bench(&bench(line)).expect_err(line).to_string();
            assert!(err.contains(&format!("cannot take {option}:")) && err.contains("host twin"), "{line}: {err}");
        }
        for (line, option) in [
            ("ferroccl coll --devices 0,1 --ranks 4", "--devices"),
            ("ferroccl coll --heap", "--heap"),
            ("ferroccl coll --sms 0,2", "--sms"),
            ("ferroccl coll --path stream", "--path stream"),
            ("ferroccl coll --resident 1", "--resident"),
            ("ferroccl coll --sleep-after 1ms", "--sleep-after"),
            ("ferroccl coll --big 3145728", "--big 3145728"),
        ] {
            let err = refuse_coll(&coll(line)).expect_err(line).to_string();
            assert!(err.contains(&format!("cannot take {option}:")), "{line}: {err}");
        }
        for line in [
            "ferroccl bench",
            "ferroccl bench all_reduce reduce -b 8 -e 16M -f 4 -d bfloat16 -o max -c 0 -n 2 -w 0 -r 1 --json out.json",
            "ferroccl bench --ranks 3 --channels 4 --threads 256 --step 16K --paired true --direct false --algo ring --staging 2M --stats",
            "ferroccl bench --path direct --timing back-to-back,sync --latency-maxbytes 4K",
        ] {
            refuse_bench(&bench(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
        }
        for line in ["ferroccl coll", "ferroccl coll --ranks 4 --channels 1 --step 4K --big 1000 --algo two-shot --path direct all_reduce"] {
            refuse_coll(&coll(line)).unwrap_or_else(|e| panic!("{line}: {e}"));
        }
    }

    /// Without -b/-e/-n/-w/--repeats the twin's sweep is short; what the command line
    /// gives is kept.
    #[test]
    fn the_twin_sweep_defaults_to_small_sizes_and_few_iterations() {
        let twin = |line: &str| {
            let b = bench(line);
            bench_sweep(b.sweep, b.given).normalized().unwrap()
        };
        let d = twin("ferroccl bench");
        assert_eq!((d.min_bytes, d.max_bytes, d.iters, d.warmup, d.repeats), (8, 64 << 10, 5, 1, 1));
        assert_eq!(d.functions.len(), 5);
        let rows = crate::collbench::row_count(&d, DEFAULT_RANKS as u32);
        assert!(rows <= 70, "{rows} rows");
        let given = twin("ferroccl bench all_reduce -b 1K -e 4K -n 3 -w 2 --repeats 3");
        assert_eq!((given.min_bytes, given.max_bytes, given.iters, given.warmup, given.repeats), (1 << 10, 4 << 10, 3, 2, 3));
        // One end of the range given: the other is the twin's default.
        let b = twin("ferroccl bench -b 64");
        assert_eq!((b.min_bytes, b.max_bytes), (64, 64 << 10));
        let e = twin("ferroccl bench -e 512");
        assert_eq!((e.min_bytes, e.max_bytes), (8, 512));
        let above = bench("ferroccl bench -b 128K");
        assert!(bench_sweep(above.sweep, above.given).normalized().is_err(), "-b above the default -e makes no sweep");
        assert_eq!(twin("ferroccl bench -n 7").iters, 7);
        assert_eq!(twin("ferroccl bench -w 0").warmup, 0);
        // GPUs keep nccl-tests' defaults: the sweep as parsed.
        assert_eq!(bench("ferroccl bench").sweep, BenchArgs::default());
    }

    #[test]
    fn sizes_are_written_as_the_command_line_takes_them() {
        assert_eq!([size_text(1 << 30), size_text(3 << 20), size_text(64 << 10), size_text(1000), size_text(0)], ["1G", "3M", "64K", "1000", "0"]);
        assert_eq!(crate::cli::parse_size(&size_text(MAX_BYTES)), Ok(MAX_BYTES));
    }

    #[test]
    fn the_twin_shape_takes_the_flags_given() {
        let s = shape(&bench("ferroccl bench").comm, 2, false);
        assert_eq!((s.nchannels, s.ring_step_bytes, s.direct, s.paired, s.staging_bytes, s.algorithm), (2, 64 << 10, true, false, 1 << 20, AlgorithmChoice::Auto));
        let c = bench("ferroccl bench --channels 4 --step 16K --direct false --paired true --staging 2M --algo ring").comm;
        let s = shape(&c, 3, true);
        assert_eq!((s.nranks, s.nchannels, s.ring_step_bytes, s.direct, s.paired, s.staging_bytes, s.algorithm, s.stats), (3, 4, 16 << 10, false, true, 2 << 20, AlgorithmChoice::Ring, true));
    }
}
