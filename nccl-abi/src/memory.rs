//! `ncclMemAlloc` / `ncclMemFree` (device memory of the current device),
//! `ncclCommRegister` / `ncclCommDeregister` (accepted; ferroccl needs no registration:
//! every call stages or reads its buffers through the connection blocks), and the staged
//! copies of in-place all-to-alls.

use std::ffi::c_void;
use std::sync::Arc;

use host_shim::cudarc::driver::{CudaContext, sys};

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

/// A copy of a buffer made on a stream (`cuMemAllocAsync`, then the copy), for an exchange
/// that must not read the buffer it writes; freed on the same stream when dropped
/// (`cuMemFreeAsync`: after the work enqueued on the stream before the drop).
pub struct StagedCopy {
    ptr: sys::CUdeviceptr,
    stream: sys::CUstream,
    ctx: Arc<CudaContext>,
}

impl StagedCopy {
    /// Copies `bytes` bytes from `src` on `stream`.
    ///
    /// # Safety
    /// `stream` is a live stream of `ctx` (or null: the legacy default stream) until the
    /// copy is dropped; `src` is device memory of `ctx`'s device, `bytes` long, until the
    /// stream has passed the copy.
    pub unsafe fn new(ctx: &Arc<CudaContext>, stream: sys::CUstream, src: sys::CUdeviceptr, bytes: usize) -> Result<Self, Failure> {
        ctx.bind_to_thread().map_err(cuda("cuCtxSetCurrent"))?;
        let mut ptr = 0;
        // SAFETY: writes the allocation's address; the stream is `ctx`'s (this function's
        // contract).
        unsafe { sys::cuMemAllocAsync(&mut ptr, bytes.max(1), stream) }.result().map_err(cuda("cuMemAllocAsync"))?;
        let copy = Self { ptr, stream, ctx: ctx.clone() };
        // SAFETY: `ptr` holds `bytes` bytes; `src` as this function's contract says. On
        // failure, dropping `copy` frees `ptr` on the stream.
        unsafe { sys::cuMemcpyDtoDAsync_v2(ptr, src, bytes, stream) }.result().map_err(cuda("cuMemcpyDtoDAsync"))?;
        Ok(copy)
    }

    /// The copy's device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
}

impl Drop for StagedCopy {
    fn drop(&mut self) {
        // Enqueues the free and returns; a failure leaks the copy and is logged.
        let freed = self.ctx.bind_to_thread().and_then(|()| {
            // SAFETY: this copy's allocation, freed once, on the stream it was made on,
            // which `new`'s contract keeps live until now.
            unsafe { sys::cuMemFreeAsync(self.ptr, self.stream) }.result()
        });
        if let Err(e) = freed {
            log::warn!("ferroccl's NCCL: freeing an all-to-all's staged copy failed: {e}");
        }
    }
}
