//! `ferroccl bench shmem`: the symmetric heap's device API between two GPUs, in
//! one run.
//!
//! Two PEs in this process, one per device, on one heap ([`Heap::new`]: every PE's heap
//! mapped on both devices; the contexts' peer access enabled both ways too, the copy
//! engine's direct path). Per message size (`--min-bytes` times powers of 4, and
//! `--max-bytes`), PE 0 alone, towards PE 1:
//!
//! - put and get bandwidth: a grid of `--blocks` CTAs, each putting (getting) its
//!   contiguous slice of the message `--iters` times, then a quiet; GB/s (1e9) of the
//!   message's bytes times `--iters` over the launch's CUDA-event time (the launch
//!   included), median of [`REPS`] launches after 3 untimed ones;
//! - the copy engine: `--iters` `cuMemcpyPeerAsync` of the same bytes between the same
//!   buffers on PE 0's stream, timed the same way, and put bandwidth over it;
//! - put latency by one thread (messages up to [`THREAD_MAX_BYTES`]), one warp (up to
//!   [`WARP_MAX_BYTES`]) and one CTA of `--threads`: `--iters` puts each followed by a
//!   quiet (NVSHMEM's `shmem_put_latency`), timed on the GPU's global timer inside the
//!   kernel; µs per put, median of [`REPS`] launches after one untimed.
//!
//! Then, both PEs' kernels launched at once and both streams waited for: the
//! `put_signal` + `wait_until` round trip of 8 bytes between the PEs (one thread each)
//! and `barrier_all` (one CTA each), µs per round trip and per barrier on the global
//! timer, the larger of the PEs' spans (each kernel's first round is untimed, which also
//! waits out the skew between the two launches).
//!
//! The smallest and the largest size's put and get are checked: the destination, zeroed
//! before they are timed, holds the source's bytes afterwards, and the bytes just past it
//! are still zero. Anything else wrong (a wait that ended early, a launch that failed) is
//! an error too.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg, result};
use serde::Serialize;

use host_shim::module::Module;
use host_shim::shmem::Heap;
use host_shim::work::DeviceAlloc;
use host_shim::{Error, Result, device};

use crate::bench::{median, rounded, time_ms};
use crate::cli::ShmemArgs;

/// Each size is the one before times this.
const SIZE_FACTOR: u64 = 4;
/// The largest message the one-thread put latency is measured for (a thread moves 16
/// bytes per load latency: larger ones take milliseconds per put).
pub const THREAD_MAX_BYTES: u64 = 64 << 10;
/// The largest message the one-warp put latency is measured for.
pub const WARP_MAX_BYTES: u64 = 1 << 20;
/// Timed launches per measurement (the median is reported).
pub const REPS: usize = 5;
/// Bytes past every destination that must stay zero (a put or get that overruns fails
/// the check).
const GUARD_BYTES: u64 = 256;
/// The size of the round trip's message: one `u64`.
const SIGNAL_BYTES: u64 = 8;
/// Threads of the barrier kernel's one CTA per PE.
const BARRIER_THREADS: u32 = 32;
/// The largest `--threads` (a CTA's limit).
const MAX_THREADS: u32 = 1024;
/// Each wait of the device code ends after this (then the kernel reports it).
const SPIN_BUDGET: Duration = Duration::from_secs(10);
/// The limit on any wait for a stream.
const TIMEOUT: Duration = Duration::from_secs(60);

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct ShmemBench {
    /// The devices of PE 0 and PE 1.
    pub devices: [usize; 2],
    /// The smallest message, in bytes.
    pub min_bytes: u64,
    /// The largest message, in bytes.
    pub max_bytes: u64,
    /// Operations per timed launch.
    pub iters: u32,
    /// CTAs of the bandwidth kernels (`None`: PE 0's device's SM count).
    pub blocks: Option<u32>,
    /// Threads per CTA of the bandwidth kernels and of the CTA put latency.
    pub threads: u32,
}

impl ShmemBench {
    /// The configuration of `args`, refused where it cannot run.
    pub fn from_args(args: &ShmemArgs) -> Result<Self> {
        let &[a, b] = args.devices.as_slice() else {
            return Err(Error::InvalidArgument(format!("bench shmem runs two PEs: --devices names {} device(s), not 2", args.devices.len())));
        };
        let cfg = Self { devices: [a, b], min_bytes: args.min_bytes as u64, max_bytes: args.max_bytes as u64, iters: args.iters, blocks: args.blocks, threads: args.threads };
        check(&cfg)?;
        Ok(cfg)
    }
}

/// Refuses a configuration that cannot run.
fn check(cfg: &ShmemBench) -> Result<()> {
    let threads_fit = cfg.threads > 0 && cfg.threads <= MAX_THREADS && cfg.threads.is_multiple_of(32);
    if cfg.min_bytes == 0 || cfg.min_bytes > cfg.max_bytes || cfg.iters == 0 || cfg.blocks == Some(0) || !threads_fit {
        return Err(Error::InvalidArgument(format!(
            "bench shmem needs 1 <= --min-bytes <= --max-bytes, at least one iteration and one block, and a multiple of 32 threads up to {MAX_THREADS} (got {} to {} bytes, {} iterations, {:?} blocks, {} threads)",
            cfg.min_bytes, cfg.max_bytes, cfg.iters, cfg.blocks, cfg.threads
        )));
    }
    heap_bytes(cfg.max_bytes).map(drop)
}

