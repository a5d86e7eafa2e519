//! Driver discovery: tells "no driver" apart from "no device" before cudarc is used.

use cudarc::driver::{result, sys};

use crate::{Error, Result};

/// Loads and initialises the CUDA driver and returns the number of devices: where the
/// driver library cannot be loaded, [`Error::NoDriver`] (cudarc itself would panic at its
/// first driver call); where it reports no device, [`Error::NoDevice`].
///
/// The crate's entry points call it ([`crate::device::context`], `Comm::from_devices`,
/// `Heap::new`, `Heap::join`); call it yourself before using cudarc directly (its
/// `CudaContext::new`, for one). Safe to call more than once (`cuInit` is idempotent).
pub fn init() -> Result<usize> {
    // SAFETY: only tries to dlopen the driver library; no CUDA call is made.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::NoDriver);
    }
    result::init().map_err(|e| match e.0 {
        sys::cudaError_enum::CUDA_ERROR_NO_DEVICE => Error::NoDevice,
        _ => Error::Cuda { call: "cuInit", source: e },
    })?;
    let count = result::device::get_count().map_err(Error::cuda("cuDeviceGetCount"))?;
    match usize::try_from(count) {
        Ok(0) | Err(_) => Err(Error::NoDevice),
        Ok(n) => Ok(n),
    }
}
