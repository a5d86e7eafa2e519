//! Where every connection of a communicator lives: one block of device memory per rank
//! holding its `CommDevice`, its connection ends, its step counters and the FIFOs it
//! receives into; and the wiring of each end to the peer's memory. Pure arithmetic over
//! the blocks' base addresses, so the same code wires GPU ranks and host-twin ranks.

use device_rt::conn::{CONN_DIRECT, ChannelConns, ChannelStats, CommDevice, ConnInfo, MAX_RANKS, NCCL_STEPS, STEP_ALIGN};
use device_rt::abi::MAX_CHANNELS;
use zerocopy::IntoBytes;

use crate::{Error, Result};

/// A counter (head or tail) or a sizes FIFO gets a line of its own.
const LINE: u64 = 128;

/// The shape of a communicator's connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub nranks: u32,
    pub nchannels: u32,
    /// Bytes per step of the ring FIFOs.
    pub ring_step_bytes: u64,
    /// Bytes per step of the point-to-point FIFOs.
    pub p2p_step_bytes: u64,
    /// Ring connections allow direct operations (`CONN_DIRECT`): senders write straight
    /// into the next rank's output buffer where the algorithm allows.
    pub direct: bool,
    /// Every channel keeps [`ChannelStats`] (where its time goes; a few atomic adds per
    /// slice).
    pub stats: bool,
    /// The channels work in pairs ([`CommDevice::pairs`]): collectives run on the first
    /// half, and a reduce-scatter on two ranks sends on the first half while the second
    /// half receives and reduces. Needs an even channel count.
    pub paired: bool,
}

/// Offsets inside one rank's block.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    shape: Shape,
    channels: u64,
    p2p: u64,
    counters: u64,
    /// The channels' statistics, `[ChannelStats; nchannels]`.
    pub stats: u64,
    ring_fifos: u64,
    p2p_fifos: u64,
    /// Bytes of the block that must be initialised (descriptions and counters).
    pub meta_bytes: u64,
    /// Bytes of the whole block.
    pub block_bytes: u64,
}

/// Counters per channel: the ring's head, tail and pointer exchange, then per peer a p2p
/// head, tail and sizes FIFO.
fn counters_per_channel(nranks: u64) -> u64 {
    3 + 3 * nranks
}

impl Layout {
    /// Checks `shape` and lays the block out.
    pub fn new(shape: Shape) -> Result<Self> {
        let bad = |why: String| Err(Error::InvalidArgument(why));
        if !(1..=MAX_RANKS as u32).contains(&shape.nranks) {
            return bad(format!("a communicator has 1..={MAX_RANKS} ranks, not {}", shape.nranks));
        }
        if !(1..=MAX_CHANNELS as u32).contains(&shape.nchannels) {
            return bad(format!("a communicator has 1..={MAX_CHANNELS} channels, not {}", shape.nchannels));
        }
        if shape.paired && !shape.nchannels.is_multiple_of(2) {
            return bad(format!("paired channels need an even channel count, not {}", shape.nchannels));
        }
        for (what, bytes) in [("ring", shape.ring_step_bytes), ("point-to-point", shape.p2p_step_bytes)] {
            if bytes == 0 || !bytes.is_multiple_of(STEP_ALIGN) || bytes > 1 << 30 {
                return bad(format!("{what} step size must be a non-zero multiple of {STEP_ALIGN} bytes up to 1 GiB, not {bytes}"));
            }
        }
        let (nr, nch) = (u64::from(shape.nranks), u64::from(shape.nchannels));
        let conn = size_of::<ChannelConns>() as u64;
        let channels = size_of::<CommDevice>().next_multiple_of(LINE as usize) as u64;
        let p2p = channels + nch * conn;
        let counters = (p2p + nch * nr * conn).next_multiple_of(LINE);
        let stats = counters + nch * counters_per_channel(nr) * LINE;
        let meta_bytes = stats + nch * size_of::<ChannelStats>() as u64;
        let ring_fifos = meta_bytes.next_multiple_of(STEP_ALIGN);
        let p2p_fifos = ring_fifos + nch * NCCL_STEPS * shape.ring_step_bytes;
        let block_bytes = p2p_fifos + nch * nr * NCCL_STEPS * shape.p2p_step_bytes;
        Ok(Self { shape, channels, p2p, counters, stats, ring_fifos, p2p_fifos, meta_bytes, block_bytes })
    }

    fn counter(&self, channel: u32, index: u64) -> u64 {
        self.counters + (u64::from(channel) * counters_per_channel(u64::from(self.shape.nranks)) + index) * LINE
    }

