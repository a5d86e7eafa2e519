//! Collective matmuls on GPUs: `AllGather(A) × B` and `ReduceScatter(A × B)` over a
//! symmetric heap, the communication hidden behind the GEMMs (`docs/matmul.md`).
//!
//! The schedule is device-rt's (`device_rt::matmul::plan`), the same list of operations
//! the host twin runs; here each lane of a rank is a stream: the caller's stream computes
//! (cuBLASLt) and waits only for events, one stream per ring direction copies with the
//! copy engines (`cuMemcpyDtoDAsync` into the neighbour's mapped workspace, no SM taken
//! from the GEMMs), and a watch stream waits for the data the GEMMs read. A wait for a
//! neighbour's signal is a one-thread kernel, bounded by the heap's abort flag and spin
//! budget; a signal is a stream memory operation
//! (`cuStreamWriteValue64` into the neighbour's mapped word, after a memory barrier: no
//! SM, and it never waits); lanes of one rank meet through CUDA events. Nothing waits on
//! the host during a call.

mod blas;
mod order;

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg, result, sys};
use device_rt::abi::ShmemHandle;
use device_rt::matmul::{Addresses, Collective, Event, LANES, Lane, Op, Peer, RingPlan, Shape, Workspace};

use crate::memory::HostMapped;
use crate::module::Module;
use crate::op::Element;
use crate::shmem::Heap;
use crate::{DeviceAlloc, Error, Result};

use blas::Blas;
use order::Submitted;

/// Bytes of a symmetric heap that holds the workspace of `shape`'s ring (and the heap's
/// reserved head, and the alignment of its allocations).
pub fn heap_bytes(shape: &Shape) -> u64 {
    Workspace::new(shape).bytes.next_multiple_of(2 << 20) + (2 << 20)
}

/// One rank's streams, kernels and GEMM handle.
struct RankLanes {
    pe: u32,
    /// By [`Lane`]: the caller's stream (the compute lane), the copy lanes to the next
    /// and the previous rank, the watch lane.
    streams: [Arc<CudaStream>; LANES.len()],
    /// Device address of the PE's `ShmemHandle`, and the handle's value (every PE's base).
    handle: u64,
    value: ShmemHandle,
    wait: CudaFunction,
    put: CudaFunction,
    /// With SM copies: the grid's CTAs, and each copy lane's arrival counter (two `u64`).
    sm_copies: Option<(u32, DeviceAlloc)>,
    /// Written by a wait that ended early: 1 aborted, 2 timed out.
    status: HostMapped<u32>,
    blas: Blas,
    /// The module the kernels are in, kept loaded.
    _module: Module,
}

/// Collective matmuls of one shape over a symmetric heap: one for every PE of this
/// process, made by every PE of the heap alike (its workspace is a collective
/// allocation), and called by every PE in the same order.
pub struct RingMatmul {
    shape: Shape,
    layout: Workspace,
    /// By local PE.
    ranks: Vec<RankLanes>,
    workspace: Vec<u64>,
    /// Calls made, this one included.
    seq: u64,
    /// Where two local PEs share a device (and so its hardware queues): the ring's words
    /// as the calls enqueued so far will have set them, which orders each call's
    /// submissions ([`order`]). PEs on devices of their own submit in their plans' order:
    /// their waits hold only their own device's queues, behind nothing another PE needs
    /// (`order`'s tests show both on a model of the queues).
    submitted: Option<Submitted>,
}