/// The message sizes: `min` times powers of [`SIZE_FACTOR`] up to `max`, then `max` if
/// that was not one of them.
pub fn sizes(min: u64, max: u64) -> Vec<u64> {
    let mut sizes: Vec<u64> = std::iter::successors(Some(min), |&s| s.checked_mul(SIZE_FACTOR)).take_while(|&s| s <= max).collect();
    if sizes.last() != Some(&max) {
        sizes.push(max);
    }
    sizes
}

/// Bytes of each PE's heap for messages of up to `max_bytes`: the source, two
/// destinations with their guards, the round trip's words, and room for alignment and the
/// heap's reserved head.
fn heap_bytes(max_bytes: u64) -> Result<u64> {
    max_bytes
        .checked_add(GUARD_BYTES)
        .and_then(|d| d.checked_mul(3))
        .and_then(|b| b.checked_add(1 << 20))
        .ok_or_else(|| Error::InvalidArgument(format!("--max-bytes {max_bytes}: the heap would not fit in 64 bits")))
}

/// One message size's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeRow {
    /// The message, in bytes.
    pub bytes: u64,
    /// µs per put and quiet by one thread (`None` above [`THREAD_MAX_BYTES`]).
    pub put_thread_us: Option<f64>,
    /// µs per put and quiet by one warp (`None` above [`WARP_MAX_BYTES`]).
    pub put_warp_us: Option<f64>,
    /// µs per put and quiet by one CTA.
    pub put_block_us: f64,
    /// GB/s of the CTA grid's puts.
    pub put_gbps: f64,
    /// GB/s of the CTA grid's gets.
    pub get_gbps: f64,
    /// GB/s of `cuMemcpyPeerAsync` of the same bytes, PE 0's source to PE 1's destination.
    pub copy_engine_gbps: f64,
}

impl SizeRow {
    /// Put bandwidth over the copy engine's.
    pub fn put_vs_copy_engine(&self) -> f64 {
        self.put_gbps / self.copy_engine_gbps
    }
}

/// What [`shmem`] measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ShmemReport {
    /// One row per size, smallest first.
    pub rows: Vec<SizeRow>,
    /// µs per `put_signal` + `wait_until` round trip of 8 bytes.
    pub signal_roundtrip_us: f64,
    /// µs per `barrier_all` of both PEs.
    pub barrier_us: f64,
    /// CTAs of the bandwidth kernels.
    pub blocks: u32,
    /// Threads per CTA of the bandwidth kernels and of the CTA put latency.
    pub threads: u32,
    /// Operations per timed launch.
    pub iters: u32,
}

impl ShmemReport {
    /// The row of messages of `bytes`, if measured.
    pub fn row(&self, bytes: u64) -> Option<&SizeRow> {
        self.rows.iter().find(|r| r.bytes == bytes)
    }
}

