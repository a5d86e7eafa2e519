//! `ferroccl bench reduce_copy`: reduce_copy's bandwidth on one GPU against
//! `cuMemcpyDtoD` of the same bytes, in the same run.
//!
//! Bytes moved count every byte read and written: a copy of B bytes moves 2B, a sum of
//! `k` sources into one destination moves (k + 1)·B. Times are CUDA-event medians.

use std::fmt::Write as _;

use serde::Serialize;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::abi::ReduceCopyArgs;
use zerocopy::IntoBytes;

use ferroccl_testkit::reference::{self, Rng};
use ferroccl_testkit::selftest::Fixture;
use host_shim::{Error, Result};

/// What to measure.
#[derive(Clone, Debug)]
pub struct ReduceCopyBench {
    /// Bytes per buffer.
    pub bytes: usize,
    /// Timed iterations per case (after 3 untimed ones).
    pub iters: usize,
}

/// One measured case.
#[derive(Clone, Debug)]
pub struct Measurement {
    pub name: String,
    pub dtype: Option<DataType>,
    pub grid: u32,
    pub block: u32,
    pub median_ms: f64,
    /// Bytes read plus bytes written per second, in GB/s (1e9).
    pub moved_gbps: f64,
}

/// Launch shapes tried for every case, as (CTAs per SM, threads per CTA).
const SHAPES: [(u32, u32); 4] = [(1, 512), (2, 512), (4, 256), (2, 256)];
/// Sources per measured case: copy, 2-source sum, 8-source sum.
const SOURCES: [usize; 3] = [1, 2, 8];

/// Runs the benchmark: memcpy, then copy / sum2 / sum8 for f32 and bf16 in every shape.
pub fn reduce_copy(fx: &Fixture, cfg: &ReduceCopyBench, sm_count: u32) -> Result<Vec<Measurement>> {
    if cfg.bytes == 0 || !cfg.bytes.is_multiple_of(16) || cfg.iters == 0 {
        return Err(Error::InvalidArgument(format!(
            "reduce_copy bench needs a non-zero multiple of 16 bytes and iterations (got {} bytes, {} iterations)",
            cfg.bytes, cfg.iters
        )));
    }
    let mut srcs: Vec<CudaSlice<u8>> = (0..*SOURCES.iter().max().unwrap_or(&1))
        .map(|_| fx.stream.alloc_zeros::<u8>(cfg.bytes).map_err(Error::cuda("cuMemAlloc")))
        .collect::<Result<_>>()?;
    let mut dst = fx.stream.alloc_zeros::<u8>(cfg.bytes).map_err(Error::cuda("cuMemAlloc"))?;
    let mut rng = Rng::new(0xBE7C);
    let mut results = Vec::new();

    let memcpy_ms = median(time_ms(&fx.stream, cfg.iters, || {
        fx.stream.memcpy_dtod(&srcs[0], &mut dst).map_err(Error::cuda("cuMemcpyDtoDAsync"))
    })?);
    results.push(Measurement {
        name: "memcpy_dtod".into(),
        dtype: None,
        grid: 0,
        block: 0,
        median_ms: memcpy_ms,
        moved_gbps: 2.0 * cfg.bytes as f64 / memcpy_ms / 1e6,
    });

    for dtype in [DataType::F32, DataType::Bf16] {
        let host = reference::random_elements(dtype, cfg.bytes / dtype.size(), &mut rng);
        for s in srcs.iter_mut() {
            fx.stream.memcpy_htod(&host, s).map_err(Error::cuda("cuMemcpyHtoD"))?;
        }
        for nsrcs in SOURCES {
            let kernel = fx.module.kernel(&format!("reduce_copy_sum_{}_s{nsrcs}d1", dtype.short_name()))?;
            let mut args = ReduceCopyArgs {
                n_elts: (cfg.bytes / dtype.size()) as u64,
                nsrcs: nsrcs as u32,
                ndsts: 1,
                op: RedOpKind::Sum as u32,
                ..Default::default()
            };
            for (s, buf) in srcs.iter().take(nsrcs).enumerate() {
                args.srcs[s] = buf.device_ptr(&fx.stream).0;
            }
            args.dsts[0] = dst.device_ptr(&fx.stream).0;
            let args_dev = fx.stream.clone_htod(args.as_bytes()).map_err(Error::cuda("cuMemcpyHtoD"))?;
            let args_ptr = args_dev.device_ptr(&fx.stream).0;
            for (per_sm, block) in SHAPES {
                let grid = sm_count * per_sm;
                let launch = LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: 0 };
                let ms = median(time_ms(&fx.stream, cfg.iters, || {
                    // SAFETY: the argument block and every buffer it names are live and hold
                    // `n_elts` elements.
                    unsafe { fx.stream.launch_builder(&kernel).arg(&args_ptr).launch(launch) }
                        .map(drop)
                        .map_err(Error::cuda("cuLaunchKernel"))
                })?);
                results.push(Measurement {
                    name: if nsrcs == 1 { "copy".into() } else { format!("sum{nsrcs}") },
                    dtype: Some(dtype),
                    grid,
                    block,
                    median_ms: ms,
                    moved_gbps: (nsrcs + 1) as f64 * cfg.bytes as f64 / ms / 1e6,
                });
            }
        }
    }
    Ok(results)
}

