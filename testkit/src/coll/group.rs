//! What the correctness matrix and the benchmark need from a communicator, whatever runs
//! its ranks (GPUs, or the host twin): buffers, their bytes, and the direct host path.

use std::ops::Range;
use std::time::Duration;

use device_rt::conn::ChannelStats;
use device_rt::work::WorkItem;

use host_shim::Result;
use host_shim::bootstrap::Bootstrap;
use host_shim::comm::wiring::Shape;
use host_shim::queue::Ticket;

/// A buffer of one rank, by its device address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub rank: u32,
    pub addr: u64,
    pub bytes: usize,
}

/// How [`RankGroup::submit`] hands items to the ranks' loops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SubmitPath {
    /// The direct host path: the rank's queue; waited for by ticket.
    #[default]
    Direct,
    /// The stream-ordered path the communicator's public calls take: a call kernel on the
    /// rank's stream; waited for by synchronizing the stream (GPUs only).
    Stream,
    /// The stream-ordered path through the public calls themselves: each item made again
    /// as the communicator's typed call (`Comm::all_reduce` and its siblings) on cudarc
    /// slices over the buffers, cudarc's tracking of the slices' reads and writes included:
    /// what a Rust user's call costs (GPUs only; the collectives other than send/recv).
    Typed,
}

impl SubmitPath {
    /// Whether items go through the ranks' streams (a call kernel each).
    pub fn on_stream(self) -> bool {
        self != Self::Direct
    }
}

impl std::str::FromStr for SubmitPath {
    type Err = host_shim::Error;

    /// `direct`, `stream` or `typed`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "direct" => Ok(Self::Direct),
            "stream" => Ok(Self::Stream),
            "typed" => Ok(Self::Typed),
            other => Err(host_shim::Error::InvalidArgument(format!("{other:?} is not a path: direct, stream or typed"))),
        }
    }
}

/// An item handed to a rank by [`RankGroup::submit`], to wait for.
#[derive(Clone, Copy, Debug)]
pub enum Submitted {
    /// On the rank's queue.
    Queue(Ticket),
    /// On the rank's stream.
    Stream,
}

/// The ranks of one communicator, driven from one host thread: all of them, or (a
/// communicator across processes) this process's.
pub trait RankGroup {
    /// Ranks in the communicator.
    fn nranks(&self) -> u32;

    /// The ranks this group drives (every rank, unless the others are in other
    /// processes): every call that names a rank names one of these.
    fn local_ranks(&self) -> Range<u32> {
        0..self.nranks()
    }

    /// Where the communicator's ranks are in several processes, the bootstrap between
    /// them for the benchmark's barriers and figures (every process calls the same
    /// collective calls in the same order); `None` for a group of every rank.
    fn processes(&mut self) -> Option<&mut Bootstrap> {
        None
    }

    /// What runs the ranks, in words (for reports).
    fn describe(&self) -> String;

    /// The shape of the communicator's connections and staging (what the device plans
    /// each collective on).
    fn shape(&self) -> Shape;

    /// The channels the group's path spreads a collective over: the shape's collective
    /// channels, or (the direct path of a communicator with call channels) its
    /// resident ones.
    fn plan_channels(&self) -> u32 {
        self.shape().collective_channels()
    }

    /// The call channels a collective handed over by [`RankGroup::submit`] may take as an
    /// LL run (the stream-ordered path's call kernel, where the communicator has call
    /// channels); 0 where the group's path never takes LL.
    fn ll_channels(&self) -> u32 {
        0
    }

    /// A zeroed buffer of `bytes` in rank `rank`'s memory. Allocate before enqueueing:
    /// a GPU allocation may wait for running kernels.
    fn alloc(&mut self, rank: u32, bytes: usize) -> Result<Buffer>;

    /// Where the allocator stands: [`RankGroup::release`] with it frees every buffer
    /// allocated since.
    fn mark(&self) -> Vec<usize>;

    /// Frees every buffer allocated since `mark` was taken.
    fn release(&mut self, mark: Vec<usize>);

    /// Writes `data` at the start of `buf`.
    fn write(&mut self, buf: Buffer, data: &[u8]) -> Result<()>;

    /// Reads the first `bytes` of `buf`.
    fn read(&mut self, buf: Buffer, bytes: usize) -> Result<Vec<u8>>;