/// `ferroccl bench shmem`: runs the benchmark, prints its table, writes its JSON.
pub fn run(args: &ShmemArgs) -> Result<ExitCode> {
    let cfg = ShmemBench::from_args(args)?;
    let devices = device::list()?;
    let mut names = Vec::new();
    for ordinal in cfg.devices {
        let info = devices.get(ordinal).ok_or(Error::NoSuchDevice { ordinal, count: devices.len() })?;
        names.push(format!("[{ordinal}] {}", info.name));
    }
    let device_line = names.join(", ");
    println!("symmetric heap benchmark: PE 0 on {}, PE 1 on {}; {} operations per launch, median of {REPS} launches", names[0], names[1], cfg.iters);
    let r = shmem(&cfg)?;
    print!("{}", table(&r));
    if let Some(path) = &args.json {
        let command = format!("ferroccl {}", std::env::args().skip(1).collect::<Vec<_>>().join(" "));
        crate::write_json(path, json(&r, &command, &device_line, &crate::utc_now()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs every measurement on `cfg.devices` (see the module's documentation).
pub fn shmem(cfg: &ShmemBench) -> Result<ShmemReport> {
    check(cfg)?;
    let mut pes = Vec::new();
    for ordinal in cfg.devices {
        let ctx = device::context(ordinal)?;
        let module = Module::load(&ctx)?;
        let stream = ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
        pes.push((stream, module));
    }
    if cfg.devices[0] != cfg.devices[1] {
        // Refused without a peer path. The heap's kernels need only its own mappings; the
        // contexts' peer access gives the copy engine its direct path (as `Comm` has it).
        let (a, b) = (pes[0].0.context(), pes[1].0.context());
        device::enable_peer_access(a, b)?;
        device::enable_peer_access(b, a)?;
    }
    let streams: Vec<Arc<CudaStream>> = pes.iter().map(|(s, _)| s.clone()).collect();
    let mut heap = Heap::new(&streams, heap_bytes(cfg.max_bytes)?, SPIN_BUDGET)?;
    let pes = pes.into_iter().enumerate().map(|(pe, (stream, module))| Pe::new(stream, &module, heap.handle(pe))).collect::<Result<Vec<_>>>()?;
    let blocks = match cfg.blocks {
        Some(blocks) => blocks,
        None => device::sm_count(pes[0].stream.context())?,
    };
    let bufs = Buffers::new(&mut heap, &pes, cfg.max_bytes)?;
    let mut bench = Bench { pes, bufs, blocks, threads: cfg.threads, iters: cfg.iters, last_round: 0 };
    // Every measurement waits for the streams it used: after it, no kernel uses the buffers.
    let report = bench.measure(cfg)?;
    bench.bufs.free(&mut heap)?;
    Ok(report)
}

/// One PE: its stream, its kernels, its handle, its words for a kernel's time and status.
struct Pe {
    stream: Arc<CudaStream>,
    handle: u64,
    put_bw: CudaFunction,
    get_bw: CudaFunction,
    put_latency_thread: CudaFunction,
    put_latency_warp: CudaFunction,
    put_latency_block: CudaFunction,
    signal_pingpong: CudaFunction,
    barrier: CudaFunction,
    /// One `u64`: the span a self-timed kernel measured, in ns.
    elapsed_ns: DeviceAlloc,
    /// One `u32`: 1 once a wait of a kernel ended early.
    status: DeviceAlloc,
}

impl Pe {
    fn new(stream: Arc<CudaStream>, module: &Module, handle: u64) -> Result<Self> {
        let ctx = stream.context().clone();
        Ok(Self {
            put_bw: module.kernel("ferroccl_shmem_bench_put_bw")?,
            get_bw: module.kernel("ferroccl_shmem_bench_get_bw")?,
            put_latency_thread: module.kernel("ferroccl_shmem_bench_put_latency_thread")?,
            put_latency_warp: module.kernel("ferroccl_shmem_bench_put_latency_warp")?,
            put_latency_block: module.kernel("ferroccl_shmem_bench_put_latency_block")?,
            signal_pingpong: module.kernel("ferroccl_shmem_bench_signal_pingpong")?,
            barrier: module.kernel("ferroccl_shmem_bench_barrier")?,
            elapsed_ns: DeviceAlloc::zeroed(&ctx, 8)?,
            status: DeviceAlloc::zeroed(&ctx, 4)?,
            stream,
            handle,
        })
    }

    /// Makes this PE's context the thread's current one (for the driver's synchronous
    /// copies).
    fn bind(&self) -> Result<()> {
        self.stream.context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))
    }

    /// Waits for this PE's stream, then fails if a wait of its kernels ended early;
    /// returns the span its last self-timed kernel wrote, in ns.
    fn finish(&self, what: &str) -> Result<u64> {
        host_shim::stream::wait(&self.stream, TIMEOUT, what)?;
        self.bind()?;
        let (mut status, mut elapsed) = ([0u32], [0u64]);
        // SAFETY: this PE's own words, written only by its kernels, which have finished.
        unsafe {
            result::memcpy_dtoh_sync(&mut status, self.status.ptr()).map_err(Error::cuda("cuMemcpyDtoH"))?;
            result::memcpy_dtoh_sync(&mut elapsed, self.elapsed_ns.ptr()).map_err(Error::cuda("cuMemcpyDtoH"))?;
        }
        if status[0] != 0 {
            log::error!("bench shmem: {what}: a wait on device {} ended early (abort flag or spin budget)", self.stream.context().ordinal());
            return Err(Error::InvalidState("bench shmem: a wait of the device code ended early"));
        }
        Ok(elapsed[0])
    }
}

/// The symmetric buffers, each PE's address of each (PE order).
struct Buffers {
    /// The messages' source: [`source_bytes`] of its PE, `max_bytes` long.
    src: Vec<u64>,
    /// Where puts (and the copy engine) write: `max_bytes` and the guard.
    dst: Vec<u64>,
    /// Where gets write: `max_bytes` and the guard.
    got: Vec<u64>,
    /// The round trip's source, destination and signal: one `u64` each.
    ping_src: Vec<u64>,
    ping_dst: Vec<u64>,
    sig: Vec<u64>,
}

impl Buffers {
    /// Allocates every buffer on both PEs, fills each PE's `src` with its
    /// [`source_bytes`] and zeroes the signals, on the PE's stream, and waits for every
    /// PE's context (before any kernel can raise a signal).
    fn new(heap: &mut Heap, pes: &[Pe], max_bytes: u64) -> Result<Self> {
        let each = |bytes: u64| [bytes; 2];
        let bufs = Self {
            src: heap.malloc(&each(max_bytes))?,
            dst: heap.malloc(&each(max_bytes + GUARD_BYTES))?,
            got: heap.malloc(&each(max_bytes + GUARD_BYTES))?,
            ping_src: heap.malloc(&each(SIGNAL_BYTES))?,
            ping_dst: heap.malloc(&each(SIGNAL_BYTES))?,
            sig: heap.malloc(&each(8))?,
        };
        for (pe, owner) in pes.iter().enumerate() {
            let source = source_bytes(pe, max_bytes as usize);
            let stream = owner.stream.cu_stream();
            owner.bind()?;
            // SAFETY: this PE's symmetric buffers, of these sizes, not used by any kernel yet;
            // `source` lives until the stream has been waited for.
            unsafe {
                result::memcpy_htod_async(bufs.src[pe], &source, stream).map_err(Error::cuda("cuMemcpyHtoDAsync"))?;
                result::memcpy_htod_async(bufs.ping_src[pe], &source[..SIGNAL_BYTES as usize], stream).map_err(Error::cuda("cuMemcpyHtoDAsync"))?;
                result::memset_d8_async(bufs.sig[pe], 0, 8, stream).map_err(Error::cuda("cuMemsetD8Async"))?;
            }
            // Also the zeroing of the PE's status and span words (`DeviceAlloc::zeroed`: a
            // synchronous memset, which may finish late on the legacy stream).
            owner.stream.context().synchronize().map_err(Error::cuda("cuCtxSynchronize"))?;
        }
        Ok(bufs)
    }

    /// Returns every buffer to the heap (no kernel may use them any more).
    fn free(self, heap: &mut Heap) -> Result<()> {
        for addrs in [self.src, self.dst, self.got, self.ping_src, self.ping_dst, self.sig] {
            heap.free(&addrs)?;
        }
        Ok(())
    }
}

/// The first `bytes` of PE `pe`'s source: a period of 251 (prime, so no power-of-2 slice
/// repeats another), offset by PE.
fn source_bytes(pe: usize, bytes: usize) -> Vec<u8> {
    (0..bytes).map(|i| ((i % 251) as u8).wrapping_add(101 * pe as u8)).collect()
}

/// The first difference between `got` and `want` followed by zeroes (the guard), as
/// (offset, byte found, byte expected).
fn first_difference(got: &[u8], want: &[u8]) -> Option<(usize, u8, u8)> {
    let expected = want.iter().copied().chain(std::iter::repeat(0));
    got.iter().copied().zip(expected).enumerate().find(|(_, (g, w))| g != w).map(|(at, (g, w))| (at, g, w))
}

/// The run: both PEs, the buffers, the shape of the bandwidth kernels.
struct Bench {
    pes: Vec<Pe>,
    bufs: Buffers,
    blocks: u32,
    threads: u32,
    iters: u32,
    /// The last round of the round trips so far (the signals are at it on both PEs).
    last_round: u64,
}

/// Which way a bandwidth kernel moves the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// PE 0's source into PE 1's destination.
    Put,
    /// PE 1's source into PE 0's destination.
    Get,
}

/// Which group a put latency kernel puts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Putter {
    Thread,
    Warp,
    Block,
}

impl Bench {
    /// Every row, then the round trip and the barrier.
    fn measure(&mut self, cfg: &ShmemBench) -> Result<ShmemReport> {
        let sizes = sizes(cfg.min_bytes, cfg.max_bytes);
        let checked = [cfg.min_bytes, cfg.max_bytes];
        let mut rows = Vec::new();
        for &bytes in &sizes {
            let check = checked.contains(&bytes);
            let put_gbps = self.bandwidth(Direction::Put, bytes, check)?;
            let get_gbps = self.bandwidth(Direction::Get, bytes, check)?;
            rows.push(SizeRow {
                bytes,
                put_thread_us: (bytes <= THREAD_MAX_BYTES).then(|| self.put_latency(Putter::Thread, bytes)).transpose()?,
                put_warp_us: (bytes <= WARP_MAX_BYTES).then(|| self.put_latency(Putter::Warp, bytes)).transpose()?,
                put_block_us: self.put_latency(Putter::Block, bytes)?,
                put_gbps,
                get_gbps,
                copy_engine_gbps: self.copy_engine(bytes)?,
            });
        }
        Ok(ShmemReport { rows, signal_roundtrip_us: self.signal_roundtrip()?, barrier_us: self.barrier()?, blocks: self.blocks, threads: self.threads, iters: self.iters })
    }

    /// GB/s of the CTA grid's puts or gets of `bytes`; when `check`, the destination is
    /// zeroed first and checked after.
    fn bandwidth(&self, direction: Direction, bytes: u64, check: bool) -> Result<f64> {
        let pe = &self.pes[0];
        // The kernel, the PEs the bytes go from and to, and the destination buffer (by PE);
        // the kernel takes PE 0's symmetric addresses.
        let (kernel, from, to, dsts) = match direction {
            Direction::Put => (&pe.put_bw, 0, 1, &self.bufs.dst),
            Direction::Get => (&pe.get_bw, 1, 0, &self.bufs.got),
        };
        if check {
            self.zero(to, dsts[to], bytes + GUARD_BYTES)?;
        }
        let (dst, src) = (dsts[0], self.bufs.src[0]);
        let launch = LaunchConfig { grid_dim: (self.blocks, 1, 1), block_dim: (self.threads, 1, 1), shared_mem_bytes: 0 };
        let ms = median(time_ms(&pe.stream, REPS, || {
            // SAFETY: the kernel's contract: PE 0's handle; `dst` and `src` are symmetric
            // buffers of at least `bytes` (allocations are 256-byte aligned), disjoint; PE 1's
            // heap is mapped on PE 0's device (`Heap::new`, peer access checked); PE 1 runs
            // nothing meanwhile; CTAs of a multiple of 32 threads.
            unsafe { pe.stream.launch_builder(kernel).arg(&pe.handle).arg(&dst).arg(&src).arg(&bytes).arg(&self.iters).arg(&1u32).launch(launch) }
                .map(drop)
                .map_err(Error::cuda("cuLaunchKernel"))
        })?);
        if check {
            self.check_copy(direction, from, to, dsts[to], bytes)?;
        }
        Ok(bytes as f64 * f64::from(self.iters) / ms / 1e6)
    }

    /// Zeroes `bytes` of PE `pe`'s buffer at `addr` on its stream and waits for it (a
    /// synchronous `cuMemsetD8` may return before it is done, on the legacy stream, which
    /// the PEs' streams do not wait for).
    fn zero(&self, pe: usize, addr: u64, bytes: u64) -> Result<()> {
        let owner = &self.pes[pe];
        owner.bind()?;
        // SAFETY: PE `pe`'s symmetric buffer of at least `bytes`; no kernel runs (every
        // measurement waits for its streams).
        unsafe { result::memset_d8_async(addr, 0, bytes as usize, owner.stream.cu_stream()) }.map_err(Error::cuda("cuMemsetD8Async"))?;
        host_shim::stream::wait(&owner.stream, TIMEOUT, "bench shmem's destination zeroed")
    }

    /// Checks that PE `to`'s buffer at `dst` holds PE `from`'s source bytes, `bytes` of
    /// them, and zeroes in the guard after them.
    fn check_copy(&self, direction: Direction, from: usize, to: usize, dst: u64, bytes: u64) -> Result<()> {
        let mut got = vec![0u8; (bytes + GUARD_BYTES) as usize];
        self.pes[to].bind()?;
        // SAFETY: PE `to`'s buffer of `bytes` and the guard, written by kernels that have
        // finished (`time_ms` waited for PE 0's stream).
        unsafe { result::memcpy_dtoh_sync(&mut got, dst) }.map_err(Error::cuda("cuMemcpyDtoH"))?;
        if let Some((at, found, expected)) = first_difference(&got, &source_bytes(from, bytes as usize)) {
            log::error!("bench shmem: {direction:?} of {bytes} bytes from PE {from} to PE {to}: byte {at} is {found}, not {expected}");
            return Err(Error::InvalidState("bench shmem: a put or get delivered wrong data"));
        }
        Ok(())
    }

    /// µs per put and quiet of `bytes` by `putter`, PE 0 to PE 1.
    fn put_latency(&self, putter: Putter, bytes: u64) -> Result<f64> {
        let pe = &self.pes[0];
        let (kernel, threads) = match putter {
            Putter::Thread => (&pe.put_latency_thread, 1),
            Putter::Warp => (&pe.put_latency_warp, 32),
            Putter::Block => (&pe.put_latency_block, self.threads),
        };
        let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        let (dst, src, elapsed) = (self.bufs.dst[0], self.bufs.src[0], pe.elapsed_ns.ptr());
        median_span_us(&self.pes, self.iters, &[0], "a put latency launch", || {
            // SAFETY: the kernel's contract: PE 0's handle, disjoint symmetric buffers of at least
            // `bytes`, PE 1's heap mapped on PE 0's device, PE 1 idle, PE 0's `u64` for the span;
            // one CTA of one thread, one warp, or whole warps, as its name says.
            unsafe { pe.stream.launch_builder(kernel).arg(&pe.handle).arg(&dst).arg(&src).arg(&bytes).arg(&self.iters).arg(&1u32).arg(&elapsed).launch(one) }
                .map(drop)
                .map_err(Error::cuda("cuLaunchKernel"))
        })
    }

    /// GB/s of `cuMemcpyPeerAsync` of `bytes`, PE 0's source to PE 1's destination, on PE
    /// 0's stream.
    fn copy_engine(&self, bytes: u64) -> Result<f64> {
        let (pe, peer) = (&self.pes[0], &self.pes[1]);
        let (dst_ctx, src_ctx) = (peer.stream.context().cu_ctx(), pe.stream.context().cu_ctx());
        let (dst, src) = (self.bufs.dst[1], self.bufs.src[0]);
        let ms = median(time_ms(&pe.stream, REPS, || {
            for _ in 0..self.iters {
                // SAFETY: PE 1's destination and PE 0's source hold at least `bytes` each, in their
                // contexts' devices; no kernel touches them meanwhile.
                unsafe { result::memcpy_peer_async(dst_ctx, dst, src_ctx, src, bytes as usize, pe.stream.cu_stream()) }.map_err(Error::cuda("cuMemcpyPeerAsync"))?;
            }
            Ok(())
        })?);
        Ok(bytes as f64 * f64::from(self.iters) / ms / 1e6)
    }

    /// µs per `put_signal` + `wait_until` round trip between the PEs.
    fn signal_roundtrip(&mut self) -> Result<f64> {
        let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
        let (bufs, iters, rounds) = (&self.bufs, self.iters, u64::from(self.iters) + 1);
        let last_round = &mut self.last_round;
        let pes = &self.pes;
        median_span_us(pes, iters, &[0, 1], "a put_signal round trip launch", || {
            for (i, pe) in pes.iter().enumerate() {
                let (dst, src, sig, elapsed, status) = (bufs.ping_dst[i], bufs.ping_src[i], bufs.sig[i], pe.elapsed_ns.ptr(), pe.status.ptr());
                // SAFETY: the kernel's contract: each PE's handle, its distinct symmetric words,
                // the signals at `last_round` on both PEs (every launch raises them to its last
                // round, which the next launch starts after), each heap mapped on the other's
                // device, each PE's own span and status words; both PEs launch it now with the
                // same rounds, one thread each.
                unsafe {
                    pe.stream
                        .launch_builder(&pe.signal_pingpong)
                        .arg(&pe.handle)
                        .arg(&dst)
                        .arg(&src)
                        .arg(&sig)
                        .arg(&*last_round)
                        .arg(&iters)
                        .arg(&elapsed)
                        .arg(&status)
                        .launch(one)
                }
                .map_err(Error::cuda("cuLaunchKernel"))?;
            }
            *last_round += rounds;
            Ok(())
        })
    }

    /// µs per `barrier_all` of both PEs.
    fn barrier(&self) -> Result<f64> {
        let cta = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (BARRIER_THREADS, 1, 1), shared_mem_bytes: 0 };
        median_span_us(&self.pes, self.iters, &[0, 1], "a barrier_all launch", || {
            for pe in &self.pes {
                let (elapsed, status) = (pe.elapsed_ns.ptr(), pe.status.ptr());
                // SAFETY: the kernel's contract: each PE's handle and its own span and status
                // words; both PEs launch it now with the same iterations, as their next barriers
                // (nothing else here uses the heap's barriers), one CTA of a whole warp each.
                unsafe { pe.stream.launch_builder(&pe.barrier).arg(&pe.handle).arg(&self.iters).arg(&elapsed).arg(&status).launch(cta) }
                    .map_err(Error::cuda("cuLaunchKernel"))?;
            }
            Ok(())
        })
    }
}

