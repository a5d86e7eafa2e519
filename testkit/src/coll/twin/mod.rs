//! A communicator whose ranks run on the host twin: each rank's work loop is the real
//! device code on CPU threads (`device_rt::arch` host twin), wired with the same
//! [`Layout`] as GPU ranks, fed through host-shim's real [`Queue`], or through a twin of
//! each rank's stream: a host thread that launches the call kernel (`serve_call`, the call
//! kernel's body, with the rank's call channels) for each item, one after another.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use device_rt::arch::{self, GridDependency, WeakMemory};
use device_rt::conn::{ChannelStats, CommDevice};
use device_rt::work::{CallArgs, ITEM_OUTPUT_PEER_MAPPED, LOOP_SMEM_BYTES, LoopArgs, LoopState, QueueHeader, RingSlot, WorkItem, WorkKind, runs_without_loop, serve_call, serve_call_alone, work_loop};

mod process;

use super::group::{Buffer, RankGroup, SubmitPath, Submitted};
use process::Across;
use device_rt::algo::Staging;
use host_shim::comm::check_algorithm;
use host_shim::comm::wiring::{Layout, Shape};
use host_shim::queue::{Queue, Ticket};
use host_shim::{Error, Result};

/// 16-byte aligned host memory standing in for device memory.
struct Block(Vec<u128>);

impl Block {
    fn zeroed(bytes: usize) -> Self {
        Self(vec![0u128; bytes.div_ceil(16).max(1)])
    }

    fn addr(&self) -> u64 {
        self.0.as_ptr() as u64
    }
}

struct TwinRank {
    // The loop's memory: kept alive until its threads have ended (see `Drop`); the
    // header also as long as an abort handle holds a share of it.
    #[expect(clippy::redundant_allocation, reason = "the loop's raw header pointer is taken from the Box before it is shared: a stable, uniquely derived address")]
    _header: Arc<Box<QueueHeader>>,
    _ring: Vec<RingSlot>,
    state: Box<LoopState>,
    /// The rank's connection block (its own memory, or a shared mapping with the others'
    /// of a rank in processes): kept as long as the rank.
    _block: Box<dyn Send>,
    queue: Queue,
    /// The loop's launches, in order: the first, and one more each time the queue
    /// launched the loop again after it slept.
    launches: Launches,
    /// The rank's stream twin, when the group has one.
    stream: Option<TwinStream>,
    /// The address of the rank's `CommDevice`.
    comm: u64,
}

/// A rank's loop launches (threads), shared with the queue's relaunch hook.
type Launches = Arc<Mutex<Vec<JoinHandle<std::thread::Result<()>>>>>;

/// What every panic on a group's threads said (a device trap in a loop launch or a call
/// kernel, or the twin's own failure), in order, each naming where: recorded by the thread
/// that caught it, and reported as an error by the group's next call that waits, checks
/// or shuts down ([`reported`]).
type Traps = Arc<Mutex<Vec<String>>>;

/// Records `what` panicked with `payload`.
fn record_trap(traps: &Traps, what: &str, payload: &(dyn std::any::Any + Send)) {
    let message = format!("{what}: {}", crate::panic_message(payload));
    log::warn!("host twin: {message}");
    traps.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(message);
}

/// `Err` naming every panic recorded on a group's threads, if any.
fn reported(traps: &Traps) -> Result<()> {
    let traps = traps.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if traps.is_empty() {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!("host-twin device code trapped (panicked): {}", traps.join("; "))))
}

/// How long a wait of the group waits for a completion between two looks at the panics
/// recorded ([`Traps`]): a launch that trapped stops its loop without an error the queue
/// sees, so the wait would otherwise last its whole timeout.
const TRAP_LOOK: Duration = Duration::from_millis(50);

/// A rank's stream on the host twin: items sent to its thread run one after another,
/// each as a call kernel (`serve_call`) of one submitter CTA and one CTA per call channel.
struct TwinStream {
    /// Each item, and whether the host counted its submission (false: as if captured in a
    /// CUDA graph).
    items: Option<mpsc::Sender<(WorkItem, bool)>>,
    submitted: u64,
    /// Call kernels that have ended.
    done: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
    /// The group's record of panics (a call kernel's trap too).
    traps: Traps,
}

/// The ranks of a host-twin communicator (those of this process: all of them, or one of
/// a communicator across processes).
pub struct TwinGroup {
    ranks: Vec<TwinRank>,
    /// The rank of `ranks[0]`.
    first: u32,
    /// The other processes' ranks, for a rank of a communicator across processes.
    across: Option<Across>,
    buffers: Vec<Block>,
    shape: Shape,
    threads: u32,
    /// Each rank's `[ChannelStats; nchannels]`, when kept.
    stats: Option<Vec<u64>>,
    /// The weak-memory world the ranks run in, if any.
    memory: Option<WeakMemory>,
    /// In a weak-memory world, buffers released while the loops run whose stores may land
    /// as late as the launch's end (every buffer where the world weakens a site, else those
    /// a thread or CTA still holds stores for: a failure, see `release`), so they are freed
    /// only after it.
    retired: Vec<Block>,
    /// Each rank's resident channels (the rest of `shape.nchannels` are call channels).
    resident: u32,
    /// How [`RankGroup::submit`] hands items over.
    path: SubmitPath,
    /// Whether stream-ordered items are handed over as calls captured in a CUDA graph
    /// ([`TwinGroup::set_captured`]).
    captured: bool,
    /// Bit `r`: rank `r`'s outputs count as not mapped for its peers (the twin's memory
    /// is all mapped; see [`TwinGroup::set_unmapped_outputs`]).
    unmapped: u64,
    /// What every panic on the ranks' threads said.
    traps: Traps,
}

