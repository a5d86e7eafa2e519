//! Which stream-ordered items the call kernel runs without the loop (`call_kernel`): an
//! LL collective, or an item on the call kernel alone. Pure arithmetic over the item and
//! the communicator's fields, without the device: the call kernel decides with it, and
//! the host asks [`runs_without_loop`] of its own copy of the communicator (a call
//! captured in a CUDA graph that runs without the loop needs no loop awake at its
//! replays).

use super::item::{ITEM_OUTPUT_PEER_MAPPED, WorkItem, WorkKind};
use crate::algo::ll_plan::{LlCall, LlComm, LlPlan, ll_plan};
use crate::algo::{AlgorithmChoice, CollFunction, Plan, Staging, local_channels, plan};
use crate::conn::CommDevice;
use crate::dtype::DataType;
use crate::redop::RedOpKind;

/// How a collective of an unpaired communicator with call channels takes part, from its
/// plan over all of the communicator's channels.
#[derive(Clone, Copy)]
pub(super) enum Taking {
    /// A one-shot/two-shot algorithm on its plan's channels, or a collective of one rank (a
    /// local copy) on those of `local_channels` (the plan carries them).
    OnPlan(Plan),
    /// The ring of several ranks, NVLS (or point-to-point), on every channel.
    Every,
}

/// The plan of `item` over every channel of `comm` (what the channels' `CollCtx::staging`
/// gives for an unpaired communicator), as [`Taking`]; `None` where it cannot be planned,
/// or its function or type is unknown (the resident channels then refuse it).
#[inline(always)]
pub(super) fn planned_channels(comm: &CommDevice, item: &WorkItem) -> Option<Taking> {
    let (Some(function), Some(dtype)) = (CollFunction::from_u32(item.function), DataType::from_u8(item.dtype)) else {
        return None;
    };
    let staging = Staging { nranks: comm.nranks, channels: comm.nchannels, slot_bytes: if comm.staging == 0 { 0 } else { comm.staging_slot_bytes } };
    let choice = AlgorithmChoice::from_u32(comm.algorithm).unwrap_or_default();
    let elt = dtype.size() as u64;
    match plan(function, elt, item.count, staging, choice) {
        Ok(p) if p.algorithm.is_shot() => Some(Taking::OnPlan(p)),
        Ok(p) if comm.nranks == 1 && function != CollFunction::SendRecv => Some(Taking::OnPlan(Plan { channels: local_channels(elt, item.count, comm.nchannels), ..p })),
        Ok(_) => Some(Taking::Every),
        Err(_) => None,
    }
}

/// The plan of a stream-ordered item that runs on the call kernel alone, in as many parts
/// as the plan has channels, its part `i` on call channel `resident + i`, without the loop
/// (see `call_kernel`): a collective of an unpaired communicator with call channels, valid
/// against the communicator, whose plan is a one-shot/two-shot algorithm, or a one-rank
/// collective (a local copy), on no more channels than the call channels. `None`: the item
/// goes through the mailbox. Every CTA of the call kernel, on every rank, gets the same
/// answer: it is arithmetic over the item and the communicator, which are the same on every
/// rank for the same call. The plan is the one every channel of the communicator makes of
/// the item (`plan_collective`), so the parts run it as planned here, without planning
/// again.
///
/// # Safety
/// `comm` is null or a valid `CommDevice` that the kernel only reads.
#[inline(never)]
pub(super) unsafe fn call_kernel_only_plan(comm: *const CommDevice, resident: u32, item: &WorkItem, kind: WorkKind) -> Option<Plan> {
    if comm.is_null() || kind != WorkKind::Collective {
        return None;
    }
    // SAFETY: a non-null `comm` is a valid `CommDevice` (this function's contract).
    let comm = unsafe { &*comm };
    if comm.nchannels <= resident || comm.pairs != 0 || item.validate_in_comm(comm.rank, comm.nranks).is_err() {
        return None;
    }
    match planned_channels(comm, item) {
        Some(Taking::OnPlan(plan)) if plan.channels <= comm.nchannels - resident => Some(plan),
        _ => None,
    }
}

/// The LL collective that `item` is, with what the LL path reads of the communicator and
/// its plan from call channel `resident` on for CTAs of `nthreads` threads, when it is
/// one: an all-reduce, all-gather or reduce-scatter of a communicator with call channels
/// that leaves the algorithm to the device, of a known type and operator, that
/// [`ll_plan`] takes. `None`: the item goes the general way.
///
/// # Safety
/// `comm` is null or a valid `CommDevice` (a copy of the rank's will do: only its fields
/// are read).
pub(super) unsafe fn ll_call(comm: *const CommDevice, resident: u32, nthreads: u32, item: &WorkItem) -> Option<(LlComm, LlCall, LlPlan)> {
    if comm.is_null() || item.kind != WorkKind::Collective as u8 || item.flags & !ITEM_OUTPUT_PEER_MAPPED != 0 {
        return None;
    }
    // SAFETY: a non-null `comm` is a valid `CommDevice` (this function's contract).
    let comm = unsafe { LlComm::load(comm) };
    if comm.nchannels <= resident || AlgorithmChoice::from_u32(comm.algorithm) != Some(AlgorithmChoice::Auto) {
        return None;
    }
    let function = CollFunction::from_u32(item.function)?;
    let call = LlCall { function, dtype: DataType::from_u8(item.dtype)?, op: RedOpKind::from_u8(item.op)?, arg: item.op_arg, input: item.src, output: item.dst, count: item.count };
    let plan = ll_plan(&comm, resident, nthreads, &call)?;
    Some((comm, call, plan))
}

/// Whether the call kernel (CTAs of `nthreads` threads, the loop's `resident` channels
/// before its call channels) runs `item` without the loop: as an LL collective
/// ([`ll_call`]), or on the call kernel alone ([`call_kernel_only_plan`]), the same
/// arithmetic the call kernel does.
///
/// # Safety
/// `comm` is null or a valid `CommDevice` (a copy of the rank's will do).
pub unsafe fn runs_without_loop(comm: *const CommDevice, resident: u32, nthreads: u32, item: &WorkItem) -> bool {
    // SAFETY: this function's contract is both functions'.
    unsafe { ll_call(comm, resident, nthreads, item).is_some() || item.validate().is_ok_and(|kind| call_kernel_only_plan(comm, resident, item, kind).is_some()) }
}
