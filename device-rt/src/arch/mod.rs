//! The hardware layer: the only module with inline PTX.
//!
//! Names and semantics follow NCCL's `op128.h` so the two can be read side by side
//! (`ld_volatile_global`, `ld_acquire_sys_global`, `st_release_sys_global`,
//! `fence_acq_rel_sys`, …). Every function states the memory ordering it gives.
//! Nothing above this module may use `asm!` or nvptx intrinsics.

mod nvptx;
pub use nvptx::*;
