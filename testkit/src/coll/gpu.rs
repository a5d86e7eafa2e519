//! A GPU communicator's ranks as a [`RankGroup`]: buffers in one arena per rank, items
//! through the direct host path or, as the communicator's public calls, the ranks'
//! streams. What the correctness matrix and `ferroccl bench` run on.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{CudaContext, CudaGraph, CudaStream, result, sys};
use device_rt::conn::ChannelStats;
use device_rt::work::WorkItem;
use host_shim::comm::wiring::Shape;
use host_shim::bootstrap::Bootstrap;
use host_shim::comm::{Comm, CommId, Tuning};
use host_shim::queue::Ticket;
use host_shim::shmem::Heap;
use host_shim::work::{DeviceAlloc, LoopConfig, Placement};
use host_shim::{Error, Result, device};

use super::group::{Buffer, RankGroup, SubmitPath, Submitted};
use super::typed::{self, TypedBuffer};

/// A communicator's ranks with a buffer arena each, driven from one host thread: what
/// the correctness matrix and `ferroccl bench` run on.
pub struct GpuGroup {
    /// First: dropped (their loops stopped) before the heap they may read.
    comms: Vec<Comm>,
    /// The rank of `comms[0]`, and the communicator's ranks (more than `comms` holds
    /// where the others are in other processes).
    first: u32,
    nranks: u32,
    /// The processes' bootstrap, for a communicator across processes.
    coordination: Option<Bootstrap>,
    /// Each rank's captured graphs ([`RankGroup::capture`]).
    graphs: Vec<Vec<CudaGraph>>,
    path: SubmitPath,
    arenas: Vec<(u64, usize)>,
    used: Vec<usize>,
    describe: String,
    shape: Shape,
    /// Each rank's resident channels (the direct path spreads over these only).
    resident: u32,
    /// The symmetric heap the ranks' arenas are in, when on one.
    _heap: Option<Heap>,
    /// Whether the ranks' loops leave the GPU when idle.
    sleeps: bool,
    /// Each rank's buffers as cudarc slices, for the typed path (made by `alloc` on it).
    typed: Vec<Vec<TypedBuffer>>,
}

impl GpuGroup {
    /// One rank per entry of `ordinals` (a device may repeat), each with `arena_bytes` of
    /// device memory for buffers.
    pub fn new(ordinals: &[usize], cfg: Tuning, arena_bytes: usize) -> Result<Self> {
        let streams = streams_on(ordinals)?;
        let mut arenas = Vec::new();
        let mut allocs = Vec::new();
        let mut comms = Comm::from_devices_tuned(streams, cfg, &mut |_, ctx| {
            let a = DeviceAlloc::zeroed(ctx, arena_bytes.max(256))?;
            arenas.push((a.ptr(), arena_bytes));
            allocs.push(a);
            Ok(())
        })?;
        for (c, a) in comms.iter_mut().zip(allocs) {
            c.keep_until_stopped(a)?;
        }
        Self::with_comms(ordinals, cfg, comms, arenas, None)
    }

    /// Rank `rank` of a communicator of `nranks` ranks across processes
    /// (`Comm::init_rank` at `id`) on device `ordinal`, with an arena of `arena_bytes`
    /// (allocated before the rank's loop starts), and `coordination`, the processes'
    /// bootstrap ([`RankGroup::processes`]).
    pub fn join_process(id: &CommId, rank: u32, nranks: u32, ordinal: usize, cfg: Tuning, arena_bytes: usize, coordination: Bootstrap) -> Result<Self> {
        let stream = streams_on(&[ordinal])?.remove(0);
        let arena = DeviceAlloc::zeroed(stream.context(), arena_bytes.max(256))?;
        let arenas = vec![(arena.ptr(), arena_bytes)];
        let mut comm = Comm::init_rank_tuned(id, nranks as usize, rank as usize, stream, cfg)?;
        comm.keep_until_stopped(arena)?;
        // Across processes nothing writes into another's buffers (no direct writes).
        let cfg = Tuning { direct: false, ..cfg };
        let mut group = Self::with_comms(&[ordinal], cfg, vec![comm], arenas, None)?;
        (group.first, group.nranks, group.shape) = (rank, nranks, cfg.shape(nranks));
        group.describe = format!("rank {rank} of {nranks} (one process each), {}", group.describe);
        group.coordination = Some(coordination);
        Ok(group)
    }

