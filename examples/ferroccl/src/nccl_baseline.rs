//! NCCL as [`collbench`](crate::collbench)'s baseline: one NCCL rank per GPU, all driven
//! from the calling thread (`ncclCommInitAll`), or one rank of a communicator across
//! processes (`ncclCommInitRank`), timed the way nccl-tests times them, in two modes:
//! on plain buffers (stream-ordered allocations), and on symmetric windows
//! (`ncclMemAlloc` buffers registered with `ncclCommWindowRegister` and
//! `NCCL_WIN_COLL_SYMMETRIC`, NCCL 2.27 and later), where NCCL runs its symmetric
//! kernels. Every buffer is allocated and registered when the baseline is made, before
//! ferroccl's loops start, for the largest row of the sweep.
//!
//! Built with the `nccl` feature. libnccl is loaded when the baseline is made, not when
//! the crate is built; without it, making it returns an error.
//!
//! The calls go through cudarc's raw wrappers (`cudarc::nccl::result`) on raw device
//! addresses: cudarc's `Comm` neither exposes its `ncclComm_t` nor offers in-place
//! all-gather and reduce-scatter, and raw addresses give every element type (half and
//! bfloat16 included) without a Rust element type per NCCL type.

#![cfg(feature = "nccl")]

use std::ffi::{c_int, c_void};
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaGraph, CudaSlice, CudaStream, DevicePtrMut, result as cuda, sys as sys_cuda};
use cudarc::nccl::result::{self as nccl, NcclError};
use cudarc::nccl::sys;
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::algo::CollFunction;

use crate::collbench::{Baseline, BaselineCall, CallTiming, GRAPH_CALLS};
use ferroccl_testkit::coll::expect::CollCase;
use host_shim::bootstrap::Bootstrap;
use host_shim::{Error, Result};

/// NCCL's `NCCL_WIN_COLL_SYMMETRIC` window flag (nccl.h, 2.27 and later).
const NCCL_WIN_COLL_SYMMETRIC: c_int = 0x01;

/// The first NCCL version with symmetric windows (`ncclCommWindowRegister`), as
/// `ncclGetVersion` numbers them.
const SYMMETRIC_SINCE: c_int = 22_700;

/// The modes, in [`Baseline::modes`]' order: plain buffers, then symmetric windows.
const MODES: [&str; 2] = ["plain", "symmetric"];

/// An NCCL communicator of one rank per GPU, with buffers for the benchmark.
pub struct NcclBaseline {
    ranks: Vec<NcclRank>,
    /// What [`Baseline::name`] reports.
    name: String,
    /// Bytes of each buffer of each rank, in both modes.
    capacity: usize,
    /// Whether every rank has symmetric windows (mode 1).
    symmetric: bool,
}

/// One rank: its communicator, the stream its calls run on, its buffers.
struct NcclRank {
    comm: sys::ncclComm_t,
    context: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    plain: PlainBuffers,
    /// `ncclMemAlloc` buffers (input, output), registered as symmetric windows when
    /// [`NcclBaseline::symmetric`]; freed after the communicator is destroyed (which
    /// releases its windows).
    windows: Vec<*mut c_void>,
}

/// A rank's input and output buffers on plain allocations.
struct PlainBuffers {
    // The allocations: kept alive (and freed on drop) for the addresses below.
    _input: CudaSlice<u8>,
    _output: CudaSlice<u8>,
    input_addr: u64,
    output_addr: u64,
}

impl PlainBuffers {
    /// Two zeroed buffers of `bytes` on `stream`'s device.
    fn alloc(stream: &Arc<CudaStream>, bytes: usize) -> Result<Self> {
        let mut input = stream.alloc_zeros::<u8>(bytes).map_err(Error::cuda("cuMemAllocAsync"))?;
        let mut output = stream.alloc_zeros::<u8>(bytes).map_err(Error::cuda("cuMemAllocAsync"))?;
        let input_addr = input.device_ptr_mut(stream).0;
        let output_addr = output.device_ptr_mut(stream).0;
        Ok(Self { _input: input, _output: output, input_addr, output_addr })
    }
}

