//! `ncclComm_t`: a boxed [`NcclComm`] (one rank of a ferroccl communicator across
//! processes, `Comm::init_rank`), its lifetime (init, finalize, destroy, abort, split)
//! and what it is asked (count, device, rank, async error), and its own operators
//! (`ncclRedOpCreatePreMulSum`).

use std::sync::{Arc, Mutex, MutexGuard};

use host_shim::device_rt::dtype::DataType;
use host_shim::device_rt::redop::RedOpKind;
use host_shim::comm::{Comm, CommConfig, CommId, ReduceOp};
use host_shim::cudarc::driver::{CudaContext, sys};

use crate::error::Failure;
use crate::types::{CONFIG_MAGIC, CONFIG_UNDEF_INT, ConfigHead, NUM_OPS, SPLIT_NOCOLOR, UniqueId};

/// One rank, as a C caller holds it (`ncclComm_t`).
pub struct NcclComm {
    inner: Mutex<Inner>,
}

/// What a rank holds.
pub struct Inner {
    /// The rank's communicator; `None` once finalized.
    comm: Option<Comm>,
    pub device: i32,
    pub ctx: Arc<CudaContext>,
    cfg: CommConfig,
    /// The operators `ncclRedOpCreatePreMulSum` made, by `op - ncclNumOps`: the element
    /// type each was made for and its device argument; `None` once destroyed.
    ops: Vec<Option<(DataType, u64)>>,
}

impl NcclComm {
    /// The rank behind a caller's `ncclComm_t`.
    ///
    /// # Safety
    /// `comm` is null (refused) or a pointer this library returned and that has not been
    /// destroyed.
    pub unsafe fn from_ptr<'a>(comm: *mut NcclComm) -> Result<&'a NcclComm, Failure> {
        // SAFETY: this function's contract.
        unsafe { comm.as_ref() }.ok_or_else(|| Failure::argument("comm is NULL"))
    }

    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Inner {
    /// The live communicator; refused once finalized.
    pub fn comm(&self) -> Result<&Comm, Failure> {
        self.comm.as_ref().ok_or_else(|| Failure::usage("the communicator was finalized"))
    }

    /// The device operator and argument of NCCL operator `op` on `dtype`.
    pub fn operator(&self, op: i32, dtype: DataType) -> Result<(RedOpKind, u64), Failure> {
        let nranks = self.comm()?.world_size() as u32;
        let builtin = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg];
        if let Some(op) = usize::try_from(op).ok().and_then(|i| builtin.get(i)) {
            return Ok(op.device(dtype, nranks));
        }
        let made = usize::try_from(op - NUM_OPS).ok().and_then(|i| self.ops.get(i).copied().flatten());
        match made {
            Some((made_for, arg)) if made_for == dtype => Ok((RedOpKind::PreMulSum, arg)),
            Some((made_for, _)) => Err(Failure::argument(format!("operator {op} was made for {made_for:?}, used on {dtype:?}"))),
            None => Err(Failure::argument(format!("operator {op} is neither built in nor one this communicator made"))),
        }
    }

    /// A PreMulSum operator of `scalar` (the bits of a `dtype` value) for this rank.
    pub fn add_operator(&mut self, dtype: DataType, arg: u64) -> i32 {
        let at = self.ops.iter().position(Option::is_none).unwrap_or(self.ops.len());
        if at == self.ops.len() {
            self.ops.push(None);
        }
        self.ops[at] = Some((dtype, arg));
        NUM_OPS + at as i32
    }

    /// Forgets operator `op` (one this rank made).
    pub fn remove_operator(&mut self, op: i32) -> Result<(), Failure> {
        let slot = usize::try_from(op - NUM_OPS).ok().and_then(|i| self.ops.get_mut(i)).filter(|slot| slot.is_some());
        let slot = slot.ok_or_else(|| Failure::argument(format!("operator {op} is not one this communicator made")))?;
        *slot = None;
        Ok(())
    }

    /// Runs every outstanding call and stops the rank (`ncclCommFinalize`).
    pub fn finalize(&mut self) -> Result<(), Failure> {
        let mut comm = self.comm.take().ok_or_else(|| Failure::usage("the communicator was finalized already"))?;
        comm.shutdown(self.cfg.timeout)?;
        Ok(())
    }

    /// Aborts the rank now (and, through it, every other rank).
    pub fn abort(&self) {
        if let Some(comm) = &self.comm {
            comm.abort();
        }
    }

    /// The error that stopped the communicator, if any.
    pub fn async_error(&self) -> Option<Failure> {
        self.comm.as_ref().and_then(Comm::async_error).map(Failure::from)
    }

    /// NCCL's `ncclCommSplit` on this rank: `None` for `NCCL_SPLIT_NOCOLOR`.
    pub fn split(&self, color: i32, key: i32, config: Option<&ConfigHead>) -> Result<Option<Box<NcclComm>>, Failure> {
        let cfg = match config {
            Some(config) => config_of(config)?,
            None => self.cfg,
        };
        let color = if color == SPLIT_NOCOLOR { host_shim::comm::join::NO_COLOR } else { color };
        let Some(comm) = self.comm()?.split(color, key, cfg)? else { return Ok(None) };
        Ok(Some(Box::new(NcclComm { inner: Mutex::new(Inner { comm: Some(comm), device: self.device, ctx: self.ctx.clone(), cfg, ops: Vec::new() }) })))
    }
}

