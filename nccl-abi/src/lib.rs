//! NCCL's host API over ferroccl: `libnccl.so` (soname `libnccl.so.2`), which programs
//! written for NCCL load in its place (`LD_LIBRARY_PATH`, or `LD_PRELOAD`; see
//! docs/nccl.md). Each `ncclComm_t` is one rank of a ferroccl communicator across
//! processes (`Comm::init_rank`); each collective is one work item on the caller's stream.
//!
//! Every function checks its arguments and returns NCCL's result codes; anything ferroccl
//! does not serve is `ncclInvalidUsage`, with `ncclGetLastError` saying what and why.
//! No function panics into its caller (a panic is `ncclInternalError`).
//!
//! Written from NCCL's public documentation: the names, enum values and struct layouts of
//! `include/nccl.h`.

#![allow(non_snake_case, reason = "NCCL's function names")]

pub mod calls;
pub mod comm;
pub mod error;
pub mod exchange;
pub mod group;
pub mod memory;
pub mod rounds;
pub mod types;

use std::ffi::{c_char, c_int, c_void};

use host_shim::device_rt::algo::CollFunction;
use host_shim::comm::CommId;
use host_shim::cudarc::driver::sys::CUstream;

use calls::{Collective, Side};
use exchange::{Buffers, Exchange};
use comm::{InitArgs, NcclComm};
use error::{Failure, guarded};
use types::{ConfigHead, NUM_RESULTS, NcclResult, RESULT_TEXTS, SCALAR_DEVICE, SCALAR_HOST_IMMEDIATE, UniqueId, VERSION_CODE, data_type};

/// `*out = value` for a caller's out-pointer, refused when null.
///
/// # Safety
/// `out` is null or writable.
unsafe fn put<T>(out: *mut T, what: &str, value: T) -> Result<(), Failure> {
    // SAFETY: this function's contract.
    let out = unsafe { out.as_mut() }.ok_or_else(|| Failure::argument(format!("{what} is NULL")))?;
    *out = value;
    Ok(())
}

/// The config a caller passed, if any.
///
/// # Safety
/// `config` is null or points at a config of at least its `size` bytes.
unsafe fn config<'a>(config: *const ConfigHead) -> Option<&'a ConfigHead> {
    // SAFETY: this function's contract.
    unsafe { config.as_ref() }
}

/// # Safety
/// `version` is null (refused) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetVersion(version: *mut c_int) -> NcclResult {
    // SAFETY: this function's contract.
    guarded("ncclGetVersion", || unsafe { put(version, "version", VERSION_CODE) })
}

/// # Safety
/// `unique_id` is null (refused) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGetUniqueId(unique_id: *mut UniqueId) -> NcclResult {
    guarded("ncclGetUniqueId", || {
        let id = CommId::new()?;
        // SAFETY: this function's contract.
        unsafe { put(unique_id, "uniqueId", UniqueId { internal: *id.as_bytes() }) }
    })
}

/// # Safety
/// `comm` is null (refused) or writable (inside a group, until its end).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRank(comm: *mut *mut NcclComm, nranks: c_int, comm_id: UniqueId, rank: c_int) -> NcclResult {
    // SAFETY: this function's contract.
    guarded("ncclCommInitRank", || unsafe { group::init(comm, InitArgs::new(nranks, comm_id, rank, None)?) })
}

/// # Safety
/// As [`ncclCommInitRank`]'s; `config` null or a config initialized with
/// `NCCL_CONFIG_INITIALIZER`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRankConfig(comm: *mut *mut NcclComm, nranks: c_int, comm_id: UniqueId, rank: c_int, cfg: *const ConfigHead) -> NcclResult {
    guarded("ncclCommInitRankConfig", || {
        // SAFETY: this function's contract.
        let args = InitArgs::new(nranks, comm_id, rank, unsafe { config(cfg) })?;
        // SAFETY: this function's contract.
        unsafe { group::init(comm, args) }
    })
}