impl RingMatmul {
    /// Collective matmuls of `collective` for `m`, `k`, `n` of `T` (f16 or bf16; see
    /// `device_rt::matmul::Shape` for what each dimension is) on `heap`, whose every PE is
    /// a rank: `streams[i]` is local PE `i`'s stream (on its device), the stream its calls
    /// run on. Allocates the ring's workspace from the heap (collective: every PE makes
    /// the same `RingMatmul`), zeroes its signal words and waits for every PE to have done
    /// so. Loads the kernels' module on each device: make it before any persistent loop
    /// runs there, or with `CUDA_MODULE_LOADING=EAGER`. Bad shapes, and a stream per PE
    /// missing or on another device, are refused with [`Error::InvalidArgument`] before
    /// anything is allocated; a shape cuBLASLt cannot run, or a heap too small for the
    /// workspace, with its error before any call can be made.
    pub fn new<T: Element>(heap: &mut Heap, collective: Collective, m: u64, k: u64, n: u64, streams: Vec<Arc<CudaStream>>) -> Result<Self> {
        Self::with_modules::<T>(heap, collective, m, k, n, streams, None)
    }

    /// As [`RingMatmul::new`], the kernels taken from `modules` (one per stream, already
    /// loaded on its device) where given: a module loaded while a persistent loop runs on
    /// the device may wait for that loop.
    pub(crate) fn with_modules<T: Element>(heap: &mut Heap, collective: Collective, m: u64, k: u64, n: u64, streams: Vec<Arc<CudaStream>>, modules: Option<Vec<Module>>) -> Result<Self> {
        let nranks = u32::try_from(heap.n_pes()).map_err(|_| Error::InvalidArgument("too many PEs".into()))?;
        let shape = Shape { collective, nranks, m, k, n, dtype: T::DTYPE };
        shape.check().map_err(|e| Error::InvalidArgument(format!("collective matmul: {e}")))?;
        let local = heap.local_pes().to_vec();
        if streams.len() != local.len() {
            return Err(Error::InvalidArgument(format!("collective matmul: {} streams for {} PE(s) of this process", streams.len(), local.len())));
        }
        for (&pe, s) in local.iter().zip(&streams) {
            if heap.device_of(pe) != Some(s.context().ordinal()) {
                return Err(Error::InvalidArgument(format!("collective matmul: PE {pe} is on device {:?}, its stream on device {}", heap.device_of(pe), s.context().ordinal())));
            }
        }
        let layout = Workspace::new(&shape);
        // Every GEMM the plan makes (its row count, and whether it accumulates), so that
        // cuBLASLt's plans are made, or refused, before any call.
        let mut gemms = Vec::new();
        RingPlan { shape, rank: 0, seq: 1 }.for_each(|_, op| {
            if let Op::Gemm { c, acc, .. } = op {
                gemms.push((c.rows, acc.is_some()));
            }
        });
        gemms.sort_unstable();
        gemms.dedup();
        if let Some(modules) = &modules
            && modules.len() != streams.len()
        {
            return Err(Error::InvalidArgument(format!("collective matmul: {} modules for {} streams", modules.len(), streams.len())));
        }
        let mut modules = modules.map(Vec::into_iter);
        let mut ranks = Vec::with_capacity(local.len());
        for (&pe, compute) in local.iter().zip(streams) {
            let ctx = compute.context().clone();
            let module = match modules.as_mut().and_then(Iterator::next) {
                Some(module) => module,
                None => Module::load(&ctx)?,
            };
            let streams = [compute.clone(), side_lane(&ctx)?, side_lane(&ctx)?, side_lane(&ctx)?];
            let mut blas = Blas::new(&compute, &shape)?;
            for &(rows, accumulates) in &gemms {
                blas.plan(rows, accumulates)?;
            }
            blas.warm_up(&compute)?;
            ranks.push(RankLanes {
                pe: pe as u32,
                handle: heap.handle(pe),
                value: heap.device_handle(pe)?,
                wait: module.kernel("ferroccl_matmul_wait")?,
                put: module.kernel("ferroccl_matmul_put")?,
                sm_copies: None,
                status: HostMapped::zeroed(&ctx, 1)?,
                blas,
                streams,
                _module: module,
            });
        }
        let workspace = heap.malloc(&vec![layout.bytes; local.len()])?;
        for (rank, &ws) in ranks.iter().zip(&workspace) {
            let words = layout.words;
            rank.streams[0].context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
            // SAFETY: the words lie in the allocation just made; no kernel uses it yet.
            unsafe { result::memset_d8_async(ws + words, 0, (layout.bytes - words) as usize, rank.streams[0].cu_stream()) }.map_err(Error::cuda("cuMemsetD8Async"))?;
            rank.streams[0].synchronize().map_err(Error::cuda("cuStreamSynchronize"))?;
        }
        // No PE signals into another's workspace before every PE has zeroed its words.
        heap.host_barrier("collective matmul")?;
        let mut devices: Vec<usize> = ranks.iter().map(|r| r.streams[0].context().ordinal()).collect();
        devices.sort_unstable();
        let shared = devices.windows(2).any(|w| w[0] == w[1]);
        Ok(Self { shape, layout, ranks, workspace, seq: 0, submitted: shared.then(Submitted::default) })
    }

