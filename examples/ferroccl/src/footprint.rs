//! `ferroccl bench footprint`: what a ferroccl communicator costs other work on the same
//! GPU, in one run.
//!
//! Three kinds of work, each filling the GPU, are timed with CUDA events on a stream of
//! their own (median of `iters` runs after untimed ones): `fma`, f32 FMA chains
//! (compute-bound); `copy`, 1 GiB copies (memory-bound); `gemm`, bf16 GEMMs through cuBLAS.
//! Four phases: `before` (no communicator), `idle` (a communicator whose loops wait for
//! work: asleep, where they sleep when idle, as the default communicator's do after its
//! sleep time; `--sleep-after never` keeps them polling), `busy` (while a second thread keeps a few rounds of large all-reduces queued on
//! every rank) and `after` (the communicator shut down). A phase's ratio is its throughput
//! over `before`'s: before's time over its own. The busy phase also reports the
//! all-reduces' own rate beside each kind over their rate alone (each call's call kernel
//! needs a CTA slot beside the work's CTAs).
//!
//! Whatever may wait for a running persistent kernel happens before the communicator
//! starts: loading the module, creating the cuBLAS handle, every allocation, and a first
//! run of every kind (which loads cuBLAS's kernels). Nothing here checks results.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cudarc::cublas::result::CublasError;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig};
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use half::bf16;
use serde::Serialize;

use host_shim::comm::{Comm, Tuning, ReduceOp};
use host_shim::module::Module;
use host_shim::{Error, Result, device};

use crate::bench::{median, rounded, time_ms};

// The two kernels run many short CTAs (many waves): SMs a communicator holds then show as
// throughput lost, not as a partly empty last wave.
/// CTAs per SM and threads per CTA of the FMA kernel.
const FMA_SHAPE: (u32, u32) = (128, 256);
/// FMA rounds per thread (8 chains each): about 9 ms on an H100.
const FMA_ITERS: u32 = 1 << 13;
/// CTAs per SM and threads per CTA of the copy kernel (grid-stride).
const COPY_SHAPE: (u32, u32) = (64, 256);
/// Bytes per copy.
const COPY_BYTES: usize = 1 << 30;
/// Copies per timed run: about 6 ms on an H100.
const COPY_REPS: usize = 8;
/// M = N = K of the GEMM.
const GEMM_DIM: usize = 8192;
/// GEMMs per timed run: about 7 ms on an H100.
const GEMM_REPS: usize = 4;
/// All-reduce rounds timed alone: the busy phase's all-reduce rate is against theirs.
const PROBE_ROUNDS: usize = 4;
/// Rounds of all-reduces the busy phase keeps queued on every rank.
const BUSY_DEPTH: usize = 8;
/// The limit on any wait for the communicator.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The phases, in order.
pub const PHASES: [&str; 4] = ["before", "idle", "busy", "after"];

/// A kind of other work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Fma,
    Copy,
    Gemm,
}

impl Kind {
    /// Every kind, in the order of [`Times`].
    pub const ALL: [Kind; 3] = [Kind::Fma, Kind::Copy, Kind::Gemm];

    /// The kind's name in the table and the JSON keys.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Fma => "fma",
            Kind::Copy => "copy",
            Kind::Gemm => "gemm",
        }
    }
}

/// Median ms of one timed run of each kind, indexed by `Kind as usize`.
pub type Times = [f64; 3];

/// What to run.
#[derive(Clone, Debug)]
pub struct FootprintBench {
    /// The device everything runs on.
    pub ordinal: usize,
    /// Ranks of the communicator, all on that device.
    pub ranks: usize,
    /// The communicator's configuration.
    pub comm: Tuning,
    /// Bytes per all-reduce in the busy phase (a non-zero multiple of 4: f32).
    pub busy_bytes: usize,
    /// Timed runs per kind and phase.
    pub iters: usize,
}

/// What [`footprint`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct FootprintReport {
    /// Median ms per phase (in [`PHASES`] order) and kind.
    pub ms: [Times; 4],
    /// All-reduce rounds per second while each kind's busy runs ran, over the rate alone.
    pub busy_allreduce: Times,
}