impl NcclBaseline {
    /// One NCCL rank per entry of `devices` (CUDA ordinals, rank `r` on `devices[r]`,
    /// each device at most once), each with its own stream and buffers of `bytes` (at
    /// least 1).
    pub fn new(devices: &[usize], bytes: usize) -> Result<Self> {
        if devices.is_empty() {
            return Err(Error::InvalidArgument("NCCL baseline: no device given".into()));
        }
        if let Some(d) = devices.iter().enumerate().find_map(|(i, d)| devices[..i].contains(d).then_some(d)) {
            return Err(Error::InvalidArgument(format!("NCCL baseline: device {d} given twice (one rank per GPU)")));
        }
        let version = load_nccl()?;
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
        let name = format!("{} on {} GPU(s) (devices {devices_list})", version_text(version), devices.len());
        Self::with_comms(comms.into_iter().zip(devices.iter().copied()).collect(), name, version, bytes, None)
    }

    /// Rank `rank` of an NCCL communicator of `nranks` ranks in as many processes, on
    /// device `ordinal`, with buffers of `bytes`: rank 0 makes NCCL's unique id and hands
    /// it to the others through `processes` (`ncclCommInitRank`, as programs of one
    /// process per GPU do); the processes agree through it on the symmetric windows too.
    pub fn join(rank: u32, nranks: u32, ordinal: usize, processes: &mut Bootstrap, bytes: usize) -> Result<Self> {
        let version = load_nccl()?;
        let mine: Vec<u8> = if rank == 0 { nccl::get_uniqueid().map_err(nccl_error("ncclGetUniqueId"))?.internal.iter().map(|&b| b as u8).collect() } else { Vec::new() };
        let parts = processes.all_gather("NCCL's unique id", &mine, &[])?;
        let id_bytes = parts.first().map(|p| p.bytes.as_slice()).filter(|b| b.len() == 128).ok_or_else(|| Error::Bootstrap("rank 0 sent no NCCL unique id".into()))?;
        let mut id = sys::ncclUniqueId { internal: [0; 128] };
        for (to, &from) in id.internal.iter_mut().zip(id_bytes) {
            *to = from as std::ffi::c_char;
        }
        host_shim::device::context(ordinal)?.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let mut comm: sys::ncclComm_t = std::ptr::null_mut();
        // SAFETY: `comm` is written on success; the id came from rank 0's ncclGetUniqueId.
        unsafe { nccl::comm_init_rank(&mut comm, nranks as c_int, id, rank as c_int) }.map_err(nccl_error("ncclCommInitRank"))?;
        let name = format!("{}, rank {rank} of {nranks} (one process each) on device {ordinal}", version_text(version));
        Self::with_comms(vec![(comm, ordinal)], name, version, bytes, Some(processes))
    }

    /// The baseline of `comms` (each with its device's ordinal): a stream and plain
    /// buffers of `bytes` per rank, then the symmetric windows where NCCL has them (every
    /// process agreeing through `processes`, when the ranks are in several).
    fn with_comms(comms: Vec<(sys::ncclComm_t, usize)>, name: String, version: c_int, bytes: usize, processes: Option<&mut Bootstrap>) -> Result<Self> {
        let capacity = bytes.max(1);
        let made: Result<Vec<NcclRank>> = comms
            .iter()
            .map(|&(comm, ordinal)| {
                let context = host_shim::device::context(ordinal)?;
                let stream = context.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
                let plain = PlainBuffers::alloc(&stream, capacity)?;
                Ok(NcclRank { comm, context, stream, plain, windows: Vec::new() })
            })
            .collect();
        let ranks = match made {
            Ok(ranks) => ranks,
            Err(e) => {
                for &(comm, _) in &comms {
                    // SAFETY: a communicator of this baseline, which has run nothing and
                    // is destroyed once.
                    if let Err(destroyed) = unsafe { nccl::comm_destroy(comm) } {
                        log::warn!("NCCL baseline: ncclCommDestroy failed: {:?}", destroyed.0);
                    }
                }
                return Err(e);
            }
        };
        let mut baseline = Self { ranks, name, capacity, symmetric: false };
        match baseline.register_windows(version, processes) {
            Ok(()) => {
                baseline.symmetric = true;
                baseline.name += "; modes: plain buffers, symmetric windows (ncclMemAlloc + ncclCommWindowRegister)";
            }
            Err(why) => baseline.name += &format!("; plain buffers only (no symmetric windows: {why})"),
        }
        Ok(baseline)
    }

