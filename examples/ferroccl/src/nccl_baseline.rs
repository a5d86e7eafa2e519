//! NCCL as [`collbench`](crate::collbench)'s baseline: one NCCL rank per GPU, all driven
//! from the calling thread (`ncclCommInitAll`), timed the way nccl-tests times them.
//!
//! Built with the `nccl` feature. libnccl is loaded when [`NcclBaseline::new`] runs, not
//! when the crate is built; without it, `new` returns an error.
//!
//! The calls go through cudarc's raw wrappers (`cudarc::nccl::result`) on raw device
//! addresses: cudarc's `Comm` neither exposes its `ncclComm_t` nor offers in-place
//! all-gather and reduce-scatter, and raw addresses give every element type (half and
//! bfloat16 included) without a Rust element type per NCCL type.

#![cfg(feature = "nccl")]

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaGraph, CudaSlice, CudaStream, DevicePtrMut, sys as sys_cuda};
use cudarc::nccl::result::{self as nccl, NcclError};
use cudarc::nccl::sys;
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::algo::CollFunction;

use crate::collbench::{Baseline, CallTiming, GRAPH_CALLS};
use host_shim::{Error, Result};

/// An NCCL communicator of one rank per GPU, with buffers for the benchmark.
pub struct NcclBaseline {
    ranks: Vec<NcclRank>,
    /// What [`Baseline::name`] reports.
    name: String,
}

/// One rank: its communicator, the stream its calls run on, its buffers.
struct NcclRank {
    comm: sys::ncclComm_t,
    stream: Arc<CudaStream>,
    /// `None` until the first timing; replaced by larger ones as requests grow.
    buffers: Option<RankBuffers>,
}

/// A rank's input and output buffers, of the same size, and their device addresses.
struct RankBuffers {
    // The allocations: kept alive (and freed on drop) for the addresses below.
    _input: CudaSlice<u8>,
    _output: CudaSlice<u8>,
    input_addr: u64,
    output_addr: u64,
    /// Bytes of each buffer.
    capacity: usize,
}

impl RankBuffers {
    /// Two zeroed buffers of `bytes` (at least 1) on `stream`'s device.
    fn alloc(stream: &Arc<CudaStream>, bytes: usize) -> Result<Self> {
        let capacity = bytes.max(1);
        let mut input = stream.alloc_zeros::<u8>(capacity).map_err(Error::cuda("cuMemAllocAsync"))?;
        let mut output = stream.alloc_zeros::<u8>(capacity).map_err(Error::cuda("cuMemAllocAsync"))?;
        let input_addr = input.device_ptr_mut(stream).0;
        let output_addr = output.device_ptr_mut(stream).0;
        Ok(Self { _input: input, _output: output, input_addr, output_addr, capacity })
    }
}