impl TwinGroup {
    /// Starts `shape.nranks` work loops of `shape.nchannels` channels of `threads`
    /// threads each (a multiple of 32, at least 128: point-to-point items split a CTA
    /// into two groups of at least 64), with spin budget `budget`.
    /// With `FERROCCL_TWIN_WEAK=<seed>` set, in a weak-memory world of that seed: any test
    /// of a twin communicator, the whole matrix included, runs in weak memory by hand (CI
    /// runs a reduced matrix that way, through [`TwinGroup::start_in`]).
    pub fn start(shape: Shape, threads: u32, budget: Duration) -> Result<Self> {
        Self::start_in(shape, threads, budget, None)
    }

    /// As [`TwinGroup::start`], with `resident` of the `shape.nchannels` channels in each
    /// rank's loop and the others call channels (none when `resident` is all of them:
    /// each call kernel then only submits to the mailbox), and a stream twin per rank,
    /// which [`RankGroup::submit`] uses (the stream-ordered path; [`TwinGroup::set_path`]
    /// picks the queue instead).
    pub fn start_with_call_channels(shape: Shape, resident: u32, threads: u32, budget: Duration, memory: Option<WeakMemory>) -> Result<Self> {
        Self::start_streamed(shape, resident, threads, budget, memory, Streams::Plain)
    }

    /// As [`TwinGroup::start_with_call_channels`], with call kernels that overlap the one
    /// before them as on a GPU that holds two call kernels per rank (`arch::launch_after`):
    /// each call kernel runs on threads of its own, the next one starts once every thread
    /// of it has passed its `after_previous_grid` (or ended), and its
    /// `grid_dependency_wait` waits for the one before.
    pub fn start_with_overlapping_call_kernels(shape: Shape, resident: u32, threads: u32, budget: Duration, memory: Option<WeakMemory>) -> Result<Self> {
        Self::start_streamed(shape, resident, threads, budget, memory, Streams::Overlapping)
    }

    /// As [`TwinGroup::start_with_call_channels`] with one resident channel per rank (the
    /// others call channels), whose loops sleep after `sleep_after` with nothing to do and
    /// are launched again by the next item (`device_rt::work`'s sleep handshake;
    /// host-shim's `Queue::wake`); `overlapping`: call kernels overlap as in
    /// [`TwinGroup::start_with_overlapping_call_kernels`].
    pub fn start_sleeping(shape: Shape, threads: u32, budget: Duration, sleep_after: Duration, overlapping: bool) -> Result<Self> {
        let streams = if overlapping { Streams::Overlapping } else { Streams::Plain };
        let loops = TwinLoops { resident: 1, threads, budget, sleep_after: Some(sleep_after) };
        Self::launch(shape, loops, None, None, streams)
    }

    /// The ranks with `resident` of their channels in the loop and stream twins as
    /// `streams` says.
    fn start_streamed(shape: Shape, resident: u32, threads: u32, budget: Duration, memory: Option<WeakMemory>, streams: Streams) -> Result<Self> {
        if resident == 0 || resident > shape.nchannels {
            return Err(Error::InvalidArgument(format!("{resident} resident channels of {}", shape.nchannels)));
        }
        Self::launch(shape, TwinLoops { resident, threads, budget, sleep_after: None }, memory, None, streams)
    }

    /// Whether rank `rank`'s loop has left to sleep.
    pub fn asleep(&self, rank: u32) -> bool {
        self.ranks[(rank - self.first) as usize].queue.asleep()
    }

    /// Pins rank `rank`'s loop awake for good, as a call kernel captured in a CUDA graph
    /// does (host-shim's `Queue::announce_submit`).
    pub fn pin_awake(&self, rank: u32) -> Result<()> {
        self.ranks[(rank - self.first) as usize].queue.announce_submit(true)
    }

    /// The last ring item every channel of rank `rank`'s loop has completed.
    pub fn completed(&self, rank: u32) -> u64 {
        self.ranks[(rank - self.first) as usize].queue.completed()
    }

    /// The highest ring item rank `rank`'s loop has found whole (taken, or about to be):
    /// a state that precedes the item's run.
    pub fn ring_items_found(&self, rank: u32) -> u64 {
        let state = &self.ranks[(rank - self.first) as usize].state;
        // SAFETY: an aligned word of the rank's live loop state, which the loop changes only
        // atomically (an atomic max).
        unsafe { AtomicU64::from_ptr((&raw const state.seen_seq).cast_mut()) }.load(Ordering::Relaxed)
    }

