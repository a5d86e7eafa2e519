//! Where every connection of a communicator lives: one block of device memory per rank
//! holding its `CommDevice`, its connection ends, its step counters, the FIFOs it
//! receives into, its staging buffers, flags and packet regions (the one-shot/two-shot and
//! LL algorithms'; a packet region is `2 × nranks` slots of 8 KiB per channel), and on a
//! communicator that forces NVLS its NVLS regions and their software multicast tables;
//! and the wiring of each end to the peer's memory. Pure arithmetic over the blocks' base
//! addresses, so the same code wires GPU ranks and host-twin ranks.

use device_rt::abi::MAX_CHANNELS;
use device_rt::algo::{AlgorithmChoice, Staging, shot_channels};
use device_rt::conn::{
    CONN_DIRECT, CONN_NVLS_MIN_POLL, ChannelConns, ChannelStats, CommDevice, ConnInfo, MAX_NVLS_ARITY, MAX_RANKS, MAX_SHOT_RANKS, NCCL_STEPS, NvlsConns, STEP_ALIGN,
    StagingConns, packet_region_bytes,
};
use device_rt::multicast::SwMulticastTable;
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
    /// Bytes of staging per rank for the one-shot/two-shot algorithms: the
    /// largest call they take, split over the channels a one-shot/two-shot collective takes
    /// (those a collective spreads over, at most `THRESHOLDS.shot_channels_max`; each
    /// channel's part rounded up to 4 KiB), twice (calls alternate between two buffers),
    /// for every channel a collective spreads over.
    /// 0: none (as with one rank, or more than `MAX_SHOT_RANKS`: they never stage).
    pub staging_bytes: u64,
    /// The algorithm the device runs collectives with: its choice by size, or one forced.
    pub algorithm: AlgorithmChoice,
    /// The NVLS regions (FIFOs and step counters) live in a multicast object's memory,
    /// not in the block (hardware NVLS, [`crate::nvls_hw`]): the block keeps the NVLS
    /// connections alone, and [`Layout::nvls_multicast_bytes`] is each rank's share of the
    /// object. Needs [`Shape::nvls`].
    pub nvls_multicast: bool,
}

impl Shape {
    /// Channels a collective spreads over: the first half of paired channels, else all.
    pub fn collective_channels(&self) -> u32 {
        if self.paired { self.nchannels / 2 } else { self.nchannels }
    }

    /// Bytes of one of a channel's two staging buffers; 0 when the communicator has none.
    fn staging_slot_bytes(&self) -> u64 {
        let has_staging = (2..=MAX_SHOT_RANKS as u32).contains(&self.nranks) && self.staging_bytes > 0;
        if !has_staging {
            return 0;
        }
        self.staging_bytes.div_ceil(u64::from(shot_channels(self.collective_channels()))).next_multiple_of(STEP_ALIGN)
    }

    /// What the communicator has for the one-shot/two-shot algorithms.
    pub fn staging(&self) -> Staging {
        Staging { nranks: self.nranks, channels: self.collective_channels(), slot_bytes: self.staging_slot_bytes() }
    }

    /// True when the communicator has NVLS connections: it forces NVLS, on 2 to
    /// `MAX_NVLS_ARITY` ranks (one rank copies locally).
    pub fn nvls(&self) -> bool {
        self.algorithm == AlgorithmChoice::Nvls && (2..=MAX_NVLS_ARITY as u32).contains(&self.nranks)
    }

    /// Bytes per step of the NVLS FIFOs: the ring's, at most [`NVLS_STEP_BYTES_MAX`].
    pub fn nvls_step_bytes(&self) -> u64 {
        self.ring_step_bytes.min(NVLS_STEP_BYTES_MAX)
    }
}

/// The most bytes per step of an NVLS FIFO (NCCL's NVLS chunk, 128 KiB): every rank holds
/// `collective channels × nranks × 2 × NCCL_STEPS` of them, e.g. 256 MiB on each of 2 ranks
/// with 64 channels.
pub const NVLS_STEP_BYTES_MAX: u64 = 128 << 10;

/// The two NVLS regions of a (channel, head): the scatter's, read by the head's
/// reduction, and the head's broadcast, read by the gather.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Region {
    Reduce = 0,
    Broadcast = 1,
}