/// The configuration of a config struct (checked: its magic, its size) over the
/// `FERROCCL_*` variables: `maxCTAs` becomes the channels at most; `blocking = 0` is
/// served blocking (every call completes before it returns, which NCCL allows a
/// non-blocking communicator); the other fields are not used.
pub fn config_of(config: &ConfigHead) -> Result<CommConfig, Failure> {
    if config.magic != CONFIG_MAGIC {
        return Err(Failure::argument(format!("config magic {:#x} is not NCCL's {CONFIG_MAGIC:#x}: initialize it with NCCL_CONFIG_INITIALIZER", config.magic)));
    }
    if config.size < size_of::<ConfigHead>() {
        return Err(Failure::argument(format!("a config of {} bytes; every NCCL config since 2.17 has at least {}", config.size, size_of::<ConfigHead>())));
    }
    let mut cfg = CommConfig::from_env()?;
    if config.max_ctas != CONFIG_UNDEF_INT {
        cfg.max_channels = u32::try_from(config.max_ctas).ok().filter(|&n| n >= 1).ok_or_else(|| Failure::argument(format!("maxCTAs {}", config.max_ctas)))?;
    }
    Ok(cfg)
}

/// The device current on this thread (the CUDA runtime's `cudaSetDevice` makes its
/// primary context current), device 0 where no context is.
fn current_device() -> Result<i32, Failure> {
    host_shim::init()?;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: writes the current context (or null) to `ctx`.
    unsafe { sys::cuCtxGetCurrent(&mut ctx) }.result().map_err(|e| Failure::from(host_shim::Error::Cuda { call: "cuCtxGetCurrent", source: e }))?;
    if ctx.is_null() {
        return Ok(0);
    }
    let mut device = 0;
    // SAFETY: a context is current; writes its device to `device`.
    unsafe { sys::cuCtxGetDevice(&mut device) }.result().map_err(|e| Failure::from(host_shim::Error::Cuda { call: "cuCtxGetDevice", source: e }))?;
    Ok(device)
}

/// What `ncclCommInitRank` is given, checked before anything is done.
#[derive(Clone, Copy)]
pub struct InitArgs {
    pub nranks: i32,
    pub id: UniqueId,
    pub rank: i32,
    pub cfg: CommConfig,
    /// The device; `None`: the current one.
    pub device: Option<i32>,
}

impl InitArgs {
    pub fn new(nranks: i32, id: UniqueId, rank: i32, config: Option<&ConfigHead>) -> Result<Self, Failure> {
        if nranks < 1 {
            return Err(Failure::argument(format!("nranks {nranks}")));
        }
        if !(0..nranks).contains(&rank) {
            return Err(Failure::argument(format!("rank {rank} of {nranks}")));
        }
        CommId::from_bytes(&id.internal)?;
        let cfg = match config {
            Some(config) => config_of(config)?,
            None => CommConfig::from_env()?,
        };
        Ok(Self { nranks, id, rank, cfg, device: None })
    }

    /// The same, on the device current on this thread where none is named.
    pub fn on_current_device(self) -> Result<Self, Failure> {
        Ok(Self { device: Some(self.device.map_or_else(current_device, Ok)?), ..self })
    }

    /// Builds the rank (blocks until every rank has arrived, or fails within the
    /// configuration's timeout), on the current device where none is named.
    pub fn init(self) -> Result<Box<NcclComm>, Failure> {
        let device = self.device.map_or_else(current_device, Ok)?;
        let ctx = host_shim::device::context(usize::try_from(device).map_err(|_| Failure::argument(format!("device {device}")))?)?;
        let stream = ctx.new_stream().map_err(host_shim::Error::cuda("cuStreamCreate"))?;
        let id = CommId::from_bytes(&self.id.internal)?;
        let comm = Comm::init_rank(&id, self.nranks as usize, self.rank as usize, stream, self.cfg)?;
        Ok(Box::new(NcclComm { inner: Mutex::new(Inner { comm: Some(comm), device, ctx, cfg: self.cfg, ops: Vec::new() }) }))
    }
}

/// Destroys a rank: runs its outstanding calls (unless finalized) and frees it, its
/// memory back before this returns where no other rank's loop runs on its device
/// ([`Comm::destroy`]: a program may reset the device next, as nccl-tests does). A
/// shutdown that fails is logged; the rank is freed either way.
pub fn destroy(comm: Box<NcclComm>) {
    let mut inner = comm.inner.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(c) = inner.comm.take() {
        let rank = c.rank();
        if let Err(e) = c.destroy(inner.cfg.timeout) {
            log::warn!("ferroccl's NCCL: destroying rank {rank}: {e}");
        }
    }
}
