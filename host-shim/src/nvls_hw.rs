//! Hardware NVLS: the NVLS collectives (all-reduce, reduce-scatter, all-gather) through a
//! multicast object, `multimem.ld_reduce` and `multimem.st` done by the NVLink switch, for
//! a team of ranks of one process, each on its own device.
//!
//! The connections are the software twin's ([`crate::comm`] with NVLS forced), laid out
//! by the same [`Layout`]; only the NVLS regions (FIFOs and step counters) move out of the
//! ranks' blocks into one [`MulticastBuffer`], each rank's share at the same offsets, so
//! a head's multicast end reaches every rank's copy of its region ([`Layout::image_with_multicast`]).
//! Each call is one launch of the `ferroccl_nvls_hardware` kernel per rank on that rank's
//! stream, a CTA per channel: the persistent loop keeps NVLS on its software twin, so
//! its code holds no `multimem` instruction.
//!
//! **Gated**, as [`crate::multicast`] is: [`HardwareNvls::new`] creates a multicast
//! object, so it takes a [`MulticastOptIn`] and a [`TeamPlan`], which checks first
//! (creating nothing) that every device reports
//! `CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED`; a call whose type, operator or count the
//! switch cannot reduce is refused before anything is launched ([`check_hardware_nvls`]).
//! Never on GPUs that others share (docs/nvls.md): this path has been built and checked
//! by ptxas, and its host half tested up to the object's creation, but never run.

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use device_rt::abi::{MAX_CHANNELS, MAX_GROUPS, PrimsShared};
use device_rt::algo::{AlgorithmChoice, CollFunction, NVLS_MIN_THREADS};
use device_rt::conn::{MAX_NVLS_ARITY, STEP_ALIGN};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;

use crate::comm::wiring::{Layout, MulticastShare, Shape};
use crate::module::{Module, allow_dynamic_smem};
use crate::multicast::{MulticastBuffer, MulticastOptIn, check_hardware_nvls, check_team, supports_multicast};
use crate::work::{DeviceAlloc, fits_threads};
use crate::{Error, Result};

/// The kernel every call launches.
const KERNEL: &str = "ferroccl_nvls_hardware";

/// Dynamic shared memory of a CTA: every group's primitives.
const SMEM_BYTES: u32 = (MAX_GROUPS * size_of::<PrimsShared>()) as u32;

/// How a team runs: channels (CTAs per call), threads per channel, bytes per FIFO step
/// and how long any wait may spin before the call stops with [`Error::DeviceTimeout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvlsTeamConfig {
    pub channels: u32,
    pub threads: u32,
    pub step_bytes: u64,
    pub spin_budget: Duration,
}

impl Default for NvlsTeamConfig {
    /// 16 channels of 384 threads, 128 KiB steps, 10 s waits: NCCL's NVLS channels and
    /// chunk, with the most threads the kernel's registers allow a CTA (ptxas 13.0 gives
    /// it more than 128 registers a thread: an H200 runs at most 384 threads of it, as
    /// the `hardware_nvls_plan` self-test found; see docs/tuning.md,
    /// `NvlsTeamConfig::default`).
    fn default() -> Self {
        Self { channels: 16, threads: 384, step_bytes: 128 << 10, spin_budget: Duration::from_secs(10) }
    }
}