    /// How the copy lanes move data from the next call on: `None` (the default) the copy
    /// engines, no SM taken from the GEMMs; `Some(ctas)` a kernel of `ctas` CTAs per copy
    /// (`device_rt::matmul::lane::put_by_grid`), which takes SMs from the GEMMs while it
    /// runs and may pay where the copy engines are slower. `ctas` from 1 to the device's
    /// SM count, else [`Error::InvalidArgument`] and nothing changes. Every rank should
    /// choose alike (each rank's copies are its own; the results do not depend on it).
    pub fn set_sm_copies(&mut self, ctas: Option<u32>) -> Result<()> {
        let mut chosen = Vec::with_capacity(self.ranks.len());
        for rank in &self.ranks {
            chosen.push(match ctas {
                None => None,
                Some(n) => {
                    let ctx = rank.streams[0].context();
                    let sms = crate::device::sm_count(ctx)?;
                    if n == 0 || n > sms {
                        return Err(Error::InvalidArgument(format!("collective matmul: copies by {n} CTAs on a device of {sms} SMs")));
                    }
                    Some((n, DeviceAlloc::zeroed(ctx, 16)?))
                }
            });
        }
        for (rank, sm) in self.ranks.iter_mut().zip(chosen) {
            // A counter in use by a queued copy goes with the rank's other deferred memory.
            if let Some(old) = std::mem::replace(&mut rank.sm_copies, sm) {
                crate::work::free_after_streams(&rank.streams, Box::new(old));
            }
        }
        Ok(())
    }

    /// The shape every call takes.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// One call on every local PE, enqueued on each PE's stream (it returns before the
    /// work is done): `args[i]` is local PE `i`'s `(A, B, C)`, of the shape's sizes
    /// (`Shape::dims`, row-major). Wrong lengths, an element type that is not the shape's,
    /// and a stream capturing a CUDA graph are refused before anything is enqueued. The call is complete, on every
    /// lane, when the PE's stream has passed it; a wait that ended early (abort, spin
    /// budget) is reported by [`RingMatmul::async_error`] (its call's `C` is then wrong).
    pub fn call<T: Element, S: DevicePtr<T>, R: DevicePtrMut<T>>(&mut self, args: &mut [(&S, &S, &mut R)]) -> Result<()> {
        self.check_call(args)?;
        let order = match &mut self.submitted {
            Some(submitted) => submitted.order(self.shape, self.seq + 1).map_err(|stuck| {
                log::error!("{stuck}");
                Error::InvalidState("a collective matmul's schedule cannot finish")
            })?,
            None => {
                let mut order = Vec::new();
                for rank in &self.ranks {
                    RingPlan { shape: self.shape, rank: rank.pe, seq: self.seq + 1 }.for_each(|lane, op| order.push((rank.pe, lane, op)));
                }
                order
            }
        };
        self.seq += 1;
        // Each local PE's matrices, held (cudarc's records) until every operation is enqueued.
        let streams: Vec<Arc<CudaStream>> = self.ranks.iter().map(|r| r.streams[0].clone()).collect();
        let mut held = Vec::with_capacity(args.len());
        let mut at = Vec::with_capacity(args.len());
        for ((i, (a, b, c)), stream) in args.iter_mut().enumerate().zip(&streams) {
            let (a, ra) = a.device_ptr(stream);
            let (b, rb) = b.device_ptr(stream);
            let (c, rc) = c.device_ptr_mut(stream);
            at.push(Addresses { a, b, c, workspace: self.workspace[i] });
            held.push((ra, rb, rc));
        }
        let mut events: Vec<HashMap<(Event, u64), CudaEvent>> = (0..self.ranks.len()).map(|_| HashMap::new()).collect();
        for (rank, lane, op) in order {
            let Some(i) = self.ranks.iter().position(|r| r.pe == rank) else { continue };
            // SAFETY: `A`, `B` and `C` hold the shape's sizes (checked above) and stay live
            // for the stream (cudarc's records, held above); the workspace is this ring's.
            unsafe { self.enqueue(i, at[i], lane, op, &mut events[i])? };
        }
        Ok(())
    }

