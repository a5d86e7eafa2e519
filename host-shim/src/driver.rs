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

/// Whether CUDA loads kernels lazily in this process (`CUDA_MODULE_LOADING` unset or
/// `LAZY`, the default since CUDA 12.2): a kernel's first launch then loads it, which may
/// wait for every running kernel of its context, a persistent loop's included. Asked once;
/// false where no driver answers.
pub(crate) fn loads_lazily() -> bool {
    static LAZY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LAZY.get_or_init(|| {
        // SAFETY: only tries to dlopen the driver library; no CUDA call is made.
        if !unsafe { sys::is_culib_present() } {
            return false;
        }
        let mut mode = sys::CUmoduleLoadingMode::CU_MODULE_EAGER_LOADING;
        // SAFETY: the driver writes the mode into `mode`, a live local.
        let status = unsafe { sys::cuModuleGetLoadingMode(&mut mode) };
        status == sys::cudaError_enum::CUDA_SUCCESS && mode == sys::CUmoduleLoadingMode::CU_MODULE_LAZY_LOADING
    })
}