/// A software multicast table's place among a region's tables: per slot, then the head
/// and the tail word.
const TABLE_HEAD: u64 = NCCL_STEPS;
const TABLE_TAIL: u64 = NCCL_STEPS + 1;
/// Bytes of one region's multicast part in the rank that heads it: the slots' handles
/// (`offs_fifo`, `[u64; NCCL_STEPS]`), then the tables of every slot, the head and the tail.
const REGION_TABLES_BYTES: u64 = 8 * NCCL_STEPS + (NCCL_STEPS + 2) * size_of::<SwMulticastTable>() as u64;

/// One rank's addresses of the multicast object that holds the NVLS regions (hardware
/// NVLS): its own share (unicast) and the object's multicast address, both as its device
/// addresses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MulticastShare {
    pub unicast: u64,
    pub multicast: u64,
}

/// Offsets inside one rank's block.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    shape: Shape,
    channels: u64,
    p2p: u64,
    /// `[StagingConns; collective channels]`.
    staging_conns: u64,
    counters: u64,
    /// Per collective channel, a line-rounded `[u64; 5 × nranks]` of staging flags, call
    /// descriptors and published outputs.
    staging_flags: u64,
    /// The channels' statistics, `[ChannelStats; nchannels]`.
    pub stats: u64,
    ring_fifos: u64,
    p2p_fifos: u64,
    /// Per collective channel, two staging buffers of `slot_bytes`.
    staging: u64,
    slot_bytes: u64,
    /// Per collective channel (with staging), its packet region
    /// (`packet_region_bytes(nranks)`).
    packets: u64,
    /// `[NvlsConns; collective channels]` (NVLS only, like the three below).
    nvls_conns: u64,
    /// Per collective channel, this rank's (the head's) two regions' multicast tables.
    nvls_tables: u64,
    /// Per collective channel, head and region, a head and a tail word on lines of their
    /// own: in the block, or with [`Shape::nvls_multicast`] in the multicast share.
    nvls_counters: u64,
    /// Per collective channel, head and region, `NCCL_STEPS` slots of the NVLS step: in the
    /// block, or with [`Shape::nvls_multicast`] in the multicast share.
    nvls_fifos: u64,
    /// Bytes of each rank's share of the multicast object (0 without
    /// [`Shape::nvls_multicast`]): the counters, then the FIFOs. Hardware NVLS is the
    /// `testing` feature's alone.
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    nvls_multicast_bytes: u64,
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