    /// The index in `comms` of rank `rank`.
    fn local(&self, rank: u32) -> usize {
        (rank - self.first) as usize
    }

    /// As [`GpuGroup::new`], with every rank's arena one allocation of a symmetric heap of
    /// the ranks (PE `r` is rank `r`), zeroed, and the communicator on the heap
    /// (`Comm::from_heap`): every rank allocates the same sizes in the same order, so its
    /// buffers lie at the same offsets as its peers', and out-of-place all-reduces read
    /// their inputs in place.
    pub fn new_on_heap(ordinals: &[usize], cfg: Tuning, arena_bytes: usize) -> Result<Self> {
        let streams = streams_on(ordinals)?;
        let arena_bytes = arena_bytes.max(256);
        // The heap's head holds the runtime's own words: room for them beside the arena.
        let mut heap = Heap::new(&streams, arena_bytes as u64 + (4 << 20), Duration::from_secs(60))?;
        let bases = heap.malloc(&vec![arena_bytes as u64; streams.len()])?;
        for (s, &base) in streams.iter().zip(&bases) {
            // SAFETY: the rank's arena, `arena_bytes` of its heap, which no kernel uses yet.
            unsafe { result::memset_d8_async(base, 0, arena_bytes, s.cu_stream()) }.map_err(Error::cuda("cuMemsetD8Async"))?;
            host_shim::stream::wait(s, Duration::from_secs(60), "zeroing the heap's arenas")?;
        }
        // SAFETY: the heap outlives the communicators: the group keeps it, and drops (or shuts
        // down) the communicators first.
        let comms = unsafe { Comm::from_heap_tuned(&heap, streams, cfg)? };
        let arenas = bases.iter().map(|&b| (b, arena_bytes)).collect();
        Self::with_comms(ordinals, cfg, comms, arenas, Some(heap))
    }

    /// The group of `comms` (over `ordinals`, made with `cfg`) with buffers in `arenas`.
    fn with_comms(ordinals: &[usize], cfg: Tuning, comms: Vec<Comm>, arenas: Vec<(u64, usize)>, heap: Option<Heap>) -> Result<Self> {
        // The channels the communicator has: its call channels may be fewer than asked for.
        let call_channels = comms.first().map_or(0, |c| c.channels() - cfg.loop_cfg.channels);
        let cfg = Tuning { loop_cfg: LoopConfig { call_channels, ..cfg.loop_cfg }, ..cfg };
        let describe = format!(
            "{} rank(s) on device(s) {:?}, {} channels ({} resident) × {} threads, ring step {} KiB, algorithm {}, staging {} KiB{}",
            ordinals.len(),
            ordinals,
            cfg.loop_cfg.channels + cfg.loop_cfg.call_channels,
            cfg.loop_cfg.channels,
            cfg.loop_cfg.threads,
            cfg.ring_step_bytes >> 10,
            cfg.algorithm.name(),
            cfg.staging_bytes >> 10,
            if cfg.direct { ", direct" } else { "" }
        ) + if heap.is_some() { ", buffers in a symmetric heap (zero copy)" } else { "" }
            + if cfg.paired { ", paired channels" } else { "" }
            + if cfg.stats { ", statistics kept" } else { "" }
            + &match comms.first().map_or(Placement::Hardware, |c| c.placement()) {
                Placement::Hardware => ", SMs: the hardware's choice".to_string(),
                Placement::Tpcs => ", SMs: one channel per TPC from SM 2".to_string(),
                Placement::Sms(list) => format!(", SMs {:?}", list.sms().collect::<Vec<_>>()),
            };
        let shape = cfg.shape(comms.len() as u32);
        let resident = cfg.loop_cfg.channels;
        let nranks = comms.len() as u32;
        let sleeps = cfg.loop_cfg.sleep_after_ns() != 0;
        let (graphs, typed) = (comms.iter().map(|_| Vec::new()).collect(), comms.iter().map(|_| Vec::new()).collect());
        Ok(Self { used: vec![0; comms.len()], graphs, comms, first: 0, nranks, coordination: None, path: SubmitPath::Direct, arenas, describe, shape, resident, _heap: heap, sleeps, typed })
    }

