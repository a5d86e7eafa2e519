//! A rank's persistent work loop on a GPU: launched once, fed through its queue (direct
//! host path: no kernel launch per operation) or through a call kernel on the user's
//! stream (stream-ordered path, capturable in a CUDA graph), whose grid also carries the
//! communicator's call channels.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaStream, LaunchConfig, PushKernelArg, result, sys};
use zerocopy::{FromBytes, IntoBytes};
use device_rt::abi::MAX_CHANNELS;
use device_rt::conn::CommDevice;
use device_rt::work::{ChannelPlacement, LOOP_SMEM_BYTES, LoopState, MAX_SMS, QueueHeader, RingSlot, WorkItem, WorkKind};

use crate::memory::HostMapped;
use crate::module::Module;
use crate::queue::{AbortHandle, Queue, Ticket};
use crate::{Error, Result};

/// How a work loop is launched.
#[derive(Clone, Copy, Debug)]
pub struct LoopConfig {
    /// Resident channels, 1..=64: one CTA each while the loop runs (see `sleep_after`;
    /// with a chosen placement the loop launches one CTA per SM and the others leave at
    /// once).
    pub channels: u32,
    /// Call channels of a communicator's loop: channels beyond the resident ones, which
    /// hold no SM while the loop idles; each stream-ordered call brings them up in its
    /// call kernel when its item spreads over them, and they leave with it (see
    /// `device_rt::work::serve_call`). `channels + call_channels` is at most 64; 0 for a
    /// loop without a communicator.
    pub call_channels: u32,
    /// Threads per channel, a multiple of 32 up to 512 (and up to what the kernel's
    /// register use allows on the device).
    pub threads: u32,
    /// Threads of each resident channel, a multiple of 32 up to `threads` (0: `threads`;
    /// call channels always run `threads`). Fewer threads hold fewer of an SM's registers
    /// for the loop's lifetime, so other kernels' CTAs can share the SM.
    pub resident_threads: u32,
    /// Ring slots.
    pub capacity: u32,
    /// How long any wait inside an item may spin before the loop stops with a timeout.
    pub spin_budget: Duration,
    /// On which SMs the channels run.
    pub placement: Placement,
    /// A loop of one resident channel: how long it polls with nothing to do before it
    /// leaves the GPU (holding no SM while idle); the next item launches it again (see
    /// [`WorkLoop::start`]). `None`, and any loop of more resident channels (which would
    /// have to leave together): it runs until shut down.
    pub sleep_after: Option<Duration>,
    /// A stream-ordered call that comes less than this long after the previous one on the
    /// loop returned takes the call-kernel route without asking whether its stream is idle
    /// (see [`WorkLoop::enqueue_on_stream`]); `Duration::ZERO`: every call of a one-channel
    /// loop on an idle stream takes the ring route. Default [`BURST_GAP`].
    pub burst_gap: Duration,
}

/// [`LoopConfig::burst_gap`]'s default. Calls back to back come a few tens of ns apart;
/// between a call and a `cuStreamSynchronize` or `cuStreamQuery` of its stream the gap is
/// that driver call, over a microsecond. A burst on the ring route costs each call a
/// `cuStreamQuery` plus the loop's answer, where call kernels pipeline on the stream (see
/// docs/tuning.md, `BURST_GAP`).
pub const BURST_GAP: Duration = Duration::from_nanos(500);

impl Default for LoopConfig {
    fn default() -> Self {
        Self {
            channels: 4,
            call_channels: 0,
            threads: 256,
            resident_threads: 0,
            capacity: 1024,
            spin_budget: Duration::from_secs(10),
            placement: Placement::Hardware,
            sleep_after: None,
            burst_gap: BURST_GAP,
        }
    }
}

/// On which SMs a loop's channels run. Under NVLink saturation a channel's share of the
/// bandwidth depends on its SM, and a collective lasts as long as its slowest channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// Wherever the hardware puts a grid of one CTA per channel.
    #[default]
    Hardware,
    /// One channel per TPC (the even SM of the pair), on consecutive TPCs from the second:
    /// channel `c` on SM `2 (c + 1)`. Placed this way, 24 channels copy at the same rate,
    /// where the hardware's placement leaves some at half the rate of the others (see
    /// docs/tuning.md, `Placement::Tpcs`).
    Tpcs,
    /// Channel `c` on SM `sms[c]`.
    Sms(SmList),
}

/// SM ids, one per channel, in channel order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmList {
    sms: [u16; MAX_CHANNELS],
    len: usize,
}

impl SmList {
    /// `sms`, when they make a placement: 1..=[`MAX_CHANNELS`] of them, each below
    /// [`MAX_SMS`], none twice.
    pub fn new(sms: &[u32]) -> Result<Self> {
        if ChannelPlacement::on_sms(sms, 0).is_none() {
            return Err(Error::InvalidArgument(format!(
                "SMs {sms:?}: a placement names 1..={MAX_CHANNELS} SMs, each below {MAX_SMS}, none twice"
            )));
        }
        let mut list = Self { sms: [0; MAX_CHANNELS], len: sms.len() };
        for (slot, &sm) in list.sms.iter_mut().zip(sms) {
            *slot = sm as u16;
        }
        Ok(list)
    }

    /// The SM ids, in channel order.
    pub fn sms(&self) -> impl Iterator<Item = u32> + '_ {
        self.sms[..self.len].iter().map(|&sm| u32::from(sm))
    }

    /// How many SMs (channels) the list names.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a list names at least one SM.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl std::str::FromStr for Placement {
    type Err = Error;

    /// `hardware`, `tpcs`, or SM ids separated by commas (one per channel).
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "hardware" => Ok(Self::Hardware),
            "tpcs" => Ok(Self::Tpcs),
            list => {
                let sms: Vec<u32> = list
                    .split(',')
                    .map(|sm| sm.trim().parse().map_err(|_| Error::InvalidArgument(format!("{sm:?} is not an SM id"))))
                    .collect::<Result<_>>()?;
                Ok(Self::Sms(SmList::new(&sms)?))
            }
        }
    }
}

/// How long a spare CTA waits for the chosen SMs' CTAs before taking a channel left free.
const PLACEMENT_GRACE_NS: u32 = 2_000_000;

impl Placement {
    /// The SMs of `channels` channels on a device of `device_sms` SMs (`None`: the
    /// hardware's choice).
    pub fn sms(&self, channels: u32, device_sms: u32) -> Result<Option<Vec<u32>>> {
        match self {
            Self::Hardware => Ok(None),
            Self::Tpcs => {
                if 2 * (channels + 1) > device_sms {
                    return Err(Error::DeviceLimit(format!("{channels} channels need {} SMs, one per TPC from SM 2; the device has {device_sms}", 2 * (channels + 1))));
                }
                Ok(Some((1..=channels).map(|c| 2 * c).collect()))
            }
            Self::Sms(list) => {
                if list.len() != channels as usize {
                    return Err(Error::InvalidArgument(format!("{} SMs named for {channels} channels", list.len())));
                }
                if let Some(sm) = list.sms().find(|&sm| sm >= device_sms) {
                    return Err(Error::DeviceLimit(format!("SM {sm} named; the device has {device_sms}")));
                }
                Ok(Some(list.sms().collect()))
            }
        }
    }
}

impl LoopConfig {
    /// Threads of each CTA of the loop kernel (its resident channels).
    pub fn loop_threads(&self) -> u32 {
        if self.resident_threads == 0 { self.threads } else { self.resident_threads }
    }

    /// The sleep time the loop gets, in ns (0: it never sleeps): `sleep_after` for a loop
    /// of one resident channel.
    pub fn sleep_after_ns(&self) -> u64 {
        match self.sleep_after {
            Some(after) if self.channels == 1 => u64::try_from(after.as_nanos()).unwrap_or(u64::MAX).max(1),
            _ => 0,
        }
    }

    fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidArgument(why));
        if !(1..=MAX_CHANNELS as u32).contains(&self.channels) {
            return bad(format!("channels must be 1..={MAX_CHANNELS}, not {}", self.channels));
        }
        if self.channels.saturating_add(self.call_channels) > MAX_CHANNELS as u32 {
            return bad(format!("{} resident and {} call channels: at most {MAX_CHANNELS} in all", self.channels, self.call_channels));
        }
        if self.threads == 0 || !self.threads.is_multiple_of(32) || self.threads > 512 {
            return bad(format!("threads must be a multiple of 32 up to 512, not {}", self.threads));
        }
        if !self.resident_threads.is_multiple_of(32) || self.resident_threads > self.threads {
            return bad(format!("resident threads must be a multiple of 32 up to the channels' {}, not {}", self.threads, self.resident_threads));
        }
        if self.capacity == 0 {
            return bad("the queue needs at least one slot".into());
        }
        if self.spin_budget.is_zero() {
            return bad("the spin budget must be positive".into());
        }
        if self.sleep_after.is_some_and(|after| after.is_zero()) {
            return bad("a loop's sleep time must be positive (None: it never sleeps)".into());
        }
        Ok(())
    }
}

/// Device memory from `cuMemAlloc` (not a stream-ordered pool: the loop outlives any
/// stream order), freed on drop.
pub struct DeviceAlloc {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
}

impl DeviceAlloc {
    /// `bytes` of zeroed device memory in `ctx`, zeroed once this returns: work on any
    /// stream issued after it sees zeros. Allocate before any loop of the context starts:
    /// CUDA may make an allocation wait for running kernels.
    pub fn zeroed(ctx: &Arc<CudaContext>, bytes: usize) -> Result<Self> {
        ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        // SAFETY: a plain allocation, zeroed before use.
        let ptr = unsafe { result::malloc_sync(bytes) }.map_err(Error::cuda("cuMemAlloc"))?;
        let alloc = Self { ctx: ctx.clone(), ptr };
        alloc.on_own_stream("zeroing new device memory", |stream| {
            // SAFETY: `bytes` bytes at `ptr` were just allocated; no other work uses them.
            unsafe { result::memset_d8_async(ptr, 0, bytes, stream) }.map_err(Error::cuda("cuMemsetD8Async"))
        })?;
        Ok(alloc)
    }

