//! A host-twin rank of a communicator across processes: what `Comm::init_rank` does on a
//! GPU, with shared-memory files for the exported connection blocks. The ranks meet and
//! agree through host-shim's `comm::join` (the same code as on GPUs), each maps every
//! rank's block, writes its own `CommDevice` with the addresses its process sees, and
//! runs its loop on CPU threads; a watcher stops it when another rank fails.

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use host_shim::bootstrap::{Bootstrap, Watch};
use host_shim::comm::CommId;
use host_shim::comm::join::{self, Intro};
use host_shim::comm::wiring::{Layout, Shape};
use host_shim::{Error, Result};

use super::{RankBlock, Streams, SubmitPath, Traps, TwinGroup, TwinLoops, start_rank};
use crate::coll::group::coordination;
use crate::shared::{SharedMap, shared_file};

/// What a rank of a twin communicator across processes keeps beside its loop.
pub(super) struct Across {
    /// Says this rank leaves when dropped, or that it aborted ([`TwinGroup::abort_all`]).
    pub(super) watch: Watch,
    /// Why the communicator stopped, once another rank failed.
    failed: Arc<Mutex<Option<String>>>,
    /// The processes' own bootstrap, for a benchmark's barriers and figures
    /// ([`RankGroup::processes`](super::RankGroup::processes)).
    pub(super) coordination: Bootstrap,
}

impl TwinGroup {
    /// Rank `rank` of a twin communicator of `shape.nranks` ranks in as many processes
    /// (or threads), meeting at `id`: each rank's loop has `shape.nchannels` resident
    /// channels of `threads` threads and spin budget `budget` (which also bounds the
    /// meeting); only the queue's path (no stream twins). Peers never write into another
    /// process's buffers: `shape.direct` must be off.
    pub fn join_process(id: &CommId, rank: u32, shape: Shape, threads: u32, budget: Duration) -> Result<Self> {
        Self::join_process_on_heap(id, rank, shape, threads, budget, 0)
    }

    /// As [`TwinGroup::join_process`], on a symmetric heap of one PE per process: `heap`
    /// is the address of this rank's `ShmemHandle` (a joined [`crate::shmem::TwinHeap`]'s
    /// `handle(rank)`), as `Comm::init_rank_on_heap` on GPUs; 0 for none.
    pub fn join_process_on_heap(id: &CommId, rank: u32, shape: Shape, threads: u32, budget: Duration, heap: u64) -> Result<Self> {
        if shape.direct {
            return Err(Error::InvalidArgument("ranks in processes cannot write into each other's outputs: a direct shape".into()));
        }
        super::check_threads(shape, threads)?;
        let intro = Intro {
            process: u64::from(std::process::id()),
            device: u128::from(std::process::id()).to_le_bytes(),
            room: u32::MAX,
            granularity: 4096,
            call_channels: 0,
            config: format!("{shape:?}, {threads} threads"),
        };
        let (mut bootstrap, intros) = join::meet(id, shape.nranks as usize, rank as usize, budget, &intro)?;
        join::agree(&intros, shape.nchannels)?;
        let layout = Layout::new(shape)?;
        let len = layout.block_bytes.next_multiple_of(4096) as usize;
        let own = shared_file(len, c"ferroccl-twin-comm")?;
        let fds = join::exchange_blocks(&mut bootstrap, own.as_fd())?;
        let blocks = fds.iter().map(|fd| SharedMap::map(fd, len)).collect::<Result<Vec<_>>>()?;
        let bases: Vec<u64> = blocks.iter().map(|b| b.base() as u64).collect();
        let image = layout.image_on_heap(rank, &bases, heap)?;
        // SAFETY: this rank's block holds `block_bytes >= meta_bytes` bytes; no loop runs.
        unsafe { std::ptr::copy_nonoverlapping(image.as_ptr(), blocks[rank as usize].base(), image.len()) };
        join::ready(&mut bootstrap, "communicator blocks written")?;
        let traps = Traps::default();
        let loops = TwinLoops { resident: shape.nchannels, threads, budget, sleep_after: None };
        let block = RankBlock { addr: bases[rank as usize], memory: Box::new(blocks) };
        let twin_rank = start_rank(rank, block, 0, loops, None, Streams::None, &traps)?;
        let failed = Arc::new(Mutex::new(None));
        let on_failure = {
            let (failed, abort) = (failed.clone(), twin_rank.queue.abort_handle());
            Box::new(move |why: String| {
                *failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
                abort.abort();
            })
        };
        let watch = Watch::new(bootstrap, "rank", on_failure)?;
        let coordination = coordination(id, rank, shape.nranks, budget)?;
        Ok(Self {
            ranks: vec![twin_rank],
            first: rank,
            across: Some(Across { watch, failed, coordination }),
            buffers: Vec::new(),
            shape,
            threads,
            stats: None,
            memory: None,
            retired: Vec::new(),
            resident: shape.nchannels,
            path: SubmitPath::Direct,
            captured: false,
            unmapped: 0,
            traps,
        })
    }

    /// Another process's rank's failure ([`Error::RankFailed`]), once one stopped this
    /// rank.
    pub(super) fn failure(&self) -> Result<()> {
        let Some(across) = &self.across else { return Ok(()) };
        match across.failed.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone() {
            Some(why) => Err(Error::RankFailed(why)),
            None => Ok(()),
        }
    }
}
