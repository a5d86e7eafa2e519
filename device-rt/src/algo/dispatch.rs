//! Running one collective on one channel: plans it ([`plan_collective`]: ring, one-shot
//! or two-shot, and the channels either takes) and runs the plan with the
//! algorithm for the function and the communicator (ring, one-shot/two-shot,
//! point-to-point, or a local copy for one rank), counting the channel's busy time and what
//! ran.
//!
//! Device code (compiled for nvptx64 or the host twin), above the algorithms it picks
//! from. It must never read a work item itself or import from `work`: the loop decodes
//! the item, refuses it when [`plan_collective`] does, and calls [`run_collective`].

use super::coll::{Coll, CollCtx};
use super::function::CollFunction;
use super::select::{self, Algorithm, Plan, Unfit};
use super::{nvls, p2p, ring, shot};
use crate::abi::LoopError;
use crate::dtype::DataType;
use crate::multicast::SwMulticast;
use crate::prims::{DataOp, Movers, transform};
use crate::redop::RedOpKind;

/// The plan of `c` (elements of `dtype`) on this rank's communicator: by size, or the
/// communicator's forced algorithm (`Err` when it cannot run `c`). Every rank makes the
/// same plan of the same call. Not inlined: its 64-bit divisions would take the caller's
/// registers (the loop's item code spilled under a register cap).
#[inline(never)]
pub fn plan_collective(cx: &CollCtx, c: &Coll, dtype: DataType) -> Result<Plan, Unfit> {
    let plan = select::plan(c.function, dtype.size() as u64, c.count, cx.staging(), cx.algorithm)?;
    // NVLS needs the connections (on every channel a collective spreads over) and the
    // threads the host gives every NVLS communicator.
    let connected = cx.channel_index >= cx.nchannels || !cx.nvls.is_null();
    if plan.algorithm == Algorithm::Nvls && (!connected || cx.group.nthreads < select::NVLS_MIN_THREADS) {
        return Err(Unfit::NoNvls);
    }
    Ok(plan)
}

/// Runs `c` on this channel by `plan`: `dtype` and `kind` are the element type and
/// operator.
///
/// # Safety
/// Every thread of the CTA calls this with the same arguments; `cx` was built by
/// `CollCtx::new` for this rank's communicator and this channel; `c` was validated
/// against the communicator (ranks in range, buffers hold what the function addresses,
/// input and output the same or, where the function does not place one inside the
/// other, disjoint); `plan` is [`plan_collective`]'s for `c`.
pub unsafe fn run_collective(cx: &CollCtx, c: &Coll, dtype: DataType, kind: RedOpKind, plan: Plan) -> Result<(), (LoopError, u32)> {
    // Functions that only move data ignore the operator.
    let op = if c.function.reduces() { kind } else { RedOpKind::Sum };
    let data = DataOp { dtype, op, arg: c.red_arg };
    let started = cx.group.clock();
    let paired_reduce_scatter = cx.pairs != 0 && cx.nranks == 2 && c.function == CollFunction::ReduceScatter;
    // The algorithm this channel runs `c` with, if it takes part and `c` is a collective
    // of more than one rank.
    let runs = match plan.algorithm {
        Algorithm::Ring if c.function == CollFunction::SendRecv || cx.nranks == 1 => None,
        Algorithm::Ring => (paired_reduce_scatter || cx.channel_index < cx.nchannels).then_some(Algorithm::Ring),
        shot => (cx.channel_index < plan.channels).then_some(shot),
    };
    // SAFETY: every thread of the CTA calls this with the same arguments, `cx` was built by
    // `CollCtx::new` for this rank's communicator and channel, `c` was validated against it and
    // `plan` is its plan (this function's contract): the contracts of `shot::run` (a
    // one-shot/two-shot plan on one of its channels), `ring::run`, `p2p::run` and `local`;
    // the paired reduce-scatter runs only on two ranks with `pairs` set, as it requires; an
    // NVLS plan passed `plan_collective`'s check (this channel's NVLS connections, enough
    // threads).
    let outcome = unsafe {
        match runs {
            Some(Algorithm::OneShot | Algorithm::TwoShot) => shot::run(cx, c, data, plan),
            Some(Algorithm::Nvls) => nvls::run::<SwMulticast>(cx, c, data),
            _ if plan.algorithm != Algorithm::Ring => Ok(()),
            _ if paired_reduce_scatter => ring::reduce_scatter_paired(cx, c, data),
            // The second half of paired channels: nothing to do for this function.
            _ if cx.channel_index >= cx.nchannels => Ok(()),
            _ if c.function == CollFunction::SendRecv => p2p::run(cx, c, data),
            _ if cx.nranks == 1 => {
                local(cx, c, data);
                Ok(())
            }
            _ => ring::run(cx, c, data),
        }
    };
    if cx.group.tid == 0 {
        // SAFETY: `cx.group.stats` is null or this channel's live `ChannelStats`
        // (`CollCtx::new`'s contract), and the closure, called only with it non-null,
        // projects it onto one of its counters (only the address is taken): `count`'s
        // contract.
        unsafe { cx.group.count(|s| &raw mut (*s).busy_ns, cx.group.clock().wrapping_sub(started)) };
        if let Some(algorithm) = runs {
            // SAFETY: as above; `algorithm < 4` indexes `algorithm_items`.
            unsafe { cx.group.count(|s| &raw mut (*s).algorithm_items[algorithm as usize], 1) };
        }
    }
    outcome
}

/// A one-rank communicator: every function is `output = post(pre(input))` (nothing to
/// do in place for functions without an operator), split over the channels
/// [`select::local_channels`] gives of the context's; a channel past them has nothing to do.
///
/// Not inlined: it would take registers of `work::dispatch::collective`, which spills
/// under a register cap.
///
/// # Safety
/// As [`run_collective`], on a one-rank communicator (input and output each hold
/// `c.count` elements, the same buffer or disjoint).
#[inline(never)]
unsafe fn local(cx: &CollCtx, c: &Coll, data: DataOp) {
    if c.input == c.output && !c.function.reduces() {
        return;
    }
    let elt = data.elt();
    let n = c.count;
    let nch = u64::from(select::local_channels(elt, n, cx.nchannels));
    let quantum = 16 / elt;
    let per = n.div_ceil(nch).div_ceil(quantum) * quantum;
    let begin = (u64::from(cx.channel_index) * per).min(n);
    let end = (begin + per).min(n);
    let w = Movers { tid: cx.group.tid, nthreads: cx.group.nthreads };
    let (src, dst) = (c.input + begin * elt, c.output + begin * elt);
    // SAFETY: every thread of the CTA (a multiple of 32) calls this with the same arguments;
    // `[begin, end)` is a share of the `count` elements input and output hold (the caller's
    // contract), starting on a 16-byte boundary (`begin` is a multiple of `16 / elt`), and the
    // two buffers are the same or disjoint (this function's contract).
    unsafe { transform(w, data, true, true, src, [dst, dst], 1, (end - begin) as usize) }
}
