//! ferroccl's host shim: the runtime a user links, a thin layer on top of cudarc.
//!
//! It finds devices, creates contexts, allocates device and host-mapped memory, enables
//! peer access, loads the embedded device module, launches the persistent work loop and
//! hands it work. It never schedules: chunking, channels and algorithm choice belong to
//! the device runtime. Tooling (benchmarks, references, self-tests, the command line)
//! lives in `testkit/` and `examples/`, never here.

mod driver;
mod error;

pub mod comm;
pub mod device;
pub mod memory;
pub mod module;
pub mod queue;
pub mod stream;
pub mod work;

pub use driver::init;
pub use error::{Error, Result};