    /// Gives every rank two zeroed `ncclMemAlloc` buffers of the baseline's capacity and
    /// registers them as symmetric windows (one NCCL group over this process's ranks).
    /// Where the ranks are in several processes, they first agree that every one has its
    /// buffers (registration is collective: a process that did not come would leave the
    /// others waiting), then that every registration succeeded. Returns why not, where not.
    fn register_windows(&mut self, version: c_int, mut processes: Option<&mut Bootstrap>) -> std::result::Result<(), String> {
        let allocated = if version < SYMMETRIC_SINCE {
            Err(format!("{} has none; they came with 2.27", version_text(version)))
        } else {
            self.ranks.iter_mut().try_for_each(|rank| rank.alloc_windows(self.capacity)).map_err(|e| e.to_string())
        };
        agree(processes.as_deref_mut(), allocated)?;
        // Every process reaches the second agreement, whatever failed here.
        let registered = nccl::group_start().map_err(|e| format!("ncclGroupStart failed: {:?}", e.0)).and_then(|_| {
            let registered = self.ranks.iter().try_for_each(|rank| rank.register_windows(self.capacity));
            let ended = nccl::group_end().map(drop).map_err(|e| format!("ncclGroupEnd after ncclCommWindowRegister failed: {:?}", e.0));
            registered.and(ended)
        });
        agree(processes, registered)
    }

    /// Waits for everything queued on every rank's stream.
    fn synchronize(&self) -> Result<()> {
        self.ranks.iter().try_for_each(|r| r.stream.synchronize().map_err(Error::cuda("cuStreamSynchronize")))
    }

    /// Issues `call` on every rank inside one NCCL group (required when one thread
    /// drives several ranks), on the buffers of `mode`. The group is always closed; the
    /// first error is returned.
    fn launch(&self, call: &NcclCall, mode: usize) -> Result<()> {
        nccl::group_start().map_err(nccl_error("ncclGroupStart"))?;
        let issued = self.ranks.iter().enumerate().try_for_each(|(index, rank)| call.issue(index, rank, rank.buffers(mode)));
        let ended = nccl::group_end().map(drop).map_err(nccl_error("ncclGroupEnd"));
        issued.and(ended)
    }
}

/// The processes' agreement on `outcome`: `Ok` where every process's is (one process:
/// its own); else the first failure's reason (this process's, or that another failed).
fn agree(processes: Option<&mut Bootstrap>, outcome: std::result::Result<(), String>) -> std::result::Result<(), String> {
    let Some(p) = processes else { return outcome };
    let parts = p.all_gather("NCCL's symmetric windows", &[u8::from(outcome.is_ok())], &[]).map_err(|e| e.to_string())?;
    outcome?;
    match parts.iter().position(|part| part.bytes.as_slice() != [1]) {
        Some(rank) => Err(format!("rank {rank}'s process could not make them")),
        None => Ok(()),
    }
}

