//! The device runtime as C functions: what a kernel of another runtime (CUDA C++, or any
//! front end that emits PTX) links and calls, and what `linker/`'s header declares.
//!
//! Every function is `extern "C"` and `#[unsafe(no_mangle)]` (a `.visible .func` in the
//! PTX) and takes the handle the host filled ([`ShmemHandle`], `ferroccl_heap` in C) by
//! pointer: the handle itself travels by value as a kernel argument, so the device keeps
//! no global state and a module needs no initialisation (what NVSHMEM's per-module
//! `nvshmemx_cumodule_init` needs). Functions of a group scope come three times: no suffix
//! (one thread), `_warp` (the 32 lanes of a warp, all active) and `_block` (every thread
//! of the CTA); every thread of the group calls them with the same arguments. One
//! function goes the other way: `ferroccl_app_work`, which the module calls and an
//! application defines (its own work in the persistent loop).
//!
//! Every wait is bounded by the handle's abort word and spin budget and returns a
//! [`Status`] instead of hanging; arguments the handle can check (a PE out of range, a
//! range outside the heap, an unknown comparison or signal operation) return
//! [`Status::InvalidArgument`] and change nothing, where the Rust API would trap. Memory
//! ordering is the Rust API's ([`crate::shmem`]'s table), stated again on each function.
//!
//! A Rust kernel crate calls [`crate::shmem::Shmem`] directly (the same code, typed); these
//! functions are for code that cannot.

mod app;
mod coll;
mod heap;

pub use app::*;
pub use coll::*;
pub use heap::*;

pub use crate::abi::Status;
use crate::spin::Interrupted;

impl From<Result<(), Interrupted>> for Status {
    fn from(outcome: Result<(), Interrupted>) -> Self {
        match outcome {
            Ok(()) => Self::Success,
            Err(Interrupted::Aborted) => Self::Aborted,
            Err(Interrupted::TimedOut) => Self::TimedOut,
        }
    }
}