    /// Copies `bytes` to `offset` in this allocation and returns once they are in device
    /// memory, so that a kernel launched after it on any stream reads them.
    ///
    /// # Safety
    /// No running kernel reads or writes those bytes.
    pub unsafe fn upload(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        self.on_own_stream("an upload to device memory", |stream| {
            // SAFETY: the range lies in the allocation (the caller's contract covers who
            // else uses it); `bytes` outlives the copy, which this call waits for.
            unsafe { result::memcpy_htod_async(self.ptr + offset, bytes, stream) }.map_err(Error::cuda("cuMemcpyHtoDAsync"))
        })
    }

    /// Copies the `u64`s at the start of this allocation into `words` and returns once
    /// they are on the host.
    ///
    /// # Safety
    /// No running kernel writes those bytes (a kernel that wrote them has ended).
    pub unsafe fn download(&self, words: &mut [u64]) -> Result<()> {
        self.on_own_stream("a download from device memory", |stream| {
            // SAFETY: the range lies in the allocation (the caller's contract covers who
            // else uses it); `words` outlives the copy, which this call waits for.
            unsafe { result::memcpy_dtoh_async(words, self.ptr, stream) }.map_err(Error::cuda("cuMemcpyDtoHAsync"))
        })
    }

    /// Issues `work` on a stream of its own and waits until it has finished. The plain
    /// `cuMemsetD8` and `cuMemcpyHtoD` run on the legacy default stream, which the
    /// non-blocking streams of loops and communicators do not wait for, and may return
    /// before their writes land (for device memory and pageable copies): a kernel on
    /// another stream could then read the old bytes, or see them zeroed after it wrote.
    fn on_own_stream(&self, what: &str, work: impl FnOnce(sys::CUstream) -> Result<()>) -> Result<()> {
        crate::stream::on_private_stream(&self.ctx, what, work)
    }
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: allocated by `zeroed`; the owner drops it only once no kernel uses it.
            if let Err(e) = unsafe { result::free_sync(self.ptr) } {
                log::warn!("cuMemFree of work-loop state failed: {e}");
            }
        }
    }
}

impl DeviceAlloc {
    /// The allocation's device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The context the allocation belongs to.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
}

/// The memory a loop kernel reads and writes, but its queue header ([`SharedHeader`]).
struct LoopMemory {
    ring: HostMapped<u64>,
    state: DeviceAlloc,
    /// Other memory the loop reads (its communicator's connections, buffers: device
    /// allocations, or blocks mapped from other processes), freed with the loop's own.
    adopted: Vec<Box<dyn Send>>,
}

/// The streams other than its own that a loop's memory was handed to: every
/// stream-ordered call leaves work on the caller's stream (a call kernel, or a stream wait
/// on `stream_done`) that reads the loop's state, header and communicator. Shared by the
/// loop and its [`SharedHeader`], so that both frees wait for that work.
#[derive(Default)]
struct StreamUse {
    /// Per stream (by handle), an event recorded after the last call's work on it.
    marks: Mutex<Vec<(usize, Arc<CudaEvent>)>>,
    /// A call's work went where no event tracks it: captured in a CUDA graph (whose
    /// replays may run at any time, after the loop too), or on a stream where recording the
    /// event failed. The memory is then never freed.
    untracked: AtomicBool,
}

impl StreamUse {
    /// Records that the work queued on `stream` so far may read the loop's memory: one
    /// `cuEventRecord` of the stream's event (made at its first call). Where that fails,
    /// the memory is kept for good instead ([`StreamUse::untracked`]); never an error (the
    /// call's work is queued already).
    fn mark(&self, stream: &CudaStream) {
        let key = stream.cu_stream() as usize;
        let mut marks = self.marks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let event = match marks.iter().find(|(k, _)| *k == key) {
            Some((_, event)) => Ok(event.clone()),
            None => stream.context().new_event(None).map(Arc::new).inspect(|event| marks.push((key, event.clone()))),
        };
        if let Err(e) = event.and_then(|event| event.record(stream)) {
            log::warn!("work loop: no event tracks a stream-ordered call ({e}): the loop's memory is kept until the process exits");
            self.untracked.store(true, Ordering::Relaxed);
        }
    }

    /// The event recorded after the last call's work on the stream `key` (by handle), if
    /// a call on it was marked.
    fn mark_of(&self, key: usize) -> Option<Arc<CudaEvent>> {
        let marks = self.marks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        marks.iter().find(|(k, _)| *k == key).map(|(_, event)| event.clone())
    }

    /// A call's work went into a CUDA graph capture: the memory is kept for good.
    fn captured(&self) {
        self.untracked.store(true, Ordering::Relaxed);
    }

    /// The events a free must wait for, or `None` where the memory must be kept for good.
    fn marks(&self) -> Option<Vec<Arc<CudaEvent>>> {
        if self.untracked.load(Ordering::Relaxed) {
            return None;
        }
        let marks = self.marks.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(marks.iter().map(|(_, event)| event.clone()).collect())
    }
}

/// Whether `stream`, not capturing, is a non-blocking stream (which the ring route needs:
/// a blocking stream also waits for the legacy stream's work, which `stream_idle` does not
/// see). Asked at every call: a stream's handle may be reused by a new stream.
fn non_blocking(stream: &CudaStream) -> Result<bool> {
    let mut flags = 0u32;
    // SAFETY: a live stream (the caller's), not capturing; `flags` outlives the call.
    unsafe { sys::cuStreamGetFlags(stream.cu_stream(), &raw mut flags) }.result().map_err(Error::cuda("cuStreamGetFlags"))?;
    Ok(flags & sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32 != 0)
}

/// Hands `memory`, which the loop kernel on `stream` (of context `ctx`) and the work the
/// loop's stream-ordered calls left on other streams (`uses`) read, to the deferred frees.
/// Never blocks.
fn free_after(ctx: usize, stream: Arc<CudaStream>, uses: &StreamUse, memory: Box<dyn Send>) {
    match uses.marks() {
        Some(marks) => hand_over(FreeEvent::Park(Parked { ctx, kernel: Some(stream), marks, memory })),
        None => {
            log::warn!("work loop: calls of a dropped loop were captured in a CUDA graph (or went untracked); its memory is kept until the process exits, since a replay may still read it");
            std::mem::forget(memory);
        }
    }
}

/// Hands `memory`, which the work queued on `streams` so far reads (and no later work
/// will), to the deferred frees: freed (on their own thread) once that work has ended and
/// no loop of the streams' context runs, so that a free, or a module's unload, never
/// waits for work queued behind something only the caller would release. Never blocks;
/// where a stream's work cannot be marked, the memory is kept until the process exits.
pub(crate) fn free_after_streams(streams: &[Arc<CudaStream>], memory: Box<dyn Send>) {
    let Some(first) = streams.first() else { return drop(memory) };
    let ctx = first.context().cu_ctx() as usize;
    let marks: std::result::Result<Vec<Arc<CudaEvent>>, _> = streams.iter().map(|s| s.record_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)).map(Arc::new)).collect();
    match marks {
        Ok(marks) => {
            start_reaper();
            hand_over(FreeEvent::Park(Parked { ctx, kernel: None, marks, memory }));
        }
        Err(e) => {
            log::warn!("no event marks the work of memory being dropped ({e}): it is kept until the process exits");
            std::mem::forget(memory);
        }
    }
}

/// A loop's queue header, shared by the loop's queue and every abort handle (which may
/// outlive the loop): whichever drops last defers the memory's free
/// ([`DeferredFrees`]) until the loop's kernel, and the work its calls left on other
/// streams, have ended.
struct SharedHeader {
    header: Option<HostMapped<u64>>,
    ctx: usize,
    stream: Arc<CudaStream>,
    uses: Arc<StreamUse>,
}

// SAFETY: shared owners never touch the memory through this value; the queue and the
// abort handles reach it through raw pointers with atomic loads and stores only.
unsafe impl Sync for SharedHeader {}

impl Drop for SharedHeader {
    /// Never blocks: defers the memory's free ([`free_after`]).
    fn drop(&mut self) {
        if let Some(header) = self.header.take() {
            free_after(self.ctx, self.stream.clone(), &self.uses, Box::new(header));
        }
    }
}

/// Work that memory waits for before it is freed, as [`DeferredFrees`] sees it.
trait Passed {
    /// True once the work has ended; never blocks.
    fn passed(&self) -> bool;
}

/// The stream a loop kernel runs on, as [`DeferredFrees`] sees it: passed once everything
/// queued on it (the loop kernel) has ended.
trait KernelStream: Passed {
    /// True for the same stream.
    fn same(&self, other: &Self) -> bool;
}

impl Passed for Arc<CudaStream> {
    fn passed(&self) -> bool {
        // SAFETY: a live stream (the Arc holds it); the query never blocks.
        let status = unsafe { sys::cuStreamQuery(self.cu_stream()) };
        status == sys::cudaError_enum::CUDA_SUCCESS
    }
}

impl KernelStream for Arc<CudaStream> {
    fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(self, other)
    }
}

impl Passed for Arc<CudaEvent> {
    /// `cuEventQuery`: the work before the event's last record has completed.
    fn passed(&self) -> bool {
        self.is_complete()
    }
}

/// Memory parked until it can be freed without waiting.
struct Parked<S, M> {
    /// The context (its handle).
    ctx: usize,
    /// The stream of the loop kernel that used the memory, if a loop did.
    kernel: Option<S>,
    /// Per other stream that received work using the memory, a mark after that work.
    marks: Vec<M>,
    memory: Box<dyn Send>,
}