/// µs per operation of a self-timed kernel that `launch` launches on the PEs `timed`,
/// `iters` operations each: one untimed launch, then [`REPS`] timed ones, each waited for
/// on every PE of `timed`; a launch's span is the largest of theirs; the median.
fn median_span_us(pes: &[Pe], iters: u32, timed: &[usize], what: &str, mut launch: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut spans = Vec::with_capacity(REPS);
    for rep in 0..=REPS {
        launch()?;
        let mut span = 0;
        for &pe in timed {
            span = span.max(pes[pe].finish(what)?);
        }
        if rep > 0 {
            spans.push(span as f64);
        }
    }
    Ok(median(spans) / 1e3 / f64::from(iters))
}

/// The report as a table: one line per size, then the round trip and the barrier.
pub fn table(r: &ShmemReport) -> String {
    let us = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    let mut out = format!(
        "{:>10} {:>13} {:>11} {:>12} {:>9} {:>9} {:>16} {:>9}\n",
        "bytes", "put_thread_us", "put_warp_us", "put_block_us", "put_GB/s", "get_GB/s", "copy_engine_GB/s", "put_vs_ce"
    );
    for row in &r.rows {
        out += &format!(
            "{:>10} {:>13} {:>11} {:>12.2} {:>9.2} {:>9.2} {:>16.2} {:>9.3}\n",
            row.bytes,
            us(row.put_thread_us),
            us(row.put_warp_us),
            row.put_block_us,
            row.put_gbps,
            row.get_gbps,
            row.copy_engine_gbps,
            row.put_vs_copy_engine()
        );
    }
    out += &format!("(bandwidth: a grid of {} CTAs x {} threads; {} operations per launch)\n", r.blocks, r.threads, r.iters);
    out += &format!("put_signal + wait_until round trip, {SIGNAL_BYTES} B, one thread per PE: {:.2} us\n", r.signal_roundtrip_us);
    out + &format!("barrier_all, one CTA per PE: {:.2} us\n", r.barrier_us)
}

