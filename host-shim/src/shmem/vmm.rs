//! One PE's heap in device memory through CUDA's virtual memory management: a physical
//! allocation, exported as a POSIX file descriptor for PEs in other processes and
//! imported there, mapped at a reserved address and opened to the devices that may reach
//! it. Thin wrappers over the driver calls; everything else is in `book`.

use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};

use crate::{Error, Result};

/// How heaps are shared with other processes: as POSIX file descriptors.
const HANDLE_TYPE: sys::CUmemAllocationHandleType = sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

/// The allocation properties of a heap (or a multicast buffer's unicast memory) on device
/// `ordinal`: pinned device memory, exportable as a POSIX file descriptor.
pub(crate) fn properties(ordinal: usize) -> sys::CUmemAllocationProp {
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: HANDLE_TYPE,
        location: sys::CUmemLocation { type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id: ordinal as i32 },
        win32HandleMetaData: std::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 { compressionType: 0, gpuDirectRDMACapable: 0, usage: 0, reserved: [0; 4] },
    }
}

/// The granularity (bytes) a heap on `ctx`'s device is allocated and mapped in.
pub fn granularity(ctx: &Arc<CudaContext>) -> Result<u64> {
    ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
    let prop = properties(ctx.ordinal());
    let mut bytes = 0usize;
    // SAFETY: `prop` is a valid property block; the result is written to `bytes`.
    unsafe { sys::cuMemGetAllocationGranularity(&mut bytes, &prop, sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) }
        .result()
        .map_err(Error::cuda("cuMemGetAllocationGranularity"))?;
    Ok(bytes as u64)
}

/// One PE's heap: `bytes` of device memory (this process's allocation, or one another
/// process exported) mapped at `base`, readable and writable by the devices it was opened
/// to. Unmapped and released on drop.
pub struct VmmHeap {
    ctx: Arc<CudaContext>,
    handle: sys::CUmemGenericAllocationHandle,
    base: sys::CUdeviceptr,
    bytes: usize,
}

impl VmmHeap {
    /// Allocates `bytes` (a multiple of [`granularity`]) on `ctx`'s device, maps them at
    /// a new address, opens them to the devices `readers` (its own included), and zeroes
    /// them. Allocate before any kernel of the context runs.
    pub fn new(ctx: &Arc<CudaContext>, bytes: u64, readers: &[usize]) -> Result<Self> {
        ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let bytes = usize::try_from(bytes).map_err(|_| Error::InvalidArgument(format!("a heap of {bytes} bytes")))?;
        let prop = properties(ctx.ordinal());
        let mut handle = 0;
        // SAFETY: `prop` is a valid property block; the handle is written on success.
        unsafe { sys::cuMemCreate(&mut handle, bytes, &prop, 0) }.result().map_err(Error::cuda("cuMemCreate"))?;
        let heap = Self::map(ctx, handle, bytes, readers)?;
        // Zeroed and waited for before anyone can see it (a peer's first write must not be
        // wiped), on a stream of its own: a context synchronization would also wait for
        // the persistent loops already running on the device (another communicator's).
        crate::stream::on_private_stream(ctx, "zeroing shared device memory", |stream| {
            // SAFETY: `bytes` mapped, writable bytes from `base`; no kernel uses them yet.
            unsafe { sys::cuMemsetD8Async(heap.base, 0, bytes, stream) }.result().map_err(Error::cuda("cuMemsetD8Async"))
        })?;
        Ok(heap)
    }

    /// Maps another process's heap, exported as `fd` (see [`VmmHeap::export`]), `bytes`
    /// long, at a new address of this process, and opens it to `ctx`'s device. The
    /// exporter keeps it zeroed until every PE is mapped (the bootstrap's calls order it).
    pub fn import(ctx: &Arc<CudaContext>, fd: &OwnedFd, bytes: u64) -> Result<Self> {
        ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let bytes = usize::try_from(bytes).map_err(|_| Error::InvalidArgument(format!("a heap of {bytes} bytes")))?;
        let mut handle = 0;
        // SAFETY: the driver reads the descriptor (passed by value in the pointer-sized
        // argument, as the POSIX handle type asks) and writes the handle on success.
        let imported = unsafe { sys::cuMemImportFromShareableHandle(&mut handle, fd.as_raw_fd() as usize as *mut c_void, HANDLE_TYPE) };
        imported.result().map_err(Error::cuda("cuMemImportFromShareableHandle"))?;
        Self::map(ctx, handle, bytes, &[ctx.ordinal()])
    }

