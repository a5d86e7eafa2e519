//! A mailbox item's participation: which channels it spreads over (the loop's resident
//! channels, and for a collective of a communicator with call channels, see `call_kernel`,
//! all of them) and which of them take part. Shared by the loop's channels and the call
//! kernel's call channels, which must agree.

use super::item::{WorkItem, WorkKind};
use super::without_loop::{Taking, planned_channels};
use crate::conn::CommDevice;

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
