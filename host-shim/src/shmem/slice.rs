//! A typed view of symmetric memory for the communicator's calls.

use std::marker::PhantomData;
use std::sync::Arc;

use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop, sys};

/// `len` elements of `T` at a symmetric address of one local PE's heap, used on `stream`
/// (made by [`super::Heap::slice`]): what `Comm`'s calls take as send and receive
/// buffers (cudarc's `DevicePtr` / `DevicePtrMut`). It owns nothing: the heap allocation
/// must outlive the calls that use it. Ordering is the stream's: the view records no
/// events (work on other streams must be ordered with it by the caller).
#[derive(Debug)]
pub struct HeapSlice<T> {
    addr: u64,
    len: usize,
    stream: Arc<CudaStream>,
    elements: PhantomData<T>,
}

impl<T> HeapSlice<T> {
    /// The view of `len` elements at `addr` on `stream`; the caller ([`super::Heap::slice`])
    /// has checked that they lie in the PE's heap, aligned for `T`.
    pub(super) fn new(addr: u64, len: usize, stream: Arc<CudaStream>) -> Self {
        Self { addr, len, stream, elements: PhantomData }
    }

    /// The symmetric address of the first element.
    pub fn addr(&self) -> u64 {
        self.addr
    }
}

impl<T> DeviceSlice<T> for HeapSlice<T> {
    fn len(&self) -> usize {
        self.len
    }

    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl<T> DevicePtr<T> for HeapSlice<T> {
    fn device_ptr<'a>(&'a self, _stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.addr, SyncOnDrop::Record(None))
    }
}

impl<T> DevicePtrMut<T> for HeapSlice<T> {
    fn device_ptr_mut<'a>(&'a mut self, _stream: &'a CudaStream) -> (sys::CUdeviceptr, SyncOnDrop<'a>) {
        (self.addr, SyncOnDrop::Record(None))
    }
}
