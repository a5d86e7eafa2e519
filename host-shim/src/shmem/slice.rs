//! A typed view of symmetric memory for the communicator's calls.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop, sys};

use super::Heap;

/// `len` elements of `T` at a symmetric address of one local PE's heap, used on `stream`
/// (made by [`Heap::slice`]): what `Comm`'s calls take as send and receive buffers
/// (cudarc's `DevicePtr` / `DevicePtrMut`). It borrows the heap: while a view lives, the
/// heap can be neither freed from ([`Heap::free`] takes `&mut`), nor finalized, nor
/// dropped, so a call never takes a view of memory that is gone. The borrow ends with
/// the view, not with the calls that used it: free an allocation only once the calls
/// that use it have run (as [`Heap::free`] says). Ordering is the stream's: the view
/// records no events (work on other streams must be ordered with it by the caller).
///
/// A view used after its heap is finalized is refused by the compiler:
///
/// ```compile_fail,E0505
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use host_shim::cudarc::driver::CudaStream;
/// # use host_shim::shmem::Heap;
/// fn view_after_finalize(heap: Heap, addr: u64, stream: &Arc<CudaStream>) -> host_shim::Result<u64> {
///     let view = heap.slice::<f32>(0, addr, 4, stream)?;
///     heap.finalize(Duration::from_secs(1))?;
///     Ok(view.addr())
/// }
/// ```
///
/// So is a view used after a `free` (or one alive when its heap drops):
///
/// ```compile_fail,E0502
/// # use std::sync::Arc;
/// # use host_shim::cudarc::driver::CudaStream;
/// # use host_shim::shmem::Heap;
/// fn view_after_free(heap: &mut Heap, addr: u64, stream: &Arc<CudaStream>) -> host_shim::Result<u64> {
///     let view = heap.slice::<f32>(0, addr, 4, stream)?;
///     heap.free(&[addr])?;
///     Ok(view.addr())
/// }
/// ```
///
/// ```compile_fail,E0505
/// # use std::sync::Arc;
/// # use host_shim::cudarc::driver::CudaStream;
/// # use host_shim::shmem::Heap;
/// fn view_after_drop(heap: Heap, addr: u64, stream: &Arc<CudaStream>) -> host_shim::Result<u64> {
///     let view = heap.slice::<f32>(0, addr, 4, stream)?;
///     drop(heap);
///     Ok(view.addr())
/// }
/// ```
///
/// The same calls with the view's last use first compile:
///
/// ```no_run
/// # use std::sync::Arc;
/// # use std::time::Duration;
/// # use host_shim::cudarc::driver::CudaStream;
/// # use host_shim::shmem::Heap;
/// fn view_then_free(mut heap: Heap, addr: u64, stream: &Arc<CudaStream>) -> host_shim::Result<u64> {
///     let view = heap.slice::<f32>(0, addr, 4, stream)?;
///     let at = view.addr();
///     heap.free(&[addr])?;
///     heap.finalize(Duration::from_secs(1))?;
///     Ok(at)
/// }
/// ```
#[derive(Debug)]
pub struct HeapSlice<'heap, T> {
    addr: u64,
    len: usize,
    stream: Arc<CudaStream>,
    heap: PhantomData<&'heap Heap>,
    elements: PhantomData<T>,
}

impl<T> HeapSlice<'_, T> {
    /// The view of `len` elements at `addr` on `stream`; the caller ([`Heap::slice`]) has
    /// checked that they lie in a live allocation of the PE's heap, aligned for `T`.
    pub(super) fn new(addr: u64, len: usize, stream: Arc<CudaStream>) -> Self {
        Self { addr, len, stream, heap: PhantomData, elements: PhantomData }
    }

    /// The symmetric address of the first element.
    pub fn addr(&self) -> u64 {
        self.addr
    }
}

impl<T> DeviceSlice<T> for HeapSlice<'_, T> {
    fn len(&self) -> usize {
        self.len
    }

    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl<T> DevicePtr<T> for HeapSlice<'_, T> {
    fn device_ptr<'a>(&'a self, _stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.addr, SyncOnDrop::Record(None))
    }
}

impl<T> DevicePtrMut<T> for HeapSlice<'_, T> {
    fn device_ptr_mut<'a>(&'a mut self, _stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.addr, SyncOnDrop::Record(None))
    }
}