    /// Refuses a call of `args` that [`RingMatmul::call`] cannot take, before anything is
    /// enqueued or recorded: an element type that is not the shape's, a count of calls
    /// that is not one per local PE, wrong lengths, a stream capturing a CUDA graph.
    pub(crate) fn check_call<T: Element, S: DevicePtr<T>, R: DevicePtrMut<T>>(&self, args: &[(&S, &S, &mut R)]) -> Result<()> {
        if T::DTYPE != self.shape.dtype {
            return Err(Error::InvalidArgument(format!("collective matmul of {} called with {}", self.shape.dtype.short_name(), T::DTYPE.short_name())));
        }
        if args.len() != self.ranks.len() {
            return Err(Error::InvalidArgument(format!("collective matmul: {} calls for {} PE(s) of this process", args.len(), self.ranks.len())));
        }
        let lens = self.shape.lens();
        for (pe, (a, b, c)) in args.iter().enumerate() {
            for (what, len, want) in [("A", a.len(), lens[0]), ("B", b.len(), lens[1]), ("C", c.len(), lens[2])] {
                if len as u64 != want {
                    return Err(Error::InvalidArgument(format!("collective matmul: local PE {pe}'s {what} holds {len} elements, its shape {want}")));
                }
            }
        }
        self.refuse_capture()
    }