/// What a drop hands to the deferred frees.
enum FreeEvent<S, M> {
    /// Memory to free once it can be.
    Park(Parked<S, M>),
    /// A started loop (context, kernel stream) was dropped.
    Forget(usize, S),
}

/// Memory of dropped loops, kept until it can be freed without waiting: in CUDA, freeing
/// memory may wait for every running kernel of the device, and a persistent loop only
/// ends when asked to. Parked memory is freed once its own loop's kernel has ended, every
/// other stream that received work using it has passed that work (a mark after it has
/// completed), and no started loop of its context still runs (a loop that sleeps has
/// ended its kernel; it is launched again only under this list's lock, so never between a
/// look and a free). A thread of its own, the reaper, looks while memory is parked (stream
/// and event queries), so a dropped loop's memory goes back promptly, not at the next
/// loop's call; where it could not be started, every loop's `new`, `start` and `shutdown`
/// look instead.
struct DeferredFrees<S, M> {
    /// Started, not yet dropped loops: their context and kernel stream.
    running: Vec<(usize, S)>,
    parked: Vec<Parked<S, M>>,
}

impl<S: KernelStream, M: Passed> DeferredFrees<S, M> {
    fn apply(&mut self, event: FreeEvent<S, M>) {
        match event {
            FreeEvent::Park(parked) => self.parked.push(parked),
            FreeEvent::Forget(ctx, stream) => self.running.retain(|(c, s)| !(*c == ctx && s.same(&stream))),
        }
    }

    /// Frees the parked memory of context `ctx` whose kernel and marks have passed, if no
    /// started loop of the context still runs. Never blocks (but in the frees).
    fn collect(&mut self, ctx: usize) {
        if !self.loop_runs(ctx) {
            self.free_passed(ctx);
        }
    }

    /// Whether a started loop of context `ctx` still runs (its kernel has not ended).
    fn loop_runs(&self, ctx: usize) -> bool {
        self.running.iter().any(|(c, s)| *c == ctx && !s.passed())
    }

    /// Frees the parked memory of context `ctx` whose kernel and marks have passed; the
    /// caller has seen no started loop of the context run.
    fn free_passed(&mut self, ctx: usize) {
        let parked = std::mem::take(&mut self.parked);
        for p in parked {
            if p.ctx == ctx && p.kernel.as_ref().is_none_or(Passed::passed) && p.marks.iter().all(Passed::passed) {
                drop(p.memory);
            } else {
                self.parked.push(p);
            }
        }
    }

    /// [`DeferredFrees::collect`] for context `ctx`, and what is left of its memory.
    fn drain(&mut self, ctx: usize) -> Drained {
        if self.loop_runs(ctx) {
            return Drained::HeldByALoop;
        }
        self.free_passed(ctx);
        if self.parked.iter().any(|p| p.ctx == ctx) { Drained::Pending } else { Drained::Done }
    }

    /// [`DeferredFrees::collect`] for every context with parked memory; whether memory
    /// is still parked.
    fn collect_all(&mut self) -> bool {
        let mut contexts: Vec<usize> = self.parked.iter().map(|p| p.ctx).collect();
        contexts.sort_unstable();
        contexts.dedup();
        for ctx in contexts {
            self.collect(ctx);
        }
        !self.parked.is_empty()
    }
}

/// What is left of a context's parked memory after a look ([`DeferredFrees::drain`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Drained {
    /// None: every piece has been freed.
    Done,
    /// Some waits for work still running on its streams (a kernel, a mark).
    Pending,
    /// A started loop of the context runs: nothing of it is freed before that loop
    /// sleeps or ends.
    HeldByALoop,
}

type Frees = DeferredFrees<Arc<CudaStream>, Arc<CudaEvent>>;

static DEFERRED_FREES: Mutex<Frees> = Mutex::new(DeferredFrees { running: Vec::new(), parked: Vec::new() });

/// What drops handed over since the deferred frees last looked. Held only to push or take
/// (never across a CUDA call), so a drop that pushes never waits for a free; the reaper
/// waits on [`HANDED_OVER`] with it.
static INCOMING: Mutex<Vec<FreeEvent<Arc<CudaStream>, Arc<CudaEvent>>>> = Mutex::new(Vec::new());
static HANDED_OVER: Condvar = Condvar::new();

/// Hands `event` to the deferred frees and wakes the reaper. Never blocks (the lock is
/// held only to push or take).
fn hand_over(event: FreeEvent<Arc<CudaStream>, Arc<CudaEvent>>) {
    INCOMING.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(event);
    HANDED_OVER.notify_one();
}

/// The deferred frees, with whatever drops handed over applied.
fn deferred_frees() -> std::sync::MutexGuard<'static, Frees> {
    let mut frees = DEFERRED_FREES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let incoming = std::mem::take(&mut *INCOMING.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    for event in incoming {
        frees.apply(event);
    }
    frees
}

/// How often the reaper looks while memory is parked: from the first to the last, doubling
/// while nothing new comes (a loop's kernel ends within microseconds of its abort; memory
/// held back by another loop of the context that keeps running may wait long).
const REAP_FIRST: Duration = Duration::from_micros(100);
const REAP_LAST: Duration = Duration::from_millis(20);

/// Whether the reaper runs ([`start_reaper`]).
static REAPER_RUNS: AtomicBool = AtomicBool::new(false);

/// Set once the process exits ([`stop_reaping`]): the reaper looks no more. Relaxed: the
/// store comes before [`stop_reaping`] takes the deferred frees' lock and the reaper reads
/// it holding that lock, so the lock orders the two.
static EXITING: AtomicBool = AtomicBool::new(false);

/// Starts, once per process, the thread that frees parked memory as soon as it can be
/// freed; without it (the thread could not be started) memory is freed at the next
/// loop's `new`, `start` or `shutdown` ([`look_at_frees`]). With the thread, registers
/// [`stop_reaping`] to run at the process's exit.
fn start_reaper() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| match std::thread::Builder::new().name("ferroccl-frees".into()).spawn(reap) {
        Ok(_) => {
            REAPER_RUNS.store(true, Ordering::Relaxed);
            // SAFETY: registers a function of no arguments that never unwinds.
            if unsafe { libc::atexit(stop_reaping) } != 0 {
                log::warn!("work loop: no exit handler for the thread that frees dropped loops' memory: it may still query streams while the driver shuts down");
            }
        }
        Err(e) => log::warn!("work loop: no thread to free dropped loops' memory ({e}): it is freed at the next loop's start or shutdown"),
    });
}

/// Run at the process's exit (`atexit`, registered after the driver was initialised, so
/// before the driver's own exit handlers run): stops the reaper, which would otherwise go
/// on querying the streams of parked memory while the driver shuts down under it. Sets
/// [`EXITING`], then takes and drops the deferred frees' lock: a look in progress ends
/// first, and the reaper reads the flag under that lock before every look, so none
/// starts after this returns. Parked memory is left to the process's end. Never blocks
/// longer than one look (a look waits for no running kernel).
extern "C" fn stop_reaping() {
    EXITING.store(true, Ordering::Relaxed);
    drop(DEFERRED_FREES.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
}

/// Frees what parked memory of context `ctx` can be freed, where no reaper does: a free
/// may wait for whatever the device runs, so the calling thread frees only where it must.
fn look_at_frees(ctx: usize) {
    if !REAPER_RUNS.load(Ordering::Relaxed) {
        deferred_frees().collect(ctx);
    }
}

/// Waits, up to `within`, until no memory of context `ctx` is parked with the deferred
/// frees, freeing on this thread what can be freed; whether none is left. Gives up at
/// once while another started loop of the context runs (its memory goes back only once
/// that loop sleeps or ends, on the reaper's thread).
pub(crate) fn wait_for_frees(ctx: usize, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut poll = REAP_FIRST;
    loop {
        match deferred_frees().drain(ctx) {
            Drained::Done => return true,
            Drained::HeldByALoop => return false,
            Drained::Pending => {}
        }
        let now = Instant::now();
        if now >= end {
            return false;
        }
        std::thread::sleep(poll.min(end - now));
        poll = (poll * 2).min(REAP_LAST);
    }
}

/// The reaper: waits for memory to be handed over, then looks at the parked memory (every
/// `REAP_FIRST` to `REAP_LAST` while some is left) and frees what can be freed, until the
/// process exits ([`stop_reaping`]).
fn reap() {
    let mut parked_left = false;
    let mut poll = REAP_FIRST;
    loop {
        {
            let incoming = INCOMING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if incoming.is_empty() {
                if parked_left {
                    let (_incoming, waited) = HANDED_OVER.wait_timeout(incoming, poll).unwrap_or_else(std::sync::PoisonError::into_inner);
                    poll = if waited.timed_out() { (poll * 2).min(REAP_LAST) } else { REAP_FIRST };
                } else {
                    let _incoming = HANDED_OVER.wait_while(incoming, |incoming| incoming.is_empty()).unwrap_or_else(std::sync::PoisonError::into_inner);
                    poll = REAP_FIRST;
                }
            } else {
                poll = REAP_FIRST;
            }
        }
        let mut frees = deferred_frees();
        // Read under the lock [`stop_reaping`] takes after setting it.
        if EXITING.load(Ordering::Relaxed) {
            return;
        }
        parked_left = frees.collect_all();
    }
}

/// One rank's work loop.
pub struct WorkLoop {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    memory: Option<LoopMemory>,
    /// The queue's header (dropped after `queue`, which holds a share of it).
    queue: Queue,
    header: Arc<SharedHeader>,
    kernel: CudaFunction,
    /// The stream-ordered path's call kernel, loaded before the loop starts (loading a
    /// function while a persistent kernel runs can wait for it): `ferroccl_call_kernel`
    /// with call channels, else `ferroccl_call_kernel_alone`.
    call_kernel: CudaFunction,
    cfg: LoopConfig,
    started: bool,
    /// The stream of the last stream-ordered call outside a capture (by handle), held
    /// while a call is enqueued: calls on different streams, from any thread, are enqueued
    /// one at a time, and a call outside a capture on another stream than the last such
    /// call first has its stream wait for the last one's work, so one call kernel at a
    /// time writes the mailbox.
    last_stream: Mutex<Option<usize>>,
    /// Stream-ordered calls that took the ring route, and of those, the ones whose item
    /// the stream had to wait for (it had not completed within [`RING_ROUTE_SPIN`]).
    ring_routed: AtomicU64,
    ring_waits: AtomicU64,
    /// When the last stream-ordered call returned, in ns since `epoch` (0: none yet): what
    /// [`LoopConfig::burst_gap`] is measured from.
    epoch: Instant,
    last_return_ns: AtomicU64,
    /// The communicator's `CommDevice` address, 0 for none.
    comm: u64,
    /// A copy of that `CommDevice`: what decides whether a call runs without the loop
    /// (`device_rt::work::runs_without_loop`), asked of calls captured in a CUDA graph.
    comm_copy: Option<Box<CommDevice>>,
    /// CTAs launched: the channels, or one per SM when the loop chooses their SMs.
    grid: u32,
    /// Whether call kernels are launched to overlap the one before them
    /// ([`WorkLoop::allow_overlapping_call_kernels`]).
    overlap_call_kernels: bool,
    /// The streams the stream-ordered calls left work on, which the memory's frees wait
    /// for (shared with the header).
    uses: Arc<StreamUse>,
}

/// Launches the call kernel `function` on `stream` with `cfg` and the parameters
/// `params` (after binding the stream's context); with `overlap`, with programmatic
/// stream serialization (`cuLaunchKernelEx`): the call kernel may start while the kernel
/// before it on the stream still runs, once that one lets it
/// (`griddepcontrol.launch_dependents`, or its end). Public so that `ferroccl bench
/// dispatch` times the calls' own launch path with other kernels.
///
/// # Safety
/// `params` point to `function`'s parameters, in order and of their types, valid for the
/// call; with `overlap`, `function` waits for the kernel before it
/// (`griddepcontrol.wait`) before any access that must follow it.
pub unsafe fn launch_call_kernel(stream: &CudaStream, function: &CudaFunction, cfg: LaunchConfig, params: &mut [*mut c_void], overlap: bool) -> Result<()> {
    stream.context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
    // SAFETY: an all-zero `CUlaunchAttribute` is a valid value of the C struct.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    let config = sys::CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: if overlap { &raw mut attribute } else { std::ptr::null_mut() },
        numAttrs: u32::from(overlap),
    };
    // SAFETY: `config` and `attribute` live through the call; `params` as this function's
    // contract says; the driver copies the parameters before it returns.
    unsafe { sys::cuLaunchKernelEx(&config, function.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) }
        .result()
        .map_err(Error::cuda("cuLaunchKernelEx (call kernel)"))
}