impl FootprintReport {
    /// Phase `phase`'s throughput of `kind` over `before`'s.
    pub fn ratio(&self, phase: usize, kind: Kind) -> f64 {
        self.ms[0][kind as usize] / self.ms[phase][kind as usize]
    }
}

/// Runs the four phases on `cfg.ordinal`.
pub fn footprint(cfg: &FootprintBench) -> Result<FootprintReport> {
    check(cfg)?;
    if std::env::var("CUDA_MODULE_LOADING").as_deref() != Ok("EAGER") {
        log::warn!("CUDA_MODULE_LOADING is not EAGER: a kernel loaded lazily while the communicator runs may wait for it forever");
    }
    let ctx = device::context(cfg.ordinal)?;
    let module = Module::load(&ctx)?;
    let mut work = Workload::new(&ctx, &module)?;
    // Also the warm-up: every kernel and the GEMM run before the communicator exists.
    let before = work.measure(cfg.iters)?;
    let mut ranks = Ranks::start(&ctx, cfg)?;
    ranks.until_asleep(cfg)?;
    let idle = work.measure(cfg.iters)?;
    ranks.check()?;
    let round_s = ranks.round_seconds()?;
    let (mut busy, mut busy_allreduce) = ([0.0; 3], [0.0; 3]);
    for kind in Kind::ALL {
        let k = kind as usize;
        (busy[k], busy_allreduce[k]) = busy_ms(&mut work, &mut ranks, kind, round_s, cfg.iters)?;
    }
    ranks.verify()?;
    ranks.shutdown()?;
    let after = work.measure(cfg.iters)?;
    Ok(FootprintReport { ms: [before, idle, busy, after], busy_allreduce })
}

/// Refuses a configuration that cannot run.
fn check(cfg: &FootprintBench) -> Result<()> {
    if cfg.ranks == 0 || cfg.iters == 0 || cfg.busy_bytes == 0 || !cfg.busy_bytes.is_multiple_of(4) {
        return Err(Error::InvalidArgument(format!(
            "bench footprint needs at least one rank and one iteration and a non-zero multiple of 4 bytes per all-reduce (got {} ranks, {} iterations, {} bytes)",
            cfg.ranks, cfg.iters, cfg.busy_bytes
        )));
    }
    Ok(())
}

