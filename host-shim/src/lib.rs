//! ferroccl's host shim: the runtime a user links, a thin layer on top of cudarc.
//!
//! It finds devices, creates contexts, allocates device and host-mapped memory, enables
//! peer access, loads the embedded device module, launches the persistent work loop and
//! hands it work. It never schedules: chunking, channels and algorithm choice belong to
//! the device runtime. Tooling (benchmarks, references, self-tests, the command line)
//! lives in `testkit/` and `examples/`, never here.
//!
//! One rank per GPU, an all-reduce on each rank's stream (the item reaches each rank's
//! persistent loop through one launch of a tiny call kernel per call). Every type it
//! names comes from this crate, cudarc's and the device runtime's through their
//! re-exports ([`cudarc`], [`device_rt`]): no second dependency to keep at the same
//! version. On a machine without a CUDA driver it returns [`Error::NoDriver`]:
//!
//! ```no_run
//! use host_shim::comm::{Comm, ReduceOp};
//! use host_shim::cudarc::driver::CudaSlice;
//! use host_shim::{Error, device};
//!
//! fn main() -> host_shim::Result<()> {
//!     let n = 1 << 20;
//!     let mut streams = Vec::new();
//!     let mut bufs: Vec<(CudaSlice<f32>, CudaSlice<f32>)> = Vec::new();
//!     for ordinal in 0..2 {
//!         // Loads the driver first (`host_shim::init`), where cudarc's own
//!         // `CudaContext::new` would panic without one.
//!         let ctx = device::context(ordinal)?;
//!         let stream = ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
//!         // Allocate before the communicator starts its loops (an allocation may wait
//!         // for running kernels).
//!         let send = stream.alloc_zeros::<f32>(n).map_err(Error::cuda("cuMemAlloc"))?;
//!         let recv = stream.alloc_zeros::<f32>(n).map_err(Error::cuda("cuMemAlloc"))?;
//!         bufs.push((send, recv));
//!         streams.push(stream);
//!     }
//!     let comms = Comm::from_devices(streams)?;
//!     for (comm, (send, recv)) in comms.iter().zip(bufs.iter_mut()) {
//!         comm.all_reduce(send, recv, ReduceOp::Sum)?;
//!     }
//!     for comm in &comms {
//!         comm.stream().synchronize().map_err(Error::cuda("cuStreamSynchronize"))?;
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
pub mod linking;
pub mod matmul;
pub mod module;
pub mod shmem;
pub mod stream;

// The loop's machinery: public to ferroccl's own test kit, examples and tests (the
// `testing` feature), private to a user.
#[cfg(feature = "testing")]
pub mod memory;
#[cfg(not(feature = "testing"))]
mod memory;
// Hardware NVLink multicast (NVLS): measured and self-tested by ferroccl's own tools only.
#[cfg(feature = "testing")]
pub mod multicast;
#[cfg(feature = "testing")]
pub mod nvls_hw;
#[cfg(feature = "testing")]
pub mod queue;
#[cfg(not(feature = "testing"))]
mod queue;
#[cfg(feature = "testing")]
pub mod work;
#[cfg(not(feature = "testing"))]
mod work;

pub use driver::init;
pub use error::{Error, ErrorKind, Result};
pub use work::DeviceAlloc;

/// cudarc, the CUDA driver binding this crate is built on, at the version it uses: its
/// contexts, streams and slices (`cudarc::driver::{CudaContext, CudaStream, CudaSlice,
/// DevicePtr, DevicePtrMut}`) are what this crate's calls take.
pub use cudarc;
/// The device runtime, whose types this crate's calls take and return (`DataType`,
/// `AlgorithmChoice`, `CollFunction`, `WorkItem`, `BadItem`, ...).
pub use device_rt;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The constructors load the driver themselves: without one (no `libcuda`, as on
    /// machines without a GPU) they return its error instead of panicking inside cudarc;
    /// with one, the empty argument is refused.
    #[test]
    fn constructors_load_the_driver_and_report_its_absence() {
        let comms = comm::Comm::from_devices(Vec::new()).map(|comms| comms.len());
        let heap = shmem::Heap::new(&[], 1 << 20, Duration::from_secs(1)).map(|heap| heap.n_pes());
        match init() {
            Err(Error::NoDriver) => {
                assert!(matches!(comms, Err(Error::NoDriver)), "{comms:?}");
                assert!(matches!(heap, Err(Error::NoDriver)), "{heap:?}");
            }
            Err(Error::NoDevice) => {
                assert!(matches!(comms, Err(Error::NoDevice)), "{comms:?}");
                assert!(matches!(heap, Err(Error::NoDevice)), "{heap:?}");
            }
            Ok(_) => {
                assert!(matches!(comms, Err(Error::InvalidArgument(_))), "a communicator of no rank: {comms:?}");
                assert!(matches!(heap, Err(Error::InvalidArgument(_))), "a heap of no PE: {heap:?}");
            }
            Err(other) => panic!("the driver failed to start: {other}"),
        }
    }
}