/// NCCL's init from several ids (spread bootstrap roots for very large jobs): every rank
/// passes the same `n_id` ids, so the first is one id every rank shares; ferroccl's
/// bootstrap needs no more than one.
///
/// # Safety
/// As [`ncclCommInitRankConfig`]'s; `comm_ids` null (refused) or `n_id` ids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitRankScalable(comm: *mut *mut NcclComm, nranks: c_int, rank: c_int, n_id: c_int, comm_ids: *const UniqueId, cfg: *const ConfigHead) -> NcclResult {
    guarded("ncclCommInitRankScalable", || {
        if n_id < 1 {
            return Err(Failure::argument(format!("nId {n_id}: at least one id")));
        }
        // SAFETY: null or `n_id` ≥ 1 ids (this function's contract).
        let first = unsafe { comm_ids.as_ref() }.ok_or_else(|| Failure::argument("commIds is NULL"))?;
        // SAFETY: this function's contract.
        let args = InitArgs::new(nranks, *first, rank, unsafe { config(cfg) })?;
        // SAFETY: this function's contract.
        unsafe { group::init(comm, args) }
    })
}

/// One process's ranks on `ndev` devices (`devlist`, or 0..ndev when null).
///
/// # Safety
/// `comm` holds `ndev` writable entries; `devlist` is null or holds `ndev` devices.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommInitAll(comm: *mut *mut NcclComm, ndev: c_int, devlist: *const c_int) -> NcclResult {
    guarded("ncclCommInitAll", || {
        let n = usize::try_from(ndev).ok().filter(|&n| n >= 1).ok_or_else(|| Failure::argument(format!("ndev {ndev}")))?;
        if comm.is_null() {
            return Err(Failure::argument("comm is NULL"));
        }
        // SAFETY: `devlist` holds `ndev` devices when not null (this function's contract).
        let devices: Vec<i32> = if devlist.is_null() { (0..ndev).collect() } else { unsafe { std::slice::from_raw_parts(devlist, n) }.to_vec() };
        let id = UniqueId { internal: *CommId::new()?.as_bytes() };
        let args: Vec<InitArgs> = devices.iter().enumerate().map(|(rank, &device)| InitArgs::new(ndev, id, rank as c_int, None).map(|a| InitArgs { device: Some(device), ..a })).collect::<Result<_, _>>()?;
        let built: Vec<Result<Box<NcclComm>, Failure>> = std::thread::scope(|s| {
            let handles: Vec<_> = args.into_iter().map(|a| s.spawn(move || a.init())).collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Failure::usage("an init panicked")))).collect()
        });
        let built: Vec<Box<NcclComm>> = built.into_iter().collect::<Result<_, _>>()?;
        for (i, rank) in built.into_iter().enumerate() {
            // SAFETY: `comm` holds `ndev` writable entries (this function's contract).
            unsafe { *comm.add(i) = Box::into_raw(rank) };
        }
        Ok(())
    })
}

/// # Safety
/// `comm` is null (refused) or a live rank of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommFinalize(comm: *mut NcclComm) -> NcclResult {
    // SAFETY: this function's contract.
    guarded("ncclCommFinalize", || unsafe { NcclComm::from_ptr(comm) }?.lock().finalize())
}

/// # Safety
/// `comm` is null (refused) or a live rank of this library, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDestroy(comm: *mut NcclComm) -> NcclResult {
    guarded("ncclCommDestroy", || {
        // SAFETY: this function's contract.
        unsafe { NcclComm::from_ptr(comm) }?;
        // SAFETY: a rank this library boxed (this function's contract), freed once.
        comm::destroy(unsafe { Box::from_raw(comm) });
        Ok(())
    })
}

/// Aborts the rank (every rank of its communicator stops) and frees it.
///
/// # Safety
/// As [`ncclCommDestroy`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommAbort(comm: *mut NcclComm) -> NcclResult {
    guarded("ncclCommAbort", || {
        // SAFETY: this function's contract.
        unsafe { NcclComm::from_ptr(comm) }?.lock().abort();
        // SAFETY: as `ncclCommDestroy`'s.
        comm::destroy(unsafe { Box::from_raw(comm) });
        Ok(())
    })
}

