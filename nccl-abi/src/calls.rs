//! The collectives and point-to-point calls: each becomes one ferroccl work item on the
//! caller's stream (a stream of the rank's device; calls on several streams run in the
//! order they were made, `Comm::enqueue_on`).

use host_shim::device_rt::algo::{CollFunction, NO_PEER};
use host_shim::device_rt::dtype::DataType;
use host_shim::device_rt::redop::RedOpKind;
use host_shim::device_rt::work::WorkItem;
use host_shim::cudarc::driver::sys;

use crate::comm::NcclComm;
use crate::error::Failure;
use crate::exchange::{Buffers, Exchange, extent, overlaps, plan};
use crate::memory::StagedCopy;
use crate::group;
use crate::types::{data_type, moved_type};

/// A collective's arguments as the C call gives them.
pub struct Collective {
    pub function: CollFunction,
    pub send: u64,
    pub recv: u64,
    pub count: usize,
    pub dtype: i32,
    /// The operator (`None`: the function reduces nothing).
    pub op: Option<i32>,
    /// The root, for broadcast and reduce.
    pub root: Option<i32>,
}

/// Runs `call` on rank `comm` on `stream`. A call of 0 elements does nothing (as NCCL's).
///
/// # Safety
/// `comm` is null or a live rank of this library; `stream` a live stream of its device
/// (or null: the legacy default stream); the buffers are device memory of the rank's
/// device, whole extent, until the stream has passed the call (ferroccl checks that each
/// lies in one allocation of the device, not that it is the caller's to use).
pub unsafe fn collective(comm: *mut NcclComm, stream: sys::CUstream, call: Collective) -> Result<(), Failure> {
    // SAFETY: this function's contract.
    let rank = unsafe { NcclComm::from_ptr(comm) }?.lock();
    let c = rank.comm()?;
    // A reduction computes with its elements; the others only move them.
    let dtype = if call.op.is_some() { data_type(call.dtype) } else { moved_type(call.dtype) }?;
    let (op, op_arg) = match call.op {
        Some(op) => rank.operator(op, dtype)?,
        None => (RedOpKind::Sum, 0),
    };
    let root = match call.root {
        Some(root) => u64::try_from(root).ok().filter(|&r| r < c.world_size() as u64).ok_or_else(|| Failure::argument(format!("root {root} of {} ranks", c.world_size())))?,
        None => 0,
    };
    if call.count == 0 {
        return Ok(());
    }
    let item = WorkItem::collective(call.function, dtype, op, op_arg, call.send, call.recv, call.count as u64, root);
    // SAFETY: the caller's stream of this rank's context (this function's contract);
    // the wrapper does not destroy it.
    let stream = unsafe { rank.ctx.wrap_borrowed_stream(stream) };
    // SAFETY: the buffers are the call's (this function's contract).
    unsafe { c.enqueue_on(&stream, item) }?;
    Ok(())
}

/// One side of a point-to-point transfer (`ncclSend` / `ncclRecv`).
#[derive(Clone, Copy, Debug)]
pub struct Side {
    pub buf: u64,
    pub count: usize,
    pub dtype: i32,
    pub peer: i32,
}

