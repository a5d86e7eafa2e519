//! The persistent work loop and what the host shares with it: [`WorkItem`]s, the queue
//! and mailbox layouts, and (on the device) the loop itself.
//!
//! `work` is the top layer: it may use every other module, and nothing in the crate
//! imports from it.
//!
//! The loop's files, one job each, import one another in one direction only:
//! `channel_loop` (each channel's loop over items) uses `abort` (the look for a stop
//! between items), `fetch` (warp 0's poll of the ring and the mailbox), `dispatch`
//! (running an item) and `complete` (completions, errors, statistics, leaving); `abort`
//! uses `fetch`'s poll outcomes; all of them use `channel` (the launch arguments and one
//! channel's view of them). The call channels (`call_kernel`) use `dispatch` and
//! `complete` too.

mod item;
mod placement;
mod queue;
mod without_loop;

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod abort;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod call_kernel;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod channel;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod channel_loop;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod complete;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod dispatch;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod fetch;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod participation;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod mailbox;

pub use item::{BadItem, DeviceFunction, ITEM_OUTPUT_PEER_MAPPED, WorkItem, WorkKind};
pub use placement::{ChannelPlacement, MAX_SMS};
pub use without_loop::runs_without_loop;
pub use queue::{LOOP_ASLEEP, LOOP_AWAKE, LOOP_LEAVING, LOOP_SMEM_BYTES, LoopState, MAILBOX_CLOSED, MAILBOX_COMPLETE, MAILBOX_GENERATION_ONE, MAILBOX_PENDING, Mailbox, QueueHeader, RingSlot, SLOT_WORDS, STREAM_DONE_RELEASE, mailbox_generation};

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use channel::LoopArgs;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use channel_loop::{shmem_work_loop, work_loop};
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use call_kernel::{CallArgs, after_previous_grid, serve_call, serve_call_alone};
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use fetch::SleepReads;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use mailbox::{SubmitOutcome, submit_to_mailbox};
