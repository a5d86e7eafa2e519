//! Communicators: N ranks over M ≤ N GPUs of one process (several ranks may share a GPU,
//! each its own work loop on its own stream), peer access between the GPUs, per-channel
//! connection FIFOs. The API is shaped like `cudarc::nccl::Comm`: one [`Comm`] per rank,
//! collectives on the rank's stream (stream-ordered: one launch of a one-thread call
//! kernel hands the item to the rank's persistent loop and waits for it), every call returning
//! `Result`; `abort()` and `async_error()` never block.
//!
//! This module wires and drives ranks; it never chooses an algorithm, a chunk or a
//! channel: the device loop does.
//!
//! # Capturing calls in a CUDA graph
//!
//! Every call is one kernel launch on the rank's stream, so it can be captured and
//! replayed (a captured call keeps the rank's loop awake for good: see
//! [`CommConfig::idle_sleep`]). One step is needed with cudarc's own buffers: when a context has several
//! streams, cudarc tracks each `CudaSlice`'s uses with events, and a capturing stream
//! cannot wait on an event recorded outside the capture. Allocate the buffers you capture
//! with while the context's event tracking is off: it applies to the slices created
//! meanwhile only (order their uses on other streams yourself), not to the whole context.
//!
//! ```no_run
//! use host_shim::cudarc::driver::sys;
//! use host_shim::comm::{Comm, ReduceOp};
//! use host_shim::{Error, device};
//!
//! fn main() -> host_shim::Result<()> {
//!     let mut streams = Vec::new();
//!     let mut bufs = Vec::new();
//!     for ordinal in 0..2 {
//!         let ctx = device::context(ordinal)?;
//!         let stream = ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
//!         // SAFETY: the slice allocated meanwhile is used on `stream` only, and freed
//!         // once `stream` is idle.
//!         unsafe { ctx.disable_event_tracking() };
//!         bufs.push(stream.alloc_zeros::<f32>(1 << 20).map_err(Error::cuda("cuMemAlloc"))?);
//!         // SAFETY: turns tracking back on for slices allocated from now on.
//!         unsafe { ctx.enable_event_tracking() };
//!         streams.push(stream);
//!     }
//!     let comms = Comm::from_devices(streams)?;
//!     let mut graphs = Vec::new();
//!     for (comm, buf) in comms.iter().zip(bufs.iter_mut()) {
//!         let stream = comm.stream();
//!         stream
//!             .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED)
//!             .map_err(Error::cuda("cuStreamBeginCapture"))?;
//!         comm.all_reduce_in_place(buf, ReduceOp::Sum)?;
//!         let graph = stream.end_capture(sys::CUgraphInstantiate_flags(0)).map_err(Error::cuda("cuStreamEndCapture"))?;
//!         graphs.push(graph);
//!     }
//!     for _ in 0..10 {
//!         for graph in graphs.iter().flatten() {
//!             graph.launch().map_err(Error::cuda("cuGraphLaunch"))?;
//!         }
//!     }
//!     for comm in &comms {
//!         comm.stream().synchronize().map_err(Error::cuda("cuStreamSynchronize"))?;
//!     }
//!     Ok(())
//! }
//! ```

mod across;
mod config;
mod id;
mod matmul;
pub mod join;
#[cfg(feature = "testing")]
pub mod tuning;
#[cfg(not(feature = "testing"))]
mod tuning;
#[cfg(feature = "testing")]
pub mod wiring;
#[cfg(not(feature = "testing"))]
pub(crate) mod wiring;

pub use config::{CommConfig, parse_bytes};
pub use id::{COMM_ID_BYTES, CommId};
pub use matmul::CommMatmul;
#[cfg(feature = "testing")]
pub use tuning::Tuning;
#[cfg(not(feature = "testing"))]
use tuning::Tuning;
pub use crate::queue::Ticket;
pub use crate::work::Placement;

// At the bottom of the crate (`crate::op`), below `shmem` as well, which takes the same
// element types; named here, where callers use them.
pub use crate::op::{Element, ReduceOp, scalar_arg};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::{CudaContext, CudaStream, DevicePtr, DevicePtrMut, result};
use device_rt::conn::ChannelStats;
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::algo::{AlgorithmChoice, CollFunction, NO_PEER, NVLS_MIN_THREADS, Staging, plan};
use device_rt::work::{BadItem, ITEM_OUTPUT_PEER_MAPPED, WorkItem, WorkKind};
use zerocopy::FromBytes;

use crate::device;
use crate::linking::LinkInput;
use crate::memory::{BufferInfo, buffer_info, check_extent, lies_in};
use crate::module::Module;
use crate::queue::AbortHandle;
use crate::shmem::{Heap, HeapAbortHandle};
use crate::work::{DeviceAlloc, LoopConfig, WorkLoop};
use crate::{Error, Result};
use wiring::Layout;

/// Aborts every rank of a communicator from any thread: `Send + Sync + Clone`, never
/// blocks, valid after the communicator is dropped (it holds a share of every rank's
/// queue header). [`Comm`] itself is `Send` but not `Sync`: take one of these
/// ([`Comm::abort_handle`]) to abort from another thread.
#[derive(Clone, Debug)]
pub struct CommAbortHandle {
    ranks: Arc<Vec<AbortHandle>>,
    /// For a rank of a communicator across processes: the rank, and its word to the other
    /// processes' ranks.
    across: Option<(u32, crate::bootstrap::WatchAbort)>,
    /// The heaps of the communicator's collective matmuls alive now ([`CommMatmul`]),
    /// aborted with it.
    matmuls: Arc<Mutex<Vec<HeapAbortHandle>>>,
}

impl CommAbortHandle {
    /// Sets every rank's abort flag: waits in progress end, later calls fail. Across
    /// processes, also tells every other rank (which stops with `Error::RankFailed`
    /// naming this one).
    ///
    /// Ordering: one release store per rank (see the loop queue's `AbortHandle::abort`).
    /// Then aborts the heaps of its collective matmuls (under a lock that is only ever
    /// held to add, remove or abort one, never across a wait).
    pub fn abort(&self) {
        self.ranks.iter().for_each(AbortHandle::abort);
        if let Some((rank, word)) = &self.across {
            word.abort(&format!("rank {rank} aborted its communicator"));
        }
        self.linked_matmuls().iter().for_each(HeapAbortHandle::abort);
    }

    /// A handle of `ranks`' abort flags, with none of the other processes' and no
    /// collective matmul yet.
    fn of_ranks(ranks: Vec<AbortHandle>) -> Self {
        Self { ranks: Arc::new(ranks), across: None, matmuls: Arc::default() }
    }

    fn linked_matmuls(&self) -> std::sync::MutexGuard<'_, Vec<HeapAbortHandle>> {
        self.matmuls.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Aborts `heap` with the communicator from now on (at once, if it was aborted).
    ///
    /// Ordering: the heap is added under the lock, then the ranks' flags read: an abort
    /// that took the lock before the addition set its flags before (the lock orders the
    /// two), one that took it after finds the heap in the list.
    fn link(&self, heap: HeapAbortHandle) {
        self.linked_matmuls().push(heap.clone());
        if self.ranks.iter().any(AbortHandle::aborted) {
            heap.abort();
        }
    }

    /// Stops aborting `heap` with the communicator.
    fn unlink(&self, heap: &HeapAbortHandle) {
        self.linked_matmuls().retain(|h| !h.same_word(heap));
    }

    /// The error a rank's loop stopped with (or [`Error::Aborted`]), if one did.
    fn stopped(&self) -> Option<Error> {
        self.ranks.iter().find_map(AbortHandle::stopped)
    }

    /// Whether `other` aborts the same ranks.
    fn same_ranks(&self, other: &CommAbortHandle) -> bool {
        Arc::ptr_eq(&self.ranks, &other.ranks)
    }
}

