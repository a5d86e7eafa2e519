//! ferroccl's host shim: a thin layer on top of cudarc.
//!
//! It finds devices, creates contexts, allocates device and host-mapped memory, enables
//! peer access, loads the embedded PTX module and launches its kernels. It never
//! schedules: chunking, channels and algorithm choice belong to the device runtime.

mod driver;
mod error;

pub mod bench;
pub mod collbench;
#[cfg(feature = "nccl")]
pub mod nccl_baseline;
pub mod comm;
pub mod device;
pub mod memory;
pub mod module;
pub mod queue;
pub mod reference;
pub mod selftest;
pub mod stream;
pub mod work;

pub use driver::init;
pub use error::{Error, Result};