/// Runs `op` `iters` times after 3 warm-up runs, timing each with a pair of CUDA events;
/// returns the milliseconds of each timed run.
pub(crate) fn time_ms(stream: &std::sync::Arc<CudaStream>, iters: usize, mut op: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    let ctx = stream.context();
    for _ in 0..3 {
        op()?;
    }
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let start = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(Error::cuda("cuEventCreate"))?;
        let end = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(Error::cuda("cuEventCreate"))?;
        start.record(stream).map_err(Error::cuda("cuEventRecord"))?;
        op()?;
        end.record(stream).map_err(Error::cuda("cuEventRecord"))?;
        host_shim::stream::wait(stream, std::time::Duration::from_secs(30), "a benchmark iteration")?;
        times.push(f64::from(start.elapsed_ms(&end).map_err(Error::cuda("cuEventElapsedTime"))?));
    }
    Ok(times)
}

/// The median of `v` (the upper one of an even count).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The fastest shape of `name` on `dtype`.
pub fn best<'a>(results: &'a [Measurement], name: &str, dtype: DataType) -> Option<&'a Measurement> {
    results
        .iter()
        .filter(|m| m.name == name && m.dtype == Some(dtype))
        .min_by(|a, b| a.median_ms.total_cmp(&b.median_ms))
}

/// The results as a table, one line per measurement, with the ratio to memcpy's bytes
/// moved per second.
pub fn table(results: &[Measurement]) -> String {
    let memcpy = results.iter().find(|m| m.dtype.is_none()).map_or(f64::NAN, |m| m.moved_gbps);
    let mut out = format!("{:<12} {:>9} {:>6} {:>6} {:>10} {:>10} {:>10}\n", "case", "dtype", "grid", "block", "time_ms", "moved_GB/s", "vs_memcpy");
    for m in results {
        let _ = writeln!(
            out,
            "{:<12} {:>9} {:>6} {:>6} {:>10.3} {:>10.1} {:>10.3}",
            m.name,
            m.dtype.map_or("-", DataType::name),
            m.grid,
            m.block,
            m.median_ms,
            m.moved_gbps,
            m.moved_gbps / memcpy
        );
    }
    out
}

/// The body of `ferroccl bench reduce_copy --json`'s report: every measurement, the best
/// shape per case, and the two headline ratios (the worse of f32 and bf16). Numbers are
/// rounded as the table prints them; one that is not finite is `null`.
pub fn json(results: &[Measurement], cfg: &ReduceCopyBench, gpu: &str, date_utc: &str) -> String {
    let memcpy = results.iter().find(|m| m.dtype.is_none()).map_or(f64::NAN, |m| m.moved_gbps);
    let ratio = |name: &str| {
        [DataType::F32, DataType::Bf16]
            .iter()
            .filter_map(|&d| best(results, name, d))
            .map(|m| m.moved_gbps / memcpy)
            .fold(f64::INFINITY, f64::min)
    };
    let body = ReduceCopyJson {
        date_utc,
        gpu,
        bytes_per_buffer: cfg.bytes,
        iterations: cfg.iters,
        memcpy_moved_gbps: rounded(memcpy, 1),
        copy_vs_memcpy: rounded(ratio("copy"), 4),
        sum2_vs_memcpy_roofline: rounded(ratio("sum2"), 4),
        sum8_vs_memcpy_roofline: rounded(ratio("sum8"), 4),
        measurements: results
            .iter()
            .map(|m| MeasurementJson {
                case: &m.name,
                dtype: m.dtype.map_or("-", DataType::name),
                grid: m.grid,
                block: m.block,
                median_ms: rounded(m.median_ms, 4),
                moved_gbps: rounded(m.moved_gbps, 1),
                vs_memcpy: rounded(m.moved_gbps / memcpy, 4),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&body).expect("plain structs serialize") + "\n"
}

/// The body of [`json`].
#[derive(Serialize)]
struct ReduceCopyJson<'a> {
    date_utc: &'a str,
    gpu: &'a str,
    bytes_per_buffer: usize,
    iterations: usize,
    memcpy_moved_gbps: f64,
    copy_vs_memcpy: f64,
    sum2_vs_memcpy_roofline: f64,
    sum8_vs_memcpy_roofline: f64,
    measurements: Vec<MeasurementJson<'a>>,
}

/// One [`Measurement`] in [`json`].
#[derive(Serialize)]
struct MeasurementJson<'a> {
    case: &'a str,
    dtype: &'static str,
    grid: u32,
    block: u32,
    median_ms: f64,
    moved_gbps: f64,
    vs_memcpy: f64,
}