/// The body of `ferroccl bench shmem --json`'s report: the run, the headline figures (those
/// at 64 MiB `null` when no row has 64 MiB), and every row. Numbers are rounded as the
/// table prints them, ratios to 4 decimals; one that is not finite is `null`.
pub fn json(r: &ShmemReport, command: &str, device: &str, date_utc: &str) -> String {
    let at_64m = r.row(64 << 20);
    let body = ShmemJson {
        command,
        device,
        date: date_utc,
        blocks: r.blocks,
        threads: r.threads,
        iters: r.iters,
        put_bw_gbps_64m: at_64m.map(|row| rounded(row.put_gbps, 2)),
        put_bw_vs_copy_engine_64m: at_64m.map(|row| rounded(row.put_vs_copy_engine(), 4)),
        get_bw_gbps_64m: at_64m.map(|row| rounded(row.get_gbps, 2)),
        signal_roundtrip_us: rounded(r.signal_roundtrip_us, 2),
        barrier_us: rounded(r.barrier_us, 2),
        rows: r
            .rows
            .iter()
            .map(|row| RowJson {
                bytes: row.bytes,
                put_thread_us: row.put_thread_us.map(|v| rounded(v, 2)),
                put_warp_us: row.put_warp_us.map(|v| rounded(v, 2)),
                put_block_us: rounded(row.put_block_us, 2),
                put_bw_gbps: rounded(row.put_gbps, 2),
                get_bw_gbps: rounded(row.get_gbps, 2),
                copy_engine_gbps: rounded(row.copy_engine_gbps, 2),
                put_bw_vs_copy_engine: rounded(row.put_vs_copy_engine(), 4),
            })
            .collect(),
    };
    serde_json::to_string_pretty(&body).expect("plain structs serialize") + "\n"
}