/// Whether a stream-ordered call made at `now_ns` belongs to a burst: the call before it
/// returned at `last_return_ns` (0: there was none), less than `gap` before.
fn in_burst(last_return_ns: u64, now_ns: u64, gap: Duration) -> bool {
    last_return_ns != 0 && u128::from(now_ns.saturating_sub(last_return_ns)) < gap.as_nanos()
}

/// Whether every operation queued on `stream` has completed (`cuStreamQuery`), asked in
/// the relaxed capture mode: a query is no operation of any capture, and another thread's
/// capture in the global mode must not see it as one.
fn stream_idle(stream: &CudaStream) -> Result<bool> {
    let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: `mode` outlives the call, which swaps this thread's mode into it.
    unsafe { sys::cuThreadExchangeStreamCaptureMode(&raw mut mode) }.result().map_err(Error::cuda("cuThreadExchangeStreamCaptureMode"))?;
    let idle = crate::stream::idle(stream);
    // SAFETY: as above: the thread's previous mode back.
    unsafe { sys::cuThreadExchangeStreamCaptureMode(&raw mut mode) }.result().map_err(Error::cuda("cuThreadExchangeStreamCaptureMode"))?;
    idle
}

/// How long a stream-ordered call on the ring route watches for its item's completion
/// before it has the stream wait for it instead: the loop answers a no-op in a few µs,
/// while the driver answers a `cuStreamWaitValue32` that was not met at once about 11 µs
/// late (see docs/tuning.md, `RING_ROUTE_SPIN`).
pub const RING_ROUTE_SPIN: Duration = Duration::from_micros(10);

/// Where `stream_done` (the ring route's word) is in a loop's state.
const STREAM_DONE_OFFSET: u64 = std::mem::offset_of!(LoopState, stream_done) as u64;

/// Where a loop's placement starts in its state: a loop launched again after it slept
/// zeroes the placement's head (its channel count, grace time and claims), so that its
/// one channel is its one CTA wherever the hardware puts it.
const PLACEMENT_OFFSET: u64 = std::mem::offset_of!(LoopState, placement) as u64;
/// Bytes of that head: everything before the SM table.
const PLACEMENT_HEAD_BYTES: usize = std::mem::offset_of!(ChannelPlacement, sm_channel);

/// Everything a launch of a loop kernel takes, for the first launch and for launches
/// after the loop slept.
struct LoopLaunch {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    kernel: CudaFunction,
    config: LaunchConfig,
    /// The kernel's parameters: header, ring, capacity, state, spin budget, communicator.
    args: [u64; 6],
    /// The device address of the loop's placement, when it chooses its SMs (its first
    /// launch is then one CTA per SM, of which the chosen become the channels).
    placement: Option<u64>,
}

impl LoopLaunch {
    /// Launches the loop kernel on its stream; `again` (after it slept: a loop of one
    /// channel): one CTA, after zeroing the head of a placement on the same stream (after
    /// the old kernel's end), so that the CTA is the channel wherever it runs: a wake
    /// waits for no particular SM, and never holds every SM of a busy GPU for a moment.
    ///
    /// # Safety
    /// The memory `args` name is live until the kernel has ended; with `again`, the loop's
    /// kernel has stored ASLEEP (it ends, and the stream orders this launch after it).
    unsafe fn launch(&self, again: bool) -> Result<()> {
        // A launch after the loop slept holds the deferred frees' lock meanwhile: they free
        // memory only while no loop of the context runs (a free may wait for a running
        // kernel), and a sleeping loop counts as ended.
        let _frees = again.then(deferred_frees);
        self.ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let mut config = self.config;
        if again {
            config.grid_dim = (1, 1, 1);
            if let Some(placement) = self.placement {
                // SAFETY: `PLACEMENT_HEAD_BYTES` at `placement` lie in the loop's state; no
                // kernel uses them before this memset ends (the stream's order).
                unsafe { result::memset_d8_async(placement, 0, PLACEMENT_HEAD_BYTES, self.stream.cu_stream()) }.map_err(Error::cuda("cuMemsetD8Async"))?;
            }
        }
        let [header, ring, capacity, state, budget_ns, comm] = self.args;
        // SAFETY: the arguments match `ferroccl_work_loop` (and the heap's loop); the memory
        // lives as this function's contract says.
        unsafe {
            self.stream
                .launch_builder(&self.kernel)
                .arg(&header)
                .arg(&ring)
                .arg(&capacity)
                .arg(&state)
                .arg(&budget_ns)
                .arg(&comm)
                .launch(config)
        }
        .map(|_| ())
        .map_err(Error::cuda("cuLaunchKernel"))
    }
}

/// Writes `cfg`'s channel placement into the loop's zeroed `state`; returns the grid to
/// launch: the channels for the hardware's placement, else one CTA per SM (the CTAs on
/// the chosen SMs become the channels, the others leave at once).
fn place_channels(ctx: &Arc<CudaContext>, state: &DeviceAlloc, cfg: &LoopConfig) -> Result<u32> {
    let device_sms = crate::device::sm_count(ctx)?;
    let Some(sms) = cfg.placement.sms(cfg.channels, device_sms)? else { return Ok(cfg.channels) };
    let placement = ChannelPlacement::on_sms(&sms, PLACEMENT_GRACE_NS)
        .ok_or_else(|| Error::InvalidArgument(format!("SMs {sms:?} do not make a placement")))?;
    log::info!("work loop: {} channels on SMs {sms:?} of {device_sms}", cfg.channels);
    // SAFETY: `state` holds a whole `LoopState`; no kernel uses it yet.
    unsafe { state.upload(std::mem::offset_of!(LoopState, placement) as u64, placement.as_bytes()) }?;
    Ok(device_sms.max(cfg.channels))
}

/// How many channels (CTAs of `threads` threads) of the loop `kernel` one SM holds at
/// once, and with `call_kernel` (a loop with call channels) also of its call kernel: the
/// smaller of the two.
pub(crate) fn channels_per_sm(kernel: &CudaFunction, call_kernel: Option<&CudaFunction>, threads: u32) -> Result<u32> {
    let per_sm = |f: &CudaFunction| {
        f.occupancy_max_active_blocks_per_multiprocessor(threads, LOOP_SMEM_BYTES as usize, None)
            .map_err(Error::cuda("cuOccupancyMaxActiveBlocksPerMultiprocessor"))
    };
    let resident = per_sm(kernel)?;
    match call_kernel {
        Some(call_kernel) => Ok(resident.min(per_sm(call_kernel)?)),
        None => Ok(resident),
    }
}