    /// Ring head of the rank's send end (written by the next rank).
    fn ring_head(&self, channel: u32) -> u64 {
        self.counter(channel, 0)
    }

    /// Ring tail of the rank's receive end (written by the previous rank).
    fn ring_tail(&self, channel: u32) -> u64 {
        self.counter(channel, 1)
    }

    /// Ring pointer exchange of the rank's send end (written by the next rank).
    fn ring_ptr_exchange(&self, channel: u32) -> u64 {
        self.counter(channel, 2)
    }

    /// Point-to-point head of the rank's send end to `peer`.
    fn p2p_head(&self, channel: u32, peer: u32) -> u64 {
        self.counter(channel, 3 + 3 * u64::from(peer))
    }

    /// Point-to-point tail of the rank's receive end from `peer`.
    fn p2p_tail(&self, channel: u32, peer: u32) -> u64 {
        self.counter(channel, 4 + 3 * u64::from(peer))
    }

    /// Sizes FIFO of the rank's receive end from `peer`.
    fn p2p_sizes(&self, channel: u32, peer: u32) -> u64 {
        self.counter(channel, 5 + 3 * u64::from(peer))
    }

    fn ring_fifo(&self, channel: u32) -> u64 {
        self.ring_fifos + u64::from(channel) * NCCL_STEPS * self.shape.ring_step_bytes
    }

    fn p2p_fifo(&self, channel: u32, peer: u32) -> u64 {
        let slot = u64::from(channel) * u64::from(self.shape.nranks) + u64::from(peer);
        self.p2p_fifos + slot * NCCL_STEPS * self.shape.p2p_step_bytes
    }