/// The connection shape of a team of `nranks` ranks run with `cfg`, checked: 2 to
/// `MAX_NVLS_ARITY` ranks, 1 to `MAX_CHANNELS` channels, whole warps of at least
/// [`NVLS_MIN_THREADS`] and at most 1024 threads, a step a multiple of `STEP_ALIGN` of at
/// most 128 KiB, and a positive spin budget. Creates nothing.
pub fn team_shape(nranks: usize, cfg: &NvlsTeamConfig) -> Result<Shape> {
    let bad = |why: String| Err(Error::InvalidArgument(why));
    if !(2..=MAX_NVLS_ARITY).contains(&nranks) {
        return bad(format!("a hardware NVLS team has 2..={MAX_NVLS_ARITY} ranks, not {nranks}"));
    }
    if !(1..=MAX_CHANNELS as u32).contains(&cfg.channels) {
        return bad(format!("a hardware NVLS team has 1..={MAX_CHANNELS} channels, not {}", cfg.channels));
    }
    if cfg.threads < NVLS_MIN_THREADS || cfg.threads > 1024 || !cfg.threads.is_multiple_of(32) {
        return bad(format!("a hardware NVLS channel has whole warps of {NVLS_MIN_THREADS}..=1024 threads, not {}", cfg.threads));
    }
    if cfg.step_bytes == 0 || !cfg.step_bytes.is_multiple_of(STEP_ALIGN) || cfg.step_bytes > crate::comm::wiring::NVLS_STEP_BYTES_MAX {
        return bad(format!("an NVLS step is a non-zero multiple of {STEP_ALIGN} bytes up to 128 KiB, not {}", cfg.step_bytes));
    }
    if cfg.spin_budget.is_zero() {
        return bad("a hardware NVLS team's spin budget must be positive".into());
    }
    let shape = Shape {
        nranks: nranks as u32,
        nchannels: cfg.channels,
        ring_step_bytes: cfg.step_bytes,
        p2p_step_bytes: STEP_ALIGN,
        direct: false,
        stats: false,
        paired: false,
        staging_bytes: 0,
        algorithm: AlgorithmChoice::Nvls,
        nvls_multicast: true,
    };
    Ok(shape)
}

/// One hardware NVLS call: NCCL's arguments (`count` as `CollFunction` defines it) with
/// the device operator and its argument ([`crate::comm::ReduceOp::device`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvlsCall {
    pub function: CollFunction,
    pub dtype: DataType,
    pub op: RedOpKind,
    pub red_arg: u64,
    pub count: u64,
    pub input: u64,
    pub output: u64,
}

/// Refuses a call that hardware NVLS cannot run, before anything is launched: a function
/// other than all-reduce, reduce-scatter and all-gather, what [`check_hardware_nvls`]
/// refuses, a null buffer of a call that moves data, and buffers of 2-byte elements not
/// aligned to 16 bytes (they move in 16-byte packs only).
pub fn check_call(call: &NvlsCall) -> Result<()> {
    check_hardware_nvls(call.function, call.dtype, call.op, call.count)?;
    if call.count > 0 && (call.input == 0 || call.output == 0) {
        return Err(Error::InvalidArgument(format!("a hardware NVLS {} of {} elements with a null buffer", call.function.name(), call.count)));
    }
    if call.dtype.size() < 4 && !(call.input | call.output).is_multiple_of(16) {
        return Err(Error::InvalidArgument(format!("hardware NVLS moves {} in 16-byte packs: its buffers must be 16-byte aligned", call.dtype.name())));
    }
    Ok(())
}

/// One rank's part: its context, the kernel, its block (connections) and a status word
/// per channel.
struct Rank {
    ctx: Arc<CudaContext>,
    kernel: CudaFunction,
    block: DeviceAlloc,
    status: DeviceAlloc,
    abort: DeviceAlloc,
    _module: Module,
}

/// What a team needs before its multicast object exists: the checked shape, and on every
/// device the module with the kernel, checked for the team's threads and shared memory.
/// [`TeamPlan::new`] creates nothing, so it may run anywhere.
pub struct TeamPlan {
    cfg: NvlsTeamConfig,
    layout: Layout,
    contexts: Vec<Arc<CudaContext>>,
    parts: Vec<(Module, CudaFunction)>,
}

impl TeamPlan {
    /// Checks a team over `contexts` (rank `r` on `contexts[r]`'s device): its shape
    /// ([`team_shape`]); every device once and every one reporting multicast support
    /// ([`check_team`], for the share each rank needs); the kernel loaded on every device
    /// and able to run the team's threads with its shared memory.
    pub fn new(contexts: &[Arc<CudaContext>], cfg: NvlsTeamConfig) -> Result<Self> {
        let layout = Layout::new(team_shape(contexts.len(), &cfg)?)?;
        let team: Vec<(usize, bool)> = contexts.iter().map(|c| Ok((c.ordinal(), supports_multicast(c)?))).collect::<Result<_>>()?;
        check_team(&team, layout.nvls_multicast_bytes())?;
        let mut parts = Vec::new();
        for ctx in contexts {
            let module = Module::load(ctx)?;
            let kernel = module.kernel(KERNEL)?;
            fits_threads(&kernel, cfg.threads, "hardware NVLS")?;
            allow_dynamic_smem(&kernel, SMEM_BYTES)?;
            parts.push((module, kernel));
        }
        Ok(Self { cfg, layout, contexts: contexts.to_vec(), parts })
    }

