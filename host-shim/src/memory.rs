//! Host-mapped memory: page-locked host memory that kernels address directly.
//!
//! Device memory is cudarc's `CudaSlice`; this adds what cudarc leaves out: the device
//! address of a mapped host allocation, and volatile access from the host while kernels
//! may be writing it.

use std::sync::Arc;

use cudarc::driver::{CudaContext, DeviceRepr, PinnedHostSlice, ValidAsZeroBits, sys};

use crate::{Error, Result};

/// `len` values of `T` in page-locked host memory, mapped into the device's address space.
pub struct HostMapped<T> {
    /// The allocation, freed when this value drops (read by the `testing` feature's
    /// accessors alone).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    host: PinnedHostSlice<T>,
    device_ptr: sys::CUdeviceptr,
    ptr: *mut T,
}

// SAFETY: the allocation is owned by this value; access goes through volatile reads and
// writes whose races with the device are the caller's protocol.
unsafe impl<T: Send> Send for HostMapped<T> {}

impl<T: DeviceRepr + ValidAsZeroBits> HostMapped<T> {
    /// Allocates `len` zeroed values, portable across contexts and mapped for the device.
    pub fn zeroed(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        if len == 0 {
            return Err(Error::InvalidArgument("a host-mapped allocation needs at least one element".into()));
        }
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: the memory is zeroed below before anyone reads it.
        let mut host = unsafe { ctx.alloc_pinned_with_flags::<T>(len, flags) }
            .map_err(Error::cuda("cuMemHostAlloc"))?;
        let ptr = host.as_mut_ptr().map_err(Error::cuda("cuEventSynchronize"))?;
        // SAFETY: `ptr` points to `len` writable `T`s; all-zero bits are a valid `T`.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        let mut device_ptr = 0;
        // SAFETY: `ptr` was returned by cuMemHostAlloc with DEVICEMAP; flags must be 0.
        unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, ptr.cast(), 0) }
            .result()
            .map_err(Error::cuda("cuMemHostGetDevicePointer"))?;
        Ok(Self { host, device_ptr, ptr })
    }
}

/// What the driver says of a buffer a call names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferInfo {
    /// The ordinal of the device whose memory holds it, or `None` where it is not device
    /// memory (host-mapped or registered host memory).
    pub device: Option<usize>,
    /// Mapped for every peer device the caller named: `cuMemAlloc` memory of the context
    /// the caller named (mapped for every context with peer access to it, which a
    /// communicator enables between its devices), or stream-ordered memory whose pool
    /// grants each of those devices read and write access. False for other memory
    /// (`cuMemCreate` memory, whose mappings this does not know; another context's).
    pub peer_mapped: bool,
    /// The allocation that holds the address, as its start and its size in bytes
    /// (`CU_POINTER_ATTRIBUTE_RANGE_START_ADDR`, `_RANGE_SIZE`): for `cuMemCreate` memory,
    /// the address range it was mapped into (`cuMemAddressReserve`'s). What
    /// [`check_extent`] checks a buffer's bytes against.
    pub allocation: (u64, u64),
}

/// Refuses `buffer` (named `what` in the error), given as its first address and its
/// bytes, unless every byte of it lies in `allocation` (its first address and its
/// bytes): the first byte and the last, `start + bytes - 1`, computed without overflow
/// (a buffer that wraps around the address space is refused). A buffer of no bytes
/// touches nothing and passes.
pub fn check_extent(what: &str, allocation: (u64, u64), buffer: (u64, u64)) -> Result<()> {
    let ((base, size), (start, bytes)) = (allocation, buffer);
    if bytes == 0 {
        return Ok(());
    }
    let Some(last) = start.checked_add(bytes - 1) else {
        return Err(Error::InvalidArgument(format!("{what}: {bytes} bytes at {start:#x} run past the end of the address space; nothing was enqueued")));
    };
    if !lies_in(allocation, buffer) {
        return Err(Error::InvalidArgument(format!(
            "{what}: bytes {start:#x}..={last:#x} do not lie in one allocation (the allocation at {start:#x} is {size} bytes at {base:#x}); nothing was enqueued"
        )));
    }
    Ok(())
}

/// Whether every byte of `buffer` lies in `allocation` (each as its first address and its
/// bytes, as [`check_extent`] takes them): never for a buffer of no bytes, or one that
/// wraps around the address space.
pub(crate) fn lies_in(allocation: (u64, u64), buffer: (u64, u64)) -> bool {
    let ((base, size), (start, bytes)) = (allocation, buffer);
    let Some(last) = bytes.checked_sub(1).and_then(|b| start.checked_add(b)) else { return false };
    size > 0 && start >= base && last <= base.saturating_add(size - 1)
}