    /// The allocation as a POSIX file descriptor, for [`VmmHeap::import`] in another
    /// process.
    pub fn export(&self) -> Result<OwnedFd> {
        self.ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let mut fd: i32 = -1;
        // SAFETY: the POSIX handle type writes an `int` descriptor through the pointer.
        unsafe { sys::cuMemExportToShareableHandle((&raw mut fd).cast(), self.handle, HANDLE_TYPE, 0) }
            .result()
            .map_err(Error::cuda("cuMemExportToShareableHandle"))?;
        // SAFETY: the driver just opened this descriptor for us.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Maps `handle` (owned from here on: released on failure too) at a new address and
    /// opens it to `readers`.
    fn map(ctx: &Arc<CudaContext>, handle: sys::CUmemGenericAllocationHandle, bytes: usize, readers: &[usize]) -> Result<Self> {
        let mut heap = Self { ctx: ctx.clone(), handle, base: 0, bytes };
        map_range(&mut heap.base, handle, bytes, 0, readers)?;
        Ok(heap)
    }

    /// The heap's address (the same in every context of this process).
    pub fn base(&self) -> u64 {
        self.base
    }

    #[cfg(feature = "testing")]
    /// The heap's physical allocation (for binding it to a multicast object).
    pub(crate) fn handle(&self) -> sys::CUmemGenericAllocationHandle {
        self.handle
    }
}

/// Reserves `bytes` of address space aligned to `align` (0: the driver's default), writes
/// its start to `base` at once (so that the caller's cleanup finds it on a later
/// failure), maps `handle` (an allocation or a multicast object of `bytes`) there and
/// opens it to the devices `readers`, read and write. The current context's thread
/// binding is the caller's.
pub(crate) fn map_range(base: &mut sys::CUdeviceptr, handle: sys::CUmemGenericAllocationHandle, bytes: usize, align: usize, readers: &[usize]) -> Result<()> {
    // SAFETY: reserves address space only; the address is written on success.
    unsafe { sys::cuMemAddressReserve(base, bytes, align, 0, 0) }.result().map_err(Error::cuda("cuMemAddressReserve"))?;
    // SAFETY: the reserved range and `handle` both hold `bytes`.
    unsafe { sys::cuMemMap(*base, bytes, 0, handle, 0) }.result().map_err(Error::cuda("cuMemMap"))?;
    let access: Vec<sys::CUmemAccessDesc> = readers
        .iter()
        .map(|&ordinal| sys::CUmemAccessDesc {
            location: sys::CUmemLocation { type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id: ordinal as i32 },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        })
        .collect();
    // SAFETY: the range was just mapped; `access` holds `access.len()` descriptors.
    unsafe { sys::cuMemSetAccess(*base, bytes, access.as_ptr(), access.len()) }.result().map_err(Error::cuda("cuMemSetAccess"))
}

/// Unmaps the range `map_range` reserved at `base` (mapped or not) and frees the address
/// space.
///
/// # Safety
/// `base` and `bytes` are a range `map_range` reserved, and no kernel uses it any more.
pub(crate) unsafe fn unmap_range(base: sys::CUdeviceptr, bytes: usize) -> Result<(), cudarc::driver::DriverError> {
    // SAFETY: the range was reserved (and maybe mapped) by `map_range`; no kernel uses it
    // (this function's contract).
    let unmapped = unsafe { sys::cuMemUnmap(base, bytes) }.result();
    // SAFETY: as above.
    let freed = unsafe { sys::cuMemAddressFree(base, bytes) }.result();
    unmapped.and(freed)
}

impl Drop for VmmHeap {
    /// Unmaps and releases what was set up (errors are logged, never raised).
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        if self.base != 0 {
            // SAFETY: `new` or `import` reserved the range; no kernel uses it once its owner
            // drops the heap.
            if let Err(e) = unsafe { unmap_range(self.base, self.bytes) } {
                log::debug!("unmapping a symmetric heap: {e}");
            }
        }
        // SAFETY: the handle came from `cuMemCreate`; its mapping is gone.
        match unsafe { sys::cuMemRelease(self.handle) }.result() {
            Ok(()) => {}
            // The process is exiting and the driver already tore down its contexts, and the
            // memory with them.
            Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_DEINITIALIZED => log::debug!("symmetric heap released after the driver shut down: {e}"),
            Err(e) => log::warn!("cuMemRelease of a symmetric heap failed: {e}"),
        }
    }
}