/// Refuses `threads` per CTA for `kernel` (named `what`) where the device runs fewer.
pub(crate) fn fits_threads(kernel: &CudaFunction, threads: u32, what: &str) -> Result<()> {
    let max_threads = kernel
        .get_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        .map_err(Error::cuda("cuFuncGetAttribute"))?;
    if threads > max_threads as u32 {
        return Err(Error::DeviceLimit(format!("{what} runs at most {max_threads} threads per CTA on this device, not {threads}")));
    }
    Ok(())
}

impl WorkLoop {
    /// The loop's resident channels.
    pub fn channels(&self) -> u32 {
        self.cfg.channels
    }

    /// The loop's channels, resident and call.
    pub fn all_channels(&self) -> u32 {
        self.cfg.channels + self.cfg.call_channels
    }

    /// Where the loop's channels run.
    pub fn placement(&self) -> Placement {
        self.cfg.placement
    }

    /// The bound of every wait of the loop.
    pub fn spin_budget(&self) -> Duration {
        self.cfg.spin_budget
    }

    /// Allocates the queue (host-mapped) and loop state (device memory) without starting
    /// the loop. Allocate every loop of a device before starting any: CUDA may make an
    /// allocation wait for running kernels.
    pub fn new(ctx: &Arc<CudaContext>, module: &Module, cfg: LoopConfig) -> Result<Self> {
        Self::with_entry(ctx, module, cfg, "ferroccl_work_loop")
    }

    /// [`WorkLoop::new`] for a symmetric heap's loop: the kernel that also runs the heap's
    /// barrier and reduction items (`ferroccl_shmem_work_loop`).
    pub fn new_for_heap(ctx: &Arc<CudaContext>, module: &Module, cfg: LoopConfig) -> Result<Self> {
        Self::with_entry(ctx, module, cfg, "ferroccl_shmem_work_loop")
    }

    fn with_entry(ctx: &Arc<CudaContext>, module: &Module, cfg: LoopConfig, entry: &str) -> Result<Self> {
        cfg.validate()?;
        start_reaper();
        look_at_frees(ctx.cu_ctx() as usize);
        log::debug!("work loop: allocating its queue and state");
        let header = HostMapped::<u64>::zeroed(ctx, size_of::<QueueHeader>() / 8)?;
        let ring = HostMapped::<u64>::zeroed(ctx, cfg.capacity as usize * size_of::<RingSlot>() / 8)?;
        let state = DeviceAlloc::zeroed(ctx, size_of::<LoopState>())?;
        let stream = ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
        let header_ptr = header.host_ptr().cast();
        let uses = Arc::new(StreamUse::default());
        let header = Arc::new(SharedHeader { header: Some(header), ctx: ctx.cu_ctx() as usize, stream: stream.clone(), uses: uses.clone() });
        // SAFETY: zeroed allocations of the right sizes; `header` (shared with the queue
        // and its abort handles) keeps the header alive, this value the ring.
        let queue = unsafe {
            Queue::new(header_ptr, ring.host_ptr().cast(), u64::from(cfg.capacity), cfg.channels as usize, header.clone())?
        };
        let kernel = module.kernel(entry)?;
        fits_threads(&kernel, cfg.threads, "the work loop kernel")?;
        let call_kernel = if cfg.call_channels > 0 {
            let call_kernel = module.kernel("ferroccl_call_kernel")?;
            fits_threads(&call_kernel, cfg.threads, "the call kernel, which runs the call channels,")?;
            call_kernel
        } else {
            module.kernel("ferroccl_call_kernel_alone")?
        };
        let grid = place_channels(ctx, &state, &cfg)?;
        let sleep_after_ns = cfg.sleep_after_ns();
        if sleep_after_ns != 0 {
            // SAFETY: `state` holds a whole `LoopState`; no kernel uses it yet.
            unsafe { state.upload(std::mem::offset_of!(LoopState, sleep_after_ns) as u64, sleep_after_ns.as_bytes()) }?;
        }
        Ok(Self {
            ctx: ctx.clone(),
            stream,
            memory: Some(LoopMemory { ring, state, adopted: Vec::new() }),
            queue,
            header,
            kernel,
            call_kernel,
            cfg,
            grid,
            started: false,
            last_stream: Mutex::new(None),
            ring_routed: AtomicU64::new(0),
            ring_waits: AtomicU64::new(0),
            epoch: Instant::now(),
            last_return_ns: AtomicU64::new(0),
            comm: 0,
            comm_copy: None,
            overlap_call_kernels: cfg.call_channels == 0,
            uses,
        })
    }

    /// Gives the loop its communicator (a `CommDevice` at `comm_addr`, in `comm`'s memory,
    /// written from `image`, whose first bytes are that `CommDevice`) before it starts;
    /// the memory is freed with the loop's own, once no loop of the context runs.
    pub(crate) fn attach_comm(&mut self, comm: Box<dyn Send>, comm_addr: u64, image: &[u8]) -> Result<()> {
        let Some(memory) = &mut self.memory else { return Err(Error::LoopClosed) };
        if self.started {
            return Err(Error::InvalidState("a communicator must be attached before the loop starts"));
        }
        let (copy, _) = CommDevice::read_from_prefix(image).map_err(|_| Error::InvalidState("a communicator image shorter than its CommDevice"))?;
        memory.adopted.push(comm);
        self.comm = comm_addr;
        self.comm_copy = Some(Box::new(copy));
        Ok(())
    }

    #[cfg(feature = "testing")]
    /// Keeps `alloc` alive as long as the loop's own memory.
    pub(crate) fn adopt(&mut self, alloc: DeviceAlloc) -> Result<()> {
        let Some(memory) = &mut self.memory else { return Err(Error::LoopClosed) };
        memory.adopted.push(Box::new(alloc));
        Ok(())
    }

    /// How many channels (CTAs) of this loop one SM holds at once: resident ones, and
    /// with call channels also the call kernel's (the smaller of the two).
    pub(crate) fn channels_per_sm(&self) -> Result<u32> {
        channels_per_sm(&self.kernel, (self.cfg.call_channels > 0).then_some(&self.call_kernel), self.cfg.threads)
    }

    /// Launches the loop kernel on the loop's own stream. Items enqueued before wait in
    /// the queue. A loop given a sleep time ([`LoopConfig::sleep_after`]) leaves the GPU
    /// when it has polled that long with nothing to do; the queue launches it again (on
    /// the same stream, after the old kernel's end) when the host next publishes work
    /// (the handshake: `device_rt::work`'s `queue` module).
    pub fn start(&mut self) -> Result<()> {
        let Some(memory) = &self.memory else { return Err(Error::LoopClosed) };
        if self.started {
            return Err(Error::InvalidState("the work loop is already started"));
        }
        let Some(header) = &self.header.header else { return Err(Error::LoopClosed) };
        look_at_frees(self.ctx_key());
        let launch_loop = LoopLaunch {
            ctx: self.ctx.clone(),
            stream: self.stream.clone(),
            kernel: self.kernel.clone(),
            config: LaunchConfig { grid_dim: (self.grid, 1, 1), block_dim: (self.cfg.loop_threads(), 1, 1), shared_mem_bytes: LOOP_SMEM_BYTES },
            args: [header.device_ptr(), memory.ring.device_ptr(), u64::from(self.cfg.capacity), memory.state.ptr, u64::try_from(self.cfg.spin_budget.as_nanos()).unwrap_or(u64::MAX), self.comm],
            placement: (self.grid != self.cfg.channels).then(|| memory.state.ptr + PLACEMENT_OFFSET),
        };
        // The deferred frees' lock is held from the launch until the loop is on their list
        // of running loops: a free between the two would think no loop of the context
        // runs, and a free (or a module's unload) may wait for the new kernel, which never
        // ends by itself, while holding the lock this thread then takes.
        let mut frees = deferred_frees();
        // SAFETY: the memory lives until the kernel has ended (`Drop` defers freeing it
        // until then); nothing runs on the loop's stream yet.
        unsafe { launch_loop.launch(false) }?;
        if self.cfg.sleep_after_ns() != 0 {
            // SAFETY: the queue launches again only after the loop stored ASLEEP, so its
            // kernel is ending, and the launch waits for it on the same stream; the memory
            // lives as above (a loop that sleeps has ended its kernel: its deferred
            // free runs once the loop is dropped, and a dropped loop's queue launches
            // nothing).
            self.queue.set_relaunch(Box::new(move || unsafe { launch_loop.launch(true) }));
        }
        self.started = true;
        frees.running.push((self.ctx_key(), self.stream.clone()));
        log::debug!("work loop started: {:?}", self.cfg);
        Ok(())
    }

    #[cfg(feature = "testing")]
    /// [`WorkLoop::new`] then [`WorkLoop::start`].
    pub fn launch(ctx: &Arc<CudaContext>, module: &Module, cfg: LoopConfig) -> Result<Self> {
        let mut lp = Self::new(ctx, module, cfg)?;
        lp.start()?;
        Ok(lp)
    }

    fn ctx_key(&self) -> usize {
        self.ctx.cu_ctx() as usize
    }

    /// The direct host path: validates `item`, waits (up to `timeout`) for a free slot,
    /// and writes it, where the loop polls for it. No kernel launch.
    ///
    /// An item names raw addresses, so the call is `unsafe`:
    ///
    /// ```compile_fail,E0133
    /// # fn f(lp: &mut host_shim::work::WorkLoop, item: device_rt::work::WorkItem) {
    /// let _ = lp.enqueue(item, std::time::Duration::from_secs(1));
    /// # }
    /// ```
    ///
    /// # Safety
    /// As [`Queue::enqueue`]'s: every address `item` carries names memory the loop's
    /// device may read and write, whole extent, that stays allocated and that nothing else
    /// uses but as the item's protocol has it, until the item has completed
    /// ([`WorkLoop::wait`] returned for it, or the loop has stopped).
    pub unsafe fn enqueue(&mut self, item: WorkItem, timeout: Duration) -> Result<Ticket> {
        // SAFETY: this function's contract, which is the queue's.
        unsafe { self.queue.enqueue(item, timeout) }
    }

