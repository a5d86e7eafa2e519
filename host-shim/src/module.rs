//! The embedded PTX module and its kernels.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, sys};
use cudarc::nvrtc::Ptx;

use crate::{Error, Result};

/// ferroccl's whole device side, as built from `ptx/kernels` by host-shim's build script.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/ferroccl.ptx"));

/// The PTX module loaded into one context.
#[derive(Clone, Debug)]
pub struct Module {
    inner: Arc<CudaModule>,
}

impl Module {
    /// JIT-compiles and loads [`PTX`] into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self> {
        let inner = ctx.load_module(Ptx::from_src(PTX)).map_err(Error::cuda("cuModuleLoadData"))?;
        Ok(Self { inner })
    }

    /// The kernel named `name` (an `extern "gpu-kernel"` function of `ptx/kernels`).
    pub fn kernel(&self, name: &str) -> Result<CudaFunction> {
        self.inner.load_function(name).map_err(Error::cuda("cuModuleGetFunction"))
    }
}

/// Lets `kernel` be launched with up to `bytes` of dynamic shared memory (above 48 KiB a
/// kernel must opt in).
pub fn allow_dynamic_smem(kernel: &CudaFunction, bytes: u32) -> Result<()> {
    let bytes = i32::try_from(bytes).map_err(|_| Error::InvalidArgument(format!("{bytes} bytes of shared memory")))?;
    kernel
        .set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)
        .map_err(Error::cuda("cuFuncSetAttribute"))
}
