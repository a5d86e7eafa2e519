//! What a communicator is built with, in full: every tunable of its loops, connections
//! and staging. Users set [`CommConfig`](super::CommConfig) and the `FERROCCL_*`
//! variables ([`CommConfig::tuning`](super::CommConfig)); tests and benchmarks, with the
//! `testing` feature, build communicators from a [`Tuning`] directly.

use std::time::Duration;

use device_rt::algo::AlgorithmChoice;

use super::wiring::Shape;
use crate::work::{LoopConfig, Placement};

/// How a communicator is built.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Each rank's work loop: resident and call channels, threads per channel (a
    /// multiple of 32, at least 128), queue slots, spin budget. The default is 64
    /// channels × 256 threads, of which 1 is resident and 63 are call channels (fewer where
    /// a device holds fewer for its ranks, [`Tuning::fit_call_channels`]): an idle
    /// communicator holds one CTA of its GPU. Call channels come up only with the calls
    /// that spread over them, so more of them cost an idle GPU nothing, and large calls
    /// move more with 64 channels than with 48 or 24. A resident channel costs the GPU's
    /// other work whatever it does; call channels cost a call a little more time (they
    /// start and leave with it). Direct-path items run on the resident channels alone.
    /// 256 threads: a loop wider than 256 threads is capped below 255 registers a thread
    /// (128 at 512) and its protocol code spills, which makes small calls slower. Figures:
    /// see docs/tuning.md, `Tuning::loop_cfg`.
    pub loop_cfg: LoopConfig,
    /// Bytes per FIFO step of the ring connections (NCCL: 512 KiB). ferroccl's default,
    /// 256 KiB, makes the ring's large reduce_scatters faster than 1 MiB steps and keeps
    /// the other collectives within a few per cent (see docs/tuning.md,
    /// `Tuning::ring_step_bytes`).
    pub ring_step_bytes: u64,
    /// Bytes per FIFO step of the point-to-point connections.
    pub p2p_step_bytes: u64,
    /// Peers write straight into a rank's output where its call found the output mapped
    /// for them ([`BufferInfo::peer_mapped`]): ring senders where the algorithm allows
    /// (NCCL's direct operations), and two-shot all-reduce's reduced blocks; elsewhere,
    /// and everywhere when false, through the FIFO or the staging. On by default.
    pub direct: bool,
    /// Every channel keeps statistics of where its time goes ([`Comm::channel_stats`]).
    pub stats: bool,
    /// The loop's channels work in pairs ([`Shape::paired`]): every function runs on the
    /// first half of `loop_cfg.channels`; a reduce-scatter on two ranks sends on the first
    /// half and receives and reduces on the second, each on its own SMs.
    pub paired: bool,
    /// Bytes of staging per rank for the one-shot/two-shot algorithms (twice
    /// this is allocated: calls alternate between two buffers): the largest call they
    /// run (all_reduce and all_gather: the input's bytes; reduce_scatter: the whole
    /// input's). 0: none, every collective runs on the ring.
    pub staging_bytes: u64,
    /// The algorithm of every collective: the device's choice by size and rank count
    /// (`Auto`), or one forced (tests, benchmarks). A call the forced algorithm cannot
    /// run (larger than the staging, or a function without that algorithm) is refused
    /// before anything is enqueued ([`Error::AlgorithmUnfit`]).
    pub algorithm: AlgorithmChoice,
    /// `loop_cfg.call_channels` is a most: where a device cannot hold that many call
    /// channels for each of its ranks at once (beside the resident ones and a call kernel's
    /// submitter per rank), every rank gets the most that every device holds. `false`: a
    /// count that does not fit is refused ([`Error::DeviceLimit`]).
    pub fit_call_channels: bool,
}

impl Tuning {
    #[cfg(feature = "testing")]
    /// What [`Comm::from_devices`](super::Comm::from_devices) builds with: the defaults
    /// under the `FERROCCL_*` environment variables.
    pub fn from_env() -> crate::Result<Self> {
        super::CommConfig::from_env()?.tuning()
    }

    /// The shape of the connections and staging of a communicator of `nranks` ranks
    /// built with this configuration.
    pub fn shape(&self, nranks: u32) -> Shape {
        Shape {
            nranks,
            nchannels: self.loop_cfg.channels + self.loop_cfg.call_channels,
            ring_step_bytes: self.ring_step_bytes,
            p2p_step_bytes: self.p2p_step_bytes,
            direct: self.direct,
            stats: self.stats,
            paired: self.paired,
            staging_bytes: self.staging_bytes,
            algorithm: self.algorithm,
            nvls_multicast: false,
        }
    }

    /// The placement of the channels of a rank whose device (of `device_sms` SMs) hosts
    /// `ranks_on_device` ranks: the configured one for a rank alone on its device; the
    /// hardware's when several share it (their loops would ask for the same SMs), or when
    /// the device has too few SMs for one channel per TPC.
    pub fn placement_on(&self, ranks_on_device: usize, device_sms: u32) -> Placement {
        match self.loop_cfg.placement {
            _ if ranks_on_device > 1 => Placement::Hardware,
            Placement::Tpcs if Placement::Tpcs.sms(self.loop_cfg.channels, device_sms).is_err() => Placement::Hardware,
            configured => configured,
        }
    }
}

/// How long the default communicator's loop (one resident channel) polls with nothing
/// to do before it leaves the GPU until the next call (see [`LoopConfig::sleep_after`]).
pub const SLEEP_AFTER: Duration = Duration::from_millis(1);

impl Default for Tuning {
    fn default() -> Self {
        Self {
            loop_cfg: LoopConfig {
                channels: 1,
                call_channels: 63,
                threads: 256,
                resident_threads: 0,
                capacity: 1024,
                spin_budget: Duration::from_secs(10),
                placement: Placement::Tpcs,
                sleep_after: Some(SLEEP_AFTER),
                burst_gap: crate::work::BURST_GAP,
            },
            ring_step_bytes: 256 << 10,
            p2p_step_bytes: 128 << 10,
            direct: true,
            stats: false,
            paired: false,
            staging_bytes: 48 << 20,
            algorithm: AlgorithmChoice::Auto,
            fit_call_channels: true,
        }
    }
}