    #[cfg(feature = "testing")]
    /// Writes several items at once (they must fit in the ring).
    ///
    /// ```compile_fail,E0133
    /// # fn f(lp: &mut host_shim::work::WorkLoop, items: &[device_rt::work::WorkItem]) {
    /// let _ = lp.enqueue_batch(items, std::time::Duration::from_secs(1));
    /// # }
    /// ```
    ///
    /// # Safety
    /// As [`WorkLoop::enqueue`]'s, for each item of `items`.
    pub unsafe fn enqueue_batch(&mut self, items: &[WorkItem], timeout: Duration) -> Result<Ticket> {
        // SAFETY: this function's contract, which is the queue's.
        unsafe { self.queue.enqueue_batch(items, timeout) }
    }

    /// Waits for `ticket`'s item (and every earlier one) to complete on every channel.
    pub fn wait(&self, ticket: Ticket, timeout: Duration) -> Result<()> {
        self.queue.wait(ticket, timeout)
    }

    /// The stream-ordered path: work queued on `stream` before runs first, work queued
    /// after waits for the item; the call can be captured in a CUDA graph and replayed.
    /// Two routes, which run the item on the same channels:
    /// - the ring route, where the loop has one resident channel, runs (not asleep) and
    ///   has a free ring slot, the call is not part of a burst (it comes at least
    ///   [`LoopConfig::burst_gap`] after the loop's previous stream-ordered call
    ///   returned: calls back to back pipeline better through the call kernel), `stream` is
    ///   a non-blocking stream, not capturing, with every earlier operation done
    ///   (`cuStreamQuery`), and the item spreads over the resident channel alone (any
    ///   item of a loop without call channels; else any but a collective): the item goes
    ///   into the ring as on the direct path, no kernel launch; the call watches for its
    ///   completion for up to [`RING_ROUTE_SPIN`] (a small item is done before the call
    ///   returns) and otherwise queues one `cuStreamWaitValue32` on the loop's
    ///   `stream_done` word (see `device_rt::work`'s `queue` module). A loop that slept
    ///   between the look and the write and cannot be launched again is stopped
    ///   (aborted) and the call fails; the stream waits for nothing.
    /// - otherwise the call-kernel route: launches on `stream` the call kernel, whose first
    ///   CTA's one working thread writes `item` into the loop's mailbox, marks it pending,
    ///   and waits until the loop has run it (or has left, or the host aborts); with call
    ///   channels, one more CTA per call channel, each of which runs its channel's share of
    ///   the item where the item spreads over it and otherwise leaves at once (1 CTA of 32
    ///   threads without call channels).
    ///
    /// Items of the direct path ([`WorkLoop::enqueue`]) and of the stream are not ordered
    /// with each other: the loop may run a submitted item before ring items enqueued
    /// earlier. A failure inside the loop does not stall `stream` (the loop releases the
    /// stream's wait as it leaves, the call kernel returns): check
    /// [`WorkLoop::async_error`]; a call kernel that waits past the loop's spin budget
    /// stops the loop with [`Error::DeviceTimeout`]. Calls may come on any streams of the
    /// loop's context, from any threads: they are enqueued one at a time, in the order they
    /// take the loop's lock, and run in that order, as NCCL orders a communicator's calls
    /// on several streams: a call on another stream than the last call outside a capture
    /// first makes its stream wait (`cuStreamWaitEvent`) for that call's work, and takes the
    /// call-kernel route. A call captured in a CUDA graph is ordered by its graph's
    /// launches: the caller orders replays with the loop's other calls (as with NCCL), since
    /// a replay's call kernel beside another call's would write the same mailbox. A call
    /// that takes the ring route may run beside an operation another thread queued on its
    /// stream between its look at the stream and its wait. The call kernel and the stream's wait
    /// read the loop's memory: after each call, one `cuEventRecord` on `stream` marks the
    /// work, and a dropped loop's memory is freed only once every stream it served has
    /// passed its mark (and the loop's own kernel has ended); a call captured in a CUDA
    /// graph keeps the memory until the process exits (a replay may come at any time).
    ///
    /// ```compile_fail,E0133
    /// # fn f(lp: &host_shim::work::WorkLoop, stream: &cudarc::driver::CudaStream, item: device_rt::work::WorkItem) {
    /// let _ = lp.enqueue_on_stream(stream, item);
    /// # }
    /// ```
    ///
    /// # Safety
    /// As [`WorkLoop::enqueue`]'s, with "until the item has completed" meaning until
    /// `stream` has passed the call: every address `item` carries names memory the loop's
    /// device may read and write, whole extent, that stays allocated and that nothing
    /// else uses but as the item's protocol has it, until work queued on `stream` after
    /// this call (a stream-ordered free included) may run.
    pub unsafe fn enqueue_on_stream(&self, stream: &CudaStream, item: WorkItem) -> Result<()> {
        let burst = in_burst(self.last_return_ns.load(Ordering::Relaxed), self.now_ns(), self.cfg.burst_gap);
        let kind = item.validate().map_err(|reason| Error::BadWorkItem { reason, seq: 0 })?;
        self.queue.health()?;
        let Some(memory) = &self.memory else { return Err(Error::LoopClosed) };
        let Some(header) = &self.header.header else { return Err(Error::LoopClosed) };
        // SAFETY: a live stream of this loop's context (the caller's).
        let capture = unsafe { result::stream::is_capturing(stream.cu_stream()) }.map_err(Error::cuda("cuStreamIsCapturing"))?;
        let captured = capture != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // Held until the call is enqueued and marked: the next call, on any stream, comes after it.
        let mut last = self.last_stream.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let this = stream.cu_stream() as usize;
        let switched = last.is_some_and(|last| last != this);
        // Ordering: the stream's later work (this call) starts once the work the last call
        // left on its own stream has completed, its mailbox item and call kernel included.
        if switched && !captured && let Some(mark) = last.and_then(|last| self.uses.mark_of(last)) {
            stream.wait(&mark).map_err(Error::cuda("cuStreamWaitEvent"))?;
        }
        let one_channel = self.cfg.channels == 1 && (self.cfg.call_channels == 0 || kind != WorkKind::Collective);
        // SAFETY: `item` as this function's contract says.
        if one_channel && !captured && !burst && !switched && non_blocking(stream)? && unsafe { self.ring_route(stream, item, &memory.state) }? {
            self.ring_routed.fetch_add(1, Ordering::Relaxed);
            self.last_return_ns.store(self.now_ns(), Ordering::Relaxed);
            *last = Some(this);
            return Ok(());
        }
        // Whether the submission was counted for the loop's sleep handshake (outside a
        // capture). A captured call pins the loop awake for good (its replays submit
        // without the host) unless it runs without the loop: then the loop may go on
        // sleeping, and a device-wide synchronize still returns once it does.
        let mut counted = false;
        if self.cfg.sleep_after_ns() != 0 {
            if !captured {
                self.queue.announce_submit(false)?;
                counted = true;
            } else if !self.runs_without_loop(&item) {
                self.queue.announce_submit(true)?;
            }
        }
        // The call kernel's parameters, each where `params` points.
        let (mut state, mut header, mut comm, mut resident) = (memory.state.ptr, header.device_ptr(), self.comm, self.cfg.channels);
        let mut words: [u64; 8] = zerocopy::transmute!(item);
        let mut budget_ns = u64::try_from(self.cfg.spin_budget.as_nanos()).unwrap_or(u64::MAX);
        // Whether the device counts the call kernel's submission as the host counted it
        // (`device_rt::work::CallArgs::counted`).
        let mut counted_flag = u32::from(!captured);
        // The kernel's parameter list, in a fixed array (no allocation on the call's path):
        // the head, then the item's eight words, then the budget (and with call channels
        // the counted flag).
        let mut params = [std::ptr::null_mut::<c_void>(); 14];
        let (launch, head_len) = match self.cfg.call_channels {
            0 => {
                params[..2].copy_from_slice(&[(&raw mut state).cast(), (&raw mut header).cast()]);
                (LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 }, 2)
            }
            call_channels => {
                params[..4].copy_from_slice(&[(&raw mut state).cast(), (&raw mut header).cast(), (&raw mut comm).cast(), (&raw mut resident).cast()]);
                (LaunchConfig { grid_dim: (1 + call_channels, 1, 1), block_dim: (self.cfg.threads, 1, 1), shared_mem_bytes: LOOP_SMEM_BYTES }, 4)
            }
        };
        for (param, word) in params[head_len..head_len + 8].iter_mut().zip(words.iter_mut()) {
            *param = (word as *mut u64).cast();
        }
        params[head_len + 8] = (&raw mut budget_ns).cast();
        params[head_len + 9] = (&raw mut counted_flag).cast();
        let params = &mut params[..head_len + if self.cfg.call_channels == 0 { 9 } else { 10 }];
        if captured {
            self.uses.captured();
        }
        // SAFETY: `params` point to the arguments of the call kernel `WorkLoop::new` chose
        // for the call channels, in order and of their types: `ferroccl_call_kernel`
        // (state, header, communicator, resident channels, item, budget, counted) or,
        // without call channels, `ferroccl_call_kernel_alone` (state, header, item, budget):
        // the loop's live state, header and communicator (whose connections
        // cover the resident and call channels: the communicator's shape counts both),
        // which stay allocated while the loop lives and, after a drop, until its kernel has
        // ended and `stream` has passed this call kernel (the deferred free waits for the
        // mark recorded below; a captured call's memory is never freed). Calls are enqueued
        // one at a time (the lock above), and their call
        // kernels run one after another: a call kernel launched to overlap the one before
        // it waits for that one's end (`device_rt::work::after_previous_grid`) before it
        // touches the mailbox or a call channel, and one on another stream than the last
        // call's waits for that call's mark (above), so one call kernel at a time writes the
        // mailbox and serves the call channels (a capture's replays: the caller's order).
        unsafe { launch_call_kernel(stream, &self.call_kernel, launch, params, self.overlap_call_kernels) }.inspect_err(|_| {
            if counted {
                self.queue.retract_submit();
            }
        })?;
        if !captured {
            self.uses.mark(stream);
            *last = Some(this);
        }
        self.last_return_ns.store(self.now_ns(), Ordering::Relaxed);
        Ok(())
    }

    /// Whether the call kernel runs `item` without the loop (`device_rt::work::runs_without_loop`,
    /// on this loop's copy of its communicator): never without call channels.
    fn runs_without_loop(&self, item: &WorkItem) -> bool {
        match &self.comm_copy {
            // SAFETY: a copy of the loop's `CommDevice`, of which only the fields are read.
            Some(comm) if self.cfg.call_channels != 0 => unsafe { device_rt::work::runs_without_loop(&raw const **comm, self.cfg.channels, self.cfg.threads, item) },
            _ => false,
        }
    }

    /// Nanoseconds since the loop was made (at least 1: 0 stands for no call yet).
    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1)
    }

    /// The ring route of [`WorkLoop::enqueue_on_stream`], for an item the loop's one
    /// resident channel runs, on a non-blocking `stream` that is not capturing: false
    /// (nothing done) where the loop is not awake, `stream` has work queued, or the ring
    /// is full. The item goes into the ring; an item the loop completes within
    /// [`RING_ROUTE_SPIN`] needs nothing more (it is done before the call returns);
    /// otherwise one `cuStreamWaitValue32` on `stream_done` makes the stream wait for it.
    /// Where CUDA refuses that wait, the call waits for the item itself (up to the spin
    /// budget) and returns the refusal.
    ///
    /// Ordering: `cuStreamQuery` returning success means every earlier operation of the
    /// stream has completed (a non-blocking stream does not wait for the legacy stream,
    /// so nothing else orders before the item); the host's acquire of the channel's
    /// completion, or the stream's wait for `stream_done`, orders what follows after the
    /// item's writes, which the loop makes visible at system scope before either store
    /// (`device_rt::work`'s `queue` module).
    ///
    /// # Safety
    /// As [`WorkLoop::enqueue_on_stream`]'s, for `item` and `stream`.
    unsafe fn ring_route(&self, stream: &CudaStream, item: WorkItem, state: &DeviceAlloc) -> Result<bool> {
        if !self.queue.awake() || !stream_idle(stream)? {
            return Ok(false);
        }
        // SAFETY: `item`'s memory is the loop's to use until the stream has passed the
        // call (this function's contract), and the stream waits for the item below unless
        // it has completed before this returns.
        let Some(ticket) = (unsafe { self.queue.try_enqueue(item) }) else { return Ok(false) };
        if let Err(e) = self.queue.wake() {
            // The item stays in the ring; stopped, the loop never runs it later behind the
            // caller's back (nothing on the stream waits for it).
            log::error!("work loop: it slept and could not be launched again for a stream-ordered item: stopping it ({e})");
            self.abort();
            return Err(e);
        }
        let start = Instant::now();
        while start.elapsed() < RING_ROUTE_SPIN {
            if self.queue.completed() >= ticket.0 {
                return Ok(true);
            }
            std::hint::spin_loop();
        }
        self.ring_waits.fetch_add(1, Ordering::Relaxed);
        let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
        // SAFETY: a live stream (the caller's); the word is `stream_done` in the loop's
        // state, which lives while the loop does and, after a drop, until the stream has
        // passed this wait (the deferred free waits for the mark recorded below). The loop
        // stores the low 32 bits of its completions there, and the wait compares them
        // cyclically with the ticket's.
        let waited = unsafe { sys::cuStreamWaitValue32_v2(stream.cu_stream(), state.ptr + STREAM_DONE_OFFSET, ticket.0 as u32, geq) };
        if let Err(e) = waited.result() {
            self.queue.wait(ticket, self.cfg.spin_budget)?;
            return Err(Error::Cuda { call: "cuStreamWaitValue32", source: e });
        }
        self.uses.mark(stream);
        Ok(true)
    }

    #[cfg(feature = "testing")]
    /// The loop's queue header as the host reads it now ([`Queue::header_report`]).
    pub fn header_report(&self) -> String {
        self.queue.header_report()
    }

    #[cfg(feature = "testing")]
    /// Stream-ordered calls that took the ring route ([`WorkLoop::enqueue_on_stream`]).
    pub fn ring_routed(&self) -> u64 {
        self.ring_routed.load(Ordering::Relaxed)
    }

    #[cfg(feature = "testing")]
    /// Of the calls on the ring route, those whose item had not completed within
    /// [`RING_ROUTE_SPIN`], so that the stream waits for it.
    pub fn ring_waits(&self) -> u64 {
        self.ring_waits.load(Ordering::Relaxed)
    }

    /// Lets this loop's call kernels overlap: each may start (and plan its item) while the
    /// one before it on the stream still runs. For a loop whose device holds two call
    /// kernels per rank beside every loop's resident channels (the communicator checks; a
    /// loop without call channels launches one CTA of 32 threads, which always fits): at
    /// most two call kernels of a stream are on the GPU at once
    /// (`device_rt::work::after_previous_grid`), so a waiting one never keeps a peer's grid
    /// from an SM.
    pub(crate) fn allow_overlapping_call_kernels(&mut self) {
        self.overlap_call_kernels = true;
    }

    #[cfg(feature = "testing")]
    /// Whether call kernels overlap the kernel before them (the communicator allows it
    /// where the device holds two call kernels of every rank beside the loops).
    pub fn call_kernels_overlap(&self) -> bool {
        self.overlap_call_kernels
    }

    #[cfg(feature = "testing")]
    /// The stream the loop kernel runs on (it ends when the loop leaves).
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    #[cfg(feature = "testing")]
    /// The loop's queue (self-tests write raw slots through it).
    pub fn queue_mut(&mut self) -> &mut Queue {
        &mut self.queue
    }

    /// A handle that aborts the loop from any thread.
    pub fn abort_handle(&self) -> AbortHandle {
        self.queue.abort_handle()
    }

    /// Asks the loop to leave now; never blocks.
    pub fn abort(&self) {
        self.queue.abort_handle().abort();
    }

    /// The loop's error, if it has stopped with one (`LoopClosed` once it has left after a
    /// Shutdown); never blocks.
    pub fn async_error(&self) -> Option<Error> {
        self.queue.health().err()
    }

    #[cfg(feature = "testing")]
    /// Items published and not yet completed.
    pub fn outstanding(&self) -> u64 {
        self.queue.outstanding()
    }

    /// Runs every outstanding item, then stops the loop and waits for its kernel to end
    /// (each up to `timeout`). On timeout, reports what was outstanding and aborts.
    pub fn shutdown(&mut self, timeout: Duration) -> Result<()> {
        let drained = self.queue.shutdown(timeout);
        if drained.is_err() {
            self.abort();
        }
        crate::stream::wait(&self.stream, timeout, "the work loop kernel")?;
        look_at_frees(self.ctx_key());
        drained
    }

    #[cfg(feature = "testing")]
    /// Whether the loop has left the GPU to sleep (see [`LoopConfig::sleep_after`]); the
    /// next item launches it again.
    pub fn asleep(&self) -> bool {
        self.queue.asleep()
    }

    /// True once the loop kernel has ended.
    pub(crate) fn kernel_done(&self) -> bool {
        self.stream.passed()
    }
}

