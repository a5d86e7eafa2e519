//! A communicator whose ranks are in several processes ([`Comm::init_rank`], NCCL's
//! `ncclCommInitRank`): each rank's connection block is device memory exported as a file
//! descriptor and mapped by every rank's process; each rank writes its own block's
//! `CommDevice` with the addresses its process sees; a watcher thread per rank
//! ([`Watch`]) learns when another rank's process ends or aborts and stops this one.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cudarc::driver::{CudaStream, sys};

use super::join::{self, Intro};
use super::wiring::Layout;
use super::{CommAbortHandle, CommConfig, CommId, Comm, Tuning, check_room, check_tuning};
use crate::bootstrap::Watch;
use crate::module::Module;
use crate::shmem::Heap;
use crate::shmem::vmm::{self, VmmHeap};
use crate::work::{LoopConfig, WorkLoop};
use crate::{Error, Result, device};

/// Why a communicator across processes stopped, once another rank failed.
pub(super) type Failure = Arc<Mutex<Option<String>>>;

/// The failure `failed` tells of, if one was heard.
pub(super) fn failure_of(failed: &Failure) -> Option<Error> {
    failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone().map(Error::RankFailed)
}

/// What a rank of a communicator across processes keeps beside its loop.
pub(super) struct Across {
    /// Says this rank leaves when dropped (its abort handle tells of an abort).
    _watch: Watch,
    pub(super) failed: Failure,
    /// Where the ranks met, how long they wait for each other, and the splits and
    /// collective matmuls so far (every rank makes them in the same order: the counts
    /// name their meetings).
    pub(super) id: CommId,
    pub(super) timeout: Duration,
    splits: AtomicU64,
    matmuls: AtomicU64,
    /// The ranks of this process on this rank's device, itself included.
    pub(super) ranks_on_device: u32,
}

impl Across {
    /// Another rank's failure, if one was heard.
    pub(super) fn failure(&self) -> Option<Error> {
        failure_of(&self.failed)
    }

