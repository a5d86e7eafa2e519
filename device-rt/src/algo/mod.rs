//! Collective and point-to-point algorithms, run by the work loop for a `Collective`
//! item: the item names the function, type, operator and buffers; the device picks the
//! algorithm (ring), the chunks and the channel split.

mod p2p;
mod ring;

pub use p2p::P2pProto;
pub use ring::RingProto;

use crate::arch;
use crate::conn::{ChannelConns, CommDevice, MAX_RANKS};
use crate::copy::{Operands, reduce_copy};
use crate::dtype::{Bf16, DataType, F16};
use crate::multicast::SwMulticast;
use crate::prims::{GroupCtx, PrimsShared, UNROLL};
use crate::redop::{Max, Min, PreMulSum, Prod, RedOp, RedOpKind, Sum, SumPostDiv};
use crate::work::{CollFunction, LoopError};

/// One collective as the loop hands it to an algorithm.
#[derive(Clone, Copy, Debug)]
pub struct Coll {
    pub function: CollFunction,
    /// Elements per rank (NCCL's count: all-gather's send count, reduce-scatter's
    /// receive count); for SendRecv, the elements sent.
    pub count: u64,
    /// Elements received (SendRecv only).
    pub recv_count: u64,
    /// Input and output buffers (byte addresses).
    pub input: u64,
    pub output: u64,
    /// The operator's argument.
    pub red_arg: u64,
    /// Broadcast and Reduce: the root rank.
    pub root: u32,
    /// SendRecv: the peer sent to and the peer received from (`NO_PEER`: none).
    pub send_peer: u32,
    pub recv_peer: u32,
}

/// No peer on this side of a SendRecv.
pub const NO_PEER: u32 = u32::MAX;

/// Where a collective runs: this rank's communicator and this channel.
#[derive(Clone, Copy)]
pub struct CollCtx {
    pub nranks: u32,
    pub ring_index: u32,
    pub ring_ranks: [u32; MAX_RANKS],
    pub nchannels: u32,
    pub channel_index: u32,
    /// This channel's ring connections.
    pub channel: *mut ChannelConns,
    /// This channel's point-to-point connections, one per peer.
    pub p2p: *mut ChannelConns,
    /// Bytes per FIFO step (the same on every connection of the rank).
    pub step_bytes: u64,
    /// The whole CTA as one group.
    pub group: GroupCtx,
    /// Shared memory for a second group (SendRecv's send side).
    pub second_shared: *mut PrimsShared,
}

impl CollCtx {
    /// The context of this CTA in `comm`.
    ///
    /// # Safety
    /// `comm` is a valid communicator description whose connection arrays cover this
    /// CTA's channel; `shared` holds `MAX_GROUPS` groups' shared memory.
    pub unsafe fn new(comm: &CommDevice, shared: *mut PrimsShared, abort: *const u64, spin_budget_ns: u64) -> Self {
        let bid = arch::block_idx();
        let channel = (comm.channels as *mut ChannelConns).wrapping_add(bid as usize);
        Self {
            nranks: comm.nranks,
            ring_index: comm.ring_index,
            ring_ranks: comm.ring_ranks,
            nchannels: arch::grid_dim(),
            channel_index: bid,
            channel,
            p2p: (comm.p2p as *mut ChannelConns).wrapping_add(bid as usize * comm.nranks as usize),
            step_bytes: unsafe { (&raw const (*channel).send.step_bytes).read() },
            group: GroupCtx { tid: arch::thread_idx(), nthreads: arch::block_dim(), group: 0, shared, abort, spin_budget_ns },
            second_shared: shared.wrapping_add(1),
        }
    }
}