    /// Refuses a call while a local PE's stream is capturing a CUDA graph: a call is not
    /// captured (its copy lanes are streams of their own, which its waits would leave out
    /// of the graph).
    fn refuse_capture(&self) -> Result<()> {
        for rank in &self.ranks {
            // SAFETY: a live stream of the rank's context.
            let capture = unsafe { result::stream::is_capturing(rank.streams[0].cu_stream()) }.map_err(Error::cuda("cuStreamIsCapturing"))?;
            if capture != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
                return Err(Error::InvalidArgument(format!(
                    "collective matmul: PE {}'s stream is capturing a CUDA graph, and a call cannot be captured (its copy lanes are streams of their own, which its waits would leave out of the graph)",
                    rank.pe
                )));
            }
        }
        Ok(())
    }

    /// Gives the ring's workspace back to `heap` (collective, as `Heap::free`: every PE
    /// frees its ring in the same order), once every lane of every local PE has run its
    /// calls (waiting up to `timeout` for each; on a timeout the workspace is kept, since
    /// a lane may still use it, and the error returned). Dropping a ring instead keeps its
    /// workspace until the heap goes.
    pub fn free(mut self, heap: &mut Heap, timeout: std::time::Duration) -> Result<()> {
        for rank in &self.ranks {
            for stream in &rank.streams {
                crate::stream::wait(stream, timeout, "a collective matmul's lane")?;
            }
        }
        heap.free(&std::mem::take(&mut self.workspace))
    }

    /// The first error a wait of any local PE reported, if one has: [`Error::Aborted`]
    /// (the heap's abort flag), or [`Error::DeviceTimeout`] (a neighbour's signal did not
    /// come within the heap's spin budget; `seq` 0: not a work loop's item).
    pub fn async_error(&self) -> Option<Error> {
        let status = self.ranks.iter().map(|r| {
            // SAFETY: one live host-mapped `u32`, which the device writes at most once.
            unsafe { r.status.host_ptr().read_volatile() }
        });
        status.into_iter().find(|&s| s != 0).map(|s| if s == 1 { Error::Aborted } else { Error::DeviceTimeout { site: None, seq: 0 } })
    }

    /// Enqueues local PE `i`'s operation `op` of the current call on its lane `lane`;
    /// `events` holds the events the PE's lanes recorded in this call.
    ///
    /// # Safety
    /// `at` holds the call's matrices, live until the PE's stream has passed the call.
    unsafe fn enqueue(&mut self, i: usize, at: Addresses, lane: Lane, op: Op, events: &mut HashMap<(Event, u64), CudaEvent>) -> Result<()> {
        let (shape, layout, rank) = (self.shape, self.layout, &mut self.ranks[i]);
        // The raw driver calls and cuBLASLt work in the current context: the rank's.
        rank.streams[0].context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let stream = rank.streams[lane as usize].clone();
        match op {
            Op::Wait { word, at_least } => rank.wait_for(&stream, at.workspace + layout.word(&shape, word), at_least)?,
            Op::Signal { word, on, value } => rank.signal(&stream, at.workspace + layout.word(&shape, word), value, on, shape.nranks)?,
            Op::Record { event, value } => {
                let e = stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)).map_err(Error::cuda("cuEventRecord"))?;
                events.insert((event, value), e);
            }
            Op::WaitEvent { event, at_least } => {
                let e = events.get(&(event, at_least)).ok_or(Error::InvalidState("a collective matmul's lane waits for an event never recorded"))?;
                stream.wait(e).map_err(Error::cuda("cuStreamWaitEvent"))?;
            }
            Op::Put { src, dst, to, word, value } => {
                let (src, bytes) = at.rows(&shape, &layout, src);
                let (dst, _) = at.rows(&shape, &layout, dst);
                let word = at.workspace + layout.word(&shape, word);
                match &rank.sm_copies {
                    Some((ctas, arrived)) => rank.put_by_sms(&stream, *ctas, arrived.ptr() + 8 * (lane as u64 - 1), (dst, src, bytes), word, value, to, shape.nranks)?,
                    None => {
                        let dst = rank.on_peer(dst, to, shape.nranks)?;
                        // SAFETY: `src` holds `bytes` (the shape's rows), `dst` the same rows
                        // of the neighbour's workspace, mapped here; the plan's waits
                        // ordered them.
                        unsafe { result::memcpy_dtod_async(dst, src, bytes as usize, stream.cu_stream()) }.map_err(Error::cuda("cuMemcpyDtoDAsync"))?;
                        rank.signal(&stream, word, value, to, shape.nranks)?;
                    }
                }
            }
            Op::Gemm { a, c, acc } => {
                let (a, _) = at.rows(&shape, &layout, a);
                let (c_at, _) = at.rows(&shape, &layout, c);
                let acc = acc.map(|acc| at.rows(&shape, &layout, acc).0);
                // SAFETY: the rows hold `rows × k` and `rows × n` elements of the shape's
                // type and `B` is `k × n` (the call's checks); the plan's waits ordered
                // the reads after the data landed.
                unsafe { rank.blas.gemm(&stream, c.rows, a, at.b, acc, c_at) }?;
            }
        }
        Ok(())
    }
}

impl Drop for RingMatmul {
    /// Never blocks: each rank's streams, kernels, handle and status word go to the
    /// deferred frees, freed once the work queued on its lanes has ended (an unload of the
    /// module, or a free, would otherwise wait for a wait kernel still spinning, or for
    /// work queued behind something the caller has yet to release).
    fn drop(&mut self) {
        for rank in self.ranks.drain(..) {
            let streams = rank.streams.to_vec();
            crate::work::free_after_streams(&streams, Box::new(rank));
        }
    }
}