impl NcclRank {
    /// Two zeroed `ncclMemAlloc` buffers of `bytes` on this rank's device.
    fn alloc_windows(&mut self, bytes: usize) -> Result<()> {
        self.context.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        for _ in 0..2 {
            let mut ptr: *mut c_void = std::ptr::null_mut();
            // SAFETY: `ptr` is written on success; the current device is this rank's.
            unsafe { sys::ncclMemAlloc(&mut ptr, bytes) }.result().map_err(nccl_error("ncclMemAlloc"))?;
            self.windows.push(ptr);
            // SAFETY: `ptr` holds `bytes` of this device's memory, which nothing uses yet.
            unsafe { cuda::memset_d8_async(ptr as sys_cuda::CUdeviceptr, 0, bytes, self.stream.cu_stream()) }.map_err(Error::cuda("cuMemsetD8Async"))?;
        }
        self.stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))
    }

    /// Registers both `ncclMemAlloc` buffers as symmetric windows (inside the caller's
    /// NCCL group). NCCL keeps the windows until the communicator is destroyed.
    fn register_windows(&self, bytes: usize) -> std::result::Result<(), String> {
        for &ptr in &self.windows {
            let mut window: sys::ncclWindow_t = std::ptr::null_mut();
            // SAFETY: `ptr` is this rank's `ncclMemAlloc` buffer of `bytes`, alive until
            // after the communicator is destroyed (`Drop`).
            unsafe { sys::ncclCommWindowRegister(self.comm, ptr, bytes, &mut window, NCCL_WIN_COLL_SYMMETRIC) }
                .result()
                .map_err(|e| format!("ncclCommWindowRegister failed: {:?}", e.0))?;
        }
        Ok(())
    }

    /// The (input, output) addresses of mode `mode` (0 plain, 1 symmetric windows).
    fn buffers(&self, mode: usize) -> (u64, u64) {
        match (mode, self.windows.as_slice()) {
            (1, [input, output]) => (*input as u64, *output as u64),
            _ => (self.plain.input_addr, self.plain.output_addr),
        }
    }
}

/// Loads libnccl; returns its version (`ncclGetVersion`'s number).
fn load_nccl() -> Result<c_int> {
    // SAFETY: only tries to dlopen libnccl; no NCCL call is made.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::InvalidArgument("NCCL baseline: libnccl.so could not be loaded (is NCCL installed, and on LD_LIBRARY_PATH?)".into()));
    }
    nccl::get_nccl_version().map_err(nccl_error("ncclGetVersion"))
}

/// `NCCL 2.28.9` for version number 22809.
fn version_text(version: c_int) -> String {
    format!("NCCL {}.{}.{}", version / 10_000, version / 100 % 100, version % 100)
}

impl Drop for NcclBaseline {
    /// Waits for the ranks' work, destroys their communicators (which releases their
    /// windows), then frees the windows' memory (errors are logged: nothing can be done
    /// about them here). The plain buffers are freed afterwards.
    fn drop(&mut self) {
        if let Err(e) = self.synchronize() {
            log::warn!("NCCL baseline: {e}");
        }
        for rank in &self.ranks {
            // SAFETY: `comm` came from ncclCommInitAll or ncclCommInitRank, its work is
            // complete, and it is destroyed once.
            if let Err(e) = unsafe { nccl::comm_destroy(rank.comm) } {
                log::warn!("NCCL baseline: ncclCommDestroy failed: {:?}", e.0);
            }
        }
        for rank in &self.ranks {
            for &ptr in &rank.windows {
                // SAFETY: an `ncclMemAlloc` buffer, freed once, whose communicator is gone.
                if let Err(e) = unsafe { sys::ncclMemFree(ptr) }.result() {
                    log::warn!("NCCL baseline: ncclMemFree failed: {:?}", e.0);
                }
            }
        }
    }
}

impl Baseline for NcclBaseline {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn modes(&self) -> Vec<String> {
        MODES[..if self.symmetric { 2 } else { 1 }].iter().map(|m| (*m).to_owned()).collect()
    }

