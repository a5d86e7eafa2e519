//! Communicators: N ranks over M ≤ N GPUs of one process, each rank a work loop, wired
//! to each other through connection FIFOs in device memory.

pub mod check;
pub mod expect;
pub mod gpu;
pub mod group;
#[cfg(feature = "twin")]
pub mod twin;
pub mod wiring;