impl NcclBaseline {
    /// One NCCL rank per entry of `devices` (CUDA ordinals, rank `r` on `devices[r]`,
    /// each device at most once), each with its own stream.
    pub fn new(devices: &[usize]) -> Result<Self> {
        if devices.is_empty() {
            return Err(Error::InvalidArgument("NCCL baseline: no device given".into()));
        }
        if let Some(d) = devices.iter().enumerate().find_map(|(i, d)| devices[..i].contains(d).then_some(d)) {
            return Err(Error::InvalidArgument(format!("NCCL baseline: device {d} given twice (one rank per GPU)")));
        }
        // SAFETY: only tries to dlopen libnccl; no NCCL call is made.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::InvalidArgument(
                "NCCL baseline: libnccl.so could not be loaded (is NCCL installed, and on LD_LIBRARY_PATH?)".into(),
            ));
        }
        let version = nccl::get_nccl_version().map_err(nccl_error("ncclGetVersion"))?;
        let streams: Vec<Arc<CudaStream>> = devices
            .iter()
            .map(|&ordinal| host_shim::device::context(ordinal)?.new_stream().map_err(Error::cuda("cuStreamCreate")))
            .collect::<Result<_>>()?;
        let ordinals: Vec<c_int> = devices
            .iter()
            .map(|&d| c_int::try_from(d).map_err(|_| Error::InvalidArgument(format!("NCCL baseline: device {d} out of range"))))
            .collect::<Result<_>>()?;
        let nranks = c_int::try_from(devices.len()).map_err(|_| Error::InvalidArgument("NCCL baseline: too many devices".into()))?;
        let mut comms: Vec<sys::ncclComm_t> = vec![std::ptr::null_mut(); devices.len()];
        // SAFETY: `comms` has room for `nranks` communicators and `ordinals` holds
        // `nranks` device numbers.
        unsafe { nccl::comm_init_all(comms.as_mut_ptr(), nranks, ordinals.as_ptr()) }.map_err(nccl_error("ncclCommInitAll"))?;
        let devices_list = devices.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let name = format!(
            "NCCL {}.{}.{} on {} GPU(s) (devices {devices_list})",
            version / 10_000,
            version / 100 % 100,
            version % 100,
            devices.len()
        );
        let ranks = comms.into_iter().zip(streams).map(|(comm, stream)| NcclRank { comm, stream, buffers: None }).collect();
        Ok(Self { ranks, name })
    }

    /// Rank `rank` of an NCCL communicator of `nranks` ranks in as many processes, on
    /// device `ordinal`: rank 0 makes NCCL's unique id and hands it to the others through
    /// `processes` (`ncclCommInitRank`, as programs of one process per GPU do).
    pub fn join(rank: u32, nranks: u32, ordinal: usize, processes: &mut host_shim::bootstrap::Bootstrap) -> Result<Self> {
        // SAFETY: only tries to dlopen libnccl; no NCCL call is made.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::InvalidArgument("NCCL baseline: libnccl.so could not be loaded (is NCCL installed, and on LD_LIBRARY_PATH?)".into()));
        }
        let version = nccl::get_nccl_version().map_err(nccl_error("ncclGetVersion"))?;
        let mine: Vec<u8> = if rank == 0 { nccl::get_uniqueid().map_err(nccl_error("ncclGetUniqueId"))?.internal.iter().map(|&b| b as u8).collect() } else { Vec::new() };
        let parts = processes.all_gather("NCCL's unique id", &mine, &[])?;
        let bytes = parts.first().map(|p| p.bytes.as_slice()).filter(|b| b.len() == 128).ok_or_else(|| Error::Bootstrap("rank 0 sent no NCCL unique id".into()))?;
        let mut id = sys::ncclUniqueId { internal: [0; 128] };
        for (to, &from) in id.internal.iter_mut().zip(bytes) {
            *to = from as std::ffi::c_char;
        }
        let stream = host_shim::device::context(ordinal)?.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
        let mut comm: sys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: `comm` is written on success; the id came from rank 0's ncclGetUniqueId.
        unsafe { nccl::comm_init_rank(&mut comm, nranks as c_int, id, rank as c_int) }.map_err(nccl_error("ncclCommInitRank"))?;
        let name = format!("NCCL {}.{}.{}, rank {rank} of {nranks} (one process each) on device {ordinal}", version / 10_000, version / 100 % 100, version % 100);
        Ok(Self { ranks: vec![NcclRank { comm, stream, buffers: None }], name })
    }

    /// Makes every rank's buffers at least `bytes` long (the old ones are freed in
    /// stream order, after the work already queued on them).
    fn reserve(&mut self, bytes: usize) -> Result<()> {
        for rank in &mut self.ranks {
            if rank.buffers.as_ref().is_none_or(|b| b.capacity < bytes) {
                // Free the old ones first: only one pair per rank at a time.
                rank.buffers = None;
                rank.buffers = Some(RankBuffers::alloc(&rank.stream, bytes)?);
            }
        }
        Ok(())
    }

    /// Issues `call` on every rank inside one NCCL group (required when one thread
    /// drives several ranks). The group is always closed; the first error is returned.
    fn launch(&self, call: &NcclCall) -> Result<()> {
        nccl::group_start().map_err(nccl_error("ncclGroupStart"))?;
        let issued = self.ranks.iter().enumerate().try_for_each(|(index, rank)| call.issue(index, rank));
        let ended = nccl::group_end().map(drop).map_err(nccl_error("ncclGroupEnd"));
        issued.and(ended)
    }

    /// Waits for everything queued on every rank's stream.
    fn synchronize(&self) -> Result<()> {
        self.ranks.iter().try_for_each(|r| r.stream.synchronize().map_err(Error::cuda("cuStreamSynchronize")))
    }
}

impl Drop for NcclBaseline {
    /// Waits for the ranks' work, then destroys their communicators (errors are logged:
    /// nothing can be done about them here). The buffers are freed afterwards.
    fn drop(&mut self) {
        if let Err(e) = self.synchronize() {
            log::warn!("NCCL baseline: {e}");
        }
        for rank in &self.ranks {
            // SAFETY: `comm` came from ncclCommInitAll, its work is complete, and it is
            // destroyed once.
            if let Err(e) = unsafe { nccl::comm_destroy(rank.comm) } {
                log::warn!("NCCL baseline: ncclCommDestroy failed: {:?}", e.0);
            }
        }
    }
}