/// `x` rounded to `decimals` decimal places (as `{:.N}` prints it); not-finite stays so
/// (and serializes as `null`).
pub(crate) fn rounded(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

/// The work loop's latencies against kernel launches, in one run (`ferroccl bench
/// work_loop`).
#[derive(Clone, Debug, Default)]
pub struct WorkLoopReport {
    /// Median µs from `enqueue(NoOp)` to its completion seen on the host, 1 channel.
    pub noop_roundtrip_us: f64,
    /// The same with 4 channels.
    pub noop_roundtrip_4ch_us: f64,
    /// Median µs of an empty kernel launch plus `cuStreamSynchronize`.
    pub empty_launch_sync_us: f64,
    /// µs per item over 10 000 back-to-back no-ops, 1 channel (device timestamps).
    pub dispatch_us_per_item: f64,
    /// The same with 4 channels (a barrier before the last timestamp).
    pub dispatch_4ch_us_per_item: f64,
    /// The same, 1 channel, with every item in the ring before the loop reads the first
    /// (a `WaitAtLeast` holds the loop until the host has written them): the loop's own
    /// rate, whatever the host's writing costs.
    pub dispatch_queued_us_per_item: f64,
    /// µs per stream-ordered no-op in a replayed CUDA graph of 100.
    pub stream_ordered_us_per_op: f64,
    /// µs per empty-kernel launch in a replayed CUDA graph of 100.
    pub graph_launch_us_per_op: f64,
    /// µs per stream-ordered no-op, 2 000 submitted back to back on one stream then waited
    /// for with `cuStreamSynchronize` (host clock, first submission to the end of the
    /// wait).
    pub stream_back_to_back_us_per_op: f64,
    /// The share of those calls that took the ring route (the others: the call-kernel
    /// route; calls in a burst take it, `LoopConfig::burst_gap`).
    pub stream_back_to_back_ring_share: f64,
    /// The same back-to-back no-ops on a loop without bursts (`burst_gap` 0: every call
    /// that finds the stream idle takes the ring route), same run.
    pub stream_back_to_back_no_burst_us_per_op: f64,
    /// Median µs of one stream-ordered no-op submitted and waited for
    /// (`cuStreamSynchronize`), host clock.
    pub stream_roundtrip_us: f64,
    /// The share of those calls (warm-up included) that took the ring route (the stream
    /// idle, the loop of one channel awake: `WorkLoop::enqueue_on_stream`).
    pub stream_roundtrip_ring_share: f64,
    /// The share of those calls whose item the stream waited for (not completed within
    /// `host_shim::work::RING_ROUTE_SPIN`).
    pub stream_roundtrip_wait_share: f64,
    /// The same round trip waited for by polling `cuStreamQuery` instead of
    /// `cuStreamSynchronize`.
    pub stream_roundtrip_polled_us: f64,
    /// The same round trip on the call-kernel route (the legacy default stream), same run.
    pub stream_roundtrip_call_kernel_us: f64,
    /// The public call path: `Comm::all_reduce` on a one-rank communicator.
    pub comm: CommCallReport,
}

/// `Comm::all_reduce` of 8 bytes (two f32) on a one-rank communicator of the default
/// configuration, on its stream: what a user's smallest call costs.
#[derive(Clone, Debug, Default)]
pub struct CommCallReport {
    /// Median µs of a call plus `cuStreamSynchronize`.
    pub call_sync_us: f64,
    /// The same for a call that finds the loop asleep (it slept after
    /// `Tuning::default()`'s sleep time with nothing to do; the call launches it
    /// again).
    pub call_sync_after_sleep_us: f64,
    /// Its baseline: an empty kernel launch plus `cuStreamSynchronize` on the same stream
    /// just before it, the loop asleep as well.
    pub empty_launch_sync_after_sleep_us: f64,
    /// µs per call in a replayed CUDA graph of 20 calls.
    pub graph_us_per_call: f64,
    /// Median over 100 batches of host µs per call while 100 calls are made back to back
    /// (the stream is waited for between batches, outside the timing), with cudarc's
    /// event tracking as the context has it by default.
    pub host_enqueue_us_per_call: f64,
    /// The same with cudarc's event tracking turned off for the context.
    pub host_enqueue_untracked_us_per_call: f64,
    /// Its baseline, measured the same way on the same stream: host µs per launch of an
    /// empty kernel (1 CTA of 32 threads, `cuLaunchKernel`).
    pub empty_launch_host_us_per_call: f64,
}

impl CommCallReport {
    /// Host time of a call without event tracking over an empty kernel launch's.
    pub fn host_enqueue_untracked_vs_empty_launch(&self) -> f64 {
        self.host_enqueue_untracked_us_per_call / self.empty_launch_host_us_per_call
    }
}

impl WorkLoopReport {
    /// (a): no-op round trip over an empty launch + sync.
    pub fn noop_roundtrip_vs_launch(&self) -> f64 {
        self.noop_roundtrip_us / self.empty_launch_sync_us
    }

    /// (c): a stream-ordered no-op over a kernel launch, both inside a CUDA graph.
    pub fn stream_ordered_vs_graph_launch(&self) -> f64 {
        self.stream_ordered_us_per_op / self.graph_launch_us_per_op
    }

    /// (d): a stream-ordered no-op submitted and waited for, over an empty launch + sync.
    pub fn stream_roundtrip_vs_launch_sync(&self) -> f64 {
        self.stream_roundtrip_us / self.empty_launch_sync_us
    }
}

const ROUNDTRIPS: usize = 2000;
const DISPATCH_ITEMS: usize = 10_000;
const GRAPH_OPS: usize = 100;

/// Measures (a) no-op round trips against empty launches, (b) back-to-back device
/// dispatch, (c) the stream-ordered path against kernel launches inside CUDA graphs.
pub fn work_loop(fx: &Fixture) -> Result<WorkLoopReport> {
    use std::time::{Duration, Instant};

    use device_rt::work::{DeviceFunction, WorkItem};

    use host_shim::work::{LoopConfig, Placement, WorkLoop};
    let timeout = Duration::from_secs(20);
    let config = |channels, capacity| LoopConfig { channels, call_channels: 0, threads: 256, resident_threads: 0, capacity, spin_budget: timeout, placement: Placement::Hardware, sleep_after: None, burst_gap: host_shim::work::BURST_GAP };
    let mut report = WorkLoopReport::default();

    let roundtrip = |channels| -> Result<f64> {
        let mut lp = WorkLoop::launch(&fx.ctx, &fx.module, config(channels, 64))?;
        let us = median_host_us(&mut || {
            // SAFETY: a no-op carries no address.
            let t = unsafe { lp.enqueue(WorkItem::noop(), timeout) }?;
            lp.wait(t, timeout)
        })?;
        lp.shutdown(timeout)?;
        Ok(us)
    };
    report.noop_roundtrip_us = roundtrip(1)?;
    report.noop_roundtrip_4ch_us = roundtrip(4)?;

    let empty = fx.module.kernel("ferroccl_empty")?;
    let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
    report.empty_launch_sync_us = median_host_us(&mut || {
        // SAFETY: `ferroccl_empty` takes no arguments.
        unsafe { fx.stream.launch_builder(&empty).launch(one) }.map_err(Error::cuda("cuLaunchKernel"))?;
        fx.stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))
    })?;

    // Two timestamps and the word a held loop waits for.
    let mut stamps = fx.stream.alloc_zeros::<u64>(3).map_err(Error::cuda("cuMemAlloc"))?;
    let base = stamps.device_ptr(&fx.stream).0;
    let (t0, t1, gate) = (base, base + 8, base + 16);
    let mut dispatch = |channels: u32, held: bool| -> Result<f64> {
        fx.stream.memset_zeros(&mut stamps).map_err(Error::cuda("cuMemsetD8"))?;
        fx.stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))?;
        let mut lp = WorkLoop::launch(&fx.ctx, &fx.module, config(channels, DISPATCH_ITEMS as u32 + 8))?;
        let mut items = if held { vec![WorkItem::call(DeviceFunction::WaitAtLeast, gate, 1)] } else { Vec::new() };
        items.push(WorkItem::call(DeviceFunction::Timestamp, t0, 0));
        items.extend(std::iter::repeat_n(WorkItem::noop(), DISPATCH_ITEMS));
        if channels > 1 {
            items.push(WorkItem::barrier());
        }
        items.push(WorkItem::call(DeviceFunction::Timestamp, t1, 0));
        // SAFETY: the items' words are `stamps`' (device memory of the loop's device), which
        // outlives the loop's shutdown below and which nothing else uses meanwhile but the
        // copy that sets the gate the first item waits for.
        let t = unsafe { lp.enqueue_batch(&items, timeout) }?;
        if held {
            let mut gate_word = stamps.slice_mut(2..3);
            fx.stream.memcpy_htod(&[1u64], &mut gate_word).map_err(Error::cuda("cuMemcpyHtoD"))?;
        }
        lp.wait(t, timeout)?;
        lp.shutdown(timeout)?;
        let v = fx.stream.clone_dtoh(&stamps).map_err(Error::cuda("cuMemcpyDtoH"))?;
        // The intervals between the two timestamps: every no-op, the barrier, the last stamp.
        let intervals = DISPATCH_ITEMS + 1 + usize::from(channels > 1);
        Ok(v[1].saturating_sub(v[0]) as f64 / 1e3 / intervals as f64)
    };
    report.dispatch_us_per_item = dispatch(1, false)?;
    report.dispatch_4ch_us_per_item = dispatch(4, false)?;
    report.dispatch_queued_us_per_item = dispatch(1, true)?;

    let user = fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
    let mut lp = WorkLoop::launch(&fx.ctx, &fx.module, config(1, 64))?;
    let graph_of = |record: &dyn Fn() -> Result<()>| -> Result<cudarc::driver::CudaGraph> {
        user.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(Error::cuda("cuStreamBeginCapture"))?;
        for _ in 0..GRAPH_OPS {
            record()?;
        }
        user.end_capture(sys::CUgraphInstantiate_flags(0))
            .map_err(Error::cuda("cuStreamEndCapture"))?
            .ok_or_else(|| Error::InvalidArgument("stream capture produced no graph".into()))
    };
    let per_op_us = |graph: &cudarc::driver::CudaGraph| -> Result<f64> {
        let times = time_ms(&user, 20, || graph.launch().map_err(Error::cuda("cuGraphLaunch")))?;
        Ok(median(times) * 1e3 / GRAPH_OPS as f64)
    };
    // SAFETY: `ferroccl_empty` takes no arguments.
    let launches = graph_of(&|| unsafe { user.launch_builder(&empty).launch(one) }.map(drop).map_err(Error::cuda("cuLaunchKernel")))?;
    report.graph_launch_us_per_op = per_op_us(&launches)?;
    // SAFETY: a no-op carries no address.
    let stream_ordered = graph_of(&|| unsafe { lp.enqueue_on_stream(&user, WorkItem::noop()) })?;
    report.stream_ordered_us_per_op = per_op_us(&stream_ordered)?;
    let sync_user = || user.synchronize().map_err(Error::cuda("cuStreamSynchronize"));
    for _ in 0..100 {
        // SAFETY: a no-op carries no address.
        unsafe { lp.enqueue_on_stream(&user, WorkItem::noop()) }?;
    }
    sync_user()?;
    let back_to_back = |lp: &WorkLoop| -> Result<(f64, f64)> {
        let routed_before = lp.ring_routed();
        let start = Instant::now();
        for _ in 0..BACK_TO_BACK {
            // SAFETY: a no-op carries no address.
            unsafe { lp.enqueue_on_stream(&user, WorkItem::noop()) }?;
        }
        sync_user()?;
        let us = start.elapsed().as_secs_f64() * 1e6 / BACK_TO_BACK as f64;
        Ok((us, (lp.ring_routed() - routed_before) as f64 / BACK_TO_BACK as f64))
    };
    (report.stream_back_to_back_us_per_op, report.stream_back_to_back_ring_share) = back_to_back(&lp)?;
    let (routed_before, waits_before) = (lp.ring_routed(), lp.ring_waits());
    report.stream_roundtrip_us = median_host_us(&mut || {
        // SAFETY: a no-op carries no address.
        unsafe { lp.enqueue_on_stream(&user, WorkItem::noop()) }?;
        sync_user()
    })?;
    report.stream_roundtrip_ring_share = (lp.ring_routed() - routed_before) as f64 / (ROUNDTRIPS + WARM_UP) as f64;
    report.stream_roundtrip_wait_share = (lp.ring_waits() - waits_before) as f64 / (ROUNDTRIPS + WARM_UP) as f64;
    report.stream_roundtrip_polled_us = median_host_us(&mut || {
        // SAFETY: a no-op carries no address.
        unsafe { lp.enqueue_on_stream(&user, WorkItem::noop()) }?;
        while !host_shim::stream::idle(&user)? {}
        Ok(())
    })?;
    if let Some(e) = lp.async_error() {
        return Err(e);
    }
    lp.shutdown(timeout)?;
    let mut no_burst = WorkLoop::launch(&fx.ctx, &fx.module, LoopConfig { burst_gap: Duration::ZERO, ..config(1, 64) })?;
    report.stream_back_to_back_no_burst_us_per_op = back_to_back(&no_burst)?.0;
    no_burst.shutdown(timeout)?;
    // The call-kernel route's round trip in the same run: a loop of its own serving the
    // legacy default stream, which is not a non-blocking stream, so every call takes the
    // call-kernel route.
    let call_kernel_lp = WorkLoop::launch(&fx.ctx, &fx.module, config(1, 64))?;
    let legacy = fx.ctx.default_stream();
    report.stream_roundtrip_call_kernel_us = median_host_us(&mut || {
        // SAFETY: a no-op carries no address.
        unsafe { call_kernel_lp.enqueue_on_stream(&legacy, WorkItem::noop()) }?;
        legacy.synchronize().map_err(Error::cuda("cuStreamSynchronize"))
    })?;
    if call_kernel_lp.ring_routed() != 0 {
        return Err(Error::InvalidState("a call on the legacy default stream took the ring route"));
    }
    let mut call_kernel_lp = call_kernel_lp;
    call_kernel_lp.shutdown(timeout)?;
    report.comm = comm_calls(fx)?;
    Ok(report)
}

