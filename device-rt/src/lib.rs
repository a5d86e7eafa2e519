//! ferroccl's device runtime.
//!
//! Everything a rank does on the GPU lives here, in `no_std` Rust that is compiled to PTX
//! by `ptx/kernels`. The layers are those of `docs/architecture.md` (Layers), and every
//! import points down: [`abi`], [`conn`] and [`dtype`] (what layers and the host share)
//! at the bottom, then `arch` → `pack` → `redop` → [`multicast`] → `copy` → `block` →
//! `shmem` (the symmetric heap's device API) → [`matmul`] → `prims` → [`algo`] → [`work`]
//! (`tests/layers.rs` checks this on the source). `arch` is the only module that speaks
//! PTX; everything above it is written against `arch`'s functions, so the same code also
//! runs on CPU threads (feature `host-emu`) for tests without a GPU.
//!
//! This crate must never allocate, never block without a spin budget, and never contain
//! host-only scheduling: the host shim hands work over, the device decides how to do it.
#![cfg_attr(not(feature = "host-emu"), no_std)]
#![cfg_attr(target_arch = "nvptx64", feature(asm_experimental_arch))]
// The application's device function has a weak default (`cabi::ferroccl_app_work`).
#![cfg_attr(any(target_arch = "nvptx64", feature = "host-emu"), feature(linkage))]
// The host twin orders its relaxed accesses for ThreadSanitizer when built under it
// (`arch/host.rs`, `tests/tsan.sh`).
#![cfg_attr(feature = "host-emu", feature(cfg_sanitize))]

#[macro_use]
mod numbering;

pub mod abi;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod arch;

pub mod algo;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod block;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod cabi;
pub mod conn;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod copy;
pub mod dtype;
pub mod matmul;
pub mod multicast;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod pack;
pub mod redop;
pub mod selftest;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod shmem;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod prims;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod spin;
pub mod work;
