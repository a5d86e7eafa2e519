//! What the correctness matrix and the benchmark need from a communicator, whatever runs
//! its ranks (GPUs, or the host twin): buffers, their bytes, and the direct host path.

use std::time::Duration;

use device_rt::conn::ChannelStats;
use device_rt::work::WorkItem;

use host_shim::Result;
use host_shim::queue::Ticket;

/// A buffer of one rank, by its device address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub rank: u32,
    pub addr: u64,
    pub bytes: usize,
}

/// The ranks of one communicator, driven from one host thread.
pub trait RankGroup {
    /// Ranks in the communicator.
    fn nranks(&self) -> u32;

    /// What runs the ranks, in words (for reports).
    fn describe(&self) -> String;

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
    fn enqueue(&mut self, rank: u32, item: WorkItem) -> Result<Ticket>;

    /// Waits until rank `rank` has completed `ticket`.
    fn wait(&mut self, rank: u32, ticket: Ticket, timeout: Duration) -> Result<()>;

    /// Rank `rank`'s channels' statistics, when the communicator keeps them (`None`
    /// otherwise). Read between operations: every completed item's counts are in.
    fn channel_stats(&mut self, rank: u32) -> Result<Option<Vec<ChannelStats>>>;
}

/// Every channel's statistics of every rank of `g`, rank by rank (`None` when not kept):
/// entry `rank × nchannels + channel`.
pub fn all_stats(g: &mut dyn RankGroup) -> Result<Option<Vec<ChannelStats>>> {
    let mut all: Option<Vec<ChannelStats>> = None;
    for rank in 0..g.nranks() {
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
