//! The LL path's plan (`ll`): which small collectives it takes and how they spread over
//! the call channels. Pure arithmetic over the call and the communicator, without the
//! device: the call kernel plans with it, and the host asks it of its own copy of the
//! communicator (`work::runs_without_loop`).

use super::function::CollFunction;
use super::select::div_ceil_narrow;
use crate::conn::{CommDevice, MAX_SHOT_RANKS, PACKET_SHARE_BYTES};
use crate::dtype::DataType;
use crate::redop::RedOpKind;

/// The most bytes an LL collective takes, counted as the one-shot/two-shot plans count size
/// (the largest buffer of one rank: all-gather's output, reduce-scatter's input). Up to
/// it an all-reduce on two ranks beats the one-shot path (a thread's lines past its first
/// go in batches: `send_rest`, `receive_rest`). At 1 MiB a 256-thread default
/// communicator's 63 call channels take 57 CTAs of 2304 lines (nine a thread), which 20 KiB
/// packet shares hold (`PACKET_SHARE_BYTES`). Measured on two ranks of one GPU, not yet
/// across two GPUs: see docs/tuning.md, `LL_MAX_BYTES`. All-gather and reduce-scatter go
/// further: see [`LL_GATHER_SCATTER_MAX_BYTES`]; an all-reduce on more than two ranks
/// stops sooner: see [`LL_ALL_REDUCE_MAX_BYTES_OVER_TWO`].
pub const LL_MAX_BYTES: u64 = 1 << 20;

/// The most bytes an LL all-reduce takes on more than two ranks: there the one-shot,
/// which pushes, is faster at 512 KiB and draws at 256 KiB, which LL keeps; on two ranks
/// LL stays ahead (see docs/tuning.md, `LL_ALL_REDUCE_MAX_BYTES_OVER_TWO`).
pub const LL_ALL_REDUCE_MAX_BYTES_OVER_TWO: u64 = 256 << 10;

/// The most bytes an LL all-gather or reduce-scatter takes on more than two ranks,
/// counted as [`LL_MAX_BYTES`]; on two, twice that ([`ll_max_bytes`]), where a rank's
/// 1 MiB block spreads as a 1 MiB all-reduce does. Up to these sizes LL beats the
/// one-shot path (see docs/tuning.md, `LL_GATHER_SCATTER_MAX_BYTES`).
pub const LL_GATHER_SCATTER_MAX_BYTES: u64 = 1 << 20;

/// The most bytes (as [`LL_MAX_BYTES`] counts them) an LL `function` takes on
/// `nranks` ranks: all-gather and reduce-scatter 2 MiB on two ranks and 1 MiB on more,
/// all-reduce 1 MiB on two ranks and 256 KiB on more.
pub const fn ll_max_bytes(function: CollFunction, nranks: u32) -> u64 {
    match function {
        CollFunction::AllGather | CollFunction::ReduceScatter if nranks == 2 => 2 * LL_GATHER_SCATTER_MAX_BYTES,
        CollFunction::AllGather | CollFunction::ReduceScatter => LL_GATHER_SCATTER_MAX_BYTES,
        _ if nranks > 2 => LL_ALL_REDUCE_MAX_BYTES_OVER_TWO,
        _ => LL_MAX_BYTES,
    }
}

/// How an LL collective spreads: `ctas` CTAs of the call kernel from its first call
/// channel, CTA `g` owning lines `[g × lines_per_cta, (g + 1) × lines_per_cta)` of every
/// block, its thread `t` lines `t, t + nthreads, …` of that run, on channel `first + g`
/// with that channel's epoch and packet region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LlPlan {
    pub ctas: u32,
    pub lines_per_cta: u64,
}

impl LlPlan {
    /// CTA `g`'s lines of every block of `call` (the last CTA's run may be shorter).
    pub fn lines(&self, g: u32, call: &LlCall) -> core::ops::Range<u64> {
        let start = u64::from(g) * self.lines_per_cta;
        start..(start + self.lines_per_cta).min(call.bytes().div_ceil(8))
    }
}