/// A send and a receive of rank `comm` run together (either may be missing), as one
/// ferroccl send/recv item on `stream`; to and from itself, a copy on the stream.
///
/// # Safety
/// As [`collective`]'s, for the sides' buffers.
pub unsafe fn send_recv(comm: *mut NcclComm, stream: sys::CUstream, send: Option<Side>, recv: Option<Side>) -> Result<(), Failure> {
    // SAFETY: this function's contract.
    let rank = unsafe { NcclComm::from_ptr(comm) }?.lock();
    let c = rank.comm()?;
    let me = c.rank() as i32;
    let peer_of = |side: &Side| {
        u32::try_from(side.peer).ok().filter(|&p| (p as usize) < c.world_size()).ok_or_else(|| Failure::argument(format!("peer {} of {} ranks", side.peer, c.world_size())))
    };
    let (send_dtype, recv_dtype) = (send.map(|s| moved_type(s.dtype)).transpose()?, recv.map(|r| moved_type(r.dtype)).transpose()?);
    for side in send.iter().chain(&recv) {
        peer_of(side)?;
    }
    // Both sides in one type where they agree; in bytes otherwise.
    let dtype = match (send_dtype, recv_dtype) {
        (Some(a), Some(b)) if a != b => DataType::U8,
        (a, b) => a.or(b).unwrap_or(DataType::U8),
    };
    let units = |side: &Side, side_dtype: Option<DataType>| (side.count * side_dtype.map_or(1, DataType::size)) / dtype.size();
    // SAFETY: the caller's stream of this rank's context (this function's contract).
    let stream = unsafe { rank.ctx.wrap_borrowed_stream(stream) };
    let to_self = (send.map(|s| s.peer == me), recv.map(|r| r.peer == me));
    if let (Some(true), _) | (_, Some(true)) = to_self {
        let (Some(s), Some(r)) = (send.filter(|s| s.peer == me), recv.filter(|r| r.peer == me)) else {
            return Err(Failure::usage("a send to this rank itself needs its receive from itself in the same group (each send to itself is paired with the receive from itself of the same order)"));
        };
        let bytes = units(&s, send_dtype).min(units(&r, recv_dtype)) * dtype.size();
        // SAFETY: both buffers are device memory of the rank's device, `bytes` long
        // (this function's contract); the copy is ordered on the caller's stream.
        unsafe { sys::cuMemcpyDtoDAsync_v2(r.buf, s.buf, bytes, stream.cu_stream()) }.result().map_err(|e| Failure::from(host_shim::Error::Cuda { call: "cuMemcpyDtoDAsync", source: e }))?;
        return Ok(());
    }
    let (src, count, to) = send.map_or((0, 0, NO_PEER), |s| (s.buf, units(&s, send_dtype) as u64, s.peer as u32));
    let (dst, recv_count, from) = recv.map_or((0, 0, NO_PEER), |r| (r.buf, units(&r, recv_dtype) as u64, r.peer as u32));
    let item = WorkItem::collective(CollFunction::SendRecv, dtype, RedOpKind::Sum, recv_count, src, dst, count, u64::from(to) | u64::from(from) << 32);
    // SAFETY: the buffers are the call's (this function's contract).
    unsafe { c.enqueue_on(&stream, item) }?;
    Ok(())
}

/// Rank `comm`'s part of `exchange` (`ncclGather`, `ncclScatter`, `ncclAlltoAll`): its
/// sends and receives as one group (inside a caller's group, at that group's end). An
/// all-to-all whose buffers overlap reads a copy of its send buffer made on `stream`
/// first (freed on it after the exchange). A call of 0 elements does nothing (as NCCL's).
///
/// # Safety
/// As [`send_recv`]'s, for every slice of the buffers the exchange names on this rank
/// (on ranks other than the root, a gather's receive buffer and a scatter's send buffer
/// are not read); inside a group, until its end.
pub unsafe fn exchange(comm: *mut NcclComm, stream: sys::CUstream, exchange: Exchange, mut buffers: Buffers) -> Result<(), Failure> {
    let (rank, nranks, ctx) = {
        // SAFETY: this function's contract.
        let held = unsafe { NcclComm::from_ptr(comm) }?.lock();
        let c = held.comm()?;
        (c.rank(), c.world_size(), held.ctx.clone())
    };
    let size = moved_type(buffers.dtype)?.size();
    let staged = match extent(nranks, buffers, size) {
        Some(bytes) if buffers.count > 0 && exchange == Exchange::AllToAll && overlaps(nranks, buffers, size) => {
            // SAFETY: the send buffer and the stream are the caller's (this function's
            // contract).
            let copy = unsafe { StagedCopy::new(&ctx, stream, buffers.send, bytes as usize) }?;
            buffers.send = copy.ptr();
            Some(copy)
        }
        _ => None,
    };
    let calls = plan(exchange, rank, nranks, buffers, size).map_err(Failure::argument)?;
    if buffers.count == 0 {
        return Ok(());
    }
    // SAFETY: this function's contract.
    unsafe { group::transfers(comm, stream, &calls, staged) }
}