/// Runs `c` on this channel with `T` the element type and `kind` the operator.
///
/// # Safety
/// Every thread of the CTA calls this with the same arguments; `c` was validated against
/// the communicator (ranks in range, buffers hold what the function addresses).
pub unsafe fn run_collective(cx: &CollCtx, c: &Coll, dtype: DataType, kind: RedOpKind) -> Result<(), (LoopError, u32)> {
    unsafe {
        match dtype {
            DataType::I8 => typed::<i8>(cx, c, kind),
            DataType::U8 => typed::<u8>(cx, c, kind),
            DataType::I32 => typed::<i32>(cx, c, kind),
            DataType::U32 => typed::<u32>(cx, c, kind),
            DataType::I64 => typed::<i64>(cx, c, kind),
            DataType::U64 => typed::<u64>(cx, c, kind),
            DataType::F16 => typed::<F16>(cx, c, kind),
            DataType::F32 => typed::<f32>(cx, c, kind),
            DataType::F64 => typed::<f64>(cx, c, kind),
            DataType::Bf16 => typed::<Bf16>(cx, c, kind),
        }
    }
}

/// Functions that only move data run with a copy operator of the element's size.
unsafe fn typed<T: crate::redop::Elem>(cx: &CollCtx, c: &Coll, kind: RedOpKind) -> Result<(), (LoopError, u32)> {
    unsafe {
        if !c.function.reduces() {
            return match size_of::<T>() {
                1 => movement::<Sum<u8>>(cx, c),
                2 => movement::<Sum<F16>>(cx, c),
                4 => movement::<Sum<u32>>(cx, c),
                _ => movement::<Sum<u64>>(cx, c),
            };
        }
        match kind {
            RedOpKind::Sum => reduction::<Sum<T>>(cx, c),
            RedOpKind::Prod => reduction::<Prod<T>>(cx, c),
            RedOpKind::Max => reduction::<Max<T>>(cx, c),
            RedOpKind::Min => reduction::<Min<T>>(cx, c),
            RedOpKind::PreMulSum => reduction::<PreMulSum<T>>(cx, c),
            RedOpKind::SumPostDiv => reduction::<SumPostDiv<T>>(cx, c),
        }
    }
}

/// A function without an operator: point-to-point, a local copy for a one-rank
/// communicator, or the ring.
unsafe fn movement<Op: RedOp>(cx: &CollCtx, c: &Coll) -> Result<(), (LoopError, u32)> {
    unsafe {
        if c.function == CollFunction::SendRecv {
            p2p::run::<Op>(cx, c)
        } else if cx.nranks == 1 {
            local::<Op>(cx, c);
            Ok(())
        } else {
            ring::run_movement::<Op>(cx, c)
        }
    }
}

/// A reduction: a local copy with the operator's pre- and post-op for a one-rank
/// communicator, else the ring.
unsafe fn reduction<Op: RedOp>(cx: &CollCtx, c: &Coll) -> Result<(), (LoopError, u32)> {
    unsafe {
        if cx.nranks == 1 {
            local::<Op>(cx, c);
            Ok(())
        } else {
            ring::run_reduction::<Op>(cx, c)
        }
    }
}

/// A one-rank communicator: every function is `output = post(pre(input))` (or nothing,
/// in place, for functions without an operator).
#[inline(never)]
unsafe fn local<Op: RedOp>(cx: &CollCtx, c: &Coll) {
    if c.input == c.output && !c.function.reduces() {
        return;
    }
    let elt = size_of::<Op::Elt>() as u64;
    let n = c.count;
    let nch = u64::from(cx.nchannels);
    let quantum = 16 / elt;
    let per = n.div_ceil(nch).div_ceil(quantum) * quantum;
    let begin = (u64::from(cx.channel_index) * per).min(n);
    let end = (begin + per).min(n);
    let x = Operands::<1, 1> {
        srcs: [c.input],
        nsrcs: 1,
        dsts: [c.output],
        ndsts: 1,
        pre_op_args: [c.red_arg],
        offset: begin * elt,
    };
    unsafe {
        reduce_copy::<UNROLL, Op, SwMulticast, 0, 1, 1, 0, 1, 1, 1>(
            cx.group.tid,
            cx.group.nthreads,
            c.red_arg,
            true,
            &x,
            (end - begin) as usize,
        )
    }
}