impl Baseline for NcclBaseline {
    fn name(&self) -> String {
        self.name.clone()
    }

    /// Microseconds per call: `warmup` calls, a synchronization of every stream, then as
    /// `timing` says (each call one NCCL group over all ranks): back to back, `iters`
    /// calls and a synchronization; sync, `iters` calls each followed by a
    /// synchronization; graph, [`GRAPH_CALLS`] calls captured in one CUDA graph per rank,
    /// the graphs launched `iters` times and synchronized, per call. Wall clock. Inputs
    /// are zeros. In place, input and output share the output buffer at NCCL's offsets
    /// (as nccl-tests places them).
    fn time_us(
        &mut self,
        function: CollFunction,
        dtype: DataType,
        op: RedOpKind,
        count: usize,
        root: u32,
        in_place: bool,
        timing: CallTiming,
        warmup: usize,
        iters: usize,
    ) -> Result<f64> {
        if iters == 0 {
            return Err(Error::InvalidArgument("NCCL baseline: at least one timed iteration is needed".into()));
        }
        if function == CollFunction::SendRecv {
            return Err(Error::InvalidArgument("NCCL baseline: sendrecv is not benchmarked".into()));
        }
        let nranks = self.ranks.len();
        if matches!(function, CollFunction::Broadcast | CollFunction::Reduce) && root as usize >= nranks {
            return Err(Error::InvalidArgument(format!("NCCL baseline: root {root} is not one of {nranks} ranks")));
        }
        let too_large = || Error::InvalidArgument(format!("NCCL baseline: {count} elements of {} overflow a buffer", dtype.name()));
        let (input, output) = function.extents(count as u64, count as u64, nranks as u64).ok_or_else(too_large)?;
        let bytes = usize::try_from(input.max(output)).ok().and_then(|n| n.checked_mul(dtype.size())).ok_or_else(too_large)?;
        let call = NcclCall {
            function,
            datatype: nccl_type(dtype),
            op: if function.reduces() { nccl_op(op)? } else { sys::ncclRedOp_t::ncclSum },
            count,
            root: c_int::try_from(root).map_err(|_| Error::InvalidArgument(format!("NCCL baseline: root {root} out of range")))?,
            in_place,
            block_bytes: count * dtype.size(),
        };
        self.reserve(bytes)?;
        for _ in 0..warmup {
            self.launch(&call)?;
        }
        self.synchronize()?;
        match timing {
            CallTiming::BackToBack => {
                let start = Instant::now();
                for _ in 0..iters {
                    self.launch(&call)?;
                }
                self.synchronize()?;
                Ok(start.elapsed().as_secs_f64() * 1e6 / iters as f64)
            }
            CallTiming::Sync => {
                let start = Instant::now();
                for _ in 0..iters {
                    self.launch(&call)?;
                    self.synchronize()?;
                }
                Ok(start.elapsed().as_secs_f64() * 1e6 / iters as f64)
            }
            CallTiming::Graph => {
                let graphs = self.capture(&call)?;
                let launch_all = || graphs.iter().try_for_each(|g| g.launch().map_err(Error::cuda("cuGraphLaunch")));
                launch_all()?;
                self.synchronize()?;
                let start = Instant::now();
                for _ in 0..iters {
                    launch_all()?;
                }
                self.synchronize()?;
                Ok(start.elapsed().as_secs_f64() * 1e6 / (iters * GRAPH_CALLS) as f64)
            }
        }
    }
}

