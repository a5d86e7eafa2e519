//! `ncclMemAlloc` / `ncclMemFree` (device memory of the current device) and
//! `ncclCommRegister` / `ncclCommDeregister` (accepted; ferroccl needs no registration:
//! every call stages or reads its buffers through the connection blocks).

use std::ffi::c_void;

use host_shim::cudarc::driver::sys;

use crate::error::Failure;

fn cuda(call: &'static str) -> impl FnOnce(host_shim::cudarc::driver::DriverError) -> Failure {
    move |source| Failure::from(host_shim::Error::Cuda { call, source })
}

/// Makes the current device's primary context current where no context is (a caller of
/// the CUDA runtime that has not touched the device yet).
fn with_context() -> Result<(), Failure> {
    host_shim::init()?;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: writes the current context (or null).
    unsafe { sys::cuCtxGetCurrent(&mut ctx) }.result().map_err(cuda("cuCtxGetCurrent"))?;
    if ctx.is_null() {
        host_shim::device::context(0)?.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
    }
    Ok(())
}

/// `ncclMemAlloc`: `size` bytes of the current device's memory.
///
/// # Safety
/// `ptr` is null (refused) or writable.
pub unsafe fn alloc(ptr: *mut *mut c_void, size: usize) -> Result<(), Failure> {
    if ptr.is_null() {
        return Err(Failure::argument("ptr is NULL"));
    }
    with_context()?;
    let mut at = 0;
    // SAFETY: writes the allocation's address to `at`.
    unsafe { sys::cuMemAlloc_v2(&mut at, size.max(1)) }.result().map_err(cuda("cuMemAlloc"))?;
    // SAFETY: `ptr` is writable (this function's contract).
    unsafe { *ptr = at as *mut c_void };
    Ok(())
}

/// `ncclMemFree`.
///
/// # Safety
/// `ptr` is null (nothing to do) or what [`alloc`] gave, not freed yet, and no work uses
/// it any more.
pub unsafe fn free(ptr: *mut c_void) -> Result<(), Failure> {
    if ptr.is_null() {
        return Ok(());
    }
    with_context()?;
    // SAFETY: an allocation of `alloc`'s (this function's contract).
    unsafe { sys::cuMemFree_v2(ptr as sys::CUdeviceptr) }.result().map_err(cuda("cuMemFree"))
}