/// One held batch of [`dispatch_timeline`]: a timestamp every `spacing` items, the
/// gaps between consecutive stamps in ns.
#[derive(Clone, Debug, Serialize)]
pub struct TimelineRun {
    /// Threads of the loop's CTA.
    pub threads: u32,
    /// Items from one stamp to the next (the stamp itself and `spacing - 1` no-ops).
    pub spacing: usize,
    /// Nanoseconds between consecutive stamps, in queue order.
    pub gaps_ns: Vec<u64>,
}

/// Stamps in each batch of [`dispatch_timeline`].
const TIMELINE_STAMPS: usize = 512;

/// Diagnosis of the loop's per-item rate (`bench work_loop --timeline`): for each shape
/// (threads, spacing), a one-channel loop held by a `WaitAtLeast` until the host has
/// written the whole batch, then `TIMELINE_STAMPS` timestamps, each followed by
/// `spacing - 1` no-ops; the gaps show where the loop spends its time (reads of the ring,
/// items, completions).
pub fn dispatch_timeline(fx: &Fixture, shapes: &[(u32, usize)]) -> Result<Vec<TimelineRun>> {
    use std::time::Duration;

    use device_rt::work::{DeviceFunction, WorkItem};

    use host_shim::work::{LoopConfig, Placement, WorkLoop};
    let timeout = Duration::from_secs(20);
    let mut runs = Vec::new();
    for &(threads, spacing) in shapes {
        let items_total = TIMELINE_STAMPS * spacing + 1;
        let cfg = LoopConfig { channels: 1, call_channels: 0, threads, resident_threads: 0, capacity: items_total as u32 + 8, spin_budget: timeout, placement: Placement::Hardware, sleep_after: None, burst_gap: host_shim::work::BURST_GAP };
        let mut stamps = fx.stream.alloc_zeros::<u64>(TIMELINE_STAMPS + 1).map_err(Error::cuda("cuMemAlloc"))?;
        fx.stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))?;
        let base = stamps.device_ptr(&fx.stream).0;
        let gate = base + 8 * TIMELINE_STAMPS as u64;
        let mut lp = WorkLoop::launch(&fx.ctx, &fx.module, cfg)?;
        let mut items = vec![WorkItem::call(DeviceFunction::WaitAtLeast, gate, 1)];
        for k in 0..TIMELINE_STAMPS {
            items.push(WorkItem::call(DeviceFunction::Timestamp, base + 8 * k as u64, 0));
            items.extend(std::iter::repeat_n(WorkItem::noop(), spacing - 1));
        }
        // SAFETY: the items' words are `stamps`' (device memory of the loop's device), which
        // outlives the loop's shutdown below and which nothing else uses meanwhile but the
        // copy that sets the gate the first item waits for.
        let t = unsafe { lp.enqueue_batch(&items, timeout) }?;
        let mut gate_word = stamps.slice_mut(TIMELINE_STAMPS..TIMELINE_STAMPS + 1);
        fx.stream.memcpy_htod(&[1u64], &mut gate_word).map_err(Error::cuda("cuMemcpyHtoD"))?;
        lp.wait(t, timeout)?;
        lp.shutdown(timeout)?;
        let v = fx.stream.clone_dtoh(&stamps).map_err(Error::cuda("cuMemcpyDtoH"))?;
        let gaps_ns = v[..TIMELINE_STAMPS].windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
        runs.push(TimelineRun { threads, spacing, gaps_ns });
    }
    Ok(runs)
}