    /// Makes [`RankGroup::submit`] take `path` (the direct path until then).
    pub fn set_path(&mut self, path: SubmitPath) {
        self.path = path;
    }

    /// Stream-ordered calls that took the ring route (`WorkLoop::enqueue_on_stream`),
    /// over every rank.
    pub fn ring_routed(&self) -> u64 {
        self.comms.iter().map(Comm::ring_routed).sum()
    }

    /// Runs every outstanding item and stops every loop.
    pub fn shutdown(mut self, timeout: Duration) -> Result<()> {
        let mut first = Ok(());
        for c in &mut self.comms {
            first = first.and(c.shutdown(timeout));
        }
        first
    }
}

/// A new stream for each rank, on device `ordinals[r]` (one context per device).
fn streams_on(ordinals: &[usize]) -> Result<Vec<Arc<CudaStream>>> {
    let mut streams = Vec::new();
    let mut contexts: BTreeMap<usize, Arc<CudaContext>> = BTreeMap::new();
    for &o in ordinals {
        let ctx = match contexts.get(&o) {
            Some(c) => c.clone(),
            None => contexts.entry(o).or_insert(device::context(o)?).clone(),
        };
        streams.push(ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?);
    }
    Ok(streams)
}

impl RankGroup for GpuGroup {
    fn nranks(&self) -> u32 {
        self.nranks
    }

    fn local_ranks(&self) -> std::ops::Range<u32> {
        self.first..self.first + self.comms.len() as u32
    }

    fn processes(&mut self) -> Option<&mut Bootstrap> {
        self.coordination.as_mut()
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn shape(&self) -> Shape {
        self.shape
    }

    fn plan_channels(&self) -> u32 {
        let all = self.shape.collective_channels();
        if self.path == SubmitPath::Direct { self.resident.min(all) } else { all }
    }

    fn ll_channels(&self) -> u32 {
        if self.path.on_stream() { self.shape.nchannels.saturating_sub(self.resident) } else { 0 }
    }

    fn alloc(&mut self, rank: u32, bytes: usize) -> Result<Buffer> {
        let r = self.local(rank);
        let (base, size) = self.arenas[r];
        let start = self.used[r].next_multiple_of(256);
        if start + bytes > size {
            return Err(Error::InvalidArgument(format!("rank {rank}'s buffer arena ({size} bytes) is full")));
        }
        self.used[r] = start + bytes;
        let addr = base + start as u64;
        if self.path == SubmitPath::Typed {
            // SAFETY: the bytes lie in the rank's arena, which outlives the group's typed
            // buffers (released with them, freed after the communicators stop).
            self.typed[r].push(unsafe { TypedBuffer::new(self.comms[r].stream(), addr, bytes) });
        }
        Ok(Buffer { rank, addr, bytes })
    }

    fn mark(&self) -> Vec<usize> {
        self.used.clone()
    }

    fn release(&mut self, mark: Vec<usize>) {
        for ((typed, &(base, _)), &used) in self.typed.iter_mut().zip(&self.arenas).zip(&mark) {
            typed.retain(|b| b.addr() < base + used as u64);
        }
        self.used = mark;
    }

    fn write(&mut self, buf: Buffer, data: &[u8]) -> Result<()> {
        if data.len() > buf.bytes {
            return Err(Error::InvalidArgument(format!("{} bytes written to a buffer of {}", data.len(), buf.bytes)));
        }
        let stream = self.comms[self.local(buf.rank)].stream();
        stream.context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        // SAFETY: `buf` lies in the rank's arena; the copy ends before `data` is dropped.
        unsafe { result::memcpy_htod_async(buf.addr, data, stream.cu_stream()) }.map_err(Error::cuda("cuMemcpyHtoDAsync"))?;
        host_shim::stream::wait(stream, Duration::from_secs(60), "a buffer upload")
    }

    fn read(&mut self, buf: Buffer, bytes: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; bytes.min(buf.bytes)];
        let stream = self.comms[self.local(buf.rank)].stream();
        stream.context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        // SAFETY: as `write`.
        unsafe { result::memcpy_dtoh_async(&mut out, buf.addr, stream.cu_stream()) }.map_err(Error::cuda("cuMemcpyDtoHAsync"))?;
        host_shim::stream::wait(stream, Duration::from_secs(60), "a buffer download")?;
        Ok(out)
    }