    /// How many times rank `rank`'s loop was launched (1 + the launches after it slept).
    pub fn launches(&self, rank: u32) -> usize {
        self.ranks[(rank - self.first) as usize].launches.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Hands the stream-ordered items that follow over as calls captured in a CUDA graph
    /// are (host-shim's `WorkLoop::enqueue_on_stream`): not counted for the loop's sleep
    /// handshake, and the loop pinned awake for good only by an item that needs it
    /// (`device_rt::work::runs_without_loop`); `false` goes back to counted calls.
    pub fn set_captured(&mut self, captured: bool) {
        self.captured = captured;
    }

    /// Makes the collectives of `ranks` say their outputs are not mapped for the peers
    /// (as host-shim's communicator says of memory other than `cuMemAlloc`'s): with direct
    /// connections, their previous ranks then send to them through the FIFO, and pushing
    /// two-shot peers through the staging. Every other rank's collectives say theirs are
    /// where the shape is direct (the twin's buffers are host memory every rank reaches),
    /// as the communicator's calls do only when direct.
    pub fn set_unmapped_outputs(&mut self, ranks: &[u32]) {
        self.unmapped = ranks.iter().fold(0, |m, &r| m | 1u64 << r);
    }

    /// `item` as rank `rank` hands it over: a collective says whether peers may write
    /// its output, as host-shim's communicator's calls do.
    fn as_handed_over(&self, rank: u32, item: WorkItem) -> WorkItem {
        let mapped = self.shape.direct && item.kind == WorkKind::Collective as u8 && self.unmapped & 1u64 << rank == 0;
        WorkItem { flags: (item.flags & !ITEM_OUTPUT_PEER_MAPPED) | if mapped { ITEM_OUTPUT_PEER_MAPPED } else { 0 }, ..item }
    }

    /// How [`RankGroup::submit`] hands items over (a group started with call channels only
    /// has streams).
    pub fn set_path(&mut self, path: SubmitPath) -> Result<()> {
        if path == SubmitPath::Typed {
            return Err(Error::InvalidState("the twin's ranks have no cudarc buffers for the typed calls (the typed path is on GPUs)"));
        }
        if path == SubmitPath::Stream && self.ranks.iter().any(|r| r.stream.is_none()) {
            return Err(Error::InvalidState("this twin group has no streams (start it with call channels)"));
        }
        self.path = path;
        Ok(())
    }

    /// As [`TwinGroup::start`], in `memory`'s weak-memory world if given (else as
    /// `FERROCCL_TWIN_WEAK` says; see `device_rt::arch::WeakMemory`): the ranks see memory
    /// ordered only as PTX promises, and the group tells the world what the host writes and
    /// when it has seen a completion.
    pub fn start_in(shape: Shape, threads: u32, budget: Duration, memory: Option<WeakMemory>) -> Result<Self> {
        Self::launch(shape, TwinLoops { resident: shape.nchannels, threads, budget, sleep_after: None }, memory, None, Streams::None)
    }

    /// As [`TwinGroup::start`], on a symmetric heap: `heap[r]` is the address of PE `r`'s
    /// `ShmemHandle` (a [`crate::shmem::TwinHeap`]'s `handle(r)`), rank `r` being PE `r`.
    pub fn start_on_heap(shape: Shape, threads: u32, budget: Duration, heap: &[u64]) -> Result<Self> {
        if heap.len() != shape.nranks as usize {
            return Err(Error::InvalidArgument(format!("{} heap handles for {} ranks", heap.len(), shape.nranks)));
        }
        Self::launch(shape, TwinLoops { resident: shape.nchannels, threads, budget, sleep_after: None }, None, Some(heap), Streams::None)
    }

    /// Starts the ranks, each with its stream twin as `streams` says (with one, the stream
    /// is the group's path).
    fn launch(shape: Shape, loops: TwinLoops, memory: Option<WeakMemory>, heap: Option<&[u64]>, streams: Streams) -> Result<Self> {
        let TwinLoops { resident, threads, .. } = loops;
        let memory = match (memory, std::env::var("FERROCCL_TWIN_WEAK")) {
            (Some(memory), _) => Some(memory),
            (None, Ok(seed)) => {
                let seed = seed.trim().parse().map_err(|_| Error::InvalidArgument(format!("FERROCCL_TWIN_WEAK={seed:?} is not a seed")))?;
                Some(WeakMemory::new(seed))
            }
            (None, Err(_)) => None,
        };
        check_threads(shape, threads)?;
        let layout = Layout::new(shape)?;
        let blocks: Vec<Block> = (0..shape.nranks).map(|_| Block::zeroed(layout.block_bytes as usize)).collect();
        let bases: Vec<u64> = blocks.iter().map(Block::addr).collect();
        let stats = shape.stats.then(|| bases.iter().map(|b| b + layout.stats).collect());
        let mut ranks = Vec::new();
        let traps = Traps::default();
        for (rank, block) in blocks.into_iter().enumerate() {
            let image = layout.image_on_heap(rank as u32, &bases, heap.map_or(0, |h| h[rank]))?;
            // SAFETY: the block holds `block_bytes >= meta_bytes` bytes.
            unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), block.addr() as *mut u8, image.len()) };
            let block = RankBlock { addr: block.addr(), memory: Box::new(block) };
            ranks.push(start_rank(rank as u32, block, shape.nchannels - resident, loops, memory.as_ref(), streams, &traps)?);
        }
        let path = if streams == Streams::None { SubmitPath::Direct } else { SubmitPath::Stream };
        Ok(Self { ranks, first: 0, across: None, buffers: Vec::new(), shape, threads, stats, memory, retired: Vec::new(), resident, path, captured: false, unmapped: 0, traps })
    }

    /// Sets every rank's abort flag; a rank of a communicator across processes also tells
    /// the other processes' ranks, which stop.
    pub fn abort_all(&self) {
        self.abort_here();
        if let Some(across) = &self.across {
            across.watch.abort(&format!("rank {} aborted its communicator", self.first));
        }
    }

    /// Sets the abort flag of every rank of this process.
    fn abort_here(&self) {
        self.ranks.iter().for_each(|r| r.queue.abort_handle().abort());
    }

    /// The loop error of rank `rank`, if it stopped with one; first, what a panic on the
    /// group's threads said, if one did.
    pub fn health(&self, rank: u32) -> Result<()> {
        reported(&self.traps)?;
        self.failure()?;
        self.ranks[(rank - self.first) as usize].queue.health()
    }

    /// Runs every rank's outstanding items, stops the loops and joins their threads; `Err`
    /// also where a thread of the group panicked (with what it said).
    pub fn shutdown(mut self, timeout: Duration) -> Result<()> {
        let mut first = Ok(());
        for r in &mut self.ranks {
            if let Some(stream) = &mut r.stream {
                first = first.and(stream.drain(timeout));
                stream.close();
            }
        }
        for r in &mut self.ranks {
            if let Err(e) = r.queue.shutdown(timeout) {
                r.queue.abort_handle().abort();
                first = first.and(Err(e));
            }
        }
        for r in &mut self.ranks {
            join(r, &self.traps, timeout)?;
        }
        reported(&self.traps).and(first)
    }
}