impl RankLanes {
    /// The address of this PE's symmetric `addr` on its neighbour `peer`.
    fn on_peer(&self, addr: u64, peer: Peer, nranks: u32) -> Result<u64> {
        let pe = peer.of(self.pe, nranks);
        self.value.translate(addr, pe).ok_or_else(|| Error::InvalidArgument(format!("collective matmul: PE {pe}'s heap is not mapped on PE {}'s device", self.pe)))
    }

    /// Queues the bounded wait for this PE's `word` to reach `at_least` on `stream`.
    fn wait_for(&self, stream: &CudaStream, word: u64, at_least: u64) -> Result<()> {
        let status = self.status.device_ptr();
        // SAFETY: the arguments match `ferroccl_matmul_wait`: the PE's handle, a word of its
        // workspace, a value, its host-mapped status; one thread.
        unsafe { stream.launch_builder(&self.wait).arg(&self.handle).arg(&word).arg(&at_least).arg(&status).launch(one_thread()) }.map(|_| ()).map_err(Error::cuda("cuLaunchKernel (collective matmul wait)"))
    }

    /// Queues a put by a grid of `ctas` CTAs on `stream`: `bytes` from `src` to this PE's
    /// symmetric `dst` on `peer`, then `peer`'s `word` set to `value`; `arrived` is the
    /// lane's arrival counter.
    #[allow(clippy::too_many_arguments)]
    fn put_by_sms(&self, stream: &CudaStream, ctas: u32, arrived: u64, (dst, src, bytes): (u64, u64, u64), word: u64, value: u64, peer: Peer, nranks: u32) -> Result<()> {
        let pe = peer.of(self.pe, nranks);
        let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (PUT_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the arguments match `ferroccl_matmul_put`: the PE's handle, a symmetric
        // range of the workspace and a source of `bytes`, a word of the workspace, a PE of
        // the heap, the lane's own counter (its launches serialised on its stream, all of
        // `ctas` CTAs).
        unsafe { stream.launch_builder(&self.put).arg(&self.handle).arg(&dst).arg(&src).arg(&bytes).arg(&word).arg(&value).arg(&pe).arg(&arrived).launch(cfg) }
            .map(|_| ())
            .map_err(Error::cuda("cuLaunchKernel (collective matmul put)"))
    }

    /// Queues the store of `value` into `peer`'s copy of the symmetric `word` on `stream`:
    /// a `cuStreamWriteValue64` into the word as mapped here, with its default memory
    /// barrier (release at system scope: everything the stream did before, and what the
    /// events it waited for cover, is complete and visible to `peer` before the store).
    fn signal(&self, stream: &CudaStream, word: u64, value: u64, peer: Peer, nranks: u32) -> Result<()> {
        let word = self.on_peer(word, peer, nranks)?;
        let barrier = sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32;
        // SAFETY: `word` is an 8-byte-aligned `u64` of `peer`'s workspace, mapped on this
        // PE's device for the heap's lifetime, which outlasts the stream's work (the ring
        // frees its workspace only after its lanes have ended); `stream` is live.
        unsafe { sys::cuStreamWriteValue64_v2(stream.cu_stream(), word, value, barrier) }.result().map_err(Error::cuda("cuStreamWriteValue64"))
    }
}

/// A copy or watch lane's stream, at the highest priority `ctx` allows: when a GEMM and a
/// lane's one-thread wait (or its SM copy) become ready together, CUDA places the pending
/// work of the higher-priority stream first as SMs free, so a GEMM that fills every SM
/// does not hold the wait, and the copy or event behind it, until the GEMM ends.
fn side_lane(ctx: &Arc<CudaContext>) -> Result<Arc<CudaStream>> {
    ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
    let (_, greatest) = result::stream::get_priority_range().map_err(Error::cuda("cuCtxGetStreamPriorityRange"))?;
    ctx.new_stream_with_priority(greatest).map_err(Error::cuda("cuStreamCreateWithPriority"))
}

/// Threads of each CTA of a put by SMs.
const PUT_THREADS: u32 = 512;

fn one_thread() -> LaunchConfig {
    LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 }
}
