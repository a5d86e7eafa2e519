//! The hardware layer: the only module with inline PTX.
//!
//! Names and semantics follow NCCL's `op128.h` so the two can be read side by side
//! (`ld_volatile_global`, `ld_acquire_sys_global`, `st_release_sys_global`,
//! `fence_acq_rel_sys`, …). Every function states the memory ordering it gives.
//! Nothing above this module may use `asm!` or nvptx intrinsics.
//!
//! Two implementations with the same public items: `nvptx.rs` on the GPU, and `host.rs`
//! (feature `host-emu`), its twin on CPU threads, which adds `launch` and lacks the
//! `multimem_*` functions (no multicast address exists on the host).

#[cfg_attr(target_arch = "nvptx64", path = "nvptx.rs")]
#[cfg_attr(not(target_arch = "nvptx64"), path = "host.rs")]
mod imp;
pub use imp::*;
