//! One channel's view of the work loop: what the loop was launched with ([`LoopArgs`]) and
//! which channel a CTA is ([`Channel`]). Every part of the loop (`channel_loop`, `fetch`,
//! `abort`, `dispatch`, `complete`) and the call channels (`call_kernel`) work through it.

use super::queue::{LoopState, QueueHeader, RingSlot};
use crate::conn::CommDevice;

/// What the loop was launched with.
#[derive(Clone, Copy, Debug)]
pub struct LoopArgs {
    /// Host-mapped queue header.
    pub header: *mut QueueHeader,
    /// Host-mapped ring of `capacity` slots.
    pub ring: *const RingSlot,
    /// Slots in the ring.
    pub capacity: u64,
    /// Device-memory loop state (mailbox, counters).
    pub state: *mut LoopState,
    /// How long any wait inside an item may spin.
    pub spin_budget_ns: u64,
    /// The rank's communicator (device memory), or null for a loop without one.
    pub comm: *const CommDevice,
}

/// One channel's view of its loop: the launch arguments and which channel it is.
///
/// Built only by [`work_loop`](super::work_loop) and by a call channel (`call_kernel`), so
/// its contract holds for every `Channel`: `header` is the host-mapped `QueueHeader` and
/// `ring` the `capacity` host-mapped slots (a call channel never reads the ring), `state`
/// the loop's `LoopState` and `comm` null or the rank's `CommDevice` (both device memory),
/// all valid for the launch; and `index < count <= MAX_CHANNELS`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Channel {
    pub(super) args: LoopArgs,
    /// This CTA's channel.
    pub(super) index: u32,
    /// The channels the current item spreads over: the loop's own (resident) channels,
    /// or for a mailbox collective of a communicator with call channels, all of the
    /// communicator's (see `call_kernel`).
    pub(super) count: u32,
}

impl core::ops::Deref for Channel {
    type Target = LoopArgs;

    fn deref(&self) -> &LoopArgs {
        &self.args
    }
}