/// How a twin group's loops run: resident channels and their threads, spin budget, and
/// the sleep time of a loop of one resident channel (`None`: it never sleeps).
#[derive(Clone, Copy)]
struct TwinLoops {
    resident: u32,
    threads: u32,
    budget: Duration,
    sleep_after: Option<Duration>,
}

/// What a launch of a rank's loop on the twin takes: the addresses of its memory.
#[derive(Clone)]
struct TwinLaunch {
    header: usize,
    ring: usize,
    state: usize,
    comm: usize,
    budget_ns: u64,
    resident: u32,
    threads: u32,
    memory: Option<WeakMemory>,
    /// The rank, and the group's record of panics.
    rank: u32,
    traps: Traps,
}

/// Ring slots of a twin rank's queue.
const CAPACITY: u64 = 256;

impl TwinLaunch {
    /// Starts the loop on threads of its own; a trap (panic) of the launch is recorded in
    /// the group's [`Traps`] and returned.
    fn spawn(&self) -> Result<JoinHandle<std::thread::Result<()>>> {
        let launch = self.clone();
        std::thread::Builder::new()
            .name("twin-rank".into())
            .spawn(move || {
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    let kernel = || {
                        let args = LoopArgs {
                            header: launch.header as *mut QueueHeader,
                            ring: launch.ring as *const RingSlot,
                            capacity: CAPACITY,
                            state: launch.state as *mut LoopState,
                            spin_budget_ns: launch.budget_ns,
                            comm: launch.comm as *const CommDevice,
                        };
                        // SAFETY: the memory outlives the launch (joined before it is freed).
                        unsafe { work_loop(args) }
                    };
                    arch::launch_in(launch.memory.as_ref(), launch.resident, launch.threads, LOOP_SMEM_BYTES, kernel)
                }));
                if let Err(payload) = &outcome {
                    record_trap(&launch.traps, &format!("rank {}'s loop", launch.rank), payload.as_ref());
                }
                outcome
            })
            .map_err(|e| Error::InvalidArgument(format!("could not start a host-twin rank: {e}")))
    }
}

