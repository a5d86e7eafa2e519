//! NVLink multicast memory, as [NCCL](https://github.com/NVIDIA/nccl) registers it for
//! NVLS: one multicast object over a team of devices, one physical allocation per device
//! (its unicast buffer, mapped on its own device) bound to the object, and the object
//! mapped on every device at a multicast address, where `multimem.*` instructions reach
//! every device's copy at once.
//!
//! **Gated.** Creating a multicast object can take shared GPUs out of service, so never
//! on shared machines (docs/nvls.md). [`MulticastBuffer::new`], the only function here
//! that creates one, runs only with a [`MulticastOptIn`] (the caller's explicit
//! statement) and only where every device of the team reports
//! `CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED`. [`check_team`] and [`granularity`] create
//! nothing: they check a request and ask the driver which sizes a multicast object of a
//! team takes.
//!
//! The order of the driver calls is NCCL's (`nvlsGroupCreate`, `nvlsGroupBindMem`,
//! `nvlsGroupMapMem`) for PEs of one process: create the object for `n` devices, add every
//! device, then per device allocate and map its unicast buffer and bind it, then per
//! device map the object and open it to that device (which waits until every device has
//! bound its memory).

use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};
use device_rt::algo::CollFunction;
use device_rt::dtype::DataType;
use device_rt::multicast::multimem_big_pack_size;
use device_rt::redop::RedOpKind;

use crate::shmem::vmm::{self, VmmHeap};
use crate::{Error, Result};

/// The caller's statement that multicast objects may be created on its GPUs. Never give
/// one on GPUs that other users share: see the module's docs and docs/nvls.md.
#[derive(Clone, Copy, Debug)]
pub struct MulticastOptIn {
    _statement: (),
}

impl MulticastOptIn {
    /// Allows [`MulticastBuffer::new`] to create a multicast object.
    pub fn allow_multicast_objects() -> Self {
        Self { _statement: () }
    }
}

/// Sizes (bytes) of a multicast object of a team: the least it takes and the one the
/// driver recommends for speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Granularity {
    pub minimum: u64,
    pub recommended: u64,
}

impl Granularity {
    /// `bytes` rounded up to the recommended granularity (the size [`MulticastBuffer::new`]
    /// allocates).
    pub fn round_up(&self, bytes: u64) -> u64 {
        bytes.next_multiple_of(self.recommended.max(self.minimum).max(1))
    }
}

/// Checks a team for a multicast object of `bytes`: `(ordinal, multicast supported)` per
/// device, as [`crate::device::DeviceInfo`] reports them. At least two devices, none
/// twice, every one supporting multicast, and a non-empty size.
pub fn check_team(devices: &[(usize, bool)], bytes: u64) -> Result<()> {
    if devices.len() < 2 {
        return Err(Error::InvalidArgument(format!("a multicast team needs at least 2 devices, not {}", devices.len())));
    }
    for (i, &(ordinal, _)) in devices.iter().enumerate() {
        if devices[..i].iter().any(|&(o, _)| o == ordinal) {
            return Err(Error::InvalidArgument(format!("device {ordinal} is in the multicast team twice")));
        }
    }
    if let Some(&(ordinal, _)) = devices.iter().find(|&&(_, supported)| !supported) {
        return Err(Error::MulticastUnsupported { ordinal });
    }
    if bytes == 0 {
        return Err(Error::InvalidArgument("a multicast buffer of 0 bytes".into()));
    }
    Ok(())
}

/// The object properties of a team of `devices` devices and `bytes` per device, shared
/// as POSIX file descriptors (PEs of other processes import them, as the heap's are).
fn properties(devices: usize, bytes: u64) -> Result<sys::CUmulticastObjectProp> {
    Ok(sys::CUmulticastObjectProp {
        numDevices: u32::try_from(devices).map_err(|_| Error::InvalidArgument(format!("{devices} devices in a multicast team")))?,
        size: usize::try_from(bytes).map_err(|_| Error::InvalidArgument(format!("a multicast buffer of {bytes} bytes")))?,
        handleTypes: u64::from(sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.0),
        flags: 0,
    })
}