/// The body of [`json`].
#[derive(Serialize)]
struct ShmemJson<'a> {
    command: &'a str,
    device: &'a str,
    date: &'a str,
    blocks: u32,
    threads: u32,
    iters: u32,
    #[serde(rename = "put_bw_gbps_64M")]
    put_bw_gbps_64m: Option<f64>,
    #[serde(rename = "put_bw_vs_copy_engine_64M")]
    put_bw_vs_copy_engine_64m: Option<f64>,
    #[serde(rename = "get_bw_gbps_64M")]
    get_bw_gbps_64m: Option<f64>,
    signal_roundtrip_us: f64,
    barrier_us: f64,
    rows: Vec<RowJson>,
}

/// One [`SizeRow`] in [`json`]; a latency not measured is `null`.
#[derive(Serialize)]
struct RowJson {
    bytes: u64,
    put_thread_us: Option<f64>,
    put_warp_us: Option<f64>,
    put_block_us: f64,
    put_bw_gbps: f64,
    get_bw_gbps: f64,
    copy_engine_gbps: f64,
    put_bw_vs_copy_engine: f64,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn row(bytes: u64) -> SizeRow {
        SizeRow {
            bytes,
            put_thread_us: (bytes <= THREAD_MAX_BYTES).then_some(1.234),
            put_warp_us: (bytes <= WARP_MAX_BYTES).then_some(1.5),
            put_block_us: 2.0,
            put_gbps: 360.0,
            get_gbps: 300.125,
            copy_engine_gbps: 384.0,
        }
    }