/// The block of an in-place buffer of `len` elements split over `nranks` ranks.
fn block_of(len: usize, nranks: u32) -> Result<u64> {
    if !len.is_multiple_of(nranks as usize) {
        return Err(Error::InvalidArgument(format!("an in-place buffer of {len} elements does not split into {nranks} equal blocks")));
    }
    Ok((len / nranks as usize) as u64)
}

/// The item of an in-place reduce-scatter or all-gather on rank `rank` over the buffer at
/// `base` of `world_size × n` elements of `dtype`, in NCCL's layout: reduce-scatter's
/// output and all-gather's input are block `rank` of the buffer. What
/// [`Comm::reduce_scatter_in_place`] and [`Comm::all_gather_in_place`] enqueue (also for
/// loops fed directly, such as the host twin's).
pub fn in_place_item(function: CollFunction, dtype: DataType, op: RedOpKind, op_arg: u64, base: u64, n: u64, rank: u32) -> WorkItem {
    // At most the buffer's own length in bytes: no overflow for a real buffer.
    let block = base + u64::from(rank) * n * dtype.size() as u64;
    let (src, dst) = if function == CollFunction::AllGather { (block, base) } else { (base, block) };
    WorkItem::collective(function, dtype, op, op_arg, src, dst, n, 0)
}

/// Refuses a collective `item` that `algorithm`, forced on a communicator with
/// `staging`, cannot run (the device would stop with `BadItem::UnfitAlgorithm`). Items of
/// other kinds, and collectives under the device's own choice, pass.
pub fn check_algorithm(item: &WorkItem, staging: Staging, algorithm: AlgorithmChoice) -> Result<()> {
    let (Some(function), Some(dtype)) = (CollFunction::from_u32(item.function), DataType::from_u8(item.dtype)) else { return Ok(()) };
    if item.kind != WorkKind::Collective as u8 {
        return Ok(());
    }
    match plan(function, dtype.size() as u64, item.count, staging, algorithm) {
        Ok(_) => Ok(()),
        Err(why) => Err(Error::AlgorithmUnfit { algorithm, function, why }),
    }
}

/// Refuses a communicator that forces NVLS with channels of fewer than
/// [`NVLS_MIN_THREADS`] threads (all-reduce's three warp groups need them).
pub fn check_nvls_threads(algorithm: AlgorithmChoice, threads: u32) -> Result<()> {
    if algorithm == AlgorithmChoice::Nvls && threads < NVLS_MIN_THREADS {
        return Err(Error::InvalidArgument(format!("a communicator that forces NVLS needs at least {NVLS_MIN_THREADS} threads a channel, not {threads}")));
    }
    Ok(())
}