/// The granularity of a multicast object over `devices` devices of `bytes` each, asked of
/// the driver in `ctx` (one of the team's devices). Creates nothing.
pub fn granularity(ctx: &Arc<CudaContext>, devices: usize, bytes: u64) -> Result<Granularity> {
    ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
    let prop = properties(devices, bytes)?;
    let ask = |option| {
        let mut bytes = 0usize;
        // SAFETY: `prop` is a valid property block; the driver writes the granularity to
        // `bytes`.
        unsafe { sys::cuMulticastGetGranularity(&mut bytes, &prop, option) }
            .result()
            .map_err(Error::cuda("cuMulticastGetGranularity"))
            .map(|()| bytes as u64)
    };
    use sys::CUmulticastGranularity_flags as G;
    Ok(Granularity { minimum: ask(G::CU_MULTICAST_GRANULARITY_MINIMUM)?, recommended: ask(G::CU_MULTICAST_GRANULARITY_RECOMMENDED)? })
}

/// One device's share of a [`MulticastBuffer`]: its unicast buffer and where the
/// multicast object is mapped on it.
struct DeviceShare {
    ctx: Arc<CudaContext>,
    /// The device's physical allocation, mapped here (`None`: not yet).
    unicast: Option<VmmHeap>,
    /// The unicast allocation is bound to the object.
    bound: bool,
    /// Where the multicast object is mapped on this device (0: not yet).
    multicast_ptr: sys::CUdeviceptr,
}

/// A multicast object over a team of devices of one process, with one bound unicast
/// buffer of `bytes` per device and the object mapped on every device. Unbound, unmapped
/// and released on drop (errors logged, never raised).
pub struct MulticastBuffer {
    object: sys::CUmemGenericAllocationHandle,
    bytes: usize,
    shares: Vec<DeviceShare>,
}

impl MulticastBuffer {
    /// Creates a multicast object over the devices of `contexts` (one context per device,
    /// at least two) with `bytes` per device (rounded up to the recommended granularity),
    /// zeroed. Refused, before anything is created, where a device does not support
    /// multicast ([`Error::MulticastUnsupported`]) or the team is malformed. Allocate
    /// before any kernel of the contexts runs.
    pub fn new(contexts: &[Arc<CudaContext>], bytes: u64, _opt_in: MulticastOptIn) -> Result<Self> {
        let team: Vec<(usize, bool)> = contexts.iter().map(|c| Ok((c.ordinal(), supports_multicast(c)?))).collect::<Result<_>>()?;
        check_team(&team, bytes)?;
        let first = &contexts[0];
        let g = granularity(first, contexts.len(), bytes)?;
        let rounded = g.round_up(bytes.next_multiple_of(vmm::granularity(first)?));
        let size = usize::try_from(rounded).map_err(|_| Error::InvalidArgument(format!("a multicast buffer of {rounded} bytes")))?;
        first.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let prop = properties(contexts.len(), rounded)?;
        let mut object = 0;
        // SAFETY: `prop` is a valid property block; the handle is written on success.
        unsafe { sys::cuMulticastCreate(&mut object, &prop) }.result().map_err(Error::cuda("cuMulticastCreate"))?;
        let mut buffer = Self {
            object,
            bytes: size,
            shares: contexts
                .iter()
                .map(|ctx| DeviceShare { ctx: ctx.clone(), unicast: None, bound: false, multicast_ptr: 0 })
                .collect(),
        };
        for share in &buffer.shares {
            // SAFETY: `object` is the live multicast object; the device is one of its team.
            unsafe { sys::cuMulticastAddDevice(object, device_of(&share.ctx)?) }.result().map_err(Error::cuda("cuMulticastAddDevice"))?;
        }
        for share in &mut buffer.shares {
            share.bind_unicast(object, size)?;
        }
        let align = usize::try_from(g.recommended.max(g.minimum)).map_err(|_| Error::InvalidArgument(format!("a multicast granularity of {g:?}")))?;
        for share in &mut buffer.shares {
            share.map_multicast(object, size, align)?;
        }
        Ok(buffer)
    }

    /// Bytes per device.
    pub fn bytes(&self) -> u64 {
        self.bytes as u64
    }

    /// Team member `i`'s unicast buffer (its own copy), as its device addresses it.
    pub fn unicast_ptr(&self, i: usize) -> Option<u64> {
        self.shares.get(i).and_then(|s| s.unicast.as_ref()).map(VmmHeap::base)
    }

    /// The multicast address on team member `i`'s device (`multimem.*` operands there).
    pub fn multicast_ptr(&self, i: usize) -> Option<u64> {
        self.shares.get(i).map(|s| s.multicast_ptr)
    }
}

/// Whether `ctx`'s device reports multicast support.
pub fn supports_multicast(ctx: &Arc<CudaContext>) -> Result<bool> {
    let supported =
        ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED).map_err(Error::cuda("cuDeviceGetAttribute"))?;
    Ok(supported != 0)
}