/// # Safety
/// `comm` a live rank; `newcomm` writable; `config` as [`ncclCommInitRankConfig`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommSplit(comm: *mut NcclComm, color: c_int, key: c_int, newcomm: *mut *mut NcclComm, cfg: *const ConfigHead) -> NcclResult {
    guarded("ncclCommSplit", || {
        if newcomm.is_null() {
            return Err(Failure::argument("newcomm is NULL"));
        }
        // SAFETY: this function's contract.
        let made = unsafe { NcclComm::from_ptr(comm) }?.lock().split(color, key, unsafe { config(cfg) })?;
        // SAFETY: this function's contract.
        unsafe { put(newcomm, "newcomm", made.map_or(std::ptr::null_mut(), Box::into_raw)) }
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclGetErrorString(result: NcclResult) -> *const c_char {
    match usize::try_from(result).ok().filter(|&r| r < NUM_RESULTS as usize) {
        Some(r) => RESULT_TEXTS[r].as_ptr(),
        None => c"unknown result code".as_ptr(),
    }
}

/// This thread's last failure's text (the communicator is not needed).
#[unsafe(no_mangle)]
pub extern "C" fn ncclGetLastError(_comm: *mut NcclComm) -> *const c_char {
    error::last_error()
}

/// # Safety
/// `comm` a live rank; `async_error` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommGetAsyncError(comm: *mut NcclComm, async_error: *mut NcclResult) -> NcclResult {
    guarded("ncclCommGetAsyncError", || {
        // SAFETY: this function's contract.
        let failure = unsafe { NcclComm::from_ptr(comm) }?.lock().async_error();
        // Polled often (PyTorch's watchdog): the failure is not logged here.
        let result = failure.map_or(types::SUCCESS, |f| f.result);
        // SAFETY: this function's contract.
        unsafe { put(async_error, "asyncError", result) }
    })
}

/// # Safety
/// `comm` a live rank; `count` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCount(comm: *mut NcclComm, count: *mut c_int) -> NcclResult {
    guarded("ncclCommCount", || {
        // SAFETY: this function's contract.
        let n = unsafe { NcclComm::from_ptr(comm) }?.lock().comm()?.world_size();
        // SAFETY: this function's contract.
        unsafe { put(count, "count", n as c_int) }
    })
}

/// # Safety
/// `comm` a live rank; `device` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommCuDevice(comm: *mut NcclComm, device: *mut c_int) -> NcclResult {
    guarded("ncclCommCuDevice", || {
        // SAFETY: this function's contract.
        let d = unsafe { NcclComm::from_ptr(comm) }?.lock().device;
        // SAFETY: this function's contract.
        unsafe { put(device, "device", d) }
    })
}

/// # Safety
/// `comm` a live rank; `rank` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommUserRank(comm: *mut NcclComm, rank: *mut c_int) -> NcclResult {
    guarded("ncclCommUserRank", || {
        // SAFETY: this function's contract.
        let r = unsafe { NcclComm::from_ptr(comm) }?.lock().comm()?.rank();
        // SAFETY: this function's contract.
        unsafe { put(rank, "rank", r as c_int) }
    })
}

/// A PreMulSum operator of the host scalar `*scalar` (a `datatype` value); a scalar in
/// device memory (`ncclScalarDevice`) is not served.
///
/// # Safety
/// `op` writable; `scalar` points at one `datatype` value; `comm` a live rank.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclRedOpCreatePreMulSum(op: *mut c_int, scalar: *const c_void, datatype: c_int, residence: c_int, comm: *mut NcclComm) -> NcclResult {
    guarded("ncclRedOpCreatePreMulSum", || {
        let dtype = data_type(datatype)?;
        match residence {
            SCALAR_HOST_IMMEDIATE => {}
            SCALAR_DEVICE => return Err(Failure::usage("a PreMulSum scalar in device memory (ncclScalarDevice): ferroccl takes host scalars only (ncclScalarHostImmediate)")),
            other => return Err(Failure::argument(format!("scalar residence {other}"))),
        }
        if scalar.is_null() {
            return Err(Failure::argument("scalar is NULL"));
        }
        let mut bytes = [0u8; 8];
        // SAFETY: `scalar` points at one `dtype` value (this function's contract).
        unsafe { std::ptr::copy_nonoverlapping(scalar.cast::<u8>(), bytes.as_mut_ptr(), dtype.size()) };
        let arg = types::scalar_bits(dtype, bytes);
        // SAFETY: this function's contract.
        let made = unsafe { NcclComm::from_ptr(comm) }?.lock().add_operator(dtype, arg);
        // SAFETY: this function's contract.
        unsafe { put(op, "op", made) }
    })
}