/// `kind`'s median ms while a second thread keeps the ranks busy ([`Ranks::feed`]), and
/// the all-reduces' rate meanwhile over their rate alone (`1 / round_s`).
fn busy_ms(work: &mut Workload, ranks: &mut Ranks, kind: Kind, round_s: f64, iters: usize) -> Result<(f64, f64)> {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let (ms, done) = std::thread::scope(|s| {
        let feeder = s.spawn(|| ranks.feed(&stop));
        let ms = work.median_ms(kind, iters);
        // Before anything can return: the feeder runs until it sees this.
        stop.store(true, Ordering::Relaxed);
        (ms, feeder.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    });
    let window_s = start.elapsed().as_secs_f64();
    let (ms, done) = (ms?, done?);
    ranks.drain()?;
    ranks.check()?;
    Ok((ms, done as f64 * round_s / window_s))
}

/// How many of `events` (recorded in order on one stream) have completed.
fn completed(events: &[CudaEvent]) -> Result<usize> {
    for (n, e) in events.iter().enumerate() {
        if !e.try_is_complete().map_err(Error::cuda("cuEventQuery"))? {
            return Ok(n);
        }
    }
    Ok(events.len())
}

/// The other work: its stream, kernels, cuBLAS handle and buffers, all made before any
/// communicator exists.
struct Workload {
    stream: Arc<CudaStream>,
    sms: u32,
    fma: CudaFunction,
    fma_out: CudaSlice<f32>,
    copy: CudaFunction,
    copy_src: CudaSlice<u8>,
    copy_dst: CudaSlice<u8>,
    blas: CudaBlas,
    gemm_a: CudaSlice<bf16>,
    gemm_b: CudaSlice<bf16>,
    gemm_c: CudaSlice<bf16>,
}

impl Workload {
    fn new(ctx: &Arc<CudaContext>, module: &Module) -> Result<Self> {
        // SAFETY: only tries to dlopen libcublas; no cuBLAS call is made.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(Error::InvalidArgument("bench footprint needs cuBLAS: put the folder of libcublas.so (or .so.12) on LD_LIBRARY_PATH".into()));
        }
        let stream = ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
        let sms = device::sm_count(ctx)?;
        let fma_threads = (FMA_SHAPE.0 * sms * FMA_SHAPE.1) as usize;
        // Small values of both signs, so that the GEMM draws real power.
        let host: Vec<bf16> = (0..GEMM_DIM * GEMM_DIM).map(|i| bf16::from_f32((i * 7919 % 251) as f32 / 128.0 - 1.0)).collect();
        let upload = |v: &[bf16]| stream.clone_htod(v).map_err(Error::cuda("cuMemcpyHtoD"));
        let zeros = |n| stream.alloc_zeros::<u8>(n).map_err(Error::cuda("cuMemAlloc"));
        Ok(Self {
            fma: module.kernel("ferroccl_bench_fma")?,
            fma_out: stream.alloc_zeros(fma_threads).map_err(Error::cuda("cuMemAlloc"))?,
            copy: module.kernel("ferroccl_bench_copy")?,
            copy_src: zeros(COPY_BYTES)?,
            copy_dst: zeros(COPY_BYTES)?,
            blas: CudaBlas::new(stream.clone()).map_err(cublas_error("cublasCreate"))?,
            gemm_a: upload(&host)?,
            gemm_b: upload(&host)?,
            gemm_c: stream.alloc_zeros(GEMM_DIM * GEMM_DIM).map_err(Error::cuda("cuMemAlloc"))?,
            stream,
            sms,
        })
    }

    /// Each kind's median ms.
    fn measure(&mut self, iters: usize) -> Result<Times> {
        let mut t = [0.0; 3];
        for kind in Kind::ALL {
            t[kind as usize] = self.median_ms(kind, iters)?;
        }
        Ok(t)
    }

    /// `kind`'s median ms over `iters` timed runs.
    fn median_ms(&mut self, kind: Kind, iters: usize) -> Result<f64> {
        let stream = self.stream.clone();
        Ok(median(time_ms(&stream, iters, || self.run(kind))?))
    }

    /// Enqueues one timed run of `kind`.
    fn run(&mut self, kind: Kind) -> Result<()> {
        match kind {
            Kind::Fma => self.fma(),
            Kind::Copy => (0..COPY_REPS).try_for_each(|_| self.copy()),
            Kind::Gemm => (0..GEMM_REPS).try_for_each(|_| self.gemm()),
        }
    }

    fn fma(&mut self) -> Result<()> {
        let cfg = LaunchConfig { grid_dim: (FMA_SHAPE.0 * self.sms, 1, 1), block_dim: (FMA_SHAPE.1, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: `fma_out` holds one f32 per thread of `cfg` (allocated so in `new`).
        unsafe { self.stream.launch_builder(&self.fma).arg(&mut self.fma_out).arg(&FMA_ITERS).launch(cfg) }
            .map(drop)
            .map_err(Error::cuda("cuLaunchKernel"))
    }

    fn copy(&mut self) -> Result<()> {
        let cfg = LaunchConfig { grid_dim: (COPY_SHAPE.0 * self.sms, 1, 1), block_dim: (COPY_SHAPE.1, 1, 1), shared_mem_bytes: 0 };
        let n16 = (COPY_BYTES / 16) as u64;
        // SAFETY: both buffers are separate allocations (aligned far beyond 16 bytes) of
        // `n16` packs, used only on this stream.
        unsafe { self.stream.launch_builder(&self.copy).arg(&mut self.copy_dst).arg(&self.copy_src).arg(&n16).launch(cfg) }
            .map(drop)
            .map_err(Error::cuda("cuLaunchKernel"))
    }

    fn gemm(&mut self) -> Result<()> {
        use cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N;
        let n = GEMM_DIM as i32;
        let cfg = GemmConfig { transa: CUBLAS_OP_N, transb: CUBLAS_OP_N, m: n, n, k: n, alpha: bf16::ONE, lda: n, ldb: n, beta: bf16::ZERO, ldc: n };
        // SAFETY: A, B and C each hold GEMM_DIM² elements: column-major GEMM_DIM-square
        // matrices with leading dimension GEMM_DIM, as `cfg` says.
        unsafe { self.blas.gemm(cfg, &self.gemm_a, &self.gemm_b, &mut self.gemm_c) }.map_err(cublas_error("cublasGemmEx"))
    }
}

/// The communicator's ranks, all on one device, with their all-reduce buffers (send,
/// receive), allocated before its loops start. The ranks drop before their buffers.
struct Ranks {
    comms: Vec<Comm>,
    bufs: Vec<(CudaSlice<f32>, CudaSlice<f32>)>,
}

impl Ranks {
    /// Allocates the buffers, then starts `cfg.ranks` ranks on streams of `ctx`.
    fn start(ctx: &Arc<CudaContext>, cfg: &FootprintBench) -> Result<Self> {
        let streams = (0..cfg.ranks).map(|_| ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))).collect::<Result<Vec<_>>>()?;
        let n = cfg.busy_bytes / 4;
        let bufs = (0..cfg.ranks)
            .zip(&streams)
            .map(|(rank, s)| {
                let send = s.clone_htod(&vec![rank_value(rank); n]).map_err(Error::cuda("cuMemcpyHtoD"))?;
                Ok((send, s.alloc_zeros::<f32>(n).map_err(Error::cuda("cuMemAlloc"))?))
            })
            .collect::<Result<Vec<_>>>()?;
        streams.iter().try_for_each(|s| s.synchronize().map_err(Error::cuda("cuStreamSynchronize")))?;
        let comms = Comm::from_devices_tuned(streams, cfg.comm, &mut |_, _| Ok(()))?;
        Ok(Self { comms, bufs })
    }

    /// Waits until every rank's loop sleeps, where the configuration has them sleep when
    /// idle ([`host_shim::work::LoopConfig::sleep_after`]): the idle phase is then the
    /// GPU without any of the communicator's CTAs.
    fn until_asleep(&self, cfg: &FootprintBench) -> Result<()> {
        if cfg.comm.loop_cfg.sleep_after_ns() == 0 {
            return Ok(());
        }
        let start = Instant::now();
        while !self.comms.iter().all(Comm::loop_asleep) {
            if start.elapsed() > TIMEOUT {
                return Err(Error::Timeout { what: "the idle communicator's loops to sleep".into(), after: TIMEOUT });
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }

    /// Enqueues one all-reduce on every rank; returns an event recorded on rank 0's stream
    /// after it (a round ends on every rank at once).
    fn round(&mut self) -> Result<CudaEvent> {
        for (comm, (send, recv)) in self.comms.iter().zip(&mut self.bufs) {
            comm.all_reduce(send, recv, ReduceOp::Sum)?;
        }
        self.comms[0].stream().record_event(None).map_err(Error::cuda("cuEventRecord"))
    }

    /// Keeps [`BUSY_DEPTH`] rounds queued until `stop` is set; returns how many rounds
    /// had completed by then.
    fn feed(&mut self, stop: &AtomicBool) -> Result<usize> {
        self.comms[0].stream().context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let (mut queued, mut done) = (VecDeque::new(), 0);
        while !stop.load(Ordering::Relaxed) {
            let n = completed(queued.make_contiguous())?;
            queued.drain(..n);
            done += n;
            if queued.len() < BUSY_DEPTH {
                queued.push_back(self.round()?);
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Ok(done + completed(queued.make_contiguous())?)
    }

    /// Waits until every rank's stream has drained.
    fn drain(&self) -> Result<()> {
        self.comms.iter().try_for_each(|c| host_shim::stream::wait(c.stream(), TIMEOUT, "a rank's all-reduces"))
    }

    /// Checks every rank's output of the all-reduces (every element is the sum of every
    /// rank's [`rank_value`]); call once the streams have drained.
    fn verify(&self) -> Result<()> {
        let want: f32 = (0..self.comms.len()).map(rank_value).sum();
        for (rank, (comm, (_, recv))) in self.comms.iter().zip(&self.bufs).enumerate() {
            let got = comm.stream().clone_dtoh(recv).map_err(Error::cuda("cuMemcpyDtoH"))?;
            if let Some(at) = got.iter().position(|&v| v != want) {
                log::error!("bench footprint: rank {rank}: the all-reduce wrote {} at element {at}, not {want}", got[at]);
                return Err(Error::InvalidState("the footprint benchmark's all-reduces wrote wrong sums"));
            }
        }
        Ok(())
    }

    /// The first error a rank's loop reported, if any.
    fn check(&self) -> Result<()> {
        self.comms.iter().find_map(Comm::async_error).map_or(Ok(()), Err)
    }

    /// Seconds per round of all-reduces on an otherwise idle GPU.
    fn round_seconds(&mut self) -> Result<f64> {
        self.round()?;
        self.drain()?;
        let start = Instant::now();
        for _ in 0..PROBE_ROUNDS {
            self.round()?;
        }
        self.drain()?;
        Ok(start.elapsed().as_secs_f64() / PROBE_ROUNDS as f64)
    }

    /// Shuts every rank down, then drops the communicator.
    fn shutdown(mut self) -> Result<()> {
        self.comms.iter_mut().try_for_each(|c| c.shutdown(TIMEOUT))
    }
}

/// Every element of rank `rank`'s all-reduce input (small integers: their f32 sum is
/// exact).
fn rank_value(rank: usize) -> f32 {
    (rank + 1) as f32
}

/// Wraps a cuBLAS error with the call that returned it.
fn cublas_error(call: &'static str) -> impl FnOnce(CublasError) -> Error {
    move |e| Error::InvalidArgument(format!("cuBLAS: {call} failed: {:?}", e.0))
}

/// The report as a table: one line per phase, its median ms and ratio of each kind; then
/// the all-reduces' rate during each kind's busy runs.
pub fn table(r: &FootprintReport) -> String {
    let names = Kind::ALL.map(Kind::name);
    let mut out = format!("{:<8}", "phase");
    names.iter().for_each(|k| out += &format!(" {:>10}", format!("{k}_ms")));
    names.iter().for_each(|k| out += &format!(" {:>10}", format!("{k}_ratio")));
    for (p, phase) in PHASES.iter().enumerate() {
        out += &format!("\n{phase:<8}");
        Kind::ALL.iter().for_each(|&k| out += &format!(" {:>10.3}", r.ms[p][k as usize]));
        Kind::ALL.iter().for_each(|&k| out += &format!(" {:>10.4}", r.ratio(p, k)));
    }
    out += "\nall-reduce rate while busy, over alone:";
    Kind::ALL.iter().for_each(|&k| out += &format!(" {} {:.4}", k.name(), r.busy_allreduce[k as usize]));
    out + "\n"
}

/// The report as JSON: the run's shape, `{idle,busy,after}_{kind}_ratio`, every
/// `{phase}_{kind}_ms` and `busy_{kind}_allreduce_ratio` (rounded to 4 decimals; one that
/// is not finite is `null`).
pub fn json(r: &FootprintReport, cfg: &FootprintBench, gpu: &str, date_utc: &str) -> String {
    let mut figures = BTreeMap::new();
    for kind in Kind::ALL {
        figures.insert(format!("busy_{}_allreduce_ratio", kind.name()), rounded(r.busy_allreduce[kind as usize], 4));
    }
    for (p, phase) in PHASES.iter().enumerate() {
        for kind in Kind::ALL {
            figures.insert(format!("{phase}_{}_ms", kind.name()), rounded(r.ms[p][kind as usize], 4));
            if p > 0 {
                figures.insert(format!("{phase}_{}_ratio", kind.name()), rounded(r.ratio(p, kind), 4));
            }
        }
    }
    let lc = &cfg.comm.loop_cfg;
    let body = FootprintJson {
        date_utc,
        gpu,
        ranks: cfg.ranks,
        channels: lc.channels + lc.call_channels,
        resident_channels: lc.channels,
        threads: lc.threads,
        sleep_after_us: (lc.sleep_after_ns() != 0).then(|| lc.sleep_after_ns() as f64 / 1e3),
        figures,
    };
    serde_json::to_string_pretty(&body).expect("plain structs serialize") + "\n"
}

/// The body of [`json`].
#[derive(Serialize)]
struct FootprintJson<'a> {
    date_utc: &'a str,
    gpu: &'a str,
    ranks: usize,
    /// Every channel of a rank, resident and call.
    channels: u32,
    /// The channels that hold an SM while the loop idles.
    resident_channels: u32,
    threads: u32,
    /// How long an idle loop polls before it sleeps (null: it never sleeps); the idle
    /// phase waits until every loop sleeps.
    sleep_after_us: Option<f64>,
    #[serde(flatten)]
    figures: BTreeMap<String, f64>,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn cfg() -> FootprintBench {
        FootprintBench { ordinal: 0, ranks: 2, comm: Tuning::default(), busy_bytes: 256 << 20, iters: 20 }
    }

    #[test]
    fn footprint_json_keeps_its_fields() {
        let r = FootprintReport { ms: [[10.0, 6.0, 7.0], [12.5, 6.1, 8.0], [20.0, 12.0, 0.0], [10.01, 6.0, 7.0]], busy_allreduce: [0.5, 0.25, 1.0] };
        let v: Value = serde_json::from_str(&json(&r, &cfg(), "NVIDIA H100", "2026-01-01T00:00:00Z")).unwrap();
        let mut expected: Vec<String> = ["date_utc", "gpu", "ranks", "channels", "resident_channels", "threads", "sleep_after_us"].map(String::from).into();
        for phase in PHASES {
            for kind in ["fma", "copy", "gemm"] {
                expected.push(format!("{phase}_{kind}_ms"));
                if phase != "before" {
                    expected.push(format!("{phase}_{kind}_ratio"));
                }
            }
        }
        expected.extend(["fma", "copy", "gemm"].map(|kind| format!("busy_{kind}_allreduce_ratio")));
        expected.sort_unstable();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, expected);
        assert_eq!((&v["gpu"], &v["ranks"], &v["channels"], &v["threads"]), (&json!("NVIDIA H100"), &json!(2), &json!(64), &json!(256)));
        assert_eq!(v["resident_channels"], json!(Tuning::default().loop_cfg.channels));
        assert_eq!(v["sleep_after_us"], json!(1000.0), "the default communicator's loops sleep after 1 ms");
        assert_eq!((&v["idle_fma_ratio"], &v["busy_copy_ratio"], &v["after_fma_ratio"]), (&json!(0.8), &json!(0.5), &json!(0.999)));
        assert_eq!((&v["before_fma_ms"], &v["idle_copy_ms"]), (&json!(10.0), &json!(6.1)));
        assert!(v["busy_gemm_ratio"].is_null(), "a division by 0 is null");
        assert_eq!((&v["busy_fma_allreduce_ratio"], &v["busy_copy_allreduce_ratio"]), (&json!(0.5), &json!(0.25)));
    }

    #[test]
    fn the_table_has_a_line_per_phase() {
        let r = FootprintReport { ms: [[10.0, 6.0, 7.0]; 4], busy_allreduce: [0.5; 3] };
        let t = table(&r);
        assert_eq!(t.lines().count(), 2 + PHASES.len(), "{t}");
        assert!(t.lines().next().unwrap().contains("gemm_ratio"), "{t}");
        assert!(t.lines().nth(2).unwrap().starts_with("idle") && t.contains("1.0000"), "{t}");
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(check(&cfg()).is_ok());
        for bad in [FootprintBench { ranks: 0, ..cfg() }, FootprintBench { iters: 0, ..cfg() }, FootprintBench { busy_bytes: 6, ..cfg() }] {
            assert!(matches!(check(&bad), Err(Error::InvalidArgument(_))), "{bad:?}");
        }
    }
}
