//! Running one collective on one channel: picks the algorithm for the function, the
//! communicator and the channel (ring, point-to-point, or a local copy for one rank) and
//! counts the channel's busy time.
//!
//! Device code (compiled for nvptx64 or the host twin), above the algorithms it picks
//! from. It must never read a work item itself or import from `work`: the loop decodes
//! the item and calls [`run_collective`].

use super::coll::{Coll, CollCtx};
use super::function::CollFunction;
use super::{p2p, ring};
use crate::abi::LoopError;
use crate::dtype::DataType;
use crate::prims::{DataOp, Movers, transform};
use crate::redop::RedOpKind;

/// Runs `c` on this channel: `dtype` and `kind` are the element type and operator.
///
/// # Safety
/// Every thread of the CTA calls this with the same arguments; `c` was validated against
/// the communicator (ranks in range, buffers hold what the function addresses).
pub unsafe fn run_collective(cx: &CollCtx, c: &Coll, dtype: DataType, kind: RedOpKind) -> Result<(), (LoopError, u32)> {
    // Functions that only move data ignore the operator.
    let op = if c.function.reduces() { kind } else { RedOpKind::Sum };
    let data = DataOp { dtype, op, arg: c.red_arg };
    let started = cx.group.clock();
    let outcome = unsafe {
        if cx.pairs != 0 && cx.nranks == 2 && c.function == CollFunction::ReduceScatter {
            ring::reduce_scatter_paired(cx, c, data)
        } else if cx.channel_index >= cx.nchannels {
            // The second half of paired channels: nothing to do for this function.
            Ok(())
        } else if c.function == CollFunction::SendRecv {
            p2p::run(cx, c, data)
        } else if cx.nranks == 1 {
            local(cx, c, data);
            Ok(())
        } else {
            ring::run(cx, c, data)
        }
    };
    if cx.group.tid == 0 {
        cx.group.count(|s| unsafe { &raw mut (*s).busy_ns }, cx.group.clock().wrapping_sub(started));
    }
    outcome
}

/// A one-rank communicator: every function is `output = post(pre(input))` (nothing to
/// do in place for functions without an operator).
unsafe fn local(cx: &CollCtx, c: &Coll, data: DataOp) {
    if c.input == c.output && !c.function.reduces() {
        return;
    }
    let elt = data.elt();
    let n = c.count;
    let nch = u64::from(cx.nchannels);
    let quantum = 16 / elt;
    let per = n.div_ceil(nch).div_ceil(quantum) * quantum;
    let begin = (u64::from(cx.channel_index) * per).min(n);
    let end = (begin + per).min(n);
    let w = Movers { tid: cx.group.tid, nthreads: cx.group.nthreads };
    let (src, dst) = (c.input + begin * elt, c.output + begin * elt);
    unsafe { transform(w, data, true, true, src, [dst, dst], 1, (end - begin) as usize) }
}