/// The input and the output of `item` on its rank of a communicator of `nranks` ranks,
/// each as what it is (for errors), its address and the bytes a collective reads or
/// writes there (items of other kinds: 0, their buffers' devices alone are checked).
fn buffer_extents(item: &WorkItem, nranks: u32) -> Result<[(&'static str, u64, u64); 2]> {
    let bad = |reason| Error::BadWorkItem { reason, seq: 0 };
    let (mut input, mut output) = (0, 0);
    if item.kind == WorkKind::Collective as u8 {
        let function = CollFunction::from_u32(item.function).ok_or(bad(BadItem::UnknownCollective))?;
        let size = DataType::from_u8(item.dtype).ok_or(bad(BadItem::UnknownDataType))?.size() as u64;
        let recv_count = if function == CollFunction::SendRecv { item.op_arg } else { 0 };
        let (n_input, n_output) = function.extents(item.count, recv_count, u64::from(nranks)).ok_or(bad(BadItem::CountOverflow))?;
        input = n_input.checked_mul(size).ok_or(bad(BadItem::CountOverflow))?;
        output = n_output.checked_mul(size).ok_or(bad(BadItem::CountOverflow))?;
    }
    Ok([("the input", item.src, input), ("the output", item.dst, output)])
}

/// Refuses the buffer `what` of `bytes` at `addr`, which the driver says is `buffer`, used
/// by a rank of device `ordinal`: device memory of another device, or bytes that do not
/// all lie in the allocation that holds its first address.
fn check_buffer(what: &str, (addr, bytes): (u64, u64), buffer: &BufferInfo, ordinal: usize) -> Result<()> {
    if let Some(device) = buffer.device
        && device != ordinal
    {
        return Err(Error::WrongDevice { buffer: device, rank: ordinal });
    }
    check_extent(what, buffer.allocation, (addr, bytes))
}

/// Refuses `item`, of a rank of device `ordinal` in a communicator of `nranks` ranks, if
/// a buffer it names is device memory of another device, or (a collective) if the bytes
/// it reads or writes in a buffer do not all lie in the allocation that holds the
/// buffer's first address (`info` says what the driver knows of an address); else says
/// whether its output is mapped for the rank's peers (see [`BufferInfo::peer_mapped`]).
fn check_buffers(item: &WorkItem, nranks: u32, ordinal: usize, info: impl Fn(u64) -> Result<BufferInfo>) -> Result<bool> {
    let mut output_mapped = false;
    let mut asked: Option<BufferInfo> = None;
    for (index, (what, addr, bytes)) in buffer_extents(item, nranks)?.into_iter().enumerate() {
        if addr == 0 {
            continue;
        }
        // An output in the input's allocation (in place: the same buffer, or a block of
        // it) is not asked about again.
        let buffer = match asked {
            Some(input) if lies_in(input.allocation, (addr, bytes.max(1))) => input,
            _ => info(addr)?,
        };
        check_buffer(what, (addr, bytes), &buffer, ordinal)?;
        if index == 1 {
            output_mapped = buffer.peer_mapped;
        }
        asked = Some(buffer);
    }
    Ok(output_mapped)
}

/// One rank of a communicator.
pub struct Comm {
    rank: u32,
    nranks: u32,
    stream: Arc<CudaStream>,
    lp: WorkLoop,
    /// Every rank's abort flag: aborting one rank aborts the communicator.
    aborts: CommAbortHandle,
    /// Device address of this rank's `[ChannelStats; nchannels]`, when kept.
    stats: Option<u64>,
    /// What the communicator has for the one-shot/two-shot algorithms, and the algorithm it
    /// asks for: what [`check_algorithm`] checks calls against.
    staging: Staging,
    algorithm: AlgorithmChoice,
    /// The module the rank's loop runs (its collective matmuls' kernels are in it too).
    module: Module,
    /// The other devices of the communicator's ranks: those a buffer must be mapped for
    /// before peers write into it.
    peer_devices: Vec<usize>,
    /// Peers may write into this rank's outputs where they are mapped for them
    /// ([`Tuning::direct`]).
    direct: bool,
    /// The other processes' ranks, for a communicator across processes.
    across: Option<across::Across>,
}

impl Comm {
    /// One rank per stream, in order (rank `r` runs on `streams[r]`'s device; several
    /// streams may share a device), configured by the `FERROCCL_*` environment variables
    /// over the defaults ([`CommConfig::from_env`]).
    pub fn from_devices(streams: Vec<Arc<CudaStream>>) -> Result<Vec<Self>> {
        Self::from_devices_with(streams, CommConfig::from_env()?, &mut |_, _| Ok(()))
    }

    /// As [`Comm::from_devices`] with `cfg` (and the tunables' environment variables,
    /// [`CommConfig`]); `before_start(rank, ctx)` runs once per rank after every
    /// allocation of the communicator and before any loop starts (the place to allocate
    /// more device memory: CUDA may make an allocation wait for running kernels).
    ///
    /// Refuses ([`Error::DeviceLimit`]) a layout whose channels do not all fit on their
    /// device at once, and one whose channels fill the device: each rank's calls launch a
    /// one-CTA call kernel that must find room beside the running loops, so the ranks of
    /// a device keep at least one channel's room free per rank.
    pub fn from_devices_with(
        streams: Vec<Arc<CudaStream>>,
        cfg: CommConfig,
        before_start: &mut dyn FnMut(u32, &Arc<CudaContext>) -> Result<()>,
    ) -> Result<Vec<Self>> {
        crate::init()?;
        Self::build(streams, cfg.tuning()?, before_start, None, &[])
    }

    /// As [`Comm::from_devices_with`] (no hook), the ranks' loops running the module that
    /// [`Module::load_linked`] makes of ferroccl's and `code` (the application's device
    /// code: PTX, cubins, `nvcc -dc` objects): the application's own device function
    /// (`ferroccl_app_work`, `linker/include/ferroccl_device.h`) then runs in the loops,
    /// stream-ordered between collectives, through [`Comm::call_application`]. Channels of
    /// at most 256 threads (the linked module has no register-capped variant).
    pub fn from_devices_linked(streams: Vec<Arc<CudaStream>>, cfg: CommConfig, code: &[(&str, LinkInput<'_>)]) -> Result<Vec<Self>> {
        crate::init()?;
        let tuning = cfg.tuning()?;
        if ferroccl_ptx_builder::sass::work_loop_max_registers(tuning.loop_cfg.threads).is_some() {
            return Err(Error::InvalidArgument(format!("{} threads a channel: a linked module runs loops of at most 256", tuning.loop_cfg.threads)));
        }
        Self::build(streams, tuning, &mut |_, _| Ok(()), None, code)
    }

    /// As [`Comm::from_devices_with`], every tunable given (tests and benchmarks).
    #[cfg(feature = "testing")]
    pub fn from_devices_tuned(
        streams: Vec<Arc<CudaStream>>,
        tuning: Tuning,
        before_start: &mut dyn FnMut(u32, &Arc<CudaContext>) -> Result<()>,
    ) -> Result<Vec<Self>> {
        crate::init()?;
        Self::build(streams, tuning, before_start, None, &[])
    }

    /// As [`Comm::from_devices_with`], on the symmetric heap `heap` of this process's PEs:
    /// rank `r` is PE `r`, `streams[r]` a stream of PE `r`'s device. An out-of-place
    /// all_reduce whose input lies in the rank's heap (what [`Heap::malloc`] gave it, the
    /// same allocation on every rank), with an operator other than PreMulSum, reads every
    /// rank's input in place where it runs two-shot, staging nothing (zero copy): its
    /// first flag says the input is ready, and it completes only once every rank has read
    /// it. Every other call (one-shot too: its staged copy costs less than the extra flag
    /// round trip reading in place needs) runs as on any communicator. Ranks whose calls
    /// differ (one input in the heap and another not, or at another offset) stop with
    /// [`Error::BadWorkItem`] (`BadItem::RanksDisagree`) before reading each other's data.
    ///
    /// # Safety
    /// `heap` outlives the communicators' loops: shut them down ([`Comm::shutdown`]) or
    /// drop them before the heap is freed or finalized (the loops read its handles and
    /// every PE's heap).
    pub unsafe fn from_heap(heap: &Heap, streams: Vec<Arc<CudaStream>>, cfg: CommConfig) -> Result<Vec<Self>> {
        Self::on_heap(heap, streams, cfg.tuning()?)
    }

    /// As [`Comm::from_heap`], every tunable given (tests and benchmarks).
    ///
    /// # Safety
    /// As [`Comm::from_heap`]'s.
    #[cfg(feature = "testing")]
    pub unsafe fn from_heap_tuned(heap: &Heap, streams: Vec<Arc<CudaStream>>, tuning: Tuning) -> Result<Vec<Self>> {
        Self::on_heap(heap, streams, tuning)
    }

    /// The communicators of [`Comm::from_heap`] with `cfg`. Safe itself (it only reads
    /// the heap's handles); what the loops do with them later is the callers' contract.
    fn on_heap(heap: &Heap, streams: Vec<Arc<CudaStream>>, cfg: Tuning) -> Result<Vec<Self>> {
        let n = streams.len();
        if heap.n_pes() != n || heap.local_pes() != (0..n).collect::<Vec<_>>() {
            return Err(Error::InvalidArgument(format!("a communicator of {n} ranks on a heap of {} PEs, {:?} of them in this process: every PE must be a rank, in order", heap.n_pes(), heap.local_pes())));
        }
        for (pe, s) in streams.iter().enumerate() {
            if heap.device_of(pe) != Some(s.context().ordinal()) {
                return Err(Error::InvalidArgument(format!("rank {pe}'s stream is on device {}, PE {pe} on {:?}", s.context().ordinal(), heap.device_of(pe))));
            }
        }
        let handles = (0..n).map(|pe| heap.handle(pe)).collect();
        Self::build(streams, cfg, &mut |_, _| Ok(()), Some(handles), &[])
    }

    /// The communicators of [`Comm::from_devices_with`], on the heap whose handles are
    /// `heap` (one per rank) if given.
    fn build(
        streams: Vec<Arc<CudaStream>>,
        cfg: Tuning,
        before_start: &mut dyn FnMut(u32, &Arc<CudaContext>) -> Result<()>,
        heap: Option<Vec<u64>>,
        code: &[(&str, LinkInput<'_>)],
    ) -> Result<Vec<Self>> {
        let nranks = u32::try_from(streams.len()).map_err(|_| Error::InvalidArgument("too many ranks".into()))?;
        check_tuning(&cfg)?;
        let mut contexts: BTreeMap<usize, Arc<CudaContext>> = BTreeMap::new();
        for s in &streams {
            contexts.entry(s.context().ordinal()).or_insert_with(|| s.context().clone());
        }
        for (a, ca) in &contexts {
            for (b, cb) in &contexts {
                if a != b {
                    device::enable_peer_access(ca, cb)?;
                }
            }
        }
        let mut modules = BTreeMap::new();
        for (ordinal, ctx) in &contexts {
            log::info!("communicator: loading the module on device {ordinal}");
            let module = if code.is_empty() { Module::load_for_threads(ctx, cfg.loop_cfg.threads)? } else { Module::load_linked(ctx, code)? };
            modules.insert(*ordinal, module);
        }
        let cfg = if cfg.fit_call_channels { fit_call_channels(cfg, &streams, &modules)? } else { cfg };
        let layout = Layout::new(cfg.shape(nranks))?;
        let mut loops = Vec::new();
        let mut blocks = Vec::new();
        for s in &streams {
            let ctx = s.context();
            let ranks_here = streams.iter().filter(|t| t.context().ordinal() == ctx.ordinal()).count();
            let loop_cfg = LoopConfig { placement: cfg.placement_on(ranks_here, device::sm_count(ctx)?), ..cfg.loop_cfg };
            loops.push(WorkLoop::new(ctx, &modules[&ctx.ordinal()], loop_cfg)?);
            blocks.push(DeviceAlloc::zeroed(ctx, layout.block_bytes as usize)?);
        }
        // Every channel of every rank of a device must be resident at once: a channel
        // waiting for a peer that never gets an SM would wait until its spin budget ends.
        // And each rank's stream-ordered calls launch a call kernel (its first CTA the
        // submitter: 32 threads without call channels, else a channel's size; then one CTA
        // per call channel) that must run while the loops hold their SMs and every other
        // rank's call kernel runs: the loops must leave one call kernel's room per rank.
        for (ordinal, ctx) in &contexts {
            let ranks_here = streams.iter().filter(|s| s.context().ordinal() == *ordinal).count() as u32;
            let per_sm = loops[streams.iter().position(|s| s.context().ordinal() == *ordinal).unwrap_or(0)].channels_per_sm()?;
            if check_room(*ordinal, ranks_here, device::sm_count(ctx)? * per_sm, &cfg.loop_cfg)? {
                for (lp, s) in loops.iter_mut().zip(&streams) {
                    if s.context().ordinal() == *ordinal {
                        lp.allow_overlapping_call_kernels();
                    }
                }
            }
        }
        let bases: Vec<u64> = blocks.iter().map(DeviceAlloc::ptr).collect();
        let mut images = Vec::with_capacity(blocks.len());
        for (rank, block) in blocks.iter().enumerate() {
            let image = layout.image_on_heap(rank as u32, &bases, heap.as_ref().map_or(0, |h| h[rank]))?;
            // SAFETY: the block holds at least `meta_bytes`; no kernel uses it yet.
            unsafe { block.upload(0, &image) }?;
            images.push(image);
        }
        for (rank, s) in streams.iter().enumerate() {
            before_start(rank as u32, s.context())?;
        }
        for ((lp, block), image) in loops.iter_mut().zip(blocks).zip(&images) {
            let addr = block.ptr();
            lp.attach_comm(Box::new(block), addr, image)?;
        }
        let aborts = CommAbortHandle::of_ranks(loops.iter().map(WorkLoop::abort_handle).collect());
        let mut comms = Vec::new();
        for (rank, (stream, mut lp)) in streams.into_iter().zip(loops).enumerate() {
            if let Err(e) = lp.start() {
                aborts.abort();
                return Err(e);
            }
            let stats = cfg.stats.then(|| bases[rank] + layout.stats);
            let module = modules[&stream.context().ordinal()].clone();
            let peer_devices = contexts.keys().copied().filter(|&d| d != stream.context().ordinal()).collect();
            comms.push(Comm { rank: rank as u32, nranks, stream, lp, aborts: aborts.clone(), stats, staging: layout.staging(), algorithm: cfg.algorithm, module, peer_devices, direct: cfg.direct, across: None });
        }
        Ok(comms)
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    /// Ranks in the communicator.
    pub fn world_size(&self) -> usize {
        self.nranks as usize
    }

    /// The stream this rank's collectives are ordered on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Where this rank's channels run.
    pub fn placement(&self) -> Placement {
        self.lp.placement()
    }

    /// This rank's channels, resident and call (every rank has as many; fewer call channels
    /// than configured where `Tuning::fit_call_channels` fitted them to a device).
    pub fn channels(&self) -> u32 {
        self.lp.all_channels()
    }

    #[cfg(feature = "testing")]
    /// Whether this rank's loop has left the GPU to sleep after its sleep time with
    /// nothing to do ([`LoopConfig::sleep_after`]); the next call launches it again.
    pub fn loop_asleep(&self) -> bool {
        self.lp.asleep()
    }

    #[cfg(feature = "testing")]
    /// This rank's loop's queue header as the host reads it now: whether the loop is
    /// awake or asleep, its submissions, status, exits and completions (failure reports).
    pub fn loop_report(&self) -> String {
        self.lp.header_report()
    }

    #[cfg(feature = "testing")]
    /// Whether this rank's call kernels overlap the kernel before them on its stream (where
    /// its device holds two call kernels of every rank: see `call_kernels_may_overlap`).
    pub fn call_kernels_overlap(&self) -> bool {
        self.lp.call_kernels_overlap()
    }

    #[cfg(feature = "testing")]
    /// Keeps `alloc` alive until this rank's loop has stopped, then frees it with the
    /// loop's own memory: the way to tie memory allocated before the loop started (see
    /// [`Comm::from_devices_with`]) to the communicator without freeing it while the
    /// kernel runs (a free may wait for running kernels).
    pub fn keep_until_stopped(&mut self, alloc: DeviceAlloc) -> Result<()> {
        self.lp.adopt(alloc)
    }

    /// Aborts every rank's loop now: waits in progress end, later calls fail. Never
    /// blocks. From another thread, use [`Comm::abort_handle`].
    pub fn abort(&self) {
        self.aborts.abort();
    }

    /// A handle that aborts the whole communicator from any thread.
    pub fn abort_handle(&self) -> CommAbortHandle {
        self.aborts.clone()
    }

    /// The error this rank's loop stopped with, if it did. Never blocks.
    pub fn async_error(&self) -> Option<Error> {
        self.across.as_ref().and_then(across::Across::failure).or_else(|| self.lp.async_error())
    }

    /// `result`, its error replaced by another rank's failure where one stopped the
    /// communicator (its loop's abort is that failure's consequence).
    /// Looked at only on an error: a successful call takes no lock.
    fn explained<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|e| self.across.as_ref().and_then(across::Across::failure).unwrap_or(e))
    }

    #[cfg(feature = "testing")]
    /// This rank's stream-ordered calls that took the ring route (see
    /// [`WorkLoop::enqueue_on_stream`]): with one resident channel and no call channels, a
    /// call that finds the stream idle; with call channels, no collective does.
    pub fn ring_routed(&self) -> u64 {
        self.lp.ring_routed()
    }

    /// This rank's channels' statistics (counts since the communicator started), when
    /// `FERROCCL_STATS=1` (`Tuning::stats`) asked for them. Synchronous: call it between operations.
    pub fn channel_stats(&self) -> Result<Option<Vec<ChannelStats>>> {
        let Some(addr) = self.stats else { return Ok(None) };
        let mut bytes = vec![0u8; self.lp.all_channels() as usize * size_of::<ChannelStats>()];
        self.stream.context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        // SAFETY: `addr` is this rank's counters in its live communicator block; the
        // copy waits on the rank's stream.
        unsafe { result::memcpy_dtoh_async(&mut bytes, addr, self.stream.cu_stream()) }.map_err(Error::cuda("cuMemcpyDtoHAsync"))?;
        crate::stream::wait(&self.stream, Duration::from_secs(60), "the channel statistics")?;
        Ok(Some(bytes.chunks_exact(size_of::<ChannelStats>()).map(|c| ChannelStats::read_from_bytes(c).unwrap_or_default()).collect()))
    }

    /// Checks `item` (alone, against the communicator and its algorithm as planned on
    /// `staging`, and its buffers against the rank's device and, for a collective, their
    /// extents against their allocations: [`check_buffers`]) without enqueueing it, and
    /// returns it as it is enqueued: a collective's `ITEM_OUTPUT_PEER_MAPPED` says what
    /// the driver says of its output (never set where the communicator allows no direct
    /// writes), whatever the caller set.
    fn check(&self, item: WorkItem, staging: Staging) -> Result<WorkItem> {
        item.validate().map_err(|reason| Error::BadWorkItem { reason, seq: 0 })?;
        item.validate_in_comm(self.rank, self.nranks).map_err(|reason| Error::BadWorkItem { reason, seq: 0 })?;
        check_algorithm(&item, staging, self.algorithm)?;
        let ctx = self.stream.context();
        let mapped = check_buffers(&item, self.nranks, ctx.ordinal(), |addr| buffer_info(addr, ctx.cu_ctx(), &self.peer_devices))?;
        let flag = if self.direct && mapped && item.kind == WorkKind::Collective as u8 { ITEM_OUTPUT_PEER_MAPPED } else { 0 };
        Ok(WorkItem { flags: (item.flags & !ITEM_OUTPUT_PEER_MAPPED) | flag, ..item })
    }

    /// The direct host path: checks `item` and puts it on the rank's queue (no stream
    /// order); [`Comm::wait`] waits for it.
    ///
    /// An item names raw addresses, so the call is `unsafe`:
    ///
    /// ```compile_fail,E0133
    /// # fn f(comm: &mut host_shim::comm::Comm, item: device_rt::work::WorkItem) {
    /// let _ = comm.enqueue(item);
    /// # }
    /// ```
    ///
    /// # Safety
    /// The host checks the item's form, its ranks and algorithm, that no buffer is another
    /// device's memory and, for a collective, that each buffer's bytes lie in one
    /// allocation; it cannot check that the memory is the caller's to use. Every address
    /// `item` carries (its buffers, a device function's word) names memory of this rank's
    /// device (or host memory mapped for it), whole extent (every byte the item's kind and
    /// counts make it read or write), that stays allocated, and that nothing else reads
    /// or writes but as the item's own protocol has it (the other ranks' items of the same
    /// call), until the item has completed: until [`Comm::wait`] has returned for its
    /// ticket (or the loop has stopped).
    pub unsafe fn enqueue(&mut self, item: WorkItem) -> Result<Ticket> {
        // The direct path spreads over the resident channels only (call channels come with
        // call kernels).
        let staging = if self.lp.all_channels() == self.lp.channels() { self.staging } else { Staging { channels: self.lp.channels(), ..self.staging } };
        let item = self.check(item, staging)?;
        // SAFETY: this function's contract.
        unsafe { self.lp.enqueue(item, Duration::from_secs(60)) }
    }

    /// Waits until `ticket` (and every earlier item of the direct path) has completed.
    pub fn wait(&self, ticket: Ticket, timeout: Duration) -> Result<()> {
        self.explained(self.lp.wait(ticket, timeout))
    }

    /// The stream-ordered path for a raw item (what every collective call takes): checks
    /// `item` and launches its call kernel on the rank's stream (see
    /// `WorkLoop::enqueue_on_stream`).
    ///
    /// ```compile_fail,E0133
    /// # fn f(comm: &host_shim::comm::Comm, item: device_rt::work::WorkItem) {
    /// let _ = comm.enqueue_on_stream(item);
    /// # }
    /// ```
    ///
    /// # Safety
    /// The host checks the item's form, its ranks and algorithm, that no buffer is another
    /// device's memory and, for a collective, that each buffer's bytes lie in one
    /// allocation; it cannot check that the memory is the caller's to use. Every address
    /// `item` carries (its buffers, a device function's word) names memory of this rank's
    /// device (or host memory mapped for it), whole extent (every byte the item's kind and
    /// counts make it read or write), that stays allocated, and that nothing else reads
    /// or writes but as the item's own protocol has it (the other ranks' items of the same
    /// call), until the item has completed: until the rank's stream has passed the call
    /// (work queued on it after the call, a stream-ordered free included, runs after the
    /// item).
    pub unsafe fn enqueue_on_stream(&self, item: WorkItem) -> Result<()> {
        // SAFETY: this function's contract, on the rank's own stream.
        unsafe { self.enqueue_on(&self.stream, item) }
    }

    /// [`Comm::enqueue_on_stream`] on `stream`, a stream of this rank's device other than
    /// the rank's own (what a C caller passes with each call). Calls on several streams
    /// run in the order they were made, as NCCL runs a communicator's: a call on another
    /// stream than the last one's first makes its stream wait for that call's work
    /// (outside a CUDA graph capture; a captured call is ordered by its graph's launches,
    /// which the caller orders with the communicator's other calls).
    ///
    /// # Safety
    /// As [`Comm::enqueue_on_stream`]'s, with `stream` in place of the rank's stream.
    pub unsafe fn enqueue_on(&self, stream: &CudaStream, item: WorkItem) -> Result<()> {
        if stream.context().ordinal() != self.stream.context().ordinal() {
            return Err(Error::WrongDevice { buffer: stream.context().ordinal(), rank: self.stream.context().ordinal() });
        }
        let item = self.check(item, self.staging)?;
        // SAFETY: this function's contract.
        self.explained(unsafe { self.lp.enqueue_on_stream(stream, item) })
    }

    /// The application's device function number `function` on `arg`, run by this rank's
    /// loop in stream order with the collectives (`WorkItem::application`; the module must
    /// hold the application's `ferroccl_app_work`: [`Comm::from_devices_linked`]). The
    /// function's writes are performed before the stream's next work; a status other than
    /// success stops the loop (later calls fail with its error: `BadItem::ApplicationRefused`,
    /// a timeout, an abort).
    ///
    /// # Safety
    /// `arg` is 8-byte aligned and not 0 (else the call is refused), and means what the
    /// application's function takes it to mean: usually the address of its arguments in
    /// this rank's device memory, with every buffer they name the function's to use until
    /// the stream has passed the call. The host cannot check any of it.
    pub unsafe fn call_application(&self, function: u32, arg: u64) -> Result<()> {
        // SAFETY: this function's contract is `enqueue_on_stream`'s for the item's `arg`.
        unsafe { self.enqueue_on_stream(WorkItem::application(function, arg)) }
    }

    /// [`Comm::enqueue_on_stream`] for the typed calls, whose buffers' addresses come from
    /// cudarc's `device_ptr`/`device_ptr_mut` on the rank's stream.
    ///
    /// # Safety
    /// Every buffer `item` names is the address a `DevicePtr`/`DevicePtrMut` gave for the
    /// rank's stream, and its guard lives until this returns: cudarc then records the use
    /// on that stream, so the memory stays allocated (a free waits for the stream) and
    /// other streams' uses wait for the call; the item's counts are what the buffers hold
    /// (checked against their lengths). `check` refuses buffers whose bytes do not lie in
    /// one allocation of the rank's device.
    unsafe fn enqueue_typed(&self, item: WorkItem) -> Result<()> {
        // SAFETY: the buffers live, and are this call's to use, until the stream has
        // passed it (this function's contract); so `enqueue_on_stream`'s.
        unsafe { self.enqueue_on_stream(item) }
    }

    fn need(what: &'static str, have: usize, want: usize) -> Result<()> {
        if have < want {
            return Err(Error::BufferTooSmall { what, have, want });
        }
        Ok(())
    }

    /// `recv = op(send of every rank)`, `send.len()` elements.
    pub fn all_reduce<T: Element, S: DevicePtr<T>, R: DevicePtrMut<T>>(&self, send: &S, recv: &mut R, op: ReduceOp) -> Result<()> {
        let n = send.len();
        Self::need("the receive buffer", recv.len(), n)?;
        let (kind, arg) = op.device(T::DTYPE, self.nranks);
        let (s, _s) = send.device_ptr(&self.stream);
        let (r, _r) = recv.device_ptr_mut(&self.stream);
        // SAFETY: the addresses come from the buffers' `device_ptr`/`device_ptr_mut` on
        // the rank's stream, whose guards live to the end of this call.
        unsafe { self.enqueue_typed(WorkItem::collective(CollFunction::AllReduce, T::DTYPE, kind, arg, s, r, n as u64, 0)) }
    }

    /// [`Comm::all_reduce`] in place.
    pub fn all_reduce_in_place<T: Element, R: DevicePtrMut<T>>(&self, buf: &mut R, op: ReduceOp) -> Result<()> {
        let n = buf.len();
        let (kind, arg) = op.device(T::DTYPE, self.nranks);
        let (b, _b) = buf.device_ptr_mut(&self.stream);
        // SAFETY: the addresses come from the buffers' `device_ptr`/`device_ptr_mut` on
        // the rank's stream, whose guards live to the end of this call.
        unsafe { self.enqueue_typed(WorkItem::collective(CollFunction::AllReduce, T::DTYPE, kind, arg, b, b, n as u64, 0)) }
    }

    /// `recv` = this rank's block of `op(send of every rank)`; `send` holds `world_size ×
    /// recv.len()` elements.
    pub fn reduce_scatter<T: Element, S: DevicePtr<T>, R: DevicePtrMut<T>>(&self, send: &S, recv: &mut R, op: ReduceOp) -> Result<()> {
        let n = recv.len();
        Self::need("the send buffer", send.len(), n * self.nranks as usize)?;
        let (kind, arg) = op.device(T::DTYPE, self.nranks);
        let (s, _s) = send.device_ptr(&self.stream);
        let (r, _r) = recv.device_ptr_mut(&self.stream);
        // SAFETY: the addresses come from the buffers' `device_ptr`/`device_ptr_mut` on
        // the rank's stream, whose guards live to the end of this call.
        unsafe { self.enqueue_typed(WorkItem::collective(CollFunction::ReduceScatter, T::DTYPE, kind, arg, s, r, n as u64, 0)) }
    }

    /// Block `r` of `recv` (`world_size × send.len()` elements) = `send` of rank `r`.
    pub fn all_gather<T: Element, S: DevicePtr<T>, R: DevicePtrMut<T>>(&self, send: &S, recv: &mut R) -> Result<()> {
        let n = send.len();
        Self::need("the receive buffer", recv.len(), n * self.nranks as usize)?;
        let (s, _s) = send.device_ptr(&self.stream);
        let (r, _r) = recv.device_ptr_mut(&self.stream);
        // SAFETY: the addresses come from the buffers' `device_ptr`/`device_ptr_mut` on
        // the rank's stream, whose guards live to the end of this call.
        unsafe { self.enqueue_typed(WorkItem::collective(CollFunction::AllGather, T::DTYPE, RedOpKind::Sum, 0, s, r, n as u64, 0)) }
    }

    /// [`Comm::reduce_scatter`] in place, in NCCL's layout: `buf` holds `world_size × n`
    /// elements (every rank's input); block `rank` of it receives this rank's block of
    /// `op(buf of every rank)`; the other blocks may be overwritten.
    pub fn reduce_scatter_in_place<T: Element, R: DevicePtrMut<T>>(&self, buf: &mut R, op: ReduceOp) -> Result<()> {
        let n = block_of(buf.len(), self.nranks)?;
        let (kind, arg) = op.device(T::DTYPE, self.nranks);
        let (b, _b) = buf.device_ptr_mut(&self.stream);
        // SAFETY: the addresses come from the buffers' `device_ptr`/`device_ptr_mut` on
        // the rank's stream, whose guards live to the end of this call.
        unsafe { self.enqueue_typed(in_place_item(CollFunction::ReduceScatter, T::DTYPE, kind, arg, b, n, self.rank)) }
    }

    /// [`Comm::all_gather`] in place, in NCCL's layout: `buf` holds `world_size × n`
    /// elements, this rank's input already at block `rank`; afterwards block `r` holds
    /// rank `r`'s.
    pub fn all_gather_in_place<T: Element, R: DevicePtrMut<T>>(&self, buf: &mut R) -> Result<()> {
        let n = block_of(buf.len(), self.nranks)?;
        let (b, _b) = buf.device_ptr_mut(&self.stream);
        // SAFETY: the addresses come from the buffers' `device_ptr`/`device_ptr_mut` on
        // the rank's stream, whose guards live to the end of this call.
        unsafe { self.enqueue_typed(in_place_item(CollFunction::AllGather, T::DTYPE, RedOpKind::Sum, 0, b, n, self.rank)) }
    }

    /// `recv = send of root`; `send` is read on the root only (`None`: in place there).
    pub fn broadcast<T: Element, S: DevicePtr<T>, R: DevicePtrMut<T>>(&self, send: Option<&S>, recv: &mut R, root: usize) -> Result<()> {
        let n = recv.len();
        let (r, _r) = recv.device_ptr_mut(&self.stream);
        let (s, _s) = match send {
            Some(send) => {
                Self::need("the send buffer", send.len(), n)?;
                let (p, sync) = send.device_ptr(&self.stream);
                (p, Some(sync))
            }
            None => (r, None),
        };
        // SAFETY: the addresses come from the buffers' `device_ptr`/`device_ptr_mut` on
        // the rank's stream, whose guards live to the end of this call.
        unsafe { self.enqueue_typed(WorkItem::collective(CollFunction::Broadcast, T::DTYPE, RedOpKind::Sum, 0, s, r, n as u64, root as u64)) }
    }

    /// On the root, `recv = op(send of every rank)`; `recv` is written on the root only.
    pub fn reduce<T: Element, S: DevicePtr<T>, R: DevicePtrMut<T>>(&self, send: &S, recv: &mut R, op: ReduceOp, root: usize) -> Result<()> {
        let n = send.len();
        Self::need("the receive buffer", recv.len(), n)?;
        let (kind, arg) = op.device(T::DTYPE, self.nranks);
        let (s, _s) = send.device_ptr(&self.stream);
        let (r, _r) = recv.device_ptr_mut(&self.stream);
        // SAFETY: the addresses come from the buffers' `device_ptr`/`device_ptr_mut` on
        // the rank's stream, whose guards live to the end of this call.
        unsafe { self.enqueue_typed(WorkItem::collective(CollFunction::Reduce, T::DTYPE, kind, arg, s, r, n as u64, root as u64)) }
    }

    /// [`Comm::reduce`] in place (NCCL's `sendbuff == recvbuff`): on the root, `buf =
    /// op(buf of every rank)`; the other ranks' `buf` is read only.
    pub fn reduce_in_place<T: Element, R: DevicePtrMut<T>>(&self, buf: &mut R, op: ReduceOp, root: usize) -> Result<()> {
        let n = buf.len();
        let (kind, arg) = op.device(T::DTYPE, self.nranks);
        let (b, _b) = buf.device_ptr_mut(&self.stream);
        // SAFETY: the address comes from the buffer's `device_ptr_mut` on the rank's
        // stream, whose guard lives to the end of this call.
        unsafe { self.enqueue_typed(WorkItem::collective(CollFunction::Reduce, T::DTYPE, kind, arg, b, b, n as u64, root as u64)) }
    }

    /// Sends `send` to rank `to` and receives `recv` from rank `from`, at once (NCCL's
    /// grouped send and receive); either side may be `None`. Counts must match the
    /// peers' or the loops stop with `PeerMismatch`.
    pub fn send_recv<T: Element, S: DevicePtr<T>, R: DevicePtrMut<T>>(&self, send: Option<(&S, usize)>, recv: Option<(&mut R, usize)>) -> Result<()> {
        // A peer number that does not fit a u32 becomes NO_PEER - 1: never a rank, so the
        // communicator check refuses it with BadRank.
        let (mut s, mut to, mut n) = (0, NO_PEER, 0);
        let mut syncs = Vec::new();
        if let Some((buf, peer)) = send {
            let (p, sync) = buf.device_ptr(&self.stream);
            (s, to, n) = (p, u32::try_from(peer).unwrap_or(NO_PEER - 1), buf.len() as u64);
            syncs.push(sync);
        }
        let (mut r, mut from, mut m) = (0, NO_PEER, 0);
        if let Some((buf, peer)) = recv {
            m = buf.len() as u64;
            let (p, sync) = buf.device_ptr_mut(&self.stream);
            (r, from) = (p, u32::try_from(peer).unwrap_or(NO_PEER - 1));
            syncs.push(sync);
        }
        let item = WorkItem::collective(CollFunction::SendRecv, T::DTYPE, RedOpKind::Sum, m, s, r, n, u64::from(to) | u64::from(from) << 32);
        // SAFETY: the addresses come from the buffers' `device_ptr`/`device_ptr_mut` on
        // the rank's stream, whose guards live to the end of this call.
        unsafe { self.enqueue_typed(item) }
    }

    /// Runs every outstanding item, stops this rank's loop and waits for its kernel.
    pub fn shutdown(&mut self, timeout: Duration) -> Result<()> {
        self.lp.shutdown(timeout)
    }

    /// Shuts the rank down ([`Comm::shutdown`]), drops it, and waits, within what is left
    /// of `timeout`, until the memory it held has gone back (a dropped rank's memory is
    /// otherwise freed on a thread of its own once nothing uses it), so that the device
    /// may be reset (`cudaDeviceReset`) or that memory reused as soon as this returns.
    /// Where another started loop of the device still runs, its memory goes back only
    /// once that loop sleeps or ends, and this does not wait for it. Returns the
    /// shutdown's result.
    pub fn destroy(mut self, timeout: Duration) -> Result<()> {
        let started = std::time::Instant::now();
        let ctx = self.stream.context().cu_ctx() as usize;
        let shutdown = self.shutdown(timeout);
        drop(self);
        if !crate::work::wait_for_frees(ctx, timeout.saturating_sub(started.elapsed())) {
            log::debug!("communicator: destroyed; some of its device's memory is still in use and goes back later");
        }
        shutdown
    }
}

/// `cfg` with as many call channels as it asks for, or fewer: the most that every
/// device of `streams` holds for each of its ranks at once, beside the resident channels
/// and one call kernel's submitter per rank (the room `Comm::from_devices_with` checks).
fn fit_call_channels(cfg: Tuning, streams: &[Arc<CudaStream>], modules: &BTreeMap<usize, Module>) -> Result<Tuning> {
    let mut call_channels = cfg.loop_cfg.call_channels;
    for (ordinal, module) in modules {
        let ranks_here = streams.iter().filter(|s| s.context().ordinal() == *ordinal).count() as u32;
        let Some(s) = streams.iter().find(|s| s.context().ordinal() == *ordinal) else { continue };
        let kernel = module.kernel("ferroccl_work_loop")?;
        let call_kernel = module.kernel("ferroccl_call_kernel")?;
        let room = device::sm_count(s.context())? * crate::work::channels_per_sm(&kernel, Some(&call_kernel), cfg.loop_cfg.threads)?;
        call_channels = call_channels.min(call_channels_that_fit(room, ranks_here, cfg.loop_cfg.channels));
    }
    if call_channels < cfg.loop_cfg.call_channels {
        log::info!("communicator: {call_channels} call channels per rank (of {} asked for) fit every device", cfg.loop_cfg.call_channels);
    }
    Ok(Tuning { loop_cfg: LoopConfig { call_channels, ..cfg.loop_cfg }, ..cfg })
}

/// Refuses ([`Error::InvalidArgument`]) a configuration no communicator runs with.
fn check_tuning(cfg: &Tuning) -> Result<()> {
    if cfg.loop_cfg.threads.min(cfg.loop_cfg.loop_threads()) < 128 {
        return Err(Error::InvalidArgument(format!(
            "a communicator's channels need at least 128 threads, not {}",
            cfg.loop_cfg.threads.min(cfg.loop_cfg.loop_threads())
        )));
    }
    check_nvls_threads(cfg.algorithm, cfg.loop_cfg.threads.min(cfg.loop_cfg.loop_threads()))?;
    if cfg.paired && cfg.loop_cfg.call_channels > 0 {
        return Err(Error::InvalidArgument("paired channels are all resident: call channels take unpaired communicators only".into()));
    }
    Ok(())
}

/// Refuses ([`Error::DeviceLimit`]) `ranks` ranks of `cfg`'s loops on device `ordinal`,
/// which holds `room` channels at once, unless all their channels and one call kernel's
/// submitter per rank fit at once. Every channel of every rank of a device must be
/// resident at once: a channel waiting for a peer that never gets an SM would wait until
/// its spin budget ends. And each rank's stream-ordered calls launch a call kernel (its
/// first CTA the submitter: 32 threads without call channels, else a channel's size; then
/// one CTA per call channel) that must run while the loops hold their SMs and every other
/// rank's call kernel runs. `Ok(true)` where two call kernels of every rank fit beside the
/// loops: a call kernel may then start (and plan its item) while the one before it runs,
/// since a waiting call kernel never holds an SM that a grid it waits for needs.
fn check_room(ordinal: usize, ranks: u32, room: u32, cfg: &LoopConfig) -> Result<bool> {
    let channels = ranks * (cfg.channels + cfg.call_channels);
    if channels > room {
        return Err(Error::DeviceLimit(format!(
            "device {ordinal}: {ranks} rank(s) × {} channels do not fit at once in the {room} channels it holds",
            cfg.channels + cfg.call_channels
        )));
    }
    if channels + ranks > room {
        return Err(Error::DeviceLimit(format!(
            "device {ordinal}: {ranks} rank(s) × {} channels fill the {room} channels it holds and leave no room for the call kernel each rank's stream-ordered calls launch (one CTA per rank): use fewer channels",
            cfg.channels + cfg.call_channels
        )));
    }
    Ok(call_kernels_may_overlap(room, ranks, cfg.channels, cfg.call_channels))
}

/// Whether a device that holds `room` channels at once holds, for each of its `ranks`
/// ranks, the `resident` channels and two call kernels (a submitter and `call_channels`
/// call channels each): then a rank's next call kernel may wait on the GPU while the one
/// before it runs (`WorkLoop::allow_overlapping_call_kernels`). A loop without call
/// channels launches one small CTA: always.
fn call_kernels_may_overlap(room: u32, ranks: u32, resident: u32, call_channels: u32) -> bool {
    call_channels == 0 || ranks.saturating_mul(resident + 2 * (call_channels + 1)) <= room
}

/// The most call channels each of `ranks` ranks with `resident` resident channels may
/// have on a device that holds `room` channels at once, one call kernel's submitter per
/// rank kept free.
fn call_channels_that_fit(room: u32, ranks: u32, resident: u32) -> u32 {
    (room / ranks.max(1)).saturating_sub(1).saturating_sub(resident)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With SASS built (every build but one with `FERROCCL_PTXAS=none`), the default
    /// communicator's work loop loads it: no JIT on a Hopper GPU.
    #[test]
    fn the_default_communicators_work_loop_has_prebuilt_sass() {
        if crate::module::sass::IMAGES.is_empty() {
            return;
        }
        let threads = Tuning::default().loop_cfg.threads;
        let cap = ferroccl_ptx_builder::sass::work_loop_max_registers(threads);
        assert!(crate::module::has_sass(cap), "no SASS for {threads} threads (cap {cap:?})");
    }

    /// Device 0 holds the allocations 0x100..0x200 (not mapped for peers) and
    /// 0x200..0x300 (mapped); device 1 0x1000..0x1100; 0x5000..0x5100 is host memory; any
    /// other address is unknown to the driver.
    fn fake_info(addr: u64) -> Result<BufferInfo> {
        let allocations = [(0x100, Some(0), false), (0x200, Some(0), true), (0x1000, Some(1), true), (0x5000, None, false)];
        allocations
            .into_iter()
            .find(|&(start, _, _)| (start..start + 0x100).contains(&addr))
            .map(|(start, device, peer_mapped)| BufferInfo { device, peer_mapped, allocation: (start, 0x100) })
            .ok_or_else(|| Error::InvalidArgument(format!("address {addr:#x} is unknown")))
    }

    fn all_reduce_item(src: u64, dst: u64, count: u64) -> WorkItem {
        WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, src, dst, count, 0)
    }

    #[test]
    fn buffers_on_another_device_are_refused() {
        let item = |src, dst| all_reduce_item(src, dst, 4);
        assert!(check_buffers(&item(0x100, 0x200), 2, 0, fake_info).unwrap(), "the output's mapping is what counts");
        assert!(!check_buffers(&item(0x200, 0x100), 2, 0, fake_info).unwrap(), "not the input's");
        assert!(check_buffers(&item(0x240, 0x240), 2, 0, fake_info).unwrap(), "in place");
        assert!(!check_buffers(&item(0x5000, 0), 2, 1, fake_info).unwrap(), "host memory and absent buffers pass");
        assert!(matches!(check_buffers(&item(0x1010, 0x200), 2, 0, fake_info), Err(Error::WrongDevice { buffer: 1, rank: 0 })));
        assert!(matches!(check_buffers(&item(0x100, 0x1020), 2, 0, fake_info), Err(Error::WrongDevice { buffer: 1, rank: 0 })));
        assert!(matches!(check_buffers(&item(0x100, 0x200), 2, 1, fake_info), Err(Error::WrongDevice { buffer: 0, rank: 1 })));
        assert!(matches!(check_buffers(&item(0x1010, 0x1010), 2, 0, fake_info), Err(Error::WrongDevice { buffer: 1, rank: 0 })), "in place, refused");
        assert!(check_buffers(&item(0x9000, 0x200), 2, 0, fake_info).is_err(), "an address the driver does not know");
        let asked = std::cell::Cell::new(0);
        let counting = |addr: u64| {
            asked.set(asked.get() + 1);
            fake_info(addr)
        };
        assert!(check_buffers(&item(0x210, 0x210), 2, 0, counting).is_ok());
        assert_eq!(asked.get(), 1, "an in-place buffer is asked about once");
    }

    /// A collective's buffers must hold every byte it reads or writes in one allocation:
    /// an input or an output that runs past its allocation's end (into the next
    /// allocation, or into no memory) is refused before anything is enqueued, whatever
    /// the function makes of the count.
    #[test]
    fn buffers_that_run_past_their_allocation_are_refused() {
        let refused = |item: WorkItem, nranks, what: &str| match check_buffers(&item, nranks, 0, fake_info) {
            Err(Error::InvalidArgument(why)) => assert!(why.starts_with(what), "{why}"),
            other => panic!("{item:?}: {other:?}"),
        };
        assert!(check_buffers(&all_reduce_item(0x100, 0x200, 64), 2, 0, fake_info).is_ok(), "both allocations exactly");
        refused(all_reduce_item(0x100, 0x200, 65), 2, "the input");
        refused(all_reduce_item(0x5000, 0x1f4, 4), 2, "the output");
        assert!(check_buffers(&all_reduce_item(0x5000, 0x1f0, 4), 2, 0, fake_info).is_ok(), "the output's last bytes");
        let gather = WorkItem::collective(CollFunction::AllGather, DataType::F32, RedOpKind::Sum, 0, 0x100, 0x200, 16, 0);
        assert!(check_buffers(&gather, 4, 0, fake_info).is_ok(), "4 ranks' blocks fill the output");
        refused(gather, 5, "the output");
        let scatter = WorkItem::collective(CollFunction::ReduceScatter, DataType::F32, RedOpKind::Sum, 0, 0x200, 0x100, 16, 0);
        refused(scatter, 5, "the input");
        let in_place = in_place_item(CollFunction::ReduceScatter, DataType::F32, RedOpKind::Sum, 0, 0x200, 16, 3);
        let asked = std::cell::Cell::new(0);
        let counting = |addr: u64| {
            asked.set(asked.get() + 1);
            fake_info(addr)
        };
        assert!(check_buffers(&in_place, 4, 0, counting).unwrap(), "block 3 of 4, the allocation's last");
        assert_eq!(asked.get(), 1, "an in-place block is asked about with its buffer");
        refused(in_place_item(CollFunction::ReduceScatter, DataType::F32, RedOpKind::Sum, 0, 0x220, 16, 3), 4, "the input");
        let send_recv = |sent, received| WorkItem::collective(CollFunction::SendRecv, DataType::F32, RedOpKind::Sum, received, 0x100, 0x200, sent, 1 | 1 << 32);
        assert!(check_buffers(&send_recv(64, 64), 2, 0, fake_info).is_ok());
        refused(send_recv(64, 65), 2, "the output");
        let huge = all_reduce_item(0x100, 0x200, u64::MAX / 2);
        assert!(matches!(check_buffers(&huge, 2, 0, fake_info), Err(Error::BadWorkItem { reason: BadItem::CountOverflow, seq: 0 })), "bytes that overflow");
    }

    #[test]
    fn an_in_place_buffer_splits_into_equal_blocks() {
        assert_eq!(block_of(12, 3).unwrap(), 4);
        assert_eq!(block_of(0, 3).unwrap(), 0);
        assert!(matches!(block_of(13, 3), Err(Error::InvalidArgument(_))));
        let rs = in_place_item(CollFunction::ReduceScatter, DataType::F32, RedOpKind::Sum, 0, 4096, 10, 2);
        assert_eq!((rs.src, rs.dst, rs.count), (4096, 4096 + 80, 10), "output at block 2");
        let ag = in_place_item(CollFunction::AllGather, DataType::F64, RedOpKind::Sum, 0, 4096, 10, 1);
        assert_eq!((ag.src, ag.dst, ag.count), (4096 + 80, 4096, 10), "input at block 1");
    }

    #[test]
    fn a_short_buffer_is_its_own_error() {
        assert!(Comm::need("the receive buffer", 4, 4).is_ok());
        let err = Comm::need("the receive buffer", 3, 8);
        assert!(matches!(err, Err(Error::BufferTooSmall { what: "the receive buffer", have: 3, want: 8 })), "{err:?}");
    }

    #[test]
    fn a_comm_abort_reaches_the_heaps_of_its_live_collective_matmuls() {
        use crate::shmem::abort::testing::{host_queue, host_word};
        let (queue, _ring) = host_queue();
        let aborts = CommAbortHandle::of_ranks(vec![queue.abort_handle()]);
        let (_word, live) = host_word();
        let (_dropped_word, dropped) = host_word();
        aborts.link(live.clone());
        aborts.link(dropped.clone());
        aborts.unlink(&dropped);
        assert!(!live.aborted());
        assert!(aborts.stopped().is_none());
        aborts.clone().abort();
        assert!(matches!(queue.health(), Err(Error::Aborted)), "the rank's loop");
        assert!(matches!(aborts.stopped(), Some(Error::Aborted)), "what a collective matmul then says");
        assert!(live.aborted(), "a linked heap is aborted with the communicator");
        assert!(!dropped.aborted(), "an unlinked one is not");
        let (_late_word, late) = host_word();
        aborts.link(late.clone());
        assert!(late.aborted(), "a heap linked after the abort is aborted at once");
    }

    #[test]
    fn a_comm_abort_handle_crosses_threads() {
        fn send_sync_clone<T: Send + Sync + Clone + 'static>() {}
        send_sync_clone::<CommAbortHandle>();
        fn send<T: Send>() {}
        send::<Comm>();
    }

    #[test]
    fn call_channels_shrink_to_what_the_device_holds() {
        assert_eq!(call_channels_that_fit(132, 2, 1), 64, "two ranks of 66 channels' room, a submitter each");
        assert_eq!(call_channels_that_fit(132, 4, 1), 31);
        assert_eq!(call_channels_that_fit(132, 8, 1), 14, "8 × (1 + 14) channels and 8 submitters: 128 of 132; one call channel more: 136");
        assert_eq!(call_channels_that_fit(4, 4, 1), 0, "no room beyond the resident channels");
        assert_eq!(call_channels_that_fit(0, 0, 1), 0);
    }

    #[test]
    fn call_kernels_overlap_only_where_two_of_every_rank_fit() {
        assert!(call_kernels_may_overlap(132, 1, 1, 63), "one rank: 1 + 2 × 64 of 132");
        assert!(!call_kernels_may_overlap(132, 2, 1, 63), "two ranks of a device: 2 × 129 of 132");
        assert!(call_kernels_may_overlap(132, 2, 1, 31), "2 × (1 + 2 × 32)");
        assert!(!call_kernels_may_overlap(128, 1, 1, 63), "1 + 128 of 128");
        assert!(call_kernels_may_overlap(8, 8, 1, 0), "no call channels: one small submitter CTA");
    }

    #[test]
    fn channels_are_placed_only_where_a_rank_has_its_device_and_the_tpcs() {
        let default = Tuning::default();
        assert_eq!(default.placement_on(1, 4), Placement::Tpcs, "the default's one resident channel on SM 2");
        let cfg = Tuning { loop_cfg: LoopConfig { channels: 24, call_channels: 0, resident_threads: 0, ..default.loop_cfg }, ..default };
        assert_eq!(cfg.placement_on(1, 132), Placement::Tpcs, "24 channels on SMs 2..=48 of 132");
        assert_eq!(cfg.placement_on(2, 132), Placement::Hardware, "two ranks' loops would want the same SMs");
        assert_eq!(cfg.placement_on(1, 48), Placement::Hardware, "24 channels need 50 SMs, one per TPC from SM 2");
        let listed: Placement = "3,5".parse().unwrap();
        let cfg = Tuning { loop_cfg: LoopConfig { channels: 2, placement: listed, ..cfg.loop_cfg }, ..cfg };
        assert_eq!(cfg.placement_on(1, 8), listed, "a list asked for is kept (the loop checks it against the device)");
    }
}