    fn enqueue(&mut self, rank: u32, item: WorkItem) -> Result<Ticket> {
        let r = self.local(rank);
        // SAFETY: the item's addresses lie in the rank's buffers (its arena, allocated
        // until the group drops, after the communicators), as `RankGroup::enqueue`'s
        // contract has it.
        unsafe { self.comms[r].enqueue(item) }
    }

    fn channel_stats(&mut self, rank: u32) -> Result<Option<Vec<ChannelStats>>> {
        self.comms[self.local(rank)].channel_stats()
    }

    fn wait(&mut self, rank: u32, ticket: Ticket, timeout: Duration) -> Result<()> {
        self.comms[self.local(rank)].wait(ticket, timeout)
    }

    fn submit(&mut self, rank: u32, item: WorkItem) -> Result<Submitted> {
        match self.path {
            SubmitPath::Direct => Ok(Submitted::Queue(self.enqueue(rank, item)?)),
            SubmitPath::Stream => {
                // SAFETY: as in `enqueue`.
                unsafe { self.comms[self.local(rank)].enqueue_on_stream(item) }?;
                Ok(Submitted::Stream)
            }
            SubmitPath::Typed => {
                let r = self.local(rank);
                typed::call(&self.comms[r], &mut self.typed[r], &item)?;
                Ok(Submitted::Stream)
            }
        }
    }

    fn wait_submitted(&mut self, rank: u32, submitted: Submitted, timeout: Duration) -> Result<()> {
        match submitted {
            Submitted::Queue(ticket) => self.wait(rank, ticket, timeout),
            Submitted::Stream => {
                let comm = &self.comms[self.local(rank)];
                host_shim::stream::wait(comm.stream(), timeout, "a rank's stream-ordered items")?;
                comm.async_error().map_or(Ok(()), Err)
            }
        }
    }

    /// Captures on the rank's stream in relaxed mode, on every path as items that name
    /// buffers by address, so no cudarc event enters the capture (the typed path's too).
    /// A failed capture is ended (its partial graph dropped) before the error returns.
    fn capture(&mut self, rank: u32, items: &[WorkItem]) -> Result<usize> {
        let comm = &self.comms[self.local(rank)];
        let stream = comm.stream();
        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(Error::cuda("cuStreamBeginCapture"))?;
        // SAFETY: as in `enqueue`: the arena outlives the graphs (`drop_graphs`, then the
        // group's drop).
        let submitted = items.iter().try_for_each(|&item| unsafe { comm.enqueue_on_stream(item) });
        let ended = stream.end_capture(sys::CUgraphInstantiate_flags(0)).map_err(Error::cuda("cuStreamEndCapture"));
        submitted?;
        let graph = ended?.ok_or(Error::InvalidState("the capture produced no graph"))?;
        let r = self.local(rank);
        let graphs = &mut self.graphs[r];
        graphs.push(graph);
        Ok(graphs.len() - 1)
    }

    fn replay(&mut self, rank: u32, graph: usize) -> Result<Submitted> {
        let g = self.graphs[self.local(rank)].get(graph).ok_or(Error::InvalidState("no such captured graph"))?;
        g.launch().map_err(Error::cuda("cuGraphLaunch"))?;
        Ok(Submitted::Stream)
    }

    fn drop_graphs(&mut self) {
        self.graphs.iter_mut().for_each(Vec::clear);
    }

    /// False at once where the loops never sleep (no sleep time, or several resident
    /// channels), or while a captured call keeps them awake; else polled every 100 µs.
    fn loops_asleep(&mut self, timeout: Duration) -> Result<bool> {
        if !self.sleeps {
            return Ok(false);
        }
        let start = std::time::Instant::now();
        while !self.comms.iter().all(Comm::loop_asleep) {
            if start.elapsed() > timeout {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(true)
    }
}

