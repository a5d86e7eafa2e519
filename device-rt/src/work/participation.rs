//! A mailbox item's participation: which channels it spreads over (the loop's resident
//! channels, and for a collective of a communicator with call channels, see `call_kernel`,
//! all of them) and which of them take part. Shared by the loop's channels and the call
//! kernel's call channels, which must agree.

use super::item::{WorkItem, WorkKind};
use crate::algo::{AlgorithmChoice, CollFunction, Plan, Staging, local_channels, plan};
use crate::conn::CommDevice;
use crate::dtype::DataType;

/// A mailbox item's participation: the channels it spreads over (`channels`), and how
/// many of them take part (`arrivals`: channels `0..arrivals`, every resident channel
/// among them), each arriving at the item's completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Participation {
    pub(super) channels: u32,
    pub(super) arrivals: u32,
}

/// The [`Participation`] of a mailbox item of `kind` on a loop of `resident` channels. Only
/// a collective of a communicator with more channels than the loop holds (and unpaired)
/// reaches call channels: it spreads over all of them, and takes part on those its plan
/// uses (the ring and point-to-point: every channel; a one-shot/two-shot algorithm: its
/// plan's channels; a collective of one rank: those of `local_channels`).
/// Anything else, and a collective the communicator cannot plan (its channels then refuse
/// it), takes part on the resident channels alone. Pure arithmetic over the item and the
/// communicator, so every channel of the rank gets the same answer.
///
/// Not inlined: its 64-bit divisions would take the loop's registers (its item code
/// spills under a register cap).
///
/// # Safety
/// `comm` is null or a valid `CommDevice` that the kernel only reads.
#[inline(never)]
pub(super) unsafe fn mailbox_participation(comm: *const CommDevice, resident: u32, item: &WorkItem, kind: WorkKind) -> Participation {
    let own = Participation { channels: resident, arrivals: resident };
    if comm.is_null() || kind != WorkKind::Collective {
        return own;
    }
    // SAFETY: a non-null `comm` is a valid `CommDevice` (this function's contract).
    let comm = unsafe { &*comm };
    if comm.nchannels <= resident || comm.pairs != 0 {
        return own;
    }
    let total = comm.nchannels;
    let taking_part = match planned_channels(comm, item) {
        Some(Taking::OnPlan(plan)) => plan.channels,
        Some(Taking::Every) => total,
        None => resident,
    };
    Participation { channels: total, arrivals: taking_part.max(resident) }
}

/// How a collective of an unpaired communicator with call channels takes part, from its
/// plan over all of the communicator's channels.
#[derive(Clone, Copy)]
enum Taking {
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
fn planned_channels(comm: &CommDevice, item: &WorkItem) -> Option<Taking> {
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