impl Drop for WorkLoop {
    /// Never blocks: aborts a loop still running, and hands its memory and its module's
    /// code to the deferred frees, which free them (on their own thread, promptly) once
    /// its kernel has ended, every stream its stream-ordered calls went to has passed
    /// their work, and no loop of the context runs.
    fn drop(&mut self) {
        if self.started && !self.kernel_done() {
            self.abort();
            log::debug!("work loop dropped while running: aborted");
        }
        let key = self.ctx_key();
        // The module's code goes with the memory: it is unloaded when its last function
        // drops, and an unload waits for every queued kernel of the module, such as a call
        // kernel queued on a user's stream behind work that only this thread would
        // release (an event, a stream wait on a host flag): dropped here, it could wait
        // forever.
        let code = (self.kernel.clone(), self.call_kernel.clone());
        free_after(key, self.stream.clone(), &self.uses, Box::new((self.memory.take(), code)));
        hand_over(FreeEvent::Forget(key, self.stream.clone()));
        // The header follows when the last abort handle drops its share.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::atomic::Ordering::Relaxed;

    fn flag() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(false))
    }

    /// A stand-in kernel stream: its id and whether its kernel has ended.
    struct FakeStream(u32, Arc<AtomicBool>);

    impl Passed for FakeStream {
        fn passed(&self) -> bool {
            self.1.load(Relaxed)
        }
    }

    impl KernelStream for FakeStream {
        fn same(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }

    /// A stand-in mark on a user's stream: whether the stream has passed it.
    struct FakeMark(Arc<AtomicBool>);

    impl Passed for FakeMark {
        fn passed(&self) -> bool {
            self.0.load(Relaxed)
        }
    }

    /// Memory that says when it is freed.
    struct Tracked(Arc<AtomicBool>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.store(true, Relaxed);
        }
    }

    fn park(ctx: usize, kernel: FakeStream, marks: Vec<FakeMark>, freed: &Arc<AtomicBool>) -> FreeEvent<FakeStream, FakeMark> {
        FreeEvent::Park(Parked { ctx, kernel: Some(kernel), marks, memory: Box::new(Tracked(freed.clone())) })
    }

    /// Waits up to 10 s for `done`.
    fn within_10s(done: impl Fn() -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while !done() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        done()
    }

    /// The reaper frees what is handed over until the process exits; after
    /// `stop_reaping` (the exit handler) it looks no more and ends, leaving what is handed
    /// over then parked. The process's own reaper and exit handler are those of the GPU
    /// paths, which no host test starts: this test's reaper is the only one.
    #[test]
    fn the_reaper_frees_until_the_exit_handler_stops_it() {
        let memory = |freed: &Arc<AtomicBool>| FreeEvent::Park(Parked { ctx: 7, kernel: None, marks: Vec::new(), memory: Box::new(Tracked(freed.clone())) });
        let reaper = std::thread::spawn(reap);
        let (before_exit, after_exit) = (flag(), flag());
        hand_over(memory(&before_exit));
        assert!(within_10s(|| before_exit.load(Relaxed)), "the reaper frees memory nothing holds back");
        stop_reaping();
        hand_over(memory(&after_exit));
        assert!(within_10s(|| reaper.is_finished()), "the reaper ends once woken after the exit handler");
        assert!(!after_exit.load(Relaxed), "nothing is freed after the exit handler");
    }

    /// Parked allocations are freed as soon as their kernel has ended and no other loop of
    /// their context runs, at the next look, not at process exit; another context's running
    /// loop does not hold them back.
    #[test]
    fn parked_memory_is_freed_once_its_kernel_and_its_context_are_quiet() {
        let (a_ended, b_ended, other_ctx_ended) = (flag(), flag(), flag());
        let (a_freed, b_freed) = (flag(), flag());
        let mut frees: DeferredFrees<FakeStream, FakeMark> = DeferredFrees { running: Vec::new(), parked: Vec::new() };
        frees.running.push((1, FakeStream(1, a_ended.clone())));
        frees.running.push((1, FakeStream(2, b_ended.clone())));
        frees.running.push((2, FakeStream(3, other_ctx_ended.clone())));
        // Loop 1 is dropped while its kernel still runs.
        frees.apply(park(1, FakeStream(1, a_ended.clone()), Vec::new(), &a_freed));
        frees.apply(FreeEvent::Forget(1, FakeStream(1, a_ended.clone())));
        assert!(frees.collect_all(), "still parked");
        assert!(!a_freed.load(Relaxed), "its kernel may still read it");
        a_ended.store(true, Relaxed);
        frees.collect(1);
        assert!(!a_freed.load(Relaxed), "loop 2 of the context still runs: a free could wait for it");
        // Loop 2's kernel ends (shut down), still not dropped.
        b_ended.store(true, Relaxed);
        frees.collect(1);
        assert!(a_freed.load(Relaxed), "freed at the next look once the context is quiet");
        frees.apply(park(1, FakeStream(2, b_ended.clone()), Vec::new(), &b_freed));
        frees.apply(FreeEvent::Forget(1, FakeStream(2, b_ended.clone())));
        assert!(!frees.collect_all(), "nothing left parked");
        assert!(b_freed.load(Relaxed), "loop 3 runs in another context");
        assert_eq!(frees.running.len(), 1);
    }

    /// A destroyed rank's wait for its memory: done once every piece of its context is
    /// freed, pending while its work has not ended, given up at once while another loop
    /// of the context runs (and another context's pieces are not waited for).
    #[test]
    fn a_drain_says_what_is_left_of_a_contexts_memory() {
        let (kernel_ended, mark_passed, other_loop_ended, other_ctx_ended) = (flag(), flag(), flag(), flag());
        let (freed, other_ctx_freed) = (flag(), flag());
        let mut frees: DeferredFrees<FakeStream, FakeMark> = DeferredFrees { running: Vec::new(), parked: Vec::new() };
        frees.running.push((1, FakeStream(1, kernel_ended.clone())));
        frees.running.push((1, FakeStream(2, other_loop_ended.clone())));
        frees.apply(park(1, FakeStream(1, kernel_ended.clone()), vec![FakeMark(mark_passed.clone())], &freed));
        frees.apply(FreeEvent::Forget(1, FakeStream(1, kernel_ended.clone())));
        frees.apply(park(2, FakeStream(3, other_ctx_ended), Vec::new(), &other_ctx_freed));
        kernel_ended.store(true, Relaxed);
        assert_eq!(frees.drain(1), Drained::HeldByALoop, "loop 2 of the context runs");
        other_loop_ended.store(true, Relaxed);
        assert_eq!(frees.drain(1), Drained::Pending, "a user's stream has not passed the call");
        assert!(!freed.load(Relaxed));
        mark_passed.store(true, Relaxed);
        assert_eq!(frees.drain(1), Drained::Done);
        assert!(freed.load(Relaxed), "freed by the drain itself");
        assert!(!other_ctx_freed.load(Relaxed), "another context's memory is not this drain's");
    }

    /// Memory whose stream-ordered calls left work on users' streams is freed only once
    /// every such stream has passed its mark, whatever the loop's own kernel did: a stream
    /// that received work and has not passed it keeps the memory alive.
    #[test]
    fn parked_memory_waits_for_every_stream_its_calls_went_to() {
        let (kernel_ended, first_passed, second_passed, freed) = (flag(), flag(), flag(), flag());
        let mut frees: DeferredFrees<FakeStream, FakeMark> = DeferredFrees { running: Vec::new(), parked: Vec::new() };
        frees.running.push((7, FakeStream(1, kernel_ended.clone())));
        frees.apply(park(7, FakeStream(1, kernel_ended.clone()), vec![FakeMark(first_passed.clone()), FakeMark(second_passed.clone())], &freed));
        frees.apply(FreeEvent::Forget(7, FakeStream(1, kernel_ended.clone())));
        kernel_ended.store(true, Relaxed);
        assert!(frees.collect_all());
        assert!(!freed.load(Relaxed), "the kernel has ended, but no user's stream has passed its call");
        first_passed.store(true, Relaxed);
        assert!(frees.collect_all());
        assert!(!freed.load(Relaxed), "one stream has not passed its call yet");
        second_passed.store(true, Relaxed);
        assert!(!frees.collect_all());
        assert!(freed.load(Relaxed), "every stream has passed: freed at the next look");
        // The marks alone are not enough: the loop's own kernel as before.
        let (running, passed, freed) = (flag(), Arc::new(AtomicBool::new(true)), flag());
        frees.apply(park(8, FakeStream(2, running.clone()), vec![FakeMark(passed)], &freed));
        assert!(frees.collect_all());
        assert!(!freed.load(Relaxed), "the loop's kernel still runs");
        running.store(true, Relaxed);
        assert!(!frees.collect_all());
        assert!(freed.load(Relaxed));
    }

    /// The ring route's stream wait (`cuStreamWaitValue32`) reads 32 bits at
    /// `STREAM_DONE_OFFSET`: the whole of `stream_done`, so that the loop's store and the
    /// stream's read are accesses of one size.
    #[test]
    fn the_ring_routes_stream_wait_reads_the_whole_stream_done_word() {
        fn field_size<F>(_: impl Fn(&LoopState) -> &F) -> usize {
            size_of::<F>()
        }
        assert_eq!(field_size(|state| &state.stream_done), size_of::<u32>());
        assert!(STREAM_DONE_OFFSET.is_multiple_of(4), "the wait's word is 4-byte aligned");
    }

    /// A call is in a burst only when one returned before it, less than the gap before;
    /// a zero gap makes no bursts.
    #[test]
    fn a_call_is_in_a_burst_only_right_behind_a_returned_one() {
        let gap = Duration::from_nanos(500);
        assert!(!in_burst(0, 100, gap), "no call before it");
        assert!(in_burst(1_000, 1_499, gap));
        assert!(!in_burst(1_000, 1_500, gap), "exactly the gap after it");
        assert!(!in_burst(1_000, 9_000, gap));
        assert!(in_burst(1_000, 900, gap), "another thread's call returned after this one's clock read");
        assert!(!in_burst(1_000, 1_001, Duration::ZERO));
    }

    /// Only a loop of one resident channel sleeps, and never with a zero time.
    #[test]
    fn only_a_one_channel_loop_gets_a_sleep_time() {
        let one = LoopConfig { channels: 1, sleep_after: Some(Duration::from_micros(1500)), ..LoopConfig::default() };
        assert_eq!(one.sleep_after_ns(), 1_500_000);
        assert_eq!(LoopConfig { channels: 2, ..one }.sleep_after_ns(), 0, "two channels would have to leave together");
        assert_eq!(LoopConfig { sleep_after: None, ..one }.sleep_after_ns(), 0);
        assert!(LoopConfig { sleep_after: Some(Duration::ZERO), ..one }.validate().is_err());
        assert!(one.validate().is_ok());
    }

    #[test]
    fn placements_resolve_to_one_sm_per_channel() {
        assert_eq!(Placement::Hardware.sms(24, 132).unwrap(), None);
        assert_eq!(Placement::Tpcs.sms(3, 132).unwrap(), Some(vec![2, 4, 6]));
        assert_eq!(Placement::Tpcs.sms(65, 132).unwrap().unwrap().last(), Some(&130));
        assert!(Placement::Tpcs.sms(66, 132).is_err(), "more channels than TPCs after the first");
        let listed: Placement = "8, 2,130".parse().unwrap();
        assert_eq!(listed.sms(3, 132).unwrap(), Some(vec![8, 2, 130]));
        assert!(listed.sms(4, 132).is_err(), "one SM per channel");
        assert!(listed.sms(3, 130).is_err(), "an SM the device lacks");
        assert_eq!("tpcs".parse::<Placement>().unwrap(), Placement::Tpcs);
        assert_eq!("hardware".parse::<Placement>().unwrap(), Placement::Hardware);
        for bad in ["", "1,x", "3,3", "256"] {
            assert!(bad.parse::<Placement>().is_err(), "{bad:?}");
        }
    }
}
