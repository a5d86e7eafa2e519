//! Devices: contexts, what each GPU is, and peer access between them.

use std::sync::Arc;

use cudarc::driver::{CudaContext, result, sys};

use crate::{Error, Result};

/// What `ferroccl info` reports about one GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    pub total_memory: usize,
    /// Largest dynamic shared memory a block may opt in to, in bytes.
    pub max_dynamic_smem: i32,
    /// `CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED`. Reported only: ferroccl never creates a
    /// multicast object unless the user opts in (docs/nvls.md).
    pub multicast_supported: bool,
    /// `peer_access[j]`: this device can map device `j`'s memory (false for itself).
    pub peer_access: Vec<bool>,
}

/// The primary context of device `ordinal`, after checking that it exists.
pub fn context(ordinal: usize) -> Result<Arc<CudaContext>> {
    let count = crate::init()?;
    if ordinal >= count {
        return Err(Error::NoSuchDevice { ordinal, count });
    }
    CudaContext::new(ordinal).map_err(Error::cuda("cuDevicePrimaryCtxRetain"))
}

/// SMs of the device of `ctx`.
pub fn sm_count(ctx: &CudaContext) -> Result<u32> {
    let sms = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).map_err(Error::cuda("cuDeviceGetAttribute"))?;
    Ok(sms as u32)
}

/// Describes every device the driver reports.
pub fn list() -> Result<Vec<DeviceInfo>> {
    let count = crate::init()?;
    (0..count).map(|ordinal| describe(ordinal, count)).collect()
}

fn describe(ordinal: usize, count: usize) -> Result<DeviceInfo> {
    let dev = cu_device(ordinal)?;
    let attr = |a: sys::CUdevice_attribute| {
        // SAFETY: `dev` is a valid device handle.
        unsafe { result::device::get_attribute(dev, a) }.map_err(Error::cuda("cuDeviceGetAttribute"))
    };
    use sys::CUdevice_attribute::*;
    let peer_access = (0..count)
        .map(|peer| if peer == ordinal { Ok(false) } else { can_access_peer(ordinal, peer) })
        .collect::<Result<_>>()?;
    Ok(DeviceInfo {
        ordinal,
        name: result::device::get_name(dev).map_err(Error::cuda("cuDeviceGetName"))?,
        compute_capability: (
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        // SAFETY: `dev` is a valid device handle.
        total_memory: unsafe { result::device::total_mem(dev) }.map_err(Error::cuda("cuDeviceTotalMem"))?,
        max_dynamic_smem: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        multicast_supported: attr(CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED)? != 0,
        peer_access,
    })
}

/// Whether device `from` can map device `to`'s memory.
pub fn can_access_peer(from: usize, to: usize) -> Result<bool> {
    let (a, b) = (cu_device(from)?, cu_device(to)?);
    let mut can = 0;
    // SAFETY: both handles are valid and `can` is a valid out-pointer.
    unsafe { sys::cuDeviceCanAccessPeer(&mut can, a, b) }
        .result()
        .map_err(Error::cuda("cuDeviceCanAccessPeer"))?;
    Ok(can != 0)
}

/// Lets kernels running in `ctx` access memory allocated in `peer`'s context. Enabling
/// an already enabled pair is not an error.
pub fn enable_peer_access(ctx: &CudaContext, peer: &CudaContext) -> Result<()> {
    if !can_access_peer(ctx.ordinal(), peer.ordinal())? {
        return Err(Error::NoPeerAccess { from: ctx.ordinal(), to: peer.ordinal() });
    }
    ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
    // SAFETY: `peer` is a live context; flags must be 0.
    match unsafe { sys::cuCtxEnablePeerAccess(peer.cu_ctx(), 0) } {
        sys::cudaError_enum::CUDA_SUCCESS | sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => Ok(()),
        e => Err(Error::Cuda { call: "cuCtxEnablePeerAccess", source: result::DriverError(e) }),
    }
}

fn cu_device(ordinal: usize) -> Result<sys::CUdevice> {
    let index = i32::try_from(ordinal).map_err(|_| Error::NoSuchDevice { ordinal, count: 0 })?;
    result::device::get(index).map_err(Error::cuda("cuDeviceGet"))
}

/// The CUDA driver API version the installed driver supports, as (major, minor).
pub fn driver_version() -> Result<(i32, i32)> {
    crate::init()?;
    let mut v = 0;
    // SAFETY: `v` is a valid out-pointer.
    unsafe { sys::cuDriverGetVersion(&mut v) }.result().map_err(Error::cuda("cuDriverGetVersion"))?;
    Ok((v / 1000, v % 1000 / 10))
}
