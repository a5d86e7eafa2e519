//! Collective and point-to-point algorithms, run by the work loop for a `Collective`
//! item: the item names the function, type, operator and buffers; the device picks the
//! algorithm (ring, one-shot, two-shot; NVLS when forced), the chunks and the channel split.
//!
//! `algo` sits between `prims` and `work`: it may use the primitives, `copy` and the
//! layers below, and never `work` (the loop calls it, not the other way round). The
//! functions themselves ([`CollFunction`]) and the choice of algorithm ([`plan`]) are
//! always compiled, for the host's validation; the algorithms only for nvptx64 or the
//! host twin.

mod function;
pub mod ll_plan;
mod select;

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod coll;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod dispatch;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod ll;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod nvls;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod p2p;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod ring;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod shot;

pub use function::{CollFunction, NO_PEER};
pub use select::{Algorithm, AlgorithmChoice, LOCAL_BYTES_PER_CHANNEL, NVLS_MIN_THREADS, Plan, RANKS_DISAGREE, Staging, THRESHOLDS, Thresholds, Unfit, local_channels, pack_elements, plan, push_fits, shot_channels, two_shot_block};

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use coll::{CHUNK_ALIGN_BYTES, Coll, CollCtx};
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use dispatch::{plan_collective, run_collective};
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use p2p::P2pProto;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use ring::RingProto;