/// Starts rank `rank`'s loop as `loops` says on the communicator in `block`, and as
/// `streams` says its stream twin, whose call kernels carry `call_channels` call channels;
/// their threads record their panics in `traps`.
fn start_rank(rank: u32, block: RankBlock, call_channels: u32, loops: TwinLoops, memory: Option<&WeakMemory>, streams: Streams, traps: &Traps) -> Result<TwinRank> {
    let TwinLoops { resident, threads, budget, sleep_after } = loops;
    let mut header = Box::new(QueueHeader::new());
    let mut ring = vec![RingSlot::default(); CAPACITY as usize];
    let mut state = Box::new(LoopState::default());
    // The sleep time as a GPU loop of this shape gets it (one resident channel only).
    state.sleep_after_ns = host_shim::work::LoopConfig { channels: resident, sleep_after, ..Default::default() }.sleep_after_ns();
    let (h, r, s, c) = (&raw mut *header as usize, ring.as_mut_ptr() as usize, &raw mut *state as usize, block.addr as usize);
    let budget_ns = u64::try_from(budget.as_nanos()).unwrap_or(u64::MAX);
    if let Some(memory) = memory {
        memory.host_region(ring.as_ptr().cast(), ring.len() * size_of::<RingSlot>());
        memory.host_region((&raw const *header).cast(), size_of::<QueueHeader>());
    }
    let stream_memory = memory.cloned();
    let launch = TwinLaunch { header: h, ring: r, state: s, comm: c, budget_ns, resident, threads, memory: memory.cloned(), rank, traps: Arc::clone(traps) };
    let launches: Launches = Arc::new(Mutex::new(vec![launch.spawn()?]));
    let stream = if streams != Streams::None {
        let kernel = CallKernel { rank, header: h, state: s, comm: c, budget_ns, resident, call_channels, threads, overlap: streams == Streams::Overlapping };
        Some(start_stream(kernel, stream_memory, Arc::clone(traps))?)
    } else {
        None
    };
    let header_ptr = &raw mut *header;
    let header = Arc::new(header);
    // SAFETY: zeroed header (kept alive by its shares) and ring of `CAPACITY` slots
    // (kept alive by the rank).
    let mut queue = unsafe { Queue::new(header_ptr, ring.as_mut_ptr(), CAPACITY, resident as usize, header.clone())? };
    let relaunched = Arc::clone(&launches);
    // The queue launches the loop again only after it stored ASLEEP: its threads are
    // ending, and the new ones start from the state it kept.
    queue.set_relaunch(Box::new(move || {
        let handle = launch.spawn()?;
        relaunched.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(handle);
        Ok(())
    }));
    Ok(TwinRank { _header: header, _ring: ring, state, _block: block.memory, queue, launches, stream, comm: block.addr })
}

/// A rank's connection block: the memory that holds it (kept as long as the rank) and
/// the address of its `CommDevice`.
struct RankBlock {
    memory: Box<dyn Send>,
    addr: u64,
}

/// What a rank's call kernels are launched with (addresses of the rank's loop memory).
#[derive(Clone, Copy)]
struct CallKernel {
    rank: u32,
    header: usize,
    state: usize,
    comm: usize,
    budget_ns: u64,
    resident: u32,
    call_channels: u32,
    threads: u32,
    /// Each grid may start before the one before it has ended (`arch::launch_after`).
    overlap: bool,
}

/// Whether a twin group's ranks have stream twins, and how their call kernels are launched.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Streams {
    /// No stream: the direct path only.
    None,
    /// Each call kernel after the one before it has ended.
    Plain,
    /// Each call kernel as soon as the one before it lets it (`arch::launch_after`).
    Overlapping,
}

/// Starts a rank's stream twin: a thread that runs one call kernel per item it receives,
/// recording in `traps` what a call kernel's trap (or its thread's panic) said.
fn start_stream(kernel: CallKernel, memory: Option<WeakMemory>, traps: Traps) -> Result<TwinStream> {
    let (items, received) = mpsc::channel::<(WorkItem, bool)>();
    let done = Arc::new(AtomicU64::new(0));
    let ended = done.clone();
    let stream_traps = Arc::clone(&traps);
    let thread = std::thread::Builder::new()
        .name("twin-stream".into())
        .spawn(move || {
            // The grid launched last, while it may still run beside the next (overlap).
            let mut last: Option<(Arc<GridDependency>, JoinHandle<()>)> = None;
            // A call kernel's thread catches the kernel's trap itself (`run_call_kernel`): a
            // panic that ends the thread is the twin's own failure, recorded as a trap.
            let joined = |handle: JoinHandle<()>| {
                if let Err(payload) = handle.join() {
                    record_trap(&stream_traps, &format!("rank {}'s call kernel thread", kernel.rank), payload.as_ref());
                }
            };
            for (item, counted) in received {
                if !kernel.overlap {
                    run_call_kernel(kernel, item, counted, memory.as_ref(), None, &stream_traps);
                    ended.fetch_add(1, Ordering::AcqRel);
                    continue;
                }
                let own = GridDependency::new();
                let dependency = (last.as_ref().map(|(prior, _)| Arc::clone(prior)), Arc::clone(&own));
                let (memory, ended, traps) = (memory.clone(), Arc::clone(&ended), Arc::clone(&stream_traps));
                let spawned = std::thread::Builder::new().name("twin-call-kernel".into()).spawn(move || {
                    run_call_kernel(kernel, item, counted, memory.as_ref(), Some(dependency), &traps);
                    ended.fetch_add(1, Ordering::AcqRel);
                });
                let Ok(handle) = spawned else {
                    log::warn!("could not start a host-twin call kernel");
                    break;
                };
                // The next grid starts once this one lets it: by then the one before this
                // has ended (this one's threads waited for it).
                own.wait_released();
                if let Some((_, before)) = last.replace((own, handle)) {
                    joined(before);
                }
            }
            if let Some((_, handle)) = last {
                joined(handle);
            }
        })
        .map_err(|e| Error::InvalidArgument(format!("could not start a host-twin stream: {e}")))?;
    Ok(TwinStream { items: Some(items), submitted: 0, done, thread: Some(thread), traps })
}