    /// The first `meta_bytes` of rank `rank`'s block, given every rank's block address:
    /// its `CommDevice` (at offset 0), its connection ends wired to its peers' blocks,
    /// and zeroed counters. The ring is the ranks in order.
    pub fn image(&self, rank: u32, bases: &[u64]) -> Result<Vec<u8>> {
        let s = self.shape;
        if bases.len() != s.nranks as usize || rank >= s.nranks {
            return Err(Error::InvalidArgument(format!("{} block addresses for {} ranks (rank {rank})", bases.len(), s.nranks)));
        }
        let n = s.nranks;
        let (next, prev) = ((rank + 1) % n, (rank + n - 1) % n);
        let at = |r: u32, offset: u64| bases[r as usize] + offset;
        let mut comm = CommDevice::new(rank, n, s.nchannels);
        comm.ring_index = rank;
        for (j, slot) in comm.ring_ranks.iter_mut().take(n as usize).enumerate() {
            *slot = (rank + j as u32) % n;
        }
        comm.channels = at(rank, self.channels);
        comm.p2p = at(rank, self.p2p);
        comm.stats = if s.stats { at(rank, self.stats) } else { 0 };
        comm.pairs = if s.paired { s.nchannels / 2 } else { 0 };
        let mut image = vec![0u8; self.meta_bytes as usize];
        image[..size_of::<CommDevice>()].copy_from_slice(comm.as_bytes());
        let ring = |step_bytes| ConnInfo { step_bytes, ..ConnInfo::default() };
        let direct = if s.direct { CONN_DIRECT } else { 0 };
        let conn = size_of::<ChannelConns>();
        for c in 0..s.nchannels {
            let conns = ChannelConns {
                send: ConnInfo {
                    buff: at(next, self.ring_fifo(c)),
                    head: at(rank, self.ring_head(c)),
                    tail: at(next, self.ring_tail(c)),
                    ptr_exchange: at(rank, self.ring_ptr_exchange(c)),
                    flags: direct,
                    ..ring(s.ring_step_bytes)
                },
                recv: ConnInfo {
                    buff: at(rank, self.ring_fifo(c)),
                    head: at(prev, self.ring_head(c)),
                    tail: at(rank, self.ring_tail(c)),
                    ptr_exchange: at(prev, self.ring_ptr_exchange(c)),
                    flags: direct,
                    ..ring(s.ring_step_bytes)
                },
            };
            let off = (self.channels as usize) + c as usize * conn;
            image[off..off + conn].copy_from_slice(conns.as_bytes());
            for peer in (0..n).filter(|&p| p != rank) {
                let conns = ChannelConns {
                    send: ConnInfo {
                        buff: at(peer, self.p2p_fifo(c, rank)),
                        head: at(rank, self.p2p_head(c, peer)),
                        tail: at(peer, self.p2p_tail(c, rank)),
                        sizes_fifo: at(peer, self.p2p_sizes(c, rank)),
                        ..ring(s.p2p_step_bytes)
                    },
                    recv: ConnInfo {
                        buff: at(rank, self.p2p_fifo(c, peer)),
                        head: at(peer, self.p2p_head(c, rank)),
                        tail: at(rank, self.p2p_tail(c, peer)),
                        sizes_fifo: at(rank, self.p2p_sizes(c, peer)),
                        ..ring(s.p2p_step_bytes)
                    },
                };
                let off = self.p2p as usize + (c as usize * n as usize + peer as usize) * conn;
                image[off..off + conn].copy_from_slice(conns.as_bytes());
            }
        }
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromBytes;

    fn shape(nranks: u32, nchannels: u32) -> Shape {
        Shape { nranks, nchannels, ring_step_bytes: 8192, p2p_step_bytes: 4096, direct: true, stats: true, paired: false }
    }

    #[test]
    fn bad_shapes_are_refused() {
        for bad in [shape(0, 1), shape(33, 1), shape(2, 0), shape(2, 65), Shape { ring_step_bytes: 100, ..shape(2, 1) }, Shape { paired: true, ..shape(2, 3) }] {
            assert!(matches!(Layout::new(bad), Err(Error::InvalidArgument(_))), "{bad:?}");
        }
    }

    /// Every send end writes exactly where its peer's receive end reads, and nothing
    /// of two ends overlaps.
    #[test]
    fn send_ends_meet_their_peers_receive_ends() {
        let layout = Layout::new(shape(3, 2)).unwrap();
        let bases: Vec<u64> = (0..3).map(|r| 0x1_0000_0000 * (r + 1)).collect();
        let images: Vec<Vec<u8>> = (0..3).map(|r| layout.image(r, &bases).unwrap()).collect();
        let comm = |r: usize| CommDevice::read_from_prefix(&images[r]).unwrap().0;
        let conns = |r: usize, addr: u64| ChannelConns::read_from_prefix(&images[r][(addr - bases[r]) as usize..]).unwrap().0;
        for r in 0..3usize {
            let c = comm(r);
            assert_eq!((c.rank, c.nranks, c.ring_ranks[1], c.ring_ranks[2]), (r as u32, 3, ((r + 1) % 3) as u32, ((r + 2) % 3) as u32));
            for ch in 0..2u64 {
                let mine = conns(r, c.channels + ch * 160);
                let next = (r + 1) % 3;
                let theirs = conns(next, comm(next).channels + ch * 160);
                assert_eq!(
                    (mine.send.buff, mine.send.tail, mine.send.head, mine.send.ptr_exchange),
                    (theirs.recv.buff, theirs.recv.tail, theirs.recv.head, theirs.recv.ptr_exchange)
                );
                assert_eq!((mine.send.flags, theirs.recv.flags), (CONN_DIRECT, CONN_DIRECT));
                for peer in (0..3usize).filter(|&p| p != r) {
                    let to = conns(r, c.p2p + (ch * 3 + peer as u64) * 160).send;
                    let from = conns(peer, comm(peer).p2p + (ch * 3 + r as u64) * 160).recv;
                    assert_eq!(to, from);
                    assert_ne!(to.sizes_fifo, 0);
                }
            }
        }
        let mut words: Vec<u64> = Vec::new();
        for r in 0..3u32 {
            for ch in 0..2 {
                words.push(bases[r as usize] + layout.ring_head(ch));
                words.push(bases[r as usize] + layout.ring_tail(ch));
                words.push(bases[r as usize] + layout.ring_ptr_exchange(ch));
                for p in 0..3 {
                    words.extend([layout.p2p_head(ch, p), layout.p2p_tail(ch, p), layout.p2p_sizes(ch, p)].map(|o| bases[r as usize] + o));
                }
            }
        }
        let count = words.len();
        words.sort();
        words.dedup();
        assert_eq!(words.len(), count, "two counters share a line");
        for (r, base) in bases.iter().enumerate() {
            assert_eq!(comm(r).stats, base + layout.stats);
            assert!(words.iter().all(|&w| w + LINE <= base + layout.stats || w >= base + layout.meta_bytes));
        }
        assert_eq!(layout.stats + 2 * size_of::<ChannelStats>() as u64, layout.meta_bytes, "the statistics are initialised (zeroed) with the rest");
        let quiet = Layout::new(Shape { stats: false, ..shape(3, 2) }).unwrap();
        assert_eq!(CommDevice::read_from_prefix(&quiet.image(0, &bases).unwrap()).unwrap().0.stats, 0);
        assert!(layout.ring_fifo(1) + NCCL_STEPS * 8192 <= layout.p2p_fifo(0, 0));
        assert_eq!(layout.p2p_fifo(1, 2) + NCCL_STEPS * 4096, layout.block_bytes);
    }
}