    /// Bytes of each rank's share of the multicast object, before the driver's rounding.
    pub fn share_bytes(&self) -> u64 {
        self.layout.nvls_multicast_bytes()
    }
}

/// A team of ranks, one per device of one process, running the NVLS collectives through
/// one multicast object. Drop it only once no call of it runs.
pub struct HardwareNvls {
    cfg: NvlsTeamConfig,
    // The ranks' blocks point into the buffer: dropped first.
    ranks: Vec<Rank>,
    _buffer: MulticastBuffer,
}

impl HardwareNvls {
    /// Creates the team `plan` checked: the multicast object with each rank's share of the
    /// NVLS regions, then every rank's block with its connections. Create it before any
    /// persistent loop runs on these devices (allocations may wait for running kernels).
    pub fn new(plan: TeamPlan, opt_in: MulticastOptIn) -> Result<Self> {
        let TeamPlan { cfg, layout, contexts, parts } = plan;
        let buffer = MulticastBuffer::new(&contexts, layout.nvls_multicast_bytes(), opt_in)?;
        let mut ranks = Vec::new();
        for (ctx, (module, kernel)) in contexts.into_iter().zip(parts) {
            let block = DeviceAlloc::zeroed(&ctx, layout.block_bytes as usize)?;
            let status = DeviceAlloc::zeroed(&ctx, 8 * cfg.channels as usize)?;
            let abort = DeviceAlloc::zeroed(&ctx, 8)?;
            ranks.push(Rank { ctx, kernel, block, status, abort, _module: module });
        }
        let bases: Vec<u64> = ranks.iter().map(|r| r.block.ptr()).collect();
        for (i, rank) in ranks.iter().enumerate() {
            let missing = || Error::InvalidArgument(format!("the multicast object has no share for rank {i}"));
            let share = MulticastShare { unicast: buffer.unicast_ptr(i).ok_or_else(missing)?, multicast: buffer.multicast_ptr(i).ok_or_else(missing)? };
            let image = layout.image_with_multicast(i as u32, &bases, share)?;
            // SAFETY: the block holds `meta_bytes`; no kernel of the team runs yet.
            unsafe { rank.block.upload(0, &image) }?;
        }
        Ok(Self { cfg, ranks, _buffer: buffer })
    }

    /// Ranks in the team.
    pub fn nranks(&self) -> usize {
        self.ranks.len()
    }

    /// Rank `rank`'s part, or an error naming the team's size.
    fn rank(&self, rank: usize) -> Result<&Rank> {
        self.ranks.get(rank).ok_or_else(|| Error::InvalidArgument(format!("rank {rank} of a team of {}", self.ranks.len())))
    }