/// Runs the call kernel of `item` as the host launches it: `serve_call` on `1 +
/// call_channels` CTAs, or without call channels `ferroccl_call_kernel_alone`'s body (one
/// CTA of 32 threads whose thread 0 submits); with `dependency`, overlapping the grid
/// before it (`arch::launch_after`). A trapped grid ends nothing else, as a failed launch
/// would; what it said goes into `traps`, and the stream's next wait fails with it, as a
/// GPU's stream reports a trap at its next synchronisation.
fn run_call_kernel(kernel: CallKernel, item: WorkItem, counted: bool, memory: Option<&WeakMemory>, dependency: Option<(Option<Arc<GridDependency>>, Arc<GridDependency>)>, traps: &Traps) {
    let grid = || {
        let p = CallArgs {
            state: kernel.state as *mut LoopState,
            header: kernel.header as *mut QueueHeader,
            comm: kernel.comm as *const CommDevice,
            item,
            spin_budget_ns: kernel.budget_ns,
            resident: kernel.resident,
            counted,
        };
        // SAFETY: the rank's loop memory outlives its stream (joined first, see `Drop`); one
        // call kernel at a time touches it (the stream's thread, and each overlapping grid
        // waits for the one before it).
        unsafe { serve_call(p) }
    };
    // SAFETY: as for `serve_call`.
    let alone = || unsafe { serve_call_alone(kernel.state as *mut LoopState, kernel.header as *mut QueueHeader, item, kernel.budget_ns) };
    let (ctas, threads, smem) = match kernel.call_channels {
        0 => (1, 32, 0),
        call_channels => (1 + call_channels, kernel.threads, LOOP_SMEM_BYTES),
    };
    let launched = catch_unwind(AssertUnwindSafe(|| {
        let body = || if kernel.call_channels == 0 { alone() } else { grid() };
        match dependency {
            Some((prior, own)) => arch::launch_after(memory, prior, own, ctas, threads, smem, body),
            None => arch::launch_in(memory, ctas, threads, smem, body),
        }
    }));
    if let Err(payload) = launched {
        record_trap(traps, &format!("rank {}'s call kernel", kernel.rank), payload.as_ref());
    }
}

impl TwinStream {
    fn submit(&mut self, item: WorkItem, counted: bool) -> Result<()> {
        let Some(items) = &self.items else { return Err(Error::LoopClosed) };
        items.send((item, counted)).map_err(|_| Error::LoopClosed)?;
        self.submitted += 1;
        Ok(())
    }