/// Bytes of one channel's staging flags, call descriptors and published outputs
/// (`StagingConns::flags`): `[u64; 5 × nranks]` on lines of their own.
fn flags_bytes(nranks: u64) -> u64 {
    (40 * nranks).next_multiple_of(LINE)
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
        if shape.staging_bytes > 1 << 30 {
            return bad(format!("staging is at most 1 GiB per rank, not {} bytes", shape.staging_bytes));
        }
        let slot_bytes = shape.staging_slot_bytes();
        let shot_forced = matches!(shape.algorithm, AlgorithmChoice::OneShot | AlgorithmChoice::TwoShot);
        if shot_forced && shape.nranks > 1 && slot_bytes == 0 {
            return bad(format!(
                "a communicator that forces {} needs staging buffers: 2..={MAX_SHOT_RANKS} ranks (not {}) and staging bytes (not {})",
                shape.algorithm.name(),
                shape.nranks,
                shape.staging_bytes
            ));
        }
        if shape.algorithm == AlgorithmChoice::Nvls && !(1..=MAX_NVLS_ARITY as u32).contains(&shape.nranks) {
            return bad(format!("a communicator that forces NVLS has 1..={MAX_NVLS_ARITY} ranks, not {}", shape.nranks));
        }
        if shape.nvls_multicast && !shape.nvls() {
            return bad(format!("NVLS regions in multicast memory need NVLS forced on 2..={MAX_NVLS_ARITY} ranks, not {} on {}", shape.algorithm.name(), shape.nranks));
        }
        let (nr, nch) = (u64::from(shape.nranks), u64::from(shape.nchannels));
        let shot_channels = if slot_bytes == 0 { 0 } else { u64::from(shape.collective_channels()) };
        let conn = size_of::<ChannelConns>() as u64;
        let channels = size_of::<CommDevice>().next_multiple_of(LINE as usize) as u64;
        let p2p = channels + nch * conn;
        let staging_conns = p2p + nch * nr * conn;
        let counters = (staging_conns + shot_channels * size_of::<StagingConns>() as u64).next_multiple_of(LINE);
        let staging_flags = counters + nch * counters_per_channel(nr) * LINE;
        let stats = staging_flags + shot_channels * flags_bytes(nr);
        let nvls_channels = if shape.nvls() { u64::from(shape.collective_channels()) } else { 0 };
        // Software multicast keeps its tables, counters and FIFOs in the block; hardware
        // multicast keeps none of them there.
        let in_block = if shape.nvls_multicast { 0 } else { nvls_channels };
        let nvls_counter_bytes = nvls_channels * nr * 4 * LINE;
        let nvls_fifo_bytes = nvls_channels * nr * 2 * NCCL_STEPS * shape.nvls_step_bytes();
        let nvls_conns = (stats + nch * size_of::<ChannelStats>() as u64).next_multiple_of(LINE);
        let nvls_tables = nvls_conns + nvls_channels * size_of::<NvlsConns>() as u64;
        let block_counters = (nvls_tables + in_block * 2 * REGION_TABLES_BYTES).next_multiple_of(LINE);
        let meta_bytes = block_counters + if shape.nvls_multicast { 0 } else { nvls_counter_bytes };
        let ring_fifos = meta_bytes.next_multiple_of(STEP_ALIGN);
        let p2p_fifos = ring_fifos + nch * NCCL_STEPS * shape.ring_step_bytes;
        let staging = p2p_fifos + nch * nr * NCCL_STEPS * shape.p2p_step_bytes;
        let packets = staging + shot_channels * 2 * slot_bytes;
        let block_fifos = packets + shot_channels * packet_region_bytes(shape.nranks);
        let (nvls_counters, nvls_fifos, block_bytes, nvls_multicast_bytes) = if shape.nvls_multicast {
            let fifos = nvls_counter_bytes.next_multiple_of(STEP_ALIGN);
            (0, fifos, block_fifos, fifos + nvls_fifo_bytes)
        } else {
            (block_counters, block_fifos, block_fifos + nvls_fifo_bytes, 0)
        };
        Ok(Self {
            shape,
            channels,
            p2p,
            staging_conns,
            counters,
            staging_flags,
            stats,
            ring_fifos,
            p2p_fifos,
            staging,
            slot_bytes,
            packets,
            nvls_conns,
            nvls_tables,
            nvls_counters,
            nvls_fifos,
            nvls_multicast_bytes,
            meta_bytes,
            block_bytes,
        })
    }

    #[cfg(any(test, feature = "testing"))]
    /// Bytes of each rank's share of the multicast object that holds the NVLS regions
    /// (the size its unicast buffer must have); 0 unless the shape asks for one
    /// ([`Shape::nvls_multicast`]).
    pub fn nvls_multicast_bytes(&self) -> u64 {
        self.nvls_multicast_bytes
    }

    /// The NVLS region `region` of head `head` on collective channel `channel`: its
    /// `NCCL_STEPS` slots.
    fn nvls_fifo(&self, channel: u32, head: u32, region: Region) -> u64 {
        let index = (u64::from(channel) * u64::from(self.shape.nranks) + u64::from(head)) * 2 + region as u64;
        self.nvls_fifos + index * NCCL_STEPS * self.shape.nvls_step_bytes()
    }

    /// The head (`tail == false`) or tail word of the NVLS region `region` of head `head`
    /// on collective channel `channel`.
    fn nvls_counter(&self, channel: u32, head: u32, region: Region, tail: bool) -> u64 {
        let index = ((u64::from(channel) * u64::from(self.shape.nranks) + u64::from(head)) * 2 + region as u64) * 2 + u64::from(tail);
        self.nvls_counters + index * LINE
    }

    /// This rank's multicast part of its own region `region` on collective channel
    /// `channel`: the slots' handles (`offs_fifo`), then table `k` (slot `k`,
    /// [`TABLE_HEAD`], [`TABLE_TAIL`]) at `+ 8 × NCCL_STEPS + k × 72`.
    fn nvls_region_tables(&self, channel: u32, region: Region) -> u64 {
        self.nvls_tables + (u64::from(channel) * 2 + region as u64) * REGION_TABLES_BYTES
    }

    /// Table `k` of [`Layout::nvls_region_tables`].
    fn nvls_table(&self, channel: u32, region: Region, k: u64) -> u64 {
        self.nvls_region_tables(channel, region) + 8 * NCCL_STEPS + k * size_of::<SwMulticastTable>() as u64
    }

    /// Writes rank `rank`'s NVLS connections into `image` (see `NvlsConns`: every rank is a
    /// head). With software multicast (`hardware` `None`) the regions lie in the blocks
    /// (`at`) and the rank's multicast ends name its tables, which list every rank's
    /// region in rank order; with hardware multicast (`hardware`: the rank's share of the
    /// object and the object's multicast address) the unicast ends point into the rank's
    /// share and the multicast ends at the same offsets behind the multicast address,
    /// where `multimem` reaches every rank's share at once.
    fn nvls_image(&self, image: &mut [u8], rank: u32, at: impl Fn(u32, u64) -> u64, hardware: Option<MulticastShare>) {
        let (n, step_bytes) = (self.shape.nranks, self.shape.nvls_step_bytes());
        let mut put = |offset: u64, bytes: &[u8]| image[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
        let own = |offset: u64| hardware.map_or_else(|| at(rank, offset), |share| share.unicast + offset);
        for c in 0..self.shape.collective_channels() {
            let unicast = |head: u32, region: Region| ConnInfo {
                buff: own(self.nvls_fifo(c, head, region)),
                head: own(self.nvls_counter(c, head, region, false)),
                tail: own(self.nvls_counter(c, head, region, true)),
                step_bytes,
                ..ConnInfo::default()
            };
            let multicast = |region: Region| match hardware {
                Some(share) => ConnInfo {
                    buff: share.multicast + self.nvls_fifo(c, rank, region),
                    head: share.multicast + self.nvls_counter(c, rank, region, false),
                    tail: share.multicast + self.nvls_counter(c, rank, region, true),
                    flags: CONN_NVLS_MIN_POLL,
                    step_bytes,
                    ..ConnInfo::default()
                },
                None => ConnInfo {
                    offs_fifo: at(rank, self.nvls_region_tables(c, region)),
                    head: at(rank, self.nvls_table(c, region, TABLE_HEAD)),
                    tail: at(rank, self.nvls_table(c, region, TABLE_TAIL)),
                    flags: CONN_NVLS_MIN_POLL,
                    step_bytes,
                    ..ConnInfo::default()
                },
            };
            let mut conns = NvlsConns { down_recv: multicast(Region::Reduce), down_send: multicast(Region::Broadcast), ..NvlsConns::default() };
            for h in 0..n {
                conns.up_send[h as usize] = unicast(h, Region::Reduce);
                conns.up_recv[h as usize] = unicast(h, Region::Broadcast);
            }
            put(self.nvls_conns + u64::from(c) * size_of::<NvlsConns>() as u64, conns.as_bytes());
            if hardware.is_some() {
                continue;
            }
            for region in [Region::Reduce, Region::Broadcast] {
                let table = |word: &dyn Fn(u32) -> u64| {
                    let mut t = SwMulticastTable { npeers: n, ..SwMulticastTable::default() };
                    for p in 0..n {
                        t.peers[p as usize] = word(p);
                    }
                    t
                };
                for slot in 0..NCCL_STEPS {
                    let t = table(&|p| at(p, self.nvls_fifo(c, rank, region)) + slot * step_bytes);
                    put(self.nvls_table(c, region, slot), t.as_bytes());
                    put(self.nvls_region_tables(c, region) + 8 * slot, at(rank, self.nvls_table(c, region, slot)).as_bytes());
                }
                put(self.nvls_table(c, region, TABLE_HEAD), table(&|p| at(p, self.nvls_counter(c, rank, region, false))).as_bytes());
                put(self.nvls_table(c, region, TABLE_TAIL), table(&|p| at(p, self.nvls_counter(c, rank, region, true))).as_bytes());
            }
        }
    }

    /// What the communicator has for the one-shot/two-shot algorithms.
    pub fn staging(&self) -> Staging {
        self.shape.staging()
    }

    /// Staging flags of collective channel `channel`, entry `peer` (raised by `peer`).
    fn staging_flag(&self, channel: u32, peer: u32) -> u64 {
        self.staging_flags + u64::from(channel) * flags_bytes(u64::from(self.shape.nranks)) + 8 * u64::from(peer)
    }

    /// The two staging buffers of collective channel `channel`.
    fn staging_buffers(&self, channel: u32) -> u64 {
        self.staging + u64::from(channel) * 2 * self.slot_bytes
    }

    /// The packet region of collective channel `channel`.
    fn packet_region(&self, channel: u32) -> u64 {
        self.packets + u64::from(channel) * packet_region_bytes(self.shape.nranks)
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

    #[cfg(any(test, feature = "testing"))]
    /// The first `meta_bytes` of rank `rank`'s block, given every rank's block address:
    /// its `CommDevice` (at offset 0), its connection ends wired to its peers' blocks,
    /// and zeroed counters. The ring is the ranks in order.
    pub fn image(&self, rank: u32, bases: &[u64]) -> Result<Vec<u8>> {
        self.image_on_heap(rank, bases, 0)
    }

    /// As [`Layout::image`], for a communicator on a symmetric heap: `heap` is the address
    /// of rank `rank`'s `ShmemHandle` (PE `rank` of a heap of `nranks` PEs; 0: none).
    pub fn image_on_heap(&self, rank: u32, bases: &[u64], heap: u64) -> Result<Vec<u8>> {
        if self.shape.nvls_multicast {
            return Err(Error::InvalidArgument("NVLS regions in multicast memory: the image needs the object's addresses (`image_with_multicast`)".into()));
        }
        self.image_with(rank, bases, heap, None)
    }

    #[cfg(any(test, feature = "testing"))]
    /// As [`Layout::image`], for a shape whose NVLS regions live in a multicast object
    /// ([`Shape::nvls_multicast`]): `share` is rank `rank`'s unicast share of the object
    /// (its [`Layout::nvls_multicast_bytes`] bound to the object, mapped on its device) and
    /// the object's multicast address on its device.
    pub fn image_with_multicast(&self, rank: u32, bases: &[u64], share: MulticastShare) -> Result<Vec<u8>> {
        if !self.shape.nvls_multicast {
            return Err(Error::InvalidArgument("a multicast share for a shape whose NVLS regions are not in multicast memory".into()));
        }
        self.image_with(rank, bases, 0, Some(share))
    }

    fn image_with(&self, rank: u32, bases: &[u64], heap: u64, multicast: Option<MulticastShare>) -> Result<Vec<u8>> {
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
        comm.algorithm = s.algorithm as u32;
        comm.heap = heap;
        if self.slot_bytes > 0 {
            comm.staging = at(rank, self.staging_conns);
            comm.staging_slot_bytes = self.slot_bytes;
        }
        if s.nvls() {
            comm.nvls = at(rank, self.nvls_conns);
        }
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
        if s.nvls() {
            self.nvls_image(&mut image, rank, at, multicast);
        }
        if self.slot_bytes > 0 {
            for c in 0..s.collective_channels() {
                let mut conns = StagingConns { flags: at(rank, self.staging_flag(c, 0)), ..StagingConns::default() };
                for p in 0..n {
                    conns.staging[p as usize] = at(p, self.staging_buffers(c));
                    conns.packets[p as usize] = at(p, self.packet_region(c));
                    if p != rank {
                        conns.signal[p as usize] = at(p, self.staging_flag(c, rank));
                    }
                }
                let size = size_of::<StagingConns>();
                let off = self.staging_conns as usize + c as usize * size;
                image[off..off + size].copy_from_slice(conns.as_bytes());
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
        Shape {
            nranks,
            nchannels,
            ring_step_bytes: 8192,
            p2p_step_bytes: 4096,
            direct: true,
            stats: true,
            paired: false,
            staging_bytes: 10_000,
            algorithm: AlgorithmChoice::Auto,
            nvls_multicast: false,
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        let one_shot = |nranks, staging_bytes| Shape { algorithm: AlgorithmChoice::OneShot, staging_bytes, ..shape(nranks, 2) };
        for bad in [
            shape(0, 1),
            shape(33, 1),
            shape(2, 0),
            shape(2, 65),
            Shape { ring_step_bytes: 100, ..shape(2, 1) },
            Shape { paired: true, ..shape(2, 3) },
            Shape { staging_bytes: (1 << 30) + 1, ..shape(2, 1) },
            one_shot(9, 1 << 20),
            one_shot(2, 0),
            Shape { algorithm: AlgorithmChoice::TwoShot, staging_bytes: 0, ..shape(3, 2) },
        ] {
            assert!(matches!(Layout::new(bad), Err(Error::InvalidArgument(_))), "{bad:?}");
        }
        assert!(Layout::new(one_shot(1, 0)).is_ok(), "one rank copies locally: nothing to stage");
        assert!(Layout::new(Shape { algorithm: AlgorithmChoice::Ring, ..one_shot(9, 0) }).is_ok());
    }

    /// Every rank finds every rank's staging buffers where their owner has them, raises
    /// its flags where each peer polls them, and the staging lies in the block, apart
    /// from everything else; none is laid out where the one-shot/two-shot algorithms cannot
    /// run.
    #[test]
    fn staging_flags_meet_their_peers_and_buffers_fit_the_block() {
        let paired = Shape { paired: true, ..shape(3, 4) };
        let layout = Layout::new(paired).unwrap();
        assert_eq!(layout.staging(), Staging { nranks: 3, channels: 2, slot_bytes: 8192 }, "10 000 bytes over 2 channels, 4 KiB rounded");
        let wide = Layout::new(Shape { nchannels: 64, staging_bytes: 8 << 20, ..shape(2, 4) }).unwrap().staging();
        assert_eq!((wide.channels, wide.shot_channels()), (64, 63), "one-shot/two-shot plans keep to 63 of 64 channels");
        let held = wide.slot_bytes * u64::from(wide.shot_channels());
        assert!((8 << 20..(8 << 20) + 63 * STEP_ALIGN).contains(&held), "whose buffers hold the staging bytes, each rounded up: {held}");
        let bases: Vec<u64> = (0..3).map(|r| 0x1_0000_0000 * (r + 1)).collect();
        let images: Vec<Vec<u8>> = (0..3).map(|r| layout.image_on_heap(r, &bases, 0x7000 + r as u64).unwrap()).collect();
        let comm = |r: usize| CommDevice::read_from_prefix(&images[r]).unwrap().0;
        assert_eq!((0..3).map(|r| comm(r).heap).collect::<Vec<_>>(), [0x7000, 0x7001, 0x7002], "each rank's heap handle");
        let conns = |r: usize, c: u64| {
            let at = (comm(r).staging - bases[r]) as usize + c as usize * size_of::<StagingConns>();
            StagingConns::read_from_prefix(&images[r][at..]).unwrap().0
        };
        for r in 0..3usize {
            assert_eq!((comm(r).staging_slot_bytes, comm(r).algorithm), (8192, AlgorithmChoice::Auto as u32));
            for c in 0..2 {
                let mine = conns(r, c);
                assert!(mine.flags >= bases[r] + layout.staging_flags && mine.flags + 3 * 40 <= bases[r] + layout.stats, "flags, both parities' descriptors and outputs");
                if c == 1 {
                    assert!(conns(r, 0).flags + 3 * 40 <= mine.flags, "channel 0's outputs end before channel 1's flags");
                }
                for (p, base) in bases.iter().enumerate() {
                    let theirs = conns(p, c);
                    assert_eq!(mine.staging[p], theirs.staging[p], "rank {r} reads rank {p}'s buffers where {p} writes them");
                    assert!(mine.staging[p] >= base + layout.meta_bytes && mine.staging[p] + 2 * 8192 <= base + layout.block_bytes);
                    assert_eq!(mine.staging[p] % 4096, 0);
                    assert_eq!(mine.packets[p], theirs.packets[p], "rank {r} writes rank {p}'s packets where {p} reads them");
                    assert!(mine.packets[p] >= mine.staging[p] + 2 * 8192 && mine.packets[p] + packet_region_bytes(3) <= base + layout.block_bytes);
                    assert_eq!(mine.packets[p] % 16, 0);
                    if p == r {
                        assert_eq!(mine.signal[p], 0);
                    } else {
                        assert_eq!(mine.signal[p], theirs.flags + 8 * r as u64, "rank {r} raises entry {r} of rank {p}'s flags");
                    }
                }
                assert_eq!(mine.epoch, 0);
            }
        }
        assert_eq!(conns(0, 1).staging[0] - conns(0, 0).staging[0], 2 * 8192, "two buffers per channel");
        assert_eq!(conns(0, 1).packets[0] - conns(0, 0).packets[0], packet_region_bytes(3), "a packet region per channel");
        assert_eq!(layout.staging_buffers(2), layout.packet_region(0), "the packet regions follow the staging");
        assert_eq!(layout.packet_region(2), layout.block_bytes, "and end the block");
        for no_staging in [shape(1, 2), shape(9, 2), Shape { staging_bytes: 0, ..shape(3, 2) }] {
            let layout = Layout::new(no_staging).unwrap();
            let image = layout.image(0, &bases[..1].iter().copied().cycle().take(no_staging.nranks as usize).collect::<Vec<_>>()).unwrap();
            assert_eq!(CommDevice::read_from_prefix(&image).unwrap().0.staging, 0, "{no_staging:?}");
            assert_eq!(layout.staging().slot_bytes, 0);
            assert_eq!(layout.staging_buffers(0), layout.block_bytes, "no staging bytes");
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
        assert_eq!(layout.p2p_fifo(1, 2) + NCCL_STEPS * 4096, layout.staging, "the staging follows the FIFOs");
    }

    /// NVLS as `ncclNvlsSetup` wires it: every rank's scatter end to head `h` is its own
    /// reduce region of `h`, which head `h`'s multicast tables list at the rank's place
    /// (each slot, the tail it polls, the head it posts); the same for the broadcast
    /// regions and the gather ends; the multicast ends are flagged, unicast ones not; the
    /// regions lie in the block apart from each other; nothing is laid out without NVLS.
    #[test]
    fn nvls_ends_meet_their_heads_multicast_tables() {
        let n = 3u32;
        let layout = Layout::new(Shape { algorithm: AlgorithmChoice::Nvls, ..shape(n, 2) }).unwrap();
        let step = layout.shape.nvls_step_bytes();
        assert_eq!(step, 8192, "the ring's step, under 128 KiB");
        let bases: Vec<u64> = (0..n as u64).map(|r| 0x1_0000_0000 * (r + 1)).collect();
        let images: Vec<Vec<u8>> = (0..n).map(|r| layout.image(r, &bases).unwrap()).collect();
        let read = |r: usize, addr: u64| &images[r][(addr - bases[r]) as usize..];
        let conns = |r: usize, c: u64| {
            let comm = CommDevice::read_from_prefix(&images[r]).unwrap().0;
            NvlsConns::read_from_prefix(read(r, comm.nvls + c * size_of::<NvlsConns>() as u64)).unwrap().0
        };
        let table = |r: usize, addr: u64| SwMulticastTable::read_from_prefix(read(r, addr)).unwrap().0;
        let word = |r: usize, addr: u64| u64::read_from_prefix(read(r, addr)).unwrap().0;
        let mut regions = Vec::new();
        for c in 0..2 {
            for h in 0..n as usize {
                let head = conns(h, c);
                type UpEnd = fn(&NvlsConns, usize) -> ConnInfo;
                let ends: [(ConnInfo, UpEnd); 2] = [(head.down_recv, |x, h| x.up_send[h]), (head.down_send, |x, h| x.up_recv[h])];
                for (down, up) in ends {
                    assert_eq!((down.flags, down.buff, down.step_bytes), (CONN_NVLS_MIN_POLL, 0, step));
                    let (tails, heads) = (table(h, down.tail), table(h, down.head));
                    assert_eq!((tails.npeers, heads.npeers), (n, n));
                    for (r, &base) in bases.iter().enumerate() {
                        let mine = up(&conns(r, c), h);
                        assert_eq!((mine.flags, mine.offs_fifo, mine.step_bytes), (0, 0, step));
                        assert_eq!((tails.peers[r], heads.peers[r]), (mine.tail, mine.head), "rank {r}'s words of head {h}'s region, in rank order");
                        for slot in 0..NCCL_STEPS {
                            let handle = word(h, down.offs_fifo + 8 * slot);
                            assert_eq!(table(h, handle).peers[r], mine.buff + slot * step, "slot {slot} of rank {r}'s region");
                        }
                        assert!(mine.buff >= base + layout.meta_bytes && mine.buff + NCCL_STEPS * step <= base + layout.block_bytes);
                        assert!(mine.head >= base + layout.stats && mine.tail + LINE <= base + layout.meta_bytes);
                        regions.extend([mine.buff, mine.head, mine.tail]);
                    }
                }
            }
        }
        let count = regions.len();
        regions.sort();
        regions.dedup();
        assert_eq!(regions.len(), count, "every region and word is one rank's, of one head and channel");
        for no_nvls in [shape(3, 2), Shape { algorithm: AlgorithmChoice::Nvls, ..shape(1, 2) }] {
            let layout = Layout::new(no_nvls).unwrap();
            let image = layout.image(0, &bases[..no_nvls.nranks as usize]).unwrap();
            assert_eq!(CommDevice::read_from_prefix(&image).unwrap().0.nvls, 0, "{no_nvls:?}");
            assert_eq!(layout.nvls_fifos, layout.block_bytes, "no NVLS memory");
        }
        assert!(matches!(Layout::new(Shape { algorithm: AlgorithmChoice::Nvls, ..shape(9, 2) }), Err(Error::InvalidArgument(_))));
    }

    /// Hardware NVLS: the software twin's ends, with the regions in each rank's share of a
    /// multicast object instead of the block. Every unicast end lies in the rank's own
    /// share, at the offset every rank uses for that head's region (so the object's
    /// multicast address reaches all of them), and the head's multicast end names that
    /// offset behind its multicast address, flagged for min-polling and with no tables;
    /// regions and words never overlap; the regions keep the twin's order; the block holds
    /// none of them; a shape and its image must agree on where the regions are.
    #[test]
    fn hardware_nvls_ends_point_into_the_multicast_object() {
        let (n, nch) = (4u32, 2u32);
        let sw = Layout::new(Shape { algorithm: AlgorithmChoice::Nvls, ..shape(n, nch) }).unwrap();
        let hw = Layout::new(Shape { algorithm: AlgorithmChoice::Nvls, nvls_multicast: true, ..shape(n, nch) }).unwrap();
        let (share_bytes, step) = (hw.nvls_multicast_bytes(), hw.shape.nvls_step_bytes());
        let fifo_bytes = u64::from(nch * n) * 2 * NCCL_STEPS * step;
        assert_eq!(sw.nvls_multicast_bytes(), 0);
        assert!(share_bytes >= fifo_bytes + u64::from(nch * n) * 4 * LINE && share_bytes.is_multiple_of(STEP_ALIGN));
        assert!(hw.block_bytes + fifo_bytes <= sw.block_bytes, "no NVLS region in the block");
        let bases: Vec<u64> = (0..u64::from(n)).map(|r| 0x1_0000_0000 * (r + 1)).collect();
        let shares: Vec<MulticastShare> =
            (0..u64::from(n)).map(|r| MulticastShare { unicast: 0x90_0000_0000 + 0x1_0000_0000 * r, multicast: 0xa0_0000_0000 + 0x1_0000_0000 * r }).collect();
        let conns = |image: &[u8], base: u64, c: u64| {
            let comm = CommDevice::read_from_prefix(image).unwrap().0;
            assert_ne!(comm.nvls, 0);
            NvlsConns::read_from_prefix(&image[(comm.nvls - base) as usize + c as usize * size_of::<NvlsConns>()..]).unwrap().0
        };
        let hw_images: Vec<Vec<u8>> = (0..n).map(|r| hw.image_with_multicast(r, &bases, shares[r as usize]).unwrap()).collect();
        let sw_images: Vec<Vec<u8>> = (0..n).map(|r| sw.image(r, &bases).unwrap()).collect();
        let mut spans = Vec::new();
        for c in 0..u64::from(nch) {
            for r in 0..n as usize {
                let (mine, twin) = (conns(&hw_images[r], bases[r], c), conns(&sw_images[r], bases[r], c));
                let own = |addr: u64| {
                    assert!((shares[r].unicast..shares[r].unicast + share_bytes).contains(&addr), "rank {r}: {addr:#x} outside its share");
                    addr - shares[r].unicast
                };
                for h in 0..n as usize {
                    let head = conns(&hw_images[h], bases[h], c);
                    type Ends = fn(&NvlsConns, usize) -> (ConnInfo, ConnInfo);
                    let pairs: [Ends; 2] = [|x, h| (x.up_send[h], x.down_recv), |x, h| (x.up_recv[h], x.down_send)];
                    for pair in pairs {
                        let (up, down, twin_up) = (pair(&mine, h).0, pair(&head, h).1, pair(&twin, h).0);
                        assert_eq!((up.flags, up.offs_fifo, up.step_bytes), (0, 0, step));
                        assert_eq!((down.flags, down.offs_fifo, down.step_bytes), (CONN_NVLS_MIN_POLL, 0, step));
                        let behind = |addr: u64| addr - shares[h].multicast;
                        assert_eq!((own(up.buff), own(up.head), own(up.tail)), (behind(down.buff), behind(down.head), behind(down.tail)), "rank {r}, head {h}, channel {c}");
                        assert_eq!(own(up.buff) - hw.nvls_fifos, twin_up.buff - bases[r] - sw.nvls_fifos, "the twin's order of regions");
                        assert!(own(up.buff) + NCCL_STEPS * step <= share_bytes);
                        if r == 0 {
                            spans.extend([(own(up.buff), NCCL_STEPS * step), (own(up.head), 8), (own(up.tail), 8)]);
                        }
                    }
                }
            }
        }
        spans.sort();
        assert_eq!(spans.len() as u64, u64::from(nch * n) * 2 * 3);
        assert!(spans.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0), "regions and words overlap");
        assert!(matches!(hw.image(0, &bases), Err(Error::InvalidArgument(_))), "a multicast shape's image needs the object");
        assert!(matches!(sw.image_with_multicast(0, &bases, shares[0]), Err(Error::InvalidArgument(_))));
        assert!(matches!(Layout::new(Shape { nvls_multicast: true, ..shape(n, nch) }), Err(Error::InvalidArgument(_))), "multicast regions without NVLS");
    }
}