/// Runs before the timed ones in [`median_host_us`].
const WARM_UP: usize = 100;

/// The median µs of `op` over `ROUNDTRIPS` runs after `WARM_UP` warm-up runs, on the host
/// clock.
fn median_host_us(op: &mut dyn FnMut() -> Result<()>) -> Result<f64> {
    let mut times = Vec::with_capacity(ROUNDTRIPS);
    for i in 0..ROUNDTRIPS + WARM_UP {
        let start = std::time::Instant::now();
        op()?;
        if i >= WARM_UP {
            times.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    Ok(median(times))
}

const BACK_TO_BACK: usize = 2000;
const GRAPH_CALLS: usize = 20;
const ENQUEUE_BATCHES: usize = 100;
const ENQUEUE_BATCH: usize = 100;
/// Calls timed after the loop slept.
const WAKES: usize = 50;

/// Measures [`CommCallReport`] on `fx`'s device (no loop of the device may run: the
/// communicator loads its module). Every call's result is checked, and an item that
/// names plain host memory must be refused. The capture runs with
/// cudarc's event tracking off: with it on, a slice made before a capture makes the
/// captured call wait on an event recorded outside it, which CUDA refuses
/// (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`), whatever kernel the call launches.
fn comm_calls(fx: &Fixture) -> Result<CommCallReport> {
    use device_rt::work::WorkItem;
    use host_shim::comm::{Comm, ReduceOp};
    let timeout = std::time::Duration::from_secs(20);
    let stream = fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
    let send = stream.clone_htod(&[1.5f32, -2.25]).map_err(Error::cuda("cuMemcpyHtoD"))?;
    let mut recv = stream.alloc_zeros::<f32>(2).map_err(Error::cuda("cuMemAlloc"))?;
    let mut comms = Comm::from_devices(vec![stream.clone()])?;
    let comm = &mut comms[0];
    let sync = || stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"));
    let check = |recv: &CudaSlice<f32>| -> Result<()> {
        let got = stream.clone_dtoh(recv).map_err(Error::cuda("cuMemcpyDtoH"))?;
        if got != [1.5, -2.25] {
            return Err(Error::InvalidState("a one-rank all_reduce did not copy its input"));
        }
        Ok(())
    };
    // Median over ENQUEUE_BATCHES batches of host µs per `call`, ENQUEUE_BATCH calls back
    // to back a batch, the stream waited for between batches (outside the timing).
    let host_us_per_call = |call: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let mut per_call = Vec::with_capacity(ENQUEUE_BATCHES);
        for _ in 0..ENQUEUE_BATCHES {
            let start = std::time::Instant::now();
            for _ in 0..ENQUEUE_BATCH {
                call()?;
            }
            per_call.push(start.elapsed().as_secs_f64() * 1e6 / ENQUEUE_BATCH as f64);
            sync()?;
        }
        Ok(median(per_call))
    };
    let enqueue_us = |comm: &Comm, recv: &mut CudaSlice<f32>| host_us_per_call(&mut || comm.all_reduce(&send, recv, ReduceOp::Sum));
    let host = [0f32; 2];
    // SAFETY: the item is refused before anything is enqueued (plain host memory, which the
    // driver does not know): what this checks.
    let refused = unsafe { comm.enqueue(WorkItem::copy(DataType::F32, host.as_ptr() as u64, recv.device_ptr(&stream).0, 2)) };
    if !matches!(refused, Err(Error::InvalidArgument(_))) {
        return Err(Error::InvalidState("an item reading plain host memory was not refused"));
    }
    let mut report = CommCallReport { host_enqueue_us_per_call: enqueue_us(comm, &mut recv)?, ..CommCallReport::default() };
    check(&recv)?;
    // Before the capture below, which keeps the loop awake for good.
    let empty = fx.module.kernel("ferroccl_empty")?;
    let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: `ferroccl_empty` takes no arguments.
    report.empty_launch_host_us_per_call = host_us_per_call(&mut || unsafe { stream.launch_builder(&empty).launch(one) }.map(drop).map_err(Error::cuda("cuLaunchKernel")))?;
    let (mut after_sleep, mut empty_after_sleep) = (Vec::with_capacity(WAKES), Vec::with_capacity(WAKES));
    for _ in 0..WAKES {
        let idle = std::time::Instant::now();
        while !comm.loop_asleep() {
            if idle.elapsed() > timeout {
                return Err(Error::InvalidState("the idle loop of a default communicator did not sleep"));
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        let start = std::time::Instant::now();
        // SAFETY: `ferroccl_empty` takes no arguments.
        unsafe { stream.launch_builder(&empty).launch(one) }.map_err(Error::cuda("cuLaunchKernel"))?;
        sync()?;
        empty_after_sleep.push(start.elapsed().as_secs_f64() * 1e6);
        let start = std::time::Instant::now();
        comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
        sync()?;
        after_sleep.push(start.elapsed().as_secs_f64() * 1e6);
    }
    report.call_sync_after_sleep_us = median(after_sleep);
    report.empty_launch_sync_after_sleep_us = median(empty_after_sleep);
    check(&recv)?;
    // SAFETY: the stream was waited for; the buffers are used on `stream` alone.
    unsafe { fx.ctx.disable_event_tracking() };
    let untracked = (|| -> Result<()> {
        report.host_enqueue_untracked_us_per_call = enqueue_us(comm, &mut recv)?;
        stream.memset_zeros(&mut recv).map_err(Error::cuda("cuMemsetD8"))?;
        sync()?;
        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(Error::cuda("cuStreamBeginCapture"))?;
        for _ in 0..GRAPH_CALLS {
            comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
        }
        let graph = stream
            .end_capture(sys::CUgraphInstantiate_flags(0))
            .map_err(Error::cuda("cuStreamEndCapture"))?
            .ok_or_else(|| Error::InvalidArgument("stream capture produced no graph".into()))?;
        let times = time_ms(&stream, 20, || graph.launch().map_err(Error::cuda("cuGraphLaunch")))?;
        report.graph_us_per_call = median(times) * 1e3 / GRAPH_CALLS as f64;
        check(&recv)
    })();
    // SAFETY: every use of the buffers above was waited for.
    unsafe { fx.ctx.enable_event_tracking() };
    untracked?;
    report.call_sync_us = median_host_us(&mut || {
        comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
        sync()
    })?;
    check(&recv)?;
    comm.shutdown(timeout)?;
    Ok(report)
}

/// The body of `ferroccl bench work_loop --json`'s report (ratios, shares and the device's
/// per-item dispatch times to 4 decimals, other times to 3; a number that is not finite is
/// `null`).
pub fn work_loop_json(r: &WorkLoopReport, gpu: &str, date_utc: &str) -> String {
    let body = WorkLoopJson {
        date_utc,
        gpu,
        noop_roundtrip_vs_launch: rounded(r.noop_roundtrip_vs_launch(), 4),
        device_dispatch_us_per_item: rounded(r.dispatch_us_per_item, 4),
        stream_ordered_vs_graph_launch: rounded(r.stream_ordered_vs_graph_launch(), 4),
        noop_roundtrip_us: rounded(r.noop_roundtrip_us, 3),
        noop_roundtrip_4ch_us: rounded(r.noop_roundtrip_4ch_us, 3),
        empty_launch_sync_us: rounded(r.empty_launch_sync_us, 3),
        dispatch_4ch_us_per_item: rounded(r.dispatch_4ch_us_per_item, 4),
        dispatch_queued_us_per_item: rounded(r.dispatch_queued_us_per_item, 4),
        stream_ordered_us_per_op: rounded(r.stream_ordered_us_per_op, 3),
        graph_launch_us_per_op: rounded(r.graph_launch_us_per_op, 3),
        stream_back_to_back_us_per_op: rounded(r.stream_back_to_back_us_per_op, 3),
        stream_back_to_back_ring_share: rounded(r.stream_back_to_back_ring_share, 4),
        stream_back_to_back_no_burst_us_per_op: rounded(r.stream_back_to_back_no_burst_us_per_op, 3),
        stream_roundtrip_us: rounded(r.stream_roundtrip_us, 3),
        stream_roundtrip_vs_launch_sync: rounded(r.stream_roundtrip_vs_launch_sync(), 4),
        stream_roundtrip_ring_share: rounded(r.stream_roundtrip_ring_share, 4),
        stream_roundtrip_wait_share: rounded(r.stream_roundtrip_wait_share, 4),
        stream_roundtrip_polled_us: rounded(r.stream_roundtrip_polled_us, 3),
        stream_roundtrip_call_kernel_us: rounded(r.stream_roundtrip_call_kernel_us, 3),
        host_enqueue_us_per_call: rounded(r.comm.host_enqueue_us_per_call, 3),
        host_enqueue_untracked_us_per_call: rounded(r.comm.host_enqueue_untracked_us_per_call, 3),
        empty_launch_host_us_per_call: rounded(r.comm.empty_launch_host_us_per_call, 3),
        host_enqueue_untracked_vs_empty_launch: rounded(r.comm.host_enqueue_untracked_vs_empty_launch(), 4),
        all_reduce_8b_call_sync_us: rounded(r.comm.call_sync_us, 3),
        all_reduce_8b_call_sync_after_sleep_us: rounded(r.comm.call_sync_after_sleep_us, 3),
        empty_launch_sync_after_sleep_us: rounded(r.comm.empty_launch_sync_after_sleep_us, 3),
        all_reduce_8b_graph_us_per_call: rounded(r.comm.graph_us_per_call, 3),
    };
    serde_json::to_string_pretty(&body).expect("plain structs serialize") + "\n"
}

/// The body of [`work_loop_json`].
#[derive(Serialize)]
struct WorkLoopJson<'a> {
    date_utc: &'a str,
    gpu: &'a str,
    noop_roundtrip_vs_launch: f64,
    device_dispatch_us_per_item: f64,
    stream_ordered_vs_graph_launch: f64,
    noop_roundtrip_us: f64,
    noop_roundtrip_4ch_us: f64,
    empty_launch_sync_us: f64,
    dispatch_4ch_us_per_item: f64,
    dispatch_queued_us_per_item: f64,
    stream_ordered_us_per_op: f64,
    graph_launch_us_per_op: f64,
    stream_back_to_back_us_per_op: f64,
    stream_back_to_back_ring_share: f64,
    stream_back_to_back_no_burst_us_per_op: f64,
    stream_roundtrip_us: f64,
    stream_roundtrip_vs_launch_sync: f64,
    stream_roundtrip_ring_share: f64,
    stream_roundtrip_wait_share: f64,
    stream_roundtrip_polled_us: f64,
    stream_roundtrip_call_kernel_us: f64,
    host_enqueue_us_per_call: f64,
    host_enqueue_untracked_us_per_call: f64,
    empty_launch_host_us_per_call: f64,
    host_enqueue_untracked_vs_empty_launch: f64,
    all_reduce_8b_call_sync_us: f64,
    all_reduce_8b_call_sync_after_sleep_us: f64,
    empty_launch_sync_after_sleep_us: f64,
    all_reduce_8b_graph_us_per_call: f64,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    #[test]
    fn reduce_copy_json_keeps_its_fields() {
        let m = |name: &str, dtype, median_ms, moved_gbps| Measurement { name: name.into(), dtype, grid: 132, block: 512, median_ms, moved_gbps };
        let results = [
            m("memcpy_dtod", None, 0.18612, 2884.66),
            m("copy", Some(DataType::F32), 0.2, 2700.0),
            m("copy", Some(DataType::F32), 0.19, 2750.0),
            m("copy", Some(DataType::Bf16), 0.19, 2660.0),
            m("sum2", Some(DataType::F32), 0.3, 2800.0),
        ];
        let cfg = ReduceCopyBench { bytes: 256 << 20, iters: 20 };
        let text = json(&results, &cfg, "NVIDIA \"H100\"", "2026-01-01T00:00:00Z");
        let v: Value = serde_json::from_str(&text).unwrap();
        let mut expected = [
            "date_utc",
            "gpu",
            "bytes_per_buffer",
            "iterations",
            "memcpy_moved_gbps",
            "copy_vs_memcpy",
            "sum2_vs_memcpy_roofline",
            "sum8_vs_memcpy_roofline",
            "measurements",
        ];
        expected.sort_unstable();
        assert_eq!(keys(&v), expected);
        assert_eq!((&v["gpu"], &v["bytes_per_buffer"], &v["iterations"]), (&json!("NVIDIA \"H100\""), &json!(256 << 20), &json!(20)));
        assert_eq!(v["memcpy_moved_gbps"], 2884.7);
        // The worse of f32's and bf16's best shapes.
        assert_eq!(v["copy_vs_memcpy"], rounded(2660.0 / 2884.66, 4));
        // Only f32 measured: its ratio.
        assert_eq!(v["sum2_vs_memcpy_roofline"], rounded(2800.0 / 2884.66, 4));
        assert!(v["sum8_vs_memcpy_roofline"].is_null(), "none measured: not a finite ratio, so null: {text}");
        assert_eq!(
            v["measurements"][0],
            json!({"case": "memcpy_dtod", "dtype": "-", "grid": 132, "block": 512, "median_ms": 0.1861, "moved_gbps": 2884.7, "vs_memcpy": 1.0})
        );
        assert_eq!(v["measurements"][3]["dtype"], "bfloat16");
        assert_eq!(v["measurements"].as_array().unwrap().len(), results.len());
    }

    #[test]
    fn work_loop_json_keeps_its_fields() {
        let r = WorkLoopReport {
            noop_roundtrip_us: 3.3571,
            noop_roundtrip_4ch_us: 7.414,
            empty_launch_sync_us: 10.114,
            dispatch_us_per_item: 0.69771,
            dispatch_4ch_us_per_item: 0.7209,
            dispatch_queued_us_per_item: 0.25,
            stream_ordered_us_per_op: 22.591,
            graph_launch_us_per_op: 0.0,
            stream_back_to_back_us_per_op: 3.5,
            stream_back_to_back_ring_share: 0.02,
            stream_back_to_back_no_burst_us_per_op: 4.9,
            stream_roundtrip_us: 7.25,
            stream_roundtrip_ring_share: 0.99,
            stream_roundtrip_wait_share: 0.01,
            stream_roundtrip_polled_us: 6.0,
            stream_roundtrip_call_kernel_us: 12.0,
            comm: CommCallReport { call_sync_us: 9.0, call_sync_after_sleep_us: 12.0, empty_launch_sync_after_sleep_us: 10.0, graph_us_per_call: 4.0, host_enqueue_us_per_call: 4.5, host_enqueue_untracked_us_per_call: 2.5, empty_launch_host_us_per_call: 2.0 },
        };
        let v: Value = serde_json::from_str(&work_loop_json(&r, "NVIDIA H100", "2026-01-01T00:00:00Z")).unwrap();
        let mut expected = [
            "date_utc",
            "gpu",
            "noop_roundtrip_vs_launch",
            "device_dispatch_us_per_item",
            "stream_ordered_vs_graph_launch",
            "noop_roundtrip_us",
            "noop_roundtrip_4ch_us",
            "empty_launch_sync_us",
            "dispatch_4ch_us_per_item",
            "dispatch_queued_us_per_item",
            "stream_ordered_us_per_op",
            "graph_launch_us_per_op",
            "stream_back_to_back_us_per_op",
            "stream_back_to_back_ring_share",
            "stream_back_to_back_no_burst_us_per_op",
            "stream_roundtrip_us",
            "stream_roundtrip_vs_launch_sync",
            "stream_roundtrip_ring_share",
            "stream_roundtrip_wait_share",
            "stream_roundtrip_polled_us",
            "stream_roundtrip_call_kernel_us",
            "host_enqueue_us_per_call",
            "host_enqueue_untracked_us_per_call",
            "empty_launch_host_us_per_call",
            "host_enqueue_untracked_vs_empty_launch",
            "all_reduce_8b_call_sync_us",
            "all_reduce_8b_call_sync_after_sleep_us",
            "empty_launch_sync_after_sleep_us",
            "all_reduce_8b_graph_us_per_call",
        ];
        expected.sort_unstable();
        assert_eq!(keys(&v), expected);
        assert_eq!((&v["noop_roundtrip_us"], &v["device_dispatch_us_per_item"]), (&json!(3.357), &json!(0.6977)));
        assert_eq!(v["noop_roundtrip_vs_launch"], rounded(3.3571 / 10.114, 4));
        assert!(v["stream_ordered_vs_graph_launch"].is_null(), "a division by 0 is null");
        assert_eq!(v["stream_roundtrip_vs_launch_sync"], rounded(7.25 / 10.114, 4));
        assert_eq!(v["host_enqueue_us_per_call"], json!(4.5));
        assert_eq!(v["host_enqueue_untracked_vs_empty_launch"], json!(1.25));
    }
}