    /// Waits up to `timeout` until every item submitted so far has run; `Err` at once
    /// where a thread of the group has panicked.
    fn drain(&self, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        while self.done.load(Ordering::Acquire) < self.submitted {
            reported(&self.traps)?;
            if start.elapsed() > timeout {
                return Err(Error::Timeout { what: "a host-twin rank's stream-ordered items".into(), after: timeout });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        reported(&self.traps)
    }

    /// Ends the stream's thread (after its call kernels) and joins it; a panic of the
    /// thread itself (the twin's own failure) is recorded as a trap.
    fn close(&mut self) {
        self.items = None;
        if let Some(thread) = self.thread.take()
            && let Err(payload) = thread.join()
        {
            record_trap(&self.traps, "a stream thread", payload.as_ref());
        }
    }
}

/// Waits up to `timeout` for a rank's threads (every launch of its loop) to end; a panic
/// inside them (a device trap, recorded by the launch's thread) becomes an error that says
/// what every panic of the group said.
fn join(rank: &mut TwinRank, traps: &Traps, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    let threads = std::mem::take(&mut *rank.launches.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    for (k, thread) in threads.iter().enumerate() {
        while !thread.is_finished() {
            if start.elapsed() > timeout {
                rank.launches.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(threads.into_iter().skip(k));
                return Err(Error::Timeout { what: "a host-twin rank's loop".into(), after: timeout });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    for thread in threads {
        // A launch's trap comes back as `Ok(Err)`, already recorded by its thread; `Err` is
        // a panic outside the launch (the twin's own), recorded here.
        if let Err(payload) = thread.join() {
            record_trap(traps, "a loop thread", payload.as_ref());
        }
    }
    reported(traps)
}

impl Drop for TwinGroup {
    /// Aborts the loops and waits for their threads (they end within one spin check),
    /// so the memory they use outlives them. A panic on them was recorded by the thread
    /// that caught it and fails the group's next wait, health check or shutdown; one that
    /// only shows here (nothing waited after it) is logged: a drop must not panic.
    fn drop(&mut self) {
        // This process's ranks only: a rank dropped (after its shutdown, or with the
        // process's end) leaves; it does not abort the others.
        self.abort_here();
        for r in &mut self.ranks {
            if let Some(stream) = &mut r.stream {
                stream.close();
            }
            for thread in std::mem::take(&mut *r.launches.lock().unwrap_or_else(std::sync::PoisonError::into_inner)) {
                if let Err(payload) = thread.join() {
                    record_trap(&self.traps, "a loop thread", payload.as_ref());
                }
            }
        }
        if let Err(e) = reported(&self.traps) {
            log::error!("a host-twin group dropped after panics on its threads: {e}");
        }
    }
}

impl RankGroup for TwinGroup {
    fn nranks(&self) -> u32 {
        self.shape.nranks
    }

    fn local_ranks(&self) -> std::ops::Range<u32> {
        self.first..self.first + self.ranks.len() as u32
    }

    fn processes(&mut self) -> Option<&mut host_shim::bootstrap::Bootstrap> {
        self.across.as_mut().map(|a| &mut a.coordination)
    }

    fn shape(&self) -> Shape {
        self.shape
    }

    fn plan_channels(&self) -> u32 {
        let all = self.shape.collective_channels();
        if self.path == SubmitPath::Direct { self.resident.min(all) } else { all }
    }

    fn ll_channels(&self) -> u32 {
        if self.path == SubmitPath::Stream { self.shape.nchannels - self.resident } else { 0 }
    }

    fn describe(&self) -> String {
        format!(
            "host twin (CPU threads, no GPU): {} ranks × {} channels ({} resident) × {} threads, {} path, algorithm {}, staging {} KiB{}{}{}{}",
            self.shape.nranks,
            self.shape.nchannels,
            self.resident,
            self.threads,
            if self.path == SubmitPath::Stream { "stream" } else { "direct" },
            self.shape.algorithm.name(),
            self.shape.staging_bytes >> 10,
            if self.shape.direct { ", direct" } else { "" },
            if self.shape.paired { ", paired channels" } else { "" },
            if self.shape.stats { ", statistics kept" } else { "" },
            self.memory.as_ref().map(|m| format!(", {m}")).unwrap_or_default()
        )
    }

    fn alloc(&mut self, rank: u32, bytes: usize) -> Result<Buffer> {
        let block = Block::zeroed(bytes);
        let addr = block.addr();
        self.buffers.push(block);
        Ok(Buffer { rank, addr, bytes })
    }

    fn mark(&self) -> Vec<usize> {
        vec![self.buffers.len()]
    }

    fn release(&mut self, mark: Vec<usize>) {
        let released = self.buffers.drain(mark.first().copied().unwrap_or(0).min(self.buffers.len())..);
        let Some(memory) = &self.memory else { return };
        let mut late = 0;
        for block in released {
            let held = memory.forget(block.addr() as *const u8, block.0.len() * 16);
            if memory.weakens_any() || held > 0 {
                self.retired.push(block);
            }
            late += held;
        }
        // With every ordering kept, the completions the host waited for published every
        // store of their items: a store still held would land in memory already freed.
        assert!(
            late == 0 || memory.weakens_any(),
            "{memory}: a thread or CTA still holds stores to {late} words of buffers released after their items completed: a completion did not publish them"
        );
    }

    fn write(&mut self, buf: Buffer, data: &[u8]) -> Result<()> {
        if data.len() > buf.bytes {
            return Err(Error::InvalidArgument(format!("{} bytes written to a buffer of {}", data.len(), buf.bytes)));
        }
        match &self.memory {
            // SAFETY: `buf` is one of this group's live blocks, at least `data.len()` long,
            // which no loop writes while the host hands it over.
            Some(memory) => unsafe { memory.host_write(buf.addr as *mut u8, data) },
            // SAFETY: as above.
            None => unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), buf.addr as *mut u8, data.len()) },
        }
        Ok(())
    }

    fn read(&mut self, buf: Buffer, bytes: usize) -> Result<Vec<u8>> {
        let bytes = bytes.min(buf.bytes);
        let mut out = vec![0u8; bytes];
        // SAFETY: as `write`; the loops that wrote it completed their items (acquire).
        unsafe { std::ptr::copy_nonoverlapping(buf.addr as *const u8, out.as_mut_ptr(), bytes) };
        Ok(out)
    }

    fn enqueue(&mut self, rank: u32, item: WorkItem) -> Result<Ticket> {
        reported(&self.traps)?;
        item.validate_in_comm(rank, self.shape.nranks).map_err(|reason| Error::BadWorkItem { reason, seq: 0 })?;
        // The queue's items spread over the resident channels only.
        let staging = Staging { channels: self.resident.min(self.shape.staging().channels), ..self.shape.staging() };
        check_algorithm(&item, staging, self.shape.algorithm)?;
        let item = self.as_handed_over(rank, item);
        // SAFETY: the item's addresses lie in the rank's buffers (process memory the twin's
        // loops may use), not released before it has completed, as `RankGroup::enqueue`'s
        // contract has it.
        unsafe { self.ranks[(rank - self.first) as usize].queue.enqueue(item, Duration::from_secs(60)) }
    }

    fn submit(&mut self, rank: u32, item: WorkItem) -> Result<Submitted> {
        if self.path == SubmitPath::Direct {
            return Ok(Submitted::Queue(self.enqueue(rank, item)?));
        }
        item.validate().map_err(|reason| Error::BadWorkItem { reason, seq: 0 })?;
        item.validate_in_comm(rank, self.shape.nranks).map_err(|reason| Error::BadWorkItem { reason, seq: 0 })?;
        check_algorithm(&item, self.shape.staging(), self.shape.algorithm)?;
        let item = self.as_handed_over(rank, item);
        reported(&self.traps)?;
        let r = &mut self.ranks[(rank - self.first) as usize];
        r.queue.health()?;
        let stream = r.stream.as_mut().ok_or(Error::InvalidState("this twin group has no streams"))?;
        // As host-shim's `WorkLoop::enqueue_on_stream`: the submission is counted (and a
        // loop that slept launched again) before the call kernel is.
        if !self.captured {
            r.queue.announce_submit(false)?;
            stream.submit(item, true).inspect_err(|_| r.queue.retract_submit())?;
            return Ok(Submitted::Stream);
        }
        // As host-shim's `WorkLoop::enqueue_on_stream` for a call captured in a CUDA graph:
        // uncounted, and the loop pinned awake only where the call needs it.
        // SAFETY: the rank's `CommDevice`, live while the group is.
        if !unsafe { runs_without_loop(r.comm as *const CommDevice, self.resident, self.threads, &item) } {
            r.queue.announce_submit(true)?;
        }
        stream.submit(item, false)?;
        Ok(Submitted::Stream)
    }

    fn wait_submitted(&mut self, rank: u32, submitted: Submitted, timeout: Duration) -> Result<()> {
        match submitted {
            Submitted::Queue(ticket) => self.wait(rank, ticket, timeout),
            Submitted::Stream => {
                let r = &self.ranks[(rank - self.first) as usize];
                r.stream.as_ref().ok_or(Error::InvalidState("this twin group has no streams"))?.drain(timeout)?;
                if let Some(memory) = &self.memory {
                    memory.host_acquired();
                }
                r.queue.health()
            }
        }
    }

    /// Waits as the queue does, looking at the group's panics every [`TRAP_LOOK`]: a trap
    /// fails the wait at once, with what it said.
    fn wait(&mut self, rank: u32, ticket: Ticket, timeout: Duration) -> Result<()> {
        let start = Instant::now();
        loop {
            reported(&self.traps)?;
            let left = timeout.saturating_sub(start.elapsed());
            match self.ranks[(rank - self.first) as usize].queue.wait(ticket, left.min(TRAP_LOOK)) {
                Err(Error::Timeout { .. }) if left > TRAP_LOOK => {}
                Err(Error::Timeout { what, .. }) => return reported(&self.traps).and(Err(Error::Timeout { what, after: timeout })),
                outcome => break self.failure().and(outcome)?,
            }
        }
        if let Some(memory) = &self.memory {
            memory.host_acquired();
        }
        Ok(())
    }

    fn channel_stats(&mut self, rank: u32) -> Result<Option<Vec<ChannelStats>>> {
        let Some(stats) = &self.stats else { return Ok(None) };
        let channels = (0..self.shape.nchannels as usize).map(|c| {
            let base = (stats[(rank - self.first) as usize] as usize as *mut ChannelStats).wrapping_add(c);
            // SAFETY: the rank's block (alive as long as the rank) holds its counters; the
            // device threads update them with atomic adds, read here with atomic loads.
            let load = |field: *mut u64| unsafe { std::sync::atomic::AtomicU64::from_ptr(field) }.load(std::sync::atomic::Ordering::Relaxed);
            let mut s = ChannelStats::default();
            // SAFETY: `base` points at channel `c`'s counters in the rank's live block (above).
            unsafe {
                s.slices = load(&raw mut (*base).slices);
                s.bytes = load(&raw mut (*base).bytes);
                s.copy_ns = load(&raw mut (*base).copy_ns);
                s.wait_data_ns = load(&raw mut (*base).wait_data_ns);
                s.wait_credit_ns = load(&raw mut (*base).wait_credit_ns);
                s.busy_ns = load(&raw mut (*base).busy_ns);
                s.sm = load(&raw mut (*base).sm);
                s.mailbox_items = load(&raw mut (*base).mailbox_items);
                s.dispatch_ns = load(&raw mut (*base).dispatch_ns);
                s.exchange_ns = load(&raw mut (*base).exchange_ns);
                s.call_kernel_parts = load(&raw mut (*base).call_kernel_parts);
                s.call_kernel_ns = load(&raw mut (*base).call_kernel_ns);
                s.packet_items = load(&raw mut (*base).packet_items);
                for (a, count) in s.algorithm_items.iter_mut().enumerate() {
                    *count = load(&raw mut (*base).algorithm_items[a]);
                }
            }
            s
        });
        Ok(Some(channels.collect()))
    }
}

/// Refuses `threads` a channel that no communicator of `shape` runs with: a multiple of 32,
/// at least 128, and what a forced NVLS needs (as `Comm`'s configuration check on GPUs).
fn check_threads(shape: Shape, threads: u32) -> Result<()> {
    if threads < 128 || !threads.is_multiple_of(32) {
        return Err(Error::InvalidArgument(format!("a communicator's channels need a multiple of 32 threads, at least 128, not {threads}")));
    }
    host_shim::comm::check_nvls_threads(shape.algorithm, threads)
}