/// # Safety
/// `comm` a live rank.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclRedOpDestroy(op: c_int, comm: *mut NcclComm) -> NcclResult {
    // SAFETY: this function's contract.
    guarded("ncclRedOpDestroy", || unsafe { NcclComm::from_ptr(comm) }?.lock().remove_operator(op))
}

/// # Safety
/// As [`calls::collective`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAllReduce(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, op: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let call = Collective { function: CollFunction::AllReduce, send: sendbuff as u64, recv: recvbuff as u64, count, dtype: datatype, op: Some(op), root: None };
    // SAFETY: this function's contract.
    guarded("ncclAllReduce", || unsafe { calls::collective(comm, stream, call) })
}

/// # Safety
/// As [`calls::collective`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclReduceScatter(sendbuff: *const c_void, recvbuff: *mut c_void, recvcount: usize, datatype: c_int, op: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let call = Collective { function: CollFunction::ReduceScatter, send: sendbuff as u64, recv: recvbuff as u64, count: recvcount, dtype: datatype, op: Some(op), root: None };
    // SAFETY: this function's contract.
    guarded("ncclReduceScatter", || unsafe { calls::collective(comm, stream, call) })
}

/// # Safety
/// As [`calls::collective`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAllGather(sendbuff: *const c_void, recvbuff: *mut c_void, sendcount: usize, datatype: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let call = Collective { function: CollFunction::AllGather, send: sendbuff as u64, recv: recvbuff as u64, count: sendcount, dtype: datatype, op: None, root: None };
    // SAFETY: this function's contract.
    guarded("ncclAllGather", || unsafe { calls::collective(comm, stream, call) })
}

/// # Safety
/// As [`calls::collective`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclBroadcast(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, root: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let call = Collective { function: CollFunction::Broadcast, send: sendbuff as u64, recv: recvbuff as u64, count, dtype: datatype, op: None, root: Some(root) };
    // SAFETY: this function's contract.
    guarded("ncclBroadcast", || unsafe { calls::collective(comm, stream, call) })
}

/// The in-place broadcast.
///
/// # Safety
/// As [`calls::collective`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclBcast(buff: *mut c_void, count: usize, datatype: c_int, root: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let call = Collective { function: CollFunction::Broadcast, send: buff as u64, recv: buff as u64, count, dtype: datatype, op: None, root: Some(root) };
    // SAFETY: this function's contract.
    guarded("ncclBcast", || unsafe { calls::collective(comm, stream, call) })
}

/// # Safety
/// As [`calls::collective`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclReduce(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, op: c_int, root: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let call = Collective { function: CollFunction::Reduce, send: sendbuff as u64, recv: recvbuff as u64, count, dtype: datatype, op: Some(op), root: Some(root) };
    // SAFETY: this function's contract.
    guarded("ncclReduce", || unsafe { calls::collective(comm, stream, call) })
}

/// # Safety
/// As [`calls::send_recv`]'s; inside a group, until its end.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclSend(sendbuff: *const c_void, count: usize, datatype: c_int, peer: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let side = Side { buf: sendbuff as u64, count, dtype: datatype, peer };
    // SAFETY: this function's contract.
    guarded("ncclSend", || unsafe { group::transfers(comm, stream, &[(side, true)], None) })
}