/// How an LL `function` of `count` elements of `elt` bytes spreads on a communicator of
/// `nranks` ranks over at most `channels` channels of CTAs of `nthreads` threads, where
/// it may: an all-reduce, all-gather or reduce-scatter of 1 to [`ll_max_bytes`] (as the
/// one-shot/two-shot plans count size) whose lines fit. Each thread takes as few lines as
/// the channels allow (one where they hold one line a thread), each CTA at most what its
/// slot of a packet region holds (`PACKET_SHARE_BYTES`). 32-bit arithmetic over the
/// call's shape: the same answer on every rank of a call, and the test kit's
/// expectation.
pub fn ll_runs(function: CollFunction, elt: u64, count: u64, nranks: u32, channels: u32, nthreads: u32) -> Option<LlPlan> {
    let block = count.checked_mul(elt)?;
    let largest = match function {
        CollFunction::AllReduce => Some(block),
        CollFunction::AllGather | CollFunction::ReduceScatter => block.checked_mul(u64::from(nranks)),
        _ => None,
    }?;
    if count == 0 || largest > ll_max_bytes(function, nranks) || channels == 0 || nthreads == 0 {
        return None;
    }
    let lines = block.div_ceil(8);
    let per_thread = div_ceil_narrow(lines, u64::from(channels) * u64::from(nthreads));
    let lines_per_cta = (per_thread * u64::from(nthreads)).min(PACKET_SHARE_BYTES / 8);
    let ctas = div_ceil_narrow(lines, lines_per_cta);
    (ctas <= u64::from(channels)).then_some(LlPlan { ctas: ctas as u32, lines_per_cta })
}

/// A small collective the LL path runs.
#[derive(Clone, Copy, Debug)]
pub struct LlCall {
    /// All-reduce, all-gather or reduce-scatter.
    pub function: CollFunction,
    pub dtype: DataType,
    pub op: RedOpKind,
    /// The operator's argument.
    pub arg: u64,
    pub input: u64,
    pub output: u64,
    /// NCCL's count (all-gather's send count, reduce-scatter's receive count), `1..`.
    pub count: u64,
}

impl LlCall {
    /// Bytes of one rank's block: the line range every rank exchanges.
    pub(super) fn bytes(&self) -> u64 {
        self.count * self.dtype.size() as u64
    }
}

/// What the LL path reads of the rank's communicator, loaded at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LlComm {
    pub rank: u32,
    pub nranks: u32,
    pub nchannels: u32,
    pub pairs: u32,
    pub algorithm: u32,
    pub staging: u64,
    pub stats: u64,
}

impl LlComm {
    /// Loads the fields of `comm` with volatile loads, issued back to back before any of
    /// them is tested, so that they cost one memory latency: plain loads of them behind
    /// the choice's early returns went out one after another (the call kernel's SASS; see
    /// docs/tuning.md, `LlComm::load`).
    ///
    /// # Safety
    /// `comm` is a valid `CommDevice` that nothing writes while the kernel runs.
    pub unsafe fn load(comm: *const CommDevice) -> Self {
        // SAFETY: fields of a valid `CommDevice` (this function's contract), aligned.
        unsafe {
            Self {
                rank: (&raw const (*comm).rank).read_volatile(),
                nranks: (&raw const (*comm).nranks).read_volatile(),
                nchannels: (&raw const (*comm).nchannels).read_volatile(),
                pairs: (&raw const (*comm).pairs).read_volatile(),
                algorithm: (&raw const (*comm).algorithm).read_volatile(),
                staging: (&raw const (*comm).staging).read_volatile(),
                stats: (&raw const (*comm).stats).read_volatile(),
            }
        }
    }
}

/// How `call` runs as an LL collective from channel `first` on with CTAs of `nthreads`
/// threads, when it can: the communicator has 2 to `MAX_SHOT_RANKS` ranks with staging
/// (every channel with staging has a packet region) and unpaired channels, its buffers are
/// element-aligned, and [`ll_runs`] spreads it over the channels from `first` on.
pub fn ll_plan(comm: &LlComm, first: u32, nthreads: u32, call: &LlCall) -> Option<LlPlan> {
    let elt = call.dtype.size() as u64;
    let aligned = (call.input | call.output) & (elt - 1) == 0 && call.input != 0 && call.output != 0;
    let shape = comm.staging != 0 && comm.pairs == 0 && (2..=MAX_SHOT_RANKS as u32).contains(&comm.nranks);
    if !shape || !aligned {
        return None;
    }
    ll_runs(call.function, elt, call.count, comm.nranks, comm.nchannels.checked_sub(first)?, nthreads)
}