    /// Validates `item` (also against the communicator) and enqueues it on rank `rank`'s
    /// loop through the direct host path.
    ///
    /// The items this and [`RankGroup::submit`] and [`RankGroup::capture`] take name raw
    /// addresses, which the communicator checks but cannot vouch for. The contract of this
    /// test tool (the type system does not check it): every address an item carries lies,
    /// whole extent, in a buffer of rank `rank` from [`RankGroup::alloc`] that is not
    /// released before the item has completed (a captured item: before every replay of
    /// its graph has), or the item is one the checks refuse (a test of the refusal).
    fn enqueue(&mut self, rank: u32, item: WorkItem) -> Result<Ticket>;

    /// Waits until rank `rank` has completed `ticket`.
    fn wait(&mut self, rank: u32, ticket: Ticket, timeout: Duration) -> Result<()>;

    /// Rank `rank`'s channels' statistics, when the communicator keeps them (`None`
    /// otherwise). Read between operations: every completed item's counts are in.
    fn channel_stats(&mut self, rank: u32) -> Result<Option<Vec<ChannelStats>>>;

    /// Validates `item` and hands it to rank `rank` through the group's path.
    fn submit(&mut self, rank: u32, item: WorkItem) -> Result<Submitted> {
        Ok(Submitted::Queue(self.enqueue(rank, item)?))
    }

    /// Waits until `submitted` (and everything submitted to rank `rank` before it) has
    /// completed.
    fn wait_submitted(&mut self, rank: u32, submitted: Submitted, timeout: Duration) -> Result<()> {
        match submitted {
            Submitted::Queue(ticket) => self.wait(rank, ticket, timeout),
            Submitted::Stream => Err(host_shim::Error::InvalidState("this group has no streams")),
        }
    }

    /// Captures `items`, in order, as one CUDA graph of rank `rank`'s stream-ordered
    /// calls (validated as [`RankGroup::submit`] does), to launch with
    /// [`RankGroup::replay`]; returns its index among the rank's graphs. Only a group on
    /// GPUs has streams.
    fn capture(&mut self, rank: u32, items: &[WorkItem]) -> Result<usize> {
        let _ = (rank, items);
        Err(host_shim::Error::InvalidState("this group has no streams to capture"))
    }

    /// Launches rank `rank`'s graph `graph` on its stream; wait with
    /// [`RankGroup::wait_submitted`].
    fn replay(&mut self, rank: u32, graph: usize) -> Result<Submitted> {
        let _ = (rank, graph);
        Err(host_shim::Error::InvalidState("this group has no streams to replay graphs on"))
    }

    /// Destroys every captured graph; call once their launches have completed.
    fn drop_graphs(&mut self) {}

    /// Waits up to `timeout` until no rank this process drives holds a GPU (each loop that
    /// sleeps when idle asleep, see `LoopConfig::sleep_after`); returns whether none does.
    /// A group on CPU threads holds no GPU: true at once.
    fn loops_asleep(&mut self, timeout: Duration) -> Result<bool> {
        let _ = timeout;
        Ok(true)
    }
}

/// Every channel's statistics of every rank `g` drives, rank by rank (`None` when not
/// kept): entry `(rank - first local rank) × nchannels + channel`.
pub fn all_stats(g: &mut dyn RankGroup) -> Result<Option<Vec<ChannelStats>>> {
    let mut all: Option<Vec<ChannelStats>> = None;
    for rank in g.local_ranks() {
        if let Some(channels) = g.channel_stats(rank)? {
            all.get_or_insert_with(Vec::new).extend(channels);
        }
    }
    Ok(all)
}

/// Every channel's statistics of every rank of `g`, summed (`None` when not kept).
pub fn total_stats(g: &mut dyn RankGroup) -> Result<Option<ChannelStats>> {
    Ok(all_stats(g)?.map(|all| sum_stats(&all)))
}

/// The sum of `channels`' statistics.
pub fn sum_stats(channels: &[ChannelStats]) -> ChannelStats {
    channels.iter().fold(ChannelStats::default(), |a, c| a.plus(c))
}

/// The bootstrap of a communicator's processes for what the tools around it coordinate
/// (a benchmark's barriers and figures), beside the communicator's own: rank `rank` of
/// `nranks` meeting at an id derived from `id`.
pub fn coordination(id: &host_shim::comm::CommId, rank: u32, nranks: u32, budget: Duration) -> Result<Bootstrap> {
    Bootstrap::join_at(rank as usize, nranks as usize, &id.derive(b"coordination").rendezvous(), budget)
}