impl NcclBaseline {
    /// [`GRAPH_CALLS`] launches of `call` captured on every rank's stream at once (relaxed
    /// mode; NCCL's grouped launch over several streams captures as one graph per
    /// stream): one graph per rank. Every capture begun is ended, also after an error.
    fn capture(&self, call: &NcclCall) -> Result<Vec<CudaGraph>> {
        let mut begun = Vec::new();
        let mut outcome = Ok(());
        for rank in &self.ranks {
            outcome = rank.stream.begin_capture(sys_cuda::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(Error::cuda("cuStreamBeginCapture"));
            if outcome.is_err() {
                break;
            }
            begun.push(&rank.stream);
        }
        if outcome.is_ok() {
            outcome = (0..GRAPH_CALLS).try_for_each(|_| self.launch(call));
        }
        let mut graphs = Vec::new();
        for stream in begun {
            match stream.end_capture(sys_cuda::CUgraphInstantiate_flags(0)).map_err(Error::cuda("cuStreamEndCapture")) {
                Ok(Some(g)) => graphs.push(g),
                Ok(None) => outcome = outcome.and(Err(Error::InvalidState("the capture produced no graph"))),
                Err(e) => outcome = outcome.and(Err(e)),
            }
        }
        outcome.map(|()| graphs)
    }
}

/// One collective call, as every rank issues it.
struct NcclCall {
    /// Not SendRecv.
    function: CollFunction,
    datatype: sys::ncclDataType_t,
    /// The reducing functions' operator.
    op: sys::ncclRedOp_t,
    /// NCCL's count (all-gather's send count, reduce-scatter's receive count).
    count: usize,
    /// Broadcast and reduce: the root rank.
    root: c_int,
    in_place: bool,
    /// Bytes of one rank's block (`count` elements): the in-place offset step.
    block_bytes: usize,
}

impl NcclCall {
    /// Enqueues the call of rank `index` on its stream (inside the caller's group).
    fn issue(&self, index: usize, rank: &NcclRank) -> Result<()> {
        let Some(buffers) = &rank.buffers else {
            return Err(Error::InvalidArgument("NCCL baseline: buffers not allocated".into()));
        };
        let block = (index * self.block_bytes) as u64;
        let (src, dst) = match (self.in_place, self.function) {
            (false, _) => (buffers.input_addr, buffers.output_addr),
            (true, CollFunction::AllGather) => (buffers.output_addr + block, buffers.output_addr),
            (true, CollFunction::ReduceScatter) => (buffers.output_addr, buffers.output_addr + block),
            (true, _) => (buffers.output_addr, buffers.output_addr),
        };
        let (src, dst) = (src as *const c_void, dst as *mut c_void);
        let (count, datatype, op, root, comm) = (self.count, self.datatype, self.op, self.root, rank.comm);
        let stream = rank.stream.cu_stream() as sys::cudaStream_t;
        // SAFETY: `src` and `dst` lie in this rank's buffers, on its device, which hold
        // the call's input and output extents (`reserve`) and stay allocated until the
        // call has completed (`time_us` synchronizes; `Drop` too); `comm` and `stream`
        // are this rank's.
        let issued = unsafe {
            match self.function {
                CollFunction::AllReduce => nccl::all_reduce(src, dst, count, datatype, op, comm, stream),
                CollFunction::ReduceScatter => nccl::reduce_scatter(src, dst, count, datatype, op, comm, stream),
                CollFunction::AllGather => nccl::all_gather(src, dst, count, datatype, comm, stream),
                CollFunction::Broadcast => nccl::broadcast(src, dst, count, datatype, root, comm, stream),
                CollFunction::Reduce => nccl::reduce(src, dst, count, datatype, op, root, comm, stream),
                CollFunction::SendRecv => return Err(Error::InvalidArgument("NCCL baseline: sendrecv is not benchmarked".into())),
            }
        };
        issued.map(drop).map_err(nccl_error(self.function.name()))
    }
}

/// NCCL's number for `dtype` (the same numbering as [`DataType`]).
fn nccl_type(dtype: DataType) -> sys::ncclDataType_t {
    use sys::ncclDataType_t as T;
    match dtype {
        DataType::I8 => T::ncclInt8,
        DataType::U8 => T::ncclUint8,
        DataType::I32 => T::ncclInt32,
        DataType::U32 => T::ncclUint32,
        DataType::I64 => T::ncclInt64,
        DataType::U64 => T::ncclUint64,
        DataType::F16 => T::ncclFloat16,
        DataType::F32 => T::ncclFloat32,
        DataType::F64 => T::ncclFloat64,
        DataType::Bf16 => T::ncclBfloat16,
    }
}

/// NCCL's built-in operator for `op` (average is `ncclAvg`); PreMulSum needs a
/// per-communicator operator and is refused.
fn nccl_op(op: RedOpKind) -> Result<sys::ncclRedOp_t> {
    use sys::ncclRedOp_t as O;
    Ok(match op {
        RedOpKind::Sum => O::ncclSum,
        RedOpKind::Prod => O::ncclProd,
        RedOpKind::Max => O::ncclMax,
        RedOpKind::Min => O::ncclMin,
        RedOpKind::SumPostDiv => O::ncclAvg,
        RedOpKind::PreMulSum => return Err(Error::InvalidArgument("NCCL baseline: premulsum is not supported".into())),
    })
}

/// Wraps an NCCL error with the call that returned it.
fn nccl_error(call: &'static str) -> impl FnOnce(NcclError) -> Error {
    move |e| Error::InvalidArgument(format!("NCCL: {call} failed: {:?}", e.0))
}