/// The driver's device handle of `ctx`'s device.
fn device_of(ctx: &Arc<CudaContext>) -> Result<sys::CUdevice> {
    let mut device = 0;
    // SAFETY: the ordinal is one of the driver's devices (the context was made on it); the
    // handle is written on success.
    unsafe { sys::cuDeviceGet(&mut device, ctx.ordinal() as i32) }.result().map_err(Error::cuda("cuDeviceGet"))?;
    Ok(device)
}

impl DeviceShare {
    /// Allocates this device's unicast buffer (`size` bytes, zeroed, mapped for this
    /// device alone) and binds it to `object` at offset 0 (NCCL's `nvlsGroupBindMem`).
    fn bind_unicast(&mut self, object: sys::CUmemGenericAllocationHandle, size: usize) -> Result<()> {
        let unicast = self.unicast.insert(VmmHeap::new(&self.ctx, size as u64, &[self.ctx.ordinal()])?);
        self.ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        // SAFETY: `object` is the live multicast object, to which this device was added;
        // the allocation holds `size` bytes, the object's size.
        unsafe { sys::cuMulticastBindMem(object, 0, unicast.handle(), 0, size, 0) }.result().map_err(Error::cuda("cuMulticastBindMem"))?;
        self.bound = true;
        Ok(())
    }

    /// Maps `object` at an address aligned to `align` (its granularity) on this device and
    /// opens it here (NCCL's `nvlsGroupMapMem`; the access call waits until every device
    /// of the team has bound its memory).
    fn map_multicast(&mut self, object: sys::CUmemGenericAllocationHandle, size: usize, align: usize) -> Result<()> {
        self.ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        vmm::map_range(&mut self.multicast_ptr, object, size, align, &[self.ctx.ordinal()])
    }

    /// Undoes what was set up, in reverse: the multicast mapping, the binding, then the
    /// unicast buffer (errors logged).
    fn release(&mut self, object: sys::CUmemGenericAllocationHandle, size: usize) {
        if self.ctx.bind_to_thread().is_err() {
            return;
        }
        if self.multicast_ptr != 0 {
            // SAFETY: `map_multicast` reserved the range; no kernel uses it once the owner
            // drops the buffer.
            if let Err(e) = unsafe { vmm::unmap_range(self.multicast_ptr, size) } {
                log::debug!("unmapping a multicast object on device {}: {e}", self.ctx.ordinal());
            }
        }
        if self.bound {
            // SAFETY: this device's memory was bound to `object` at offset 0, `size` bytes.
            let unbound = device_of(&self.ctx).and_then(|dev| unsafe { sys::cuMulticastUnbind(object, dev, 0, size) }.result().map_err(Error::cuda("cuMulticastUnbind")));
            if let Err(e) = unbound {
                log::debug!("unbinding a multicast buffer on device {}: {e}", self.ctx.ordinal());
            }
        }
        // Unmapped and released by its own drop, once unbound.
        self.unicast = None;
    }
}

impl Drop for MulticastBuffer {
    /// Unmaps, unbinds and releases every device's share, then the object (errors logged,
    /// never raised).
    fn drop(&mut self) {
        let (object, size) = (self.object, self.bytes);
        for share in &mut self.shares {
            share.release(object, size);
        }
        // SAFETY: the object was created by `new`; nothing is bound to or maps it now.
        if let Err(e) = unsafe { sys::cuMemRelease(object) }.result() {
            log::debug!("releasing a multicast object: {e}");
        }
    }
}