    /// The count that names this rank's next collective matmul's meeting.
    pub(super) fn next_matmul(&self) -> u64 {
        self.matmuls.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// The part of a configuration every rank must share, as text.
fn describe(t: &Tuning) -> String {
    format!(
        "{} resident channel(s) of {} threads ({} in the loop), {} B ring steps, {} B point-to-point steps, {} B staging, algorithm {:?}, statistics {}, paired {}",
        t.loop_cfg.channels, t.loop_cfg.threads, t.loop_cfg.loop_threads(), t.ring_step_bytes, t.p2p_step_bytes, t.staging_bytes, t.algorithm, t.stats, t.paired
    )
}

/// The id a heap's ranks meet at: PE 0's new one, handed to every PE through the
/// heap's bootstrap.
fn heap_comm_id(heap: &mut Heap, rank: usize) -> Result<CommId> {
    let mine = if rank == 0 { CommId::new()?.as_bytes().to_vec() } else { Vec::new() };
    let bootstrap = heap.bootstrap().ok_or(Error::InvalidState("a heap of one PE per process has a bootstrap"))?;
    let parts = bootstrap.all_gather("a communicator on the heap", &mine, &[])?;
    CommId::from_bytes(parts.first().map_or(&[][..], |p| p.bytes.as_slice()))
}

/// Copies `bytes` to device address `to` of the current context (synchronously).
fn upload(to: u64, bytes: &[u8]) -> Result<()> {
    // SAFETY: `to` starts at least `bytes.len()` mapped, writable bytes (the caller's
    // block); the copy completes before the call returns.
    unsafe { sys::cuMemcpyHtoD_v2(to, bytes.as_ptr().cast(), bytes.len()) }.result().map_err(Error::cuda("cuMemcpyHtoD"))
}

impl Comm {
    /// Rank `rank` of a communicator of `nranks` ranks that meet at `id` (made by one of
    /// them with [`CommId::new`] and handed to the others), on `stream`'s device: NCCL's
    /// `ncclCommInitRank`. Every rank calls it at once, in its own process or several in
    /// one process (each on a thread of its own: the call returns when every rank has
    /// arrived). Ranks of one process may share a device; ranks of two processes may not
    /// (their persistent loops would time-slice the GPU: [`Error::DeviceLimit`]).
    ///
    /// Every rank must be given the same configuration but for its timeout: a rank
    /// configured otherwise fails every rank's init, naming it. `cfg.timeout` bounds
    /// the meeting too: a rank that never arrives fails every other rank's init with
    /// [`Error::Bootstrap`] naming it. Once built, a rank whose process ends without
    /// dropping its communicator, or that aborts ([`Comm::abort`]), stops every other
    /// rank within milliseconds: their loops are aborted and every call fails with
    /// [`Error::RankFailed`] naming it. A rank dropped on purpose is no failure; ranks still
    /// calling collectives with it wait for it until `cfg.timeout`.
    ///
    /// Peers never write into another process's buffers: every collective moves data
    /// through the connection blocks (no direct writes into outputs).
    pub fn init_rank(id: &CommId, nranks: usize, rank: usize, stream: Arc<CudaStream>, cfg: CommConfig) -> Result<Self> {
        crate::init()?;
        Self::join(id, nranks, rank, stream, cfg.tuning()?, 0)
    }

    /// [`Comm::init_rank`] on the symmetric heap `heap` of one PE per process
    /// ([`Heap::join`]): this process's PE is the rank, its heap's PEs the ranks, and
    /// `stream` a stream of its device. As [`Comm::from_heap`] in one process, an
    /// out-of-place all_reduce whose input lies in the heap reads every rank's input in
    /// place where it runs two-shot (zero copy). Every PE calls it at once; the id the
    /// ranks meet at is made by PE 0 and handed out through the heap's bootstrap.
    ///
    /// # Safety
    /// `heap` outlives the communicator's loop: shut it down ([`Comm::shutdown`]) or drop
    /// it before the heap is freed or finalized (the loop reads every PE's heap).
    pub unsafe fn init_rank_on_heap(heap: &mut Heap, stream: Arc<CudaStream>, cfg: CommConfig) -> Result<Self> {
        crate::init()?;
        let &[rank] = heap.local_pes() else {
            return Err(Error::InvalidArgument(format!("a heap with PEs {:?} in this process: init_rank_on_heap takes a heap of one PE per process (Heap::join)", heap.local_pes())));
        };
        if heap.device_of(rank) != Some(stream.context().ordinal()) {
            return Err(Error::InvalidArgument(format!("the stream is on device {}, PE {rank} on {:?}", stream.context().ordinal(), heap.device_of(rank))));
        }
        let (nranks, handle) = (heap.n_pes(), heap.handle(rank));
        let id = heap_comm_id(heap, rank)?;
        Self::join(&id, nranks, rank, stream, cfg.tuning()?, handle)
    }

    /// As [`Comm::init_rank`], every tunable given (tests and benchmarks); its spin
    /// budget is the timeout.
    #[cfg(feature = "testing")]
    pub fn init_rank_tuned(id: &CommId, nranks: usize, rank: usize, stream: Arc<CudaStream>, tuning: Tuning) -> Result<Self> {
        crate::init()?;
        Self::join(id, nranks, rank, stream, tuning, 0)
    }

    /// The rank of [`Comm::init_rank`] built with `tuning`, on the heap whose handle
    /// (this rank's `ShmemHandle` on its device) is `heap`, if not 0.
    fn join(id: &CommId, nranks: usize, rank: usize, stream: Arc<CudaStream>, mut tuning: Tuning, heap: u64) -> Result<Self> {
        let timeout = tuning.loop_cfg.spin_budget;
        tuning.direct = false;
        check_tuning(&tuning)?;
        let ctx = stream.context().clone();
        let ordinal = ctx.ordinal();
        let module = Module::load_for_threads(&ctx, tuning.loop_cfg.threads)?;
        let room = device::sm_count(&ctx)? * crate::work::channels_per_sm(&module.kernel("ferroccl_work_loop")?, Some(&module.kernel("ferroccl_call_kernel")?), tuning.loop_cfg.threads)?;
        let uuid = ctx.uuid().map_err(Error::cuda("cuDeviceGetUuid"))?;
        let intro = Intro {
            process: u64::from(std::process::id()),
            device: uuid.bytes.map(|b| b as u8),
            room,
            granularity: vmm::granularity(&ctx)?,
            call_channels: tuning.loop_cfg.call_channels,
            config: describe(&tuning),
        };
        let (mut bootstrap, intros) = join::meet(id, nranks, rank, timeout, &intro)?;
        let agreed = join::agree(&intros, tuning.loop_cfg.channels)?;
        tuning.loop_cfg.call_channels = agreed.call_channels;
        let nranks = nranks as u32;
        let layout = Layout::new(tuning.shape(nranks))?;
        let ranks_here = agreed.ranks_on_device[rank];
        if ranks_here > 1 {
            log::warn!(
                "communicator: rank {rank} shares device {ordinal} with {} other rank(s) of this process: CUDA may make an allocation, memset or free on one rank's thread wait for another rank's running call, which waits for it until the timeout; allocate before the ranks' calls (docs/architecture.md)",
                ranks_here - 1
            );
        }
        let loop_cfg = LoopConfig { placement: tuning.placement_on(ranks_here as usize, device::sm_count(&ctx)?), ..tuning.loop_cfg };
        let mut lp = WorkLoop::new(&ctx, &module, loop_cfg)?;
        if check_room(ordinal, ranks_here, room, &tuning.loop_cfg)? {
            lp.allow_overlapping_call_kernels();
        }
        let bytes = layout.block_bytes.next_multiple_of(agreed.granularity);
        let own = VmmHeap::new(&ctx, bytes, &[ordinal])?;
        let exported = own.export()?;
        let fds = join::exchange_blocks(&mut bootstrap, exported.as_fd())?;
        let mut own = Some(own);
        let mut blocks = Vec::new();
        for (r, fd) in fds.iter().enumerate() {
            blocks.push(match own.take_if(|_| r == rank) {
                Some(own) => own,
                None => VmmHeap::import(&ctx, fd, bytes)?,
            });
        }
        let bases: Vec<u64> = blocks.iter().map(VmmHeap::base).collect();
        let image = layout.image_on_heap(rank as u32, &bases, heap)?;
        upload(bases[rank], &image)?;
        join::ready(&mut bootstrap, "communicator blocks written")?;
        lp.attach_comm(Box::new(blocks), bases[rank], &image)?;
        let local = CommAbortHandle::of_ranks(vec![lp.abort_handle()]);
        let failed = Arc::new(Mutex::new(None));
        let on_failure = {
            let (failed, local) = (failed.clone(), local.clone());
            Box::new(move |why: String| {
                log::warn!("communicator: {why}");
                *failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
                local.abort();
            })
        };
        let watch = Watch::new(bootstrap, "rank", on_failure)?;
        let aborts = CommAbortHandle { across: Some((rank as u32, watch.abort_handle())), ..local };
        let across = Across { _watch: watch, failed, id: *id, timeout, splits: AtomicU64::new(0), matmuls: AtomicU64::new(0), ranks_on_device: ranks_here };
        if let Err(e) = lp.start() {
            aborts.abort();
            return Err(e);
        }
        Ok(Comm {
            rank: rank as u32,
            nranks,
            stream,
            lp,
            aborts,
            stats: tuning.stats.then(|| bases[rank] + layout.stats),
            staging: layout.staging(),
            algorithm: tuning.algorithm,
            module,
            peer_devices: Vec::new(),
            direct: false,
            across: Some(across),
        })
    }

    /// NCCL's `ncclCommSplit`: every rank of this communicator calls it at once; the ranks
    /// of each `color` form a new communicator, ranked by `key`, then by their rank here,
    /// built with `cfg` on this rank's stream. `None` for [`join::NO_COLOR`] (the rank takes
    /// part but joins none). Only for communicators across processes ([`Comm::init_rank`]);
    /// every rank must call it with the same count of splits before.
    pub fn split(&self, color: i32, key: i32, cfg: CommConfig) -> Result<Option<Comm>> {
        let Some(across) = &self.across else {
            return Err(Error::InvalidArgument("split takes a communicator made by Comm::init_rank".into()));
        };
        if let Some(failure) = across.failure() {
            return Err(failure);
        }
        let nth = across.splits.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(place) = join::split(&across.id, nth, self.nranks as usize, self.rank as usize, color, key, across.timeout)? else { return Ok(None) };
        Comm::init_rank(&place.id, place.nranks, place.rank, self.stream.clone(), cfg).map(Some)
    }
}
