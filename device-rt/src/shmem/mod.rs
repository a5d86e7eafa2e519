//! The symmetric heap's device API: [NVSHMEM](https://docs.nvidia.com/nvshmem/api/)'s
//! programming model on memory that every PE maps of every other PE.
//!
//! A PE's device code wraps the handle the host filled ([`ShmemHandle`](crate::abi::ShmemHandle))
//! in a [`Shmem`] and calls its methods with *symmetric addresses*: addresses in this PE's
//! own heap, which name the same offset in every PE's heap. [`Shmem::ptr`] gives the
//! directly usable address of a peer's copy (null where that peer is not mapped here).
//! Operations that NVSHMEM offers per thread, warp and block take the [`Group`] that
//! calls them as a type: [`Thread`], [`Warp`] or [`Block`]; every thread of the group
//! calls them with the same arguments.
//!
//! # Memory ordering
//!
//! NVSHMEM's data-consistency rules, which every method's documentation refers to:
//! puts, gets, AMOs and signal updates are unordered among themselves unless separated
//! by an ordering operation, chosen by this table (first access → what orders it before
//! a later one):
//!
//! | first access | same target PE | different target PE |
//! | --- | --- | --- |
//! | blocking | [`Shmem::fence`] / [`Shmem::quiet`] / barrier | [`Shmem::quiet`] / barrier |
//! | non-blocking (`_nbi`) | [`Shmem::quiet`] / barrier | [`Shmem::quiet`] / barrier |
//!
//! and a [`Shmem::wait_until`] or [`Shmem::test`] that succeeds orders the caller's later
//! reads of its own heap after it; conflicting accesses (two accesses to one location, one
//! a write, not both AMOs, nor a signal update and a wait) are undefined.
//!
//! How this implementation keeps those rules: every peer's heap is mapped here, so a put
//! is weak stores (`st.global`) into the peer's memory, a get volatile loads, an AMO one
//! `atom.relaxed.sys`, a signal update a relaxed system-scope store or add. Each is
//! *issued* before its call returns; none is ordered with any other until a fence: both
//! [`Shmem::fence`] and [`Shmem::quiet`] are one `fence.acq_rel.sys` of the calling thread
//! (programs must still call `quiet` where the table asks for it: a later transport may
//! complete them differently). `_nbi` calls are therefore the blocking ones, documented
//! as non-blocking: their completion is what `quiet` guarantees. A group's call ends with
//! the group's barrier (`bar.warp.sync`, `barrier.sync 0`), after which one thread's fence
//! orders every thread's stores of that call (cumulativity through the barrier).
//! Waits poll with acquire loads at system scope.
//!
//! # Faults
//!
//! Every wait ([`Shmem::wait_until`], the barriers, [`Shmem::sum_reduce`]) reads the
//! handle's abort flag and ends after its spin budget, returning
//! [`Interrupted`](crate::spin::Interrupted) instead of hanging: a PE that never arrives
//! makes the others' waits fail, not hang. After such an error the heap's barrier state
//! is no longer agreed between PEs: the kernel should end and report it.
//!
//! This module must never allocate, never wait without the spin budget, and never speak
//! PTX itself (everything goes through `arch`).

mod amo;
mod barrier;
mod collect;
mod group;
mod order;
mod pe;
mod reduce;
mod rma;
mod signal;
mod wait;

pub use amo::ShmemWord;
pub use group::{Block, Group, Thread, Warp};
pub use pe::Shmem;
pub use signal::{Signal, SignalOp};
pub use wait::Cmp;