    /// Microseconds per call on mode `mode`'s buffers: `call.warmup` calls, a
    /// synchronization of every stream, then as `call.timing` says (each call one NCCL
    /// group over all ranks): back to back, `call.iters` calls and a synchronization;
    /// sync, each call followed by a synchronization; graph, [`GRAPH_CALLS`] calls
    /// captured in one CUDA graph per rank, the graphs launched `call.iters` times and
    /// synchronized, per call. Wall clock. Inputs are zeros. In place, input and output
    /// share the output buffer at NCCL's offsets (as nccl-tests places them).
    fn time_us(&mut self, mode: usize, _round: usize, call: &BaselineCall) -> Result<f64> {
        let (timing, warmup, iters) = (call.timing, call.warmup, call.iters);
        let CollCase { function, dtype, op, count, root, in_place, .. } = call.case;
        if iters == 0 {
            return Err(Error::InvalidArgument("NCCL baseline: at least one timed iteration is needed".into()));
        }
        if mode >= self.modes().len() {
            return Err(Error::InvalidArgument(format!("NCCL baseline: no mode {mode} (modes: {})", self.modes().join(", "))));
        }
        if function == CollFunction::SendRecv {
            return Err(Error::InvalidArgument("NCCL baseline: sendrecv is not benchmarked".into()));
        }
        let nranks = self.ranks.len();
        if matches!(function, CollFunction::Broadcast | CollFunction::Reduce) && root as usize >= nranks {
            return Err(Error::InvalidArgument(format!("NCCL baseline: root {root} is not one of {nranks} ranks")));
        }
        let too_large = || Error::InvalidArgument(format!("NCCL baseline: {count} elements of {} overflow its {} B buffers", dtype.name(), self.capacity));
        let (input, output) = function.extents(count as u64, count as u64, nranks as u64).ok_or_else(too_large)?;
        let bytes = usize::try_from(input.max(output)).ok().and_then(|n| n.checked_mul(dtype.size())).ok_or_else(too_large)?;
        if bytes > self.capacity {
            return Err(too_large());
        }
        let call = NcclCall {
            function,
            datatype: nccl_type(dtype),
            op: if function.reduces() { nccl_op(op)? } else { sys::ncclRedOp_t::ncclSum },
            count,
            root: c_int::try_from(root).map_err(|_| Error::InvalidArgument(format!("NCCL baseline: root {root} out of range")))?,
            in_place,
            block_bytes: count * dtype.size(),
        };
        for _ in 0..warmup {
            self.launch(&call, mode)?;
        }
        self.synchronize()?;
        match timing {
            CallTiming::BackToBack => {
                let start = Instant::now();
                for _ in 0..iters {
                    self.launch(&call, mode)?;
                }
                self.synchronize()?;
                Ok(start.elapsed().as_secs_f64() * 1e6 / iters as f64)
            }
            CallTiming::Sync => {
                let start = Instant::now();
                for _ in 0..iters {
                    self.launch(&call, mode)?;
                    self.synchronize()?;
                }
                Ok(start.elapsed().as_secs_f64() * 1e6 / iters as f64)
            }
            CallTiming::Graph => {
                let graphs = self.capture(&call, mode)?;
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
    fn capture(&self, call: &NcclCall, mode: usize) -> Result<Vec<CudaGraph>> {
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
            outcome = (0..GRAPH_CALLS).try_for_each(|_| self.launch(call, mode));
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
    /// Enqueues the call of rank `index` on its stream (inside the caller's group), on
    /// its `(input, output)` buffers.
    fn issue(&self, index: usize, rank: &NcclRank, (input, output): (u64, u64)) -> Result<()> {
        let block = (index * self.block_bytes) as u64;
        let (src, dst) = match (self.in_place, self.function) {
            (false, _) => (input, output),
            (true, CollFunction::AllGather) => (output + block, output),
            (true, CollFunction::ReduceScatter) => (output, output + block),
            (true, _) => (output, output),
        };
        let (src, dst) = (src as *const c_void, dst as *mut c_void);
        let (count, datatype, op, root, comm) = (self.count, self.datatype, self.op, self.root, rank.comm);
        let stream = rank.stream.cu_stream() as sys::cudaStream_t;
        // SAFETY: `src` and `dst` lie in this rank's buffers, on its device, which hold
        // the call's input and output extents (`time_us` checks them against the
        // capacity) and stay allocated until the call has completed (`time_us`
        // synchronizes; `Drop` too); `comm` and `stream` are this rank's.
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