/// What the driver says of address `ptr` ([`BufferInfo`]), `peer_mapped` against the
/// context `ctx` and the devices `peers`; an error for an address CUDA does not know
/// (plain host memory, freed memory). Never blocks; one driver call
/// (`cuPointerGetAttributes`, every attribute at once: it is on every collective call's
/// path), and for stream-ordered memory one `cuMemPoolGetAccess` per peer.
pub fn buffer_info(ptr: u64, ctx: sys::CUcontext, peers: &[usize]) -> Result<BufferInfo> {
    use sys::CUpointer_attribute as A;
    let mut attributes = [
        A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        A::CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
        A::CU_POINTER_ATTRIBUTE_CONTEXT,
        A::CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
        A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        A::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let (mut memory_type, mut ordinal, mut legacy): (i32, i32, i32) = (-1, -1, 0);
    let mut owner: sys::CUcontext = std::ptr::null_mut();
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    let (mut range_start, mut range_size): (sys::CUdeviceptr, usize) = (0, 0);
    let mut data = [
        (&raw mut memory_type).cast::<std::ffi::c_void>(),
        (&raw mut ordinal).cast(),
        (&raw mut legacy).cast(),
        (&raw mut owner).cast(),
        (&raw mut pool).cast(),
        (&raw mut range_start).cast(),
        (&raw mut range_size).cast(),
    ];
    // SAFETY: seven attributes: a `CUmemorytype` and an `int` (32-bit values), a boolean
    // the driver writes as an `int`, a `CUcontext`, a `CUmemoryPool`, a `CUdeviceptr` and a
    // `size_t`; each written into the variable of that type its `data` entry points to.
    unsafe { sys::cuPointerGetAttributes(attributes.len() as u32, attributes.as_mut_ptr(), data.as_mut_ptr(), ptr) }
        .result()
        .map_err(Error::cuda("cuPointerGetAttributes"))?;
    use sys::CUmemorytype as M;
    let device = match memory_type {
        t if t == M::CU_MEMORYTYPE_DEVICE as i32 => usize::try_from(ordinal).ok(),
        t if t == M::CU_MEMORYTYPE_HOST as i32 || t == M::CU_MEMORYTYPE_UNIFIED as i32 => None,
        // `cuPointerGetAttributes`, unlike `cuPointerGetAttribute`, succeeds for an address
        // CUDA does not know, leaving the type 0.
        _ => return Err(Error::InvalidArgument(format!("address {ptr:#x} is neither device memory nor host memory known to CUDA"))),
    };
    let peer_mapped = device.is_some() && if pool.is_null() { legacy != 0 && owner == ctx } else { pool_grants(pool, peers) };
    Ok(BufferInfo { device, peer_mapped, allocation: (range_start, range_size as u64) })
}

/// Whether memory pool `pool` grants every device of `peers` read and write access.
fn pool_grants(pool: sys::CUmemoryPool, peers: &[usize]) -> bool {
    peers.iter().all(|&peer| {
        let Ok(id) = i32::try_from(peer) else { return false };
        let mut location = sys::CUmemLocation { type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id };
        let mut flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_NONE;
        // SAFETY: `pool` is the live pool the driver just named for a buffer; `flags` and
        // `location` are valid for the call.
        let asked = unsafe { sys::cuMemPoolGetAccess(&raw mut flags, pool, &raw mut location) };
        asked == sys::CUresult::CUDA_SUCCESS && flags == sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    })
}

impl<T: Copy> HostMapped<T> {
    /// The address kernels use for element 0.
    pub fn device_ptr(&self) -> u64 {
        self.device_ptr
    }

    /// The address the host uses for element 0 (for protocols that need atomics on it).
    pub fn host_ptr(&self) -> *mut T {
        self.ptr
    }

    #[cfg(feature = "testing")]
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.host.len()
    }

    #[cfg(feature = "testing")]
    /// Always false: allocations hold at least one element.
    pub fn is_empty(&self) -> bool {
        false
    }

    #[cfg(feature = "testing")]
    /// Reads element `i` with a volatile load (the device may write it at any time).
    ///
    /// Ordering: none beyond the load itself; pair with the device's release store of a
    /// flag that the caller read first.
    pub fn read(&self, i: usize) -> T {
        assert!(i < self.len(), "index {i} out of {} host-mapped elements", self.len());
        // SAFETY: in bounds of a live allocation.
        unsafe { self.ptr.add(i).read_volatile() }
    }

    #[cfg(feature = "testing")]
    /// Writes element `i` with a volatile store.
    pub fn write(&mut self, i: usize, v: T) {
        assert!(i < self.len(), "index {i} out of {} host-mapped elements", self.len());
        // SAFETY: in bounds of a live allocation.
        unsafe { self.ptr.add(i).write_volatile(v) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer passes only with its first and its last byte in the allocation; an extent
    /// that wraps around the address space, or an allocation of no bytes, never does.
    #[test]
    fn a_buffer_must_lie_whole_in_its_allocation() {
        let allocation = (0x1000, 0x100);
        let fits = |start, bytes| check_extent("the buffer", allocation, (start, bytes)).is_ok();
        assert!(fits(0x1000, 0x100), "the whole allocation");
        assert!(fits(0x10ff, 1), "its last byte");
        assert!(fits(0x1080, 0x80));
        assert!(!fits(0x1080, 0x81), "one byte past the end");
        assert!(!fits(0x0fff, 2), "one byte before the start");
        assert!(!fits(0x1100, 1), "just past the end");
        assert!(fits(0x5000, 0), "no bytes touch nothing");
        assert!(!fits(0x1080, u64::MAX), "an extent that wraps around");
        assert!(!check_extent("the buffer", (u64::MAX - 0xff, 0x100), (u64::MAX - 0x10, 0x12)).is_ok(), "start + bytes overflows");
        assert!(check_extent("the buffer", (u64::MAX - 0xff, 0x100), (u64::MAX - 0x10, 0x11)).is_ok(), "ending at the last address");
        assert!(!check_extent("the buffer", (0x1000, 0), (0x1000, 1)).is_ok(), "an allocation of no bytes holds nothing");
        let err = check_extent("the receive buffer", allocation, (0x1080, 0x100)).unwrap_err();
        assert!(matches!(&err, Error::InvalidArgument(why) if why.starts_with("the receive buffer")), "{err}");
    }
}
