//! The persistent work loop and what the host shares with it: [`WorkItem`]s, the queue
//! and mailbox layouts, and (on the device) the loop itself.

mod item;
mod placement;
mod queue;

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod exec;

pub use item::{BadItem, CollFunction, DeviceFunction, NO_PEER, WorkItem, WorkKind};
pub use placement::{ChannelPlacement, MAX_SMS};
pub use queue::{
    LOOP_SMEM_BYTES, LoopError, LoopState, MAILBOX_CLOSED, MAILBOX_DONE, MAILBOX_PENDING, MAX_ARITY, MAX_CHANNELS, MAX_GROUPS, Mailbox, PrimsShared,
    QueueHeader, RingSlot, SLOT_WORDS, THREAD_PER_SYNC, WaitSite,
};

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use exec::{LoopArgs, work_loop};