    fn report(sizes: &[u64]) -> ShmemReport {
        ShmemReport { rows: sizes.iter().map(|&b| row(b)).collect(), signal_roundtrip_us: 3.256, barrier_us: 2.126, blocks: 132, threads: 1024, iters: 100 }
    }

    fn cfg() -> ShmemBench {
        ShmemBench { devices: [0, 1], min_bytes: 8, max_bytes: 64 << 20, iters: 100, blocks: None, threads: 1024 }
    }

    #[test]
    fn sizes_grow_by_four_and_end_at_the_largest() {
        assert_eq!(sizes(8, 8), [8]);
        assert_eq!(sizes(8, 512), [8, 32, 128, 512]);
        assert_eq!(sizes(8, 100), [8, 32, 100]);
        let all = sizes(8, 64 << 20);
        assert_eq!((all.len(), all[0], all[all.len() - 2], all[all.len() - 1]), (13, 8, 32 << 20, 64 << 20));
        assert_eq!(sizes(1 << 62, u64::MAX), [1 << 62, u64::MAX], "no overflow past the largest");
    }

    #[test]
    fn shmem_json_keeps_its_fields() {
        let r = report(&sizes(8, 64 << 20));
        let text = json(&r, "ferroccl bench shmem --json out/shmem.json", "[0] NVIDIA H100, [1] NVIDIA H100", "2026-01-01T00:00:00Z");
        let v: Value = serde_json::from_str(&text).unwrap();
        let mut expected = [
            "command",
            "device",
            "date",
            "blocks",
            "threads",
            "iters",
            "put_bw_gbps_64M",
            "put_bw_vs_copy_engine_64M",
            "get_bw_gbps_64M",
            "signal_roundtrip_us",
            "barrier_us",
            "rows",
        ];
        expected.sort_unstable();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, expected);
        assert_eq!((&v["command"], &v["date"]), (&json!("ferroccl bench shmem --json out/shmem.json"), &json!("2026-01-01T00:00:00Z")));
        assert_eq!(v["device"], "[0] NVIDIA H100, [1] NVIDIA H100");
        assert_eq!((&v["put_bw_gbps_64M"], &v["get_bw_gbps_64M"]), (&json!(360.0), &json!(300.13)));
        assert_eq!(v["put_bw_vs_copy_engine_64M"], json!(0.9375));
        assert_eq!((&v["signal_roundtrip_us"], &v["barrier_us"]), (&json!(3.26), &json!(2.13)));
        assert_eq!((&v["blocks"], &v["threads"], &v["iters"]), (&json!(132), &json!(1024), &json!(100)));
        let rows = v["rows"].as_array().unwrap();
        assert_eq!(rows.len(), r.rows.len());
        assert_eq!(
            rows[0],
            json!({"bytes": 8, "put_thread_us": 1.23, "put_warp_us": 1.5, "put_block_us": 2.0, "put_bw_gbps": 360.0, "get_bw_gbps": 300.13, "copy_engine_gbps": 384.0, "put_bw_vs_copy_engine": 0.9375})
        );
        let last = &rows[rows.len() - 1];
        assert_eq!(last["bytes"], json!(64 << 20));
        assert!(last["put_thread_us"].is_null() && last["put_warp_us"].is_null(), "not measured above their limits: {last}");
    }

    #[test]
    fn without_a_64m_row_the_headline_is_null() {
        let mut r = report(&[8, 32]);
        r.rows[1].copy_engine_gbps = 0.0;
        let v: Value = serde_json::from_str(&json(&r, "c", "d", "t")).unwrap();
        for key in ["put_bw_gbps_64M", "put_bw_vs_copy_engine_64M", "get_bw_gbps_64M"] {
            assert!(v[key].is_null(), "{key}: {}", v[key]);
        }
        assert!(v["rows"][1]["put_bw_vs_copy_engine"].is_null(), "a division by 0 is null");
    }

    #[test]
    fn the_table_has_a_line_per_size() {
        let r = report(&[8, 128 << 10, 64 << 20]);
        let t = table(&r);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 1 + r.rows.len() + 3, "{t}");
        assert!(lines[0].contains("put_thread_us") && lines[0].contains("put_vs_ce"), "{t}");
        assert!(lines[1].trim_start().starts_with("8 ") && lines[1].contains("1.23") && lines[1].contains("0.938"), "{t}");
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(&cells[..3], ["131072", "-", "1.50"], "above the thread limit, below the warp one: {t}");
        assert_eq!(&lines[3].split_whitespace().collect::<Vec<_>>()[..3], ["67108864", "-", "-"], "{t}");
        assert!(lines[4].contains("132 CTAs x 1024 threads"), "{t}");
        assert!(lines[5].contains("round trip") && lines[5].ends_with("3.26 us"), "{t}");
        assert!(lines[6].contains("barrier_all") && lines[6].ends_with("2.13 us"), "{t}");
    }

    #[test]
    fn bad_configurations_are_refused() {
        assert!(check(&cfg()).is_ok());
        for bad in [
            ShmemBench { min_bytes: 0, ..cfg() },
            ShmemBench { min_bytes: 1 << 20, max_bytes: 8, ..cfg() },
            ShmemBench { iters: 0, ..cfg() },
            ShmemBench { blocks: Some(0), ..cfg() },
            ShmemBench { threads: 0, ..cfg() },
            ShmemBench { threads: 100, ..cfg() },
            ShmemBench { threads: 2048, ..cfg() },
            ShmemBench { max_bytes: u64::MAX, ..cfg() },
        ] {
            assert!(matches!(check(&bad), Err(Error::InvalidArgument(_))), "{bad:?}");
        }
        let args = |devices: Vec<usize>| ShmemArgs { devices, min_bytes: 8, max_bytes: 64 << 20, iters: 100, blocks: None, threads: 1024, json: None };
        assert_eq!(ShmemBench::from_args(&args(vec![0, 1])).unwrap(), cfg());
        assert_eq!(ShmemBench::from_args(&args(vec![2, 0])).unwrap().devices, [2, 0]);
        for devices in [vec![0], vec![0, 1, 2], vec![]] {
            assert!(matches!(ShmemBench::from_args(&args(devices.clone())), Err(Error::InvalidArgument(_))), "{devices:?}");
        }
    }

    #[test]
    fn a_wrong_byte_or_an_overrun_is_found() {
        let want = source_bytes(0, 1000);
        assert_ne!(want, source_bytes(1, 1000), "the PEs' sources differ");
        let mut got = want.clone();
        got.extend([0; GUARD_BYTES as usize]);
        assert_eq!(first_difference(&got, &want), None);
        got[999] ^= 1;
        assert_eq!(first_difference(&got, &want), Some((999, want[999] ^ 1, want[999])));
        got[999] ^= 1;
        got[1000] = 7;
        assert_eq!(first_difference(&got, &want), Some((1000, 7, 0)), "past the message is the guard");
    }
}