/// # Safety
/// As [`calls::send_recv`]'s; inside a group, until its end.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclRecv(recvbuff: *mut c_void, count: usize, datatype: c_int, peer: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let side = Side { buf: recvbuff as u64, count, dtype: datatype, peer };
    // SAFETY: this function's contract.
    guarded("ncclRecv", || unsafe { group::transfers(comm, stream, &[(side, false)], None) })
}

/// # Safety
/// As [`calls::exchange`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGather(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, root: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let buffers = Buffers { send: sendbuff as u64, recv: recvbuff as u64, count, dtype: datatype };
    // SAFETY: this function's contract.
    guarded("ncclGather", || unsafe { calls::exchange(comm, stream, Exchange::Gather { root }, buffers) })
}

/// # Safety
/// As [`calls::exchange`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclScatter(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, root: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let buffers = Buffers { send: sendbuff as u64, recv: recvbuff as u64, count, dtype: datatype };
    // SAFETY: this function's contract.
    guarded("ncclScatter", || unsafe { calls::exchange(comm, stream, Exchange::Scatter { root }, buffers) })
}

/// # Safety
/// As [`calls::exchange`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAlltoAll(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: c_int, comm: *mut NcclComm, stream: CUstream) -> NcclResult {
    let buffers = Buffers { send: sendbuff as u64, recv: recvbuff as u64, count, dtype: datatype };
    // SAFETY: this function's contract.
    guarded("ncclAlltoAll", || unsafe { calls::exchange(comm, stream, Exchange::AllToAll, buffers) })
}

#[unsafe(no_mangle)]
pub extern "C" fn ncclGroupStart() -> NcclResult {
    guarded("ncclGroupStart", || {
        group::start();
        Ok(())
    })
}

/// # Safety
/// Every pointer the group's calls were given is still valid.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGroupEnd() -> NcclResult {
    // SAFETY: this function's contract.
    guarded("ncclGroupEnd", || unsafe { group::end() })
}

/// # Safety
/// As [`memory::alloc`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclMemAlloc(ptr: *mut *mut c_void, size: usize) -> NcclResult {
    // SAFETY: this function's contract.
    guarded("ncclMemAlloc", || unsafe { memory::alloc(ptr, size) })
}

/// # Safety
/// As [`memory::free`]'s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclMemFree(ptr: *mut c_void) -> NcclResult {
    // SAFETY: this function's contract.
    guarded("ncclMemFree", || unsafe { memory::free(ptr) })
}

/// Accepted: ferroccl needs no registration; the handle is the buffer's address.
///
/// # Safety
/// `comm` a live rank; `handle` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommRegister(comm: *mut NcclComm, buff: *mut c_void, _size: usize, handle: *mut *mut c_void) -> NcclResult {
    guarded("ncclCommRegister", || {
        // SAFETY: this function's contract.
        unsafe { NcclComm::from_ptr(comm) }?;
        // SAFETY: this function's contract.
        unsafe { put(handle, "handle", buff) }
    })
}

/// # Safety
/// `comm` a live rank.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclCommDeregister(comm: *mut NcclComm, _handle: *mut c_void) -> NcclResult {
    guarded("ncclCommDeregister", || {
        // SAFETY: this function's contract.
        unsafe { NcclComm::from_ptr(comm) }?;
        Ok(())
    })
}

/// NCCL functions ferroccl does not serve, exported so that a program linked against
/// NCCL loads (PyTorch binds every NCCL symbol it names when it loads): each returns
/// `ncclInvalidUsage`, `ncclGetLastError` naming it. Their arguments are not read.
macro_rules! not_served {
    ($($name:ident),* $(,)?) => {
        $(
            #[unsafe(no_mangle)]
            pub extern "C" fn $name() -> NcclResult {
                guarded(stringify!($name), || Err(Failure::usage("not served by ferroccl (docs/nccl.md lists what is)")))
            }
        )*
    };
}

not_served!(
    ncclCommShrink,
    ncclCommWindowRegister,
    ncclCommWindowDeregister,
    ncclDevCommCreate,
    ncclDevCommDestroy,
    ncclGroupSimulateEnd,
);