/// Refuses an NVLS call of `count` elements that the hardware path (`multimem.*` through
/// a multicast object) cannot run, before anything is enqueued: a reducing function
/// (all-reduce, reduce-scatter) whose operator and type have no `multimem.ld_reduce` form
/// ([`multimem_big_pack_size`] is 0: 8-bit integers, float min and max wider than 16 bits,
/// Prod, PreMulSum), an all-gather of 1-byte elements, and any call of 2-byte elements
/// whose count is not whole 16-byte packs (`multimem.ld_reduce` takes 16-bit floats in pairs and `multimem.st`
/// stores 4 bytes or more, so such elements move only in 16-byte packs; the buffers must
/// then be 16-byte aligned too, as cudarc's allocations are). The software twin takes
/// every type, operator and count; a caller that chooses the algorithm itself falls back
/// to another where this refuses. Pure: it looks at nothing but its arguments.
pub fn check_hardware_nvls(function: CollFunction, dtype: DataType, op: RedOpKind, count: u64) -> Result<()> {
    let whole_packs = dtype.size() >= 4 || (count * dtype.size() as u64).is_multiple_of(16);
    let runs = whole_packs
        && match function {
            CollFunction::AllReduce | CollFunction::ReduceScatter => multimem_big_pack_size(op, dtype) > 0,
            CollFunction::AllGather => dtype.size() >= 2,
            _ => false,
        };
    if runs { Ok(()) } else { Err(Error::MultimemUnsupported { function, dtype, op, count }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hardware NVLS takes NCCL's table and refuses the rest with an error that names
    /// the call; elements under 4 bytes move in whole 16-byte packs only.
    #[test]
    fn hardware_nvls_takes_the_multimem_table_only() {
        use CollFunction::{AllGather, AllReduce, ReduceScatter};
        for function in [AllReduce, ReduceScatter] {
            for (dtype, op) in [(DataType::F32, RedOpKind::Sum), (DataType::Bf16, RedOpKind::Max), (DataType::F16, RedOpKind::Min), (DataType::F64, RedOpKind::Sum), (DataType::I64, RedOpKind::Min), (DataType::U32, RedOpKind::SumPostDiv)] {
                assert!(check_hardware_nvls(function, dtype, op, 1024).is_ok(), "{dtype:?} {op:?}");
            }
            for (dtype, op) in [(DataType::U8, RedOpKind::Sum), (DataType::F32, RedOpKind::Max), (DataType::F64, RedOpKind::Min), (DataType::F32, RedOpKind::Prod), (DataType::Bf16, RedOpKind::PreMulSum), (DataType::I32, RedOpKind::Prod)] {
                let err = check_hardware_nvls(function, dtype, op, 1024);
                assert!(matches!(err, Err(Error::MultimemUnsupported { .. })), "{dtype:?} {op:?}: {err:?}");
                assert!(err.unwrap_err().to_string().contains("multimem has no form"));
            }
        }
        assert!(check_hardware_nvls(AllGather, DataType::F16, RedOpKind::Sum, 8).is_ok());
        assert!(check_hardware_nvls(AllGather, DataType::I8, RedOpKind::Sum, 32).is_err(), "no 1-byte stores");
        assert!(check_hardware_nvls(AllGather, DataType::F32, RedOpKind::Sum, 7).is_ok(), "4-byte elements store one at a time");
        for (dtype, count) in [(DataType::F16, 7), (DataType::Bf16, 9)] {
            assert!(check_hardware_nvls(AllGather, dtype, RedOpKind::Sum, count).is_err(), "{dtype:?} × {count}: not whole 16-byte packs");
        }
        assert!(check_hardware_nvls(AllReduce, DataType::F16, RedOpKind::Sum, 4).is_err(), "8 bytes: half a pack");
        assert!(check_hardware_nvls(CollFunction::Broadcast, DataType::F32, RedOpKind::Sum, 8).is_err());
        // Every pair the table takes has a `multimem.ld_reduce` arm of the hardware flavour's
        // width or the element's: 16, 8 or 4 bytes.
        for dtype in DataType::ALL {
            for op in RedOpKind::ALL {
                assert!(matches!(multimem_big_pack_size(op, dtype), 0 | 4 | 8 | 16), "{dtype:?} {op:?}");
            }
        }
    }

    #[test]
    fn a_team_is_checked_before_anything_is_created() {
        assert!(check_team(&[(0, true), (1, true)], 4096).is_ok());
        assert!(matches!(check_team(&[(0, true)], 4096), Err(Error::InvalidArgument(_))), "one device is no team");
        assert!(matches!(check_team(&[(0, true), (0, true)], 4096), Err(Error::InvalidArgument(_))), "a device twice");
        assert!(matches!(check_team(&[(0, true), (3, false)], 4096), Err(Error::MulticastUnsupported { ordinal: 3 })));
        assert!(matches!(check_team(&[(0, true), (1, true)], 0), Err(Error::InvalidArgument(_))), "an empty buffer");
    }

    #[test]
    fn sizes_round_up_to_the_recommended_granularity() {
        let g = Granularity { minimum: 2 << 20, recommended: 512 << 20 };
        assert_eq!(g.round_up(1), 512 << 20);
        assert_eq!(g.round_up(512 << 20), 512 << 20);
        assert_eq!(g.round_up((512 << 20) + 1), 1 << 30);
        assert_eq!(Granularity { minimum: 4096, recommended: 0 }.round_up(5000), 8192, "no recommendation: the minimum");
    }

    #[test]
    fn the_object_properties_say_what_was_asked() {
        let prop = properties(4, 1 << 21).unwrap();
        assert_eq!((prop.numDevices, prop.size, prop.flags), (4, 1 << 21, 0));
        assert_eq!(prop.handleTypes, u64::from(sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.0));
    }
}