    /// Enqueues `call` for rank `rank` on `stream` (of the rank's device): checked by
    /// [`check_call`] first, then one launch. Every rank must enqueue the same calls in the
    /// same order; [`HardwareNvls::outcome`] tells how the rank's last call ended.
    ///
    /// # Safety
    /// `call.input` and `call.output` are device buffers reachable from the rank's device
    /// that hold what `call.function` addresses for `call.count` on this team's rank count,
    /// and stay live (and unwritten by other work) until `stream` has passed the call.
    pub unsafe fn launch(&self, rank: usize, stream: &CudaStream, call: &NvlsCall) -> Result<()> {
        check_call(call)?;
        let r = self.rank(rank)?;
        if stream.context().ordinal() != r.ctx.ordinal() {
            return Err(Error::InvalidArgument(format!("rank {rank} is on device {}, its stream on device {}", r.ctx.ordinal(), stream.context().ordinal())));
        }
        let cfg = LaunchConfig { grid_dim: (self.cfg.channels, 1, 1), block_dim: (self.cfg.threads, 1, 1), shared_mem_bytes: SMEM_BYTES };
        let (comm, status, abort) = (r.block.ptr(), r.status.ptr(), r.abort.ptr());
        let (function, dtype, op) = (call.function as u32, call.dtype as u8, call.op as u8);
        let budget_ns = u64::try_from(self.cfg.spin_budget.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: the arguments match `ferroccl_nvls_hardware`: the rank's connections (its
        // NVLS ends wired to the multicast object), known numbers that `check_call`
        // accepted, buffers as this function's contract says, the rank's abort word and a
        // status word per channel; the CTA has the threads and shared memory it needs.
        unsafe {
            stream
                .launch_builder(&r.kernel)
                .arg(&comm)
                .arg(&function)
                .arg(&dtype)
                .arg(&op)
                .arg(&call.count)
                .arg(&call.input)
                .arg(&call.output)
                .arg(&call.red_arg)
                .arg(&abort)
                .arg(&budget_ns)
                .arg(&status)
                .launch(cfg)
        }
        .map(|_| ())
        .map_err(Error::cuda("cuLaunchKernel (hardware NVLS)"))
    }

    /// How rank `rank`'s last call ended: waits for `stream` (the one every call of the
    /// rank is enqueued on), then reads every channel's status word (the first error found, as the work loop
    /// reports it: [`Error::DeviceTimeout`] where a wait ran past the spin budget).
    pub fn outcome(&self, rank: usize, stream: &CudaStream) -> Result<()> {
        let r = self.rank(rank)?;
        stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))?;
        let mut words = vec![0u64; self.cfg.channels as usize];
        // SAFETY: the stream has passed the rank's calls: no kernel of the team writes the
        // status words now (every call of the rank goes through its stream, this
        // function's contract).
        unsafe { r.status.download(&mut words) }?;
        match words.iter().find(|&&w| w != 0) {
            Some(&status) => Err(crate::queue::status_error(status, 0)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_team_shape_is_checked_before_anything_is_created() {
        let cfg = NvlsTeamConfig::default();
        let shape = team_shape(4, &cfg).unwrap();
        assert!(shape.nvls() && shape.nvls_multicast && shape.nvls_step_bytes() == 128 << 10);
        let layout = Layout::new(shape).unwrap();
        assert_eq!(layout.nvls_multicast_bytes() % STEP_ALIGN, 0);
        for (nranks, bad) in [
            (1, cfg),
            (MAX_NVLS_ARITY + 1, cfg),
            (2, NvlsTeamConfig { channels: 0, ..cfg }),
            (2, NvlsTeamConfig { channels: MAX_CHANNELS as u32 + 1, ..cfg }),
            (2, NvlsTeamConfig { threads: NVLS_MIN_THREADS - 32, ..cfg }),
            (2, NvlsTeamConfig { threads: 200, ..cfg }),
            (2, NvlsTeamConfig { threads: 1056, ..cfg }),
            (2, NvlsTeamConfig { step_bytes: 0, ..cfg }),
            (2, NvlsTeamConfig { step_bytes: STEP_ALIGN + 1, ..cfg }),
            (2, NvlsTeamConfig { step_bytes: 256 << 10, ..cfg }),
            (2, NvlsTeamConfig { spin_budget: Duration::ZERO, ..cfg }),
        ] {
            assert!(matches!(team_shape(nranks, &bad), Err(Error::InvalidArgument(_))), "{nranks} ranks, {bad:?}");
        }
    }

    #[test]
    fn calls_the_switch_cannot_run_are_refused_before_a_launch() {
        let call = NvlsCall {
            function: CollFunction::AllReduce,
            dtype: DataType::Bf16,
            op: RedOpKind::Sum,
            red_arg: 0,
            count: 1024,
            input: 0x7f00_0000_0000,
            output: 0x7f00_0010_0000,
        };
        assert!(check_call(&call).is_ok());
        assert!(check_call(&NvlsCall { count: 0, input: 0, output: 0, ..call }).is_ok(), "an empty call moves nothing");
        assert!(matches!(check_call(&NvlsCall { op: RedOpKind::Prod, ..call }), Err(Error::MultimemUnsupported { .. })));
        assert!(matches!(check_call(&NvlsCall { function: CollFunction::Broadcast, ..call }), Err(Error::MultimemUnsupported { .. })));
        assert!(matches!(check_call(&NvlsCall { input: 0, ..call }), Err(Error::InvalidArgument(_))));
        assert!(matches!(check_call(&NvlsCall { output: call.output + 8, ..call }), Err(Error::InvalidArgument(_))), "bf16 packs need 16-byte alignment");
        assert!(check_call(&NvlsCall { dtype: DataType::F32, output: call.output + 4, ..call }).is_ok(), "4-byte elements move one at a time");
    }
}
