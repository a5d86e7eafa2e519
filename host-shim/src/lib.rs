//! ferroccl's host shim: the runtime a user links, a thin layer on top of cudarc.
//!
//! It finds devices, creates contexts, allocates device and host-mapped memory, enables
//! peer access, loads the embedded device module, launches the persistent work loop and
//! hands it work. It never schedules: chunking, channels and algorithm choice belong to
//! the device runtime. Tooling (benchmarks, references, self-tests, the command line)
//! lives in `testkit/` and `examples/`, never here.
//!
//! One rank per GPU, an all-reduce on each rank's stream (the item reaches each rank's
//! persistent loop through one launch of a tiny call kernel per call):
//!
//! ```no_run
//! use cudarc::driver::CudaContext;
//! use host_shim::comm::{Comm, ReduceOp};
//!
//! fn main() -> host_shim::Result<()> {
//!     let n = 1 << 20;
//!     let mut streams = Vec::new();
//!     let mut bufs = Vec::new();
//!     for ordinal in 0..2 {
//!         let ctx = CudaContext::new(ordinal).map_err(host_shim::Error::cuda("cuCtxCreate"))?;
//!         let stream = ctx.new_stream().map_err(host_shim::Error::cuda("cuStreamCreate"))?;
//!         // Allocate before the communicator starts its loops (an allocation may wait
//!         // for running kernels).
//!         let send = stream.alloc_zeros::<f32>(n).map_err(host_shim::Error::cuda("cuMemAlloc"))?;
//!         let recv = stream.alloc_zeros::<f32>(n).map_err(host_shim::Error::cuda("cuMemAlloc"))?;
//!         bufs.push((send, recv));
//!         streams.push(stream);
//!     }
//!     let comms = Comm::from_devices(streams)?;
//!     for (comm, (send, recv)) in comms.iter().zip(bufs.iter_mut()) {
//!         comm.all_reduce(send, recv, ReduceOp::Sum)?;
//!     }
//!     for comm in &comms {
//!         comm.stream().synchronize().map_err(host_shim::Error::cuda("cuStreamSynchronize"))?;
//!         if let Some(e) = comm.async_error() {
//!             return Err(e);
//!         }
//!     }
//!     Ok(())
//! }
//! ```

mod driver;
mod error;
mod op;

pub mod bootstrap;
pub mod comm;
pub mod device;
pub mod memory;
pub mod module;
pub mod multicast;
pub mod nvls_hw;
pub mod queue;
pub mod shmem;
pub mod stream;
pub mod work;

pub use driver::init;
pub use error::{Error, ErrorKind, Result};
