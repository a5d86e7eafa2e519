//! Which algorithm runs a collective, and on how many channels: [NCCL]'s ring, the
//! one-shot/two-shot algorithms of [vLLM's custom all-reduce][vllm], or NCCL's NVLS
//! (forced only).
//! The size thresholds are one table, [`THRESHOLDS`]; [`plan`] applies it.
//!
//! Always compiled (also without `arch`): the device's dispatch chooses with [`plan`], and
//! the host refuses with the same function, before enqueueing it, a call that the
//! communicator's forced algorithm cannot run. Pure arithmetic over what every rank of a
//! collective shares (the function, the element size, the count, the communicator's
//! shape), so every rank makes the same plan and the same channels take part. Nothing
//! here moves data, and nothing imports from above `algo`.
//!
//! [NCCL]: https://github.com/NVIDIA/nccl
//! [vllm]: https://github.com/vllm-project/vllm/blob/main/csrc/custom_all_reduce.cuh

use super::function::CollFunction;
use crate::conn::{MAX_NVLS_ARITY, MAX_SHOT_RANKS};

/// An algorithm that runs collectives.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// NCCL's ring, through the step FIFOs of each channel's connections: every function,
    /// any size, any rank count.
    Ring = 0,
    /// Every rank copies its input into its staging buffer (broadcast: the root alone),
    /// then reads what every rank staged, straight from the peers' memory: all-reduce
    /// reduces all of it, all-gather copies it, reduce-scatter reduces its own block,
    /// broadcast copies the root's, reduce reduces all of it on the root.
    OneShot = 1,
    /// All-reduce in two steps: every rank reduces its block of what every rank staged
    /// (into its own staging), then copies every peer's reduced block.
    TwoShot = 2,
    /// NCCL's NVLS for all-reduce, reduce-scatter and all-gather: every rank is
    /// a head; a scatter group sends each head its block, each head's reduce group
    /// load-reduces its block from every rank's copy through multicast and (all-reduce)
    /// stores the result to every rank through multicast, and a gather group copies every
    /// head's result out. On our GPUs the multicast is the software twin (loops over the
    /// peers' memory), which moves every byte through such loops and is slower than the
    /// ring and the one-shot/two-shot algorithms: the device never picks it by size, only
    /// when forced.
    Nvls = 3,
}

numbering!(Algorithm, u32, from_u32, [Ring, OneShot, TwoShot, Nvls]);

impl Algorithm {
    /// The name used on command lines and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Ring => "ring",
            Self::OneShot => "one-shot",
            Self::TwoShot => "two-shot",
            Self::Nvls => "nvls",
        }
    }

    /// True for the one-shot/two-shot algorithms: those that take
    /// [`Plan::channels`] channels and exchange staging flags.
    pub const fn is_shot(self) -> bool {
        matches!(self, Self::OneShot | Self::TwoShot)
    }
}

/// What a communicator asks for: the device's choice by size, or one algorithm for
/// every collective that has it (tests, benchmarks). Point-to-point, and every function
/// on a one-rank communicator, have one way only and ignore it.
#[repr(u32)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AlgorithmChoice {
    /// The device picks by function, size and rank count ([`THRESHOLDS`]).
    #[default]
    Auto = 0,
    /// The ring for every collective.
    Ring = 1,
    /// One-shot for every collective.
    OneShot = 2,
    /// Two-shot for all_reduce; the other collectives are refused.
    TwoShot = 3,
    /// NVLS for all_reduce, reduce_scatter and all_gather (2 to [`MAX_NVLS_ARITY`]
    /// ranks); the other collectives are refused. The communicator then has NVLS
    /// connections (none otherwise).
    Nvls = 4,
}

numbering!(AlgorithmChoice, u32, from_u32, [Auto, Ring, OneShot, TwoShot, Nvls]);

impl AlgorithmChoice {
    /// The algorithm forced, if any.
    pub const fn forced(self) -> Option<Algorithm> {
        match self {
            Self::Auto => None,
            Self::Ring => Some(Algorithm::Ring),
            Self::OneShot => Some(Algorithm::OneShot),
            Self::TwoShot => Some(Algorithm::TwoShot),
            Self::Nvls => Some(Algorithm::Nvls),
        }
    }

    /// The name used on command lines and in reports.
    pub const fn name(self) -> &'static str {
        match self.forced() {
            None => "auto",
            Some(a) => a.name(),
        }
    }
}

/// What a communicator has for the one-shot/two-shot algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Staging {
    /// Ranks in the communicator.
    pub nranks: u32,
    /// Channels a collective may spread over (the first half of paired channels).
    pub channels: u32,
    /// Bytes of one of a channel's two staging buffers; 0: the communicator has none.
    pub slot_bytes: u64,
}

impl Staging {
    /// True when the one-shot/two-shot algorithms can run: staging buffers, and 2 to
    /// [`MAX_SHOT_RANKS`] ranks.
    pub const fn available(&self) -> bool {
        self.slot_bytes > 0 && self.nranks >= 2 && self.nranks as usize <= MAX_SHOT_RANKS
    }

    /// The most channels a one-shot/two-shot plan takes: `channels`, at most
    /// [`Thresholds::shot_channels_max`].
    pub const fn shot_channels(&self) -> u32 {
        shot_channels(self.channels)
    }
}

/// Of `channels` a collective may spread over, the most a one-shot/two-shot plan takes (see
/// [`Thresholds::shot_channels_max`]): what a communicator sizes its staging buffers
/// for, so that they hold its staging bytes.
pub const fn shot_channels(channels: u32) -> u32 {
    if channels < THRESHOLDS.shot_channels_max { channels } else { THRESHOLDS.shot_channels_max }
}

/// How a collective runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub algorithm: Algorithm,
    /// A one-shot/two-shot algorithm: channels `0..channels` take part, channel `c` with
    /// elements `[c × share, (c + 1) × share)` of the count (clipped at the count; every
    /// one of them holds some), and the others skip the collective. The ring: every channel
    /// (on one rank, a local copy, those of [`local_channels`] take part).
    pub channels: u32,
    /// A one-shot/two-shot algorithm: elements of the count per channel, a multiple of 16
    /// bytes.
    pub share: u64,
}

impl Plan {
    /// A one-shot/two-shot plan's first element and element count on `channel`
    /// (`< channels`) of a collective of `count`.
    pub const fn range(&self, channel: u32, count: u64) -> (u64, u64) {
        let begin = channel as u64 * self.share;
        let end = if begin + self.share < count { begin + self.share } else { count };
        (begin, end - begin)
    }
}

/// Two-shot's block in a channel's share of `n` elements of `elt` bytes on `nranks` ranks:
/// `n / nranks` rounded up to whole packs (rank `p` reduces block `p`; the last blocks
/// shorter, or empty).
pub const fn two_shot_block(n: u64, nranks: u32, elt: u64) -> u64 {
    round_up_pow2(div_ceil_narrow(n, nranks as u64), pack_elements(elt))
}

/// True when a one-shot/two-shot collective's channel whose share is `n` elements of `elt`
/// bytes, on `nranks` ranks, has staging room to push (`algo::shot`'s push form): its
/// staging buffer of `slot_bytes` holds what every peer pushes into it. One-shot
/// all-reduce, all-gather and reduce-scatter: a share from each of the `nranks - 1` peers;
/// two-shot all-reduce: a block from each on the way in and a reduced block from each on
/// the way out. Broadcast and reduce never push. Pure arithmetic over what every rank
/// shares, so every rank decides alike for the same channel of the same call; on two ranks
/// every one-shot plan has the room (a share fits a buffer).
pub const fn push_fits(function: CollFunction, algorithm: Algorithm, elt: u64, n: u64, nranks: u32, slot_bytes: u64) -> bool {
    let peers = (nranks as u64).saturating_sub(1);
    let elements = match (function, algorithm) {
        (CollFunction::AllReduce, Algorithm::TwoShot) => 2 * peers * two_shot_block(n, nranks, elt),
        (CollFunction::AllReduce | CollFunction::AllGather | CollFunction::ReduceScatter, Algorithm::OneShot) => peers * n,
        _ => return false,
    };
    elements * elt <= slot_bytes
}

/// The detail of the `LoopError::BadItem` stop of a one-shot/two-shot collective whose
/// ranks' calls differ (their call descriptors, see `shot`):
/// `work::BadItem::RanksDisagree`, which the `work` layer checks equals it (this layer
/// cannot name that enum).
pub const RANKS_DISAGREE: u32 = 19;

/// Why a forced algorithm cannot run a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unfit {
    /// The communicator has no staging buffers: more than [`MAX_SHOT_RANKS`] ranks, or
    /// none were asked for.
    NoStaging,
    /// Not an algorithm of this function: two-shot is all_reduce's alone; NVLS is
    /// all_reduce's, reduce_scatter's and all_gather's.
    NotForFunction,
    /// NVLS runs on 2 to [`MAX_NVLS_ARITY`] ranks (every rank a head).
    NoNvls,
    /// The call stages `bytes` per rank; the staging buffers of every channel together
    /// hold `capacity`.
    TooLarge { bytes: u64, capacity: u64 },
}

/// Where the device switches algorithms, and how many channels a one-shot/two-shot
/// collective takes. One row per rank count, 2 to [`MAX_SHOT_RANKS`] (entry `nranks - 2`);
/// sizes are the bytes of the largest buffer of one rank (all_reduce's, broadcast's and
/// reduce's input, all_gather's output, reduce_scatter's input), as nccl-tests counts
/// them.
///
/// The 2- to 4-rank rows are measured with every algorithm forced, one rank per GPU, on
/// the default communicator: one-shot wins small and mid sizes; two-shot, with the push
/// form and its direct outputs, wins the all-reduce above it up to 32 MiB, which the
/// default staging holds pushed; the ring wins above. On 2 ranks one-shot goes further
/// (all-gather, which stages only its input, to 64 MiB). The rows for 5 to 8 ranks are
/// provisional, after vLLM's custom all-reduce (one stage up to 256 KiB on up to 8 GPUs,
/// two stages above, NCCL beyond 8 MiB), to be replaced by figures measured the same
/// way. Figures: see docs/tuning.md, `THRESHOLDS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// all_reduce: one-shot up to these bytes.
    pub all_reduce_one_shot_max: [u64; MAX_SHOT_RANKS - 1],
    /// all_reduce: two-shot above the one-shot rows and up to these bytes; the ring above.
    pub all_reduce_two_shot_max: [u64; MAX_SHOT_RANKS - 1],
    /// all_gather: one-shot up to these bytes (of its output); the ring above.
    pub all_gather_one_shot_max: [u64; MAX_SHOT_RANKS - 1],
    /// reduce_scatter: one-shot up to these bytes (of its input); the ring above.
    pub reduce_scatter_one_shot_max: [u64; MAX_SHOT_RANKS - 1],
    /// broadcast and reduce: one-shot up to these bytes; the ring above.
    pub rooted_one_shot_max: [u64; MAX_SHOT_RANKS - 1],
    /// A one-shot collective of `b` bytes takes `ceil(b / this)` channels (at least one,
    /// and more where its share would not fit a channel's staging buffer). 16 KiB a
    /// channel on up to 63 is as fast as 64 KiB on up to 32 (one-shot's time there is not
    /// its channels' copying) and lets the staging buffers of every call channel take
    /// part (see docs/tuning.md, `one_shot_bytes_per_channel`).
    pub one_shot_bytes_per_channel: u64,
    /// The same for two-shot: a channel moves about 10 GB/s, so a mid-size call needs
    /// many (see docs/tuning.md, `two_shot_bytes_per_channel`).
    pub two_shot_bytes_per_channel: u64,
    /// The most channels a one-shot/two-shot collective takes (fewer where the communicator
    /// has fewer), and those a communicator sizes its staging buffers for. On a default
    /// communicator (1 resident and 63 call channels) every one-shot/two-shot call then
    /// fits the call channels and runs on the call kernel alone; a call on more channels
    /// than the call kernel has goes through the loop's mailbox, the slower path (see
    /// docs/tuning.md, `shot_channels_max`).
    pub shot_channels_max: u32,
}

/// The thresholds the device uses (the 2- to 4-rank rows measured, the others
/// provisional: see [`Thresholds`]).
pub const THRESHOLDS: Thresholds = Thresholds {
    all_reduce_one_shot_max: [8 << 20, 2 << 20, 1 << 20, 256 << 10, 256 << 10, 256 << 10, 256 << 10],
    all_reduce_two_shot_max: [32 << 20, 32 << 20, 32 << 20, 8 << 20, 8 << 20, 8 << 20, 8 << 20],
    all_gather_one_shot_max: [64 << 20, 16 << 20, 32 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20],
    reduce_scatter_one_shot_max: [32 << 20, 16 << 20, 32 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20],
    rooted_one_shot_max: [256 << 10; MAX_SHOT_RANKS - 1],
    one_shot_bytes_per_channel: 16 << 10,
    two_shot_bytes_per_channel: 16 << 10,
    shot_channels_max: 63,
};

/// Elements of `elt` bytes (a power of two, as every element size) in 16 bytes (a pack):
/// channel shares and two-shot blocks start on multiples of it.
pub const fn pack_elements(elt: u64) -> u64 {
    if elt >= 16 { 1 } else { 16 >> elt.trailing_zeros() }
}

// The plans divide by these with shifts.
const _: () = assert!(THRESHOLDS.one_shot_bytes_per_channel.is_power_of_two() && THRESHOLDS.two_shot_bytes_per_channel.is_power_of_two());
const _: () = assert!(LOCAL_BYTES_PER_CHANNEL.is_power_of_two());

/// `a / b` (`b > 0`) in 32-bit arithmetic where both fit. The GPU divides 64-bit integers
/// in a long subroutine, and every small call is planned on its path (see docs/tuning.md,
/// `div_narrow`).
const fn div_narrow(a: u64, b: u64) -> u64 {
    if a <= u32::MAX as u64 && b <= u32::MAX as u64 { (a as u32 / b as u32) as u64 } else { a / b }
}

/// `a.div_ceil(b)` (`b > 0`), as [`div_narrow`].
pub(crate) const fn div_ceil_narrow(a: u64, b: u64) -> u64 {
    if a <= u32::MAX as u64 && b <= u32::MAX as u64 { (a as u32).div_ceil(b as u32) as u64 } else { a.div_ceil(b) }
}

/// `a.div_ceil(b)` for `b` a power of two, with a shift.
const fn div_ceil_pow2(a: u64, b: u64) -> u64 {
    (a >> b.trailing_zeros()) + if a & (b - 1) != 0 { 1 } else { 0 }
}

/// `a` rounded up to a multiple of `b`, a power of two (`a + b` must not overflow).
pub(crate) const fn round_up_pow2(a: u64, b: u64) -> u64 {
    (a + b - 1) & !(b - 1)
}

/// Bytes of the largest buffer of one rank (see [`Thresholds`]).
fn size_bytes(function: CollFunction, elt: u64, count: u64, nranks: u32) -> u64 {
    let bytes = count.saturating_mul(elt);
    match function {
        CollFunction::AllGather | CollFunction::ReduceScatter => bytes.saturating_mul(u64::from(nranks)),
        _ => bytes,
    }
}

/// A one-rank collective (a local copy: `output = post(pre(input))`) takes one channel
/// per this many bytes ([`local_channels`]), so that a small call on a communicator with
/// call channels runs on the call kernel alone instead of bringing every channel to the
/// loop's mailbox, which makes an 8-byte call in a CUDA graph more than twice as long (see
/// docs/tuning.md, `LOCAL_BYTES_PER_CHANNEL`).
pub const LOCAL_BYTES_PER_CHANNEL: u64 = 64 << 10;

/// The channels `0..n` a one-rank collective of `count` elements of `elt` bytes takes
/// part on, of the `channels` it may spread over: `ceil(bytes / LOCAL_BYTES_PER_CHANNEL)`,
/// at least one, at most `channels` (at least one). Its plan stays the ring's (every
/// channel): the channels past these have nothing to copy.
pub const fn local_channels(elt: u64, count: u64, channels: u32) -> u32 {
    let needed = div_ceil_pow2(count.saturating_mul(elt), LOCAL_BYTES_PER_CHANNEL);
    let most = if channels > 1 { channels as u64 } else { 1 };
    if needed == 0 { 1 } else if needed < most { needed as u32 } else { most as u32 }
}

/// The plan of `function` over `count` elements of `elt` bytes on a communicator with
/// `staging`, asked for `choice`. With [`AlgorithmChoice::Auto`] always a plan (the ring
/// where no one-shot/two-shot algorithm fits); with a forced algorithm, `Err` where it
/// cannot run the call. Point-to-point and one-rank communicators: the ring's plan whatever
/// the choice (they have one way only, which dispatch takes before asking).
pub fn plan(function: CollFunction, elt: u64, count: u64, staging: Staging, choice: AlgorithmChoice) -> Result<Plan, Unfit> {
    let ring = Plan { algorithm: Algorithm::Ring, channels: staging.channels, share: 0 };
    if function == CollFunction::SendRecv || staging.nranks == 1 {
        return Ok(ring);
    }
    let algorithm = match choice.forced() {
        Some(forced) => forced,
        None => by_size(function, size_bytes(function, elt, count, staging.nranks), staging.nranks),
    };
    if algorithm == Algorithm::Ring {
        return Ok(ring);
    }
    if algorithm == Algorithm::Nvls {
        return nvls(function, staging);
    }
    match shot_plan(function, elt, count, staging, algorithm) {
        Err(_) if choice == AlgorithmChoice::Auto => Ok(ring),
        outcome => outcome,
    }
}

/// [`THRESHOLDS`]' algorithm for `bytes` of `function` on `nranks`.
fn by_size(function: CollFunction, bytes: u64, nranks: u32) -> Algorithm {
    if nranks < 2 || nranks as usize > MAX_SHOT_RANKS {
        return Algorithm::Ring;
    }
    let row = nranks as usize - 2;
    let t = &THRESHOLDS;
    match function {
        CollFunction::AllReduce if bytes <= t.all_reduce_one_shot_max[row] => Algorithm::OneShot,
        CollFunction::AllReduce if bytes <= t.all_reduce_two_shot_max[row] => Algorithm::TwoShot,
        CollFunction::AllGather if bytes <= t.all_gather_one_shot_max[row] => Algorithm::OneShot,
        CollFunction::ReduceScatter if bytes <= t.reduce_scatter_one_shot_max[row] => Algorithm::OneShot,
        CollFunction::Broadcast | CollFunction::Reduce if bytes <= t.rooted_one_shot_max[row] => Algorithm::OneShot,
        _ => Algorithm::Ring,
    }
}

/// Threads a channel needs for NVLS: all-reduce's three groups of at least 64 (the
/// primitives' roles need two warps per group). A communicator that forces NVLS with
/// fewer threads is refused by the host.
pub const NVLS_MIN_THREADS: u32 = 192;

/// NVLS's plan: every channel a collective spreads over, or why it cannot run the call.
/// NVLS moves any count through its FIFOs, so only the function and the rank count
/// decide.
fn nvls(function: CollFunction, staging: Staging) -> Result<Plan, Unfit> {
    if !matches!(function, CollFunction::AllReduce | CollFunction::ReduceScatter | CollFunction::AllGather) {
        return Err(Unfit::NotForFunction);
    }
    if !(2..=MAX_NVLS_ARITY as u32).contains(&staging.nranks) {
        return Err(Unfit::NoNvls);
    }
    Ok(Plan { algorithm: Algorithm::Nvls, channels: staging.channels, share: 0 })
}

/// The plan of a one-shot/two-shot `algorithm`, or why it cannot run the call.
fn shot_plan(function: CollFunction, elt: u64, count: u64, staging: Staging, algorithm: Algorithm) -> Result<Plan, Unfit> {
    let runs = match algorithm {
        Algorithm::OneShot => function != CollFunction::SendRecv,
        Algorithm::TwoShot => function == CollFunction::AllReduce,
        Algorithm::Ring | Algorithm::Nvls => false,
    };
    if !runs {
        return Err(Unfit::NotForFunction);
    }
    if !staging.available() {
        return Err(Unfit::NoStaging);
    }
    // A channel stages its share once, or (reduce-scatter) its share of every rank's block.
    // Element sizes and packs are powers of two: shifts and masks, no 64-bit division.
    let copies = if function == CollFunction::ReduceScatter { u64::from(staging.nranks) } else { 1 };
    let align = pack_elements(elt);
    let per_channel = div_narrow(staging.slot_bytes >> elt.trailing_zeros(), copies) & !(align - 1);
    let capacity = per_channel.saturating_mul(u64::from(staging.shot_channels()));
    if count > capacity {
        let staged = |n: u64| n.saturating_mul(elt).saturating_mul(copies);
        return Err(Unfit::TooLarge { bytes: staged(count), capacity: staged(capacity) });
    }
    if count == 0 {
        return Ok(Plan { algorithm, channels: 0, share: 0 });
    }
    // From here `0 < count <= capacity`, so `per_channel > 0`, and the channels that hold
    // it are no more than `staging.shot_channels()`.
    let needed = div_ceil_narrow(count, per_channel);
    let bytes_per_channel = match algorithm {
        Algorithm::TwoShot => THRESHOLDS.two_shot_bytes_per_channel,
        _ => THRESHOLDS.one_shot_bytes_per_channel,
    };
    let wanted = div_ceil_pow2(size_bytes(function, elt, count, staging.nranks), bytes_per_channel).clamp(1, staging.shot_channels() as u64);
    let share = round_up_pow2(div_ceil_narrow(count, wanted.max(needed)), align);
    Ok(Plan { algorithm, channels: div_ceil_narrow(count, share) as u32, share })
}

#[cfg(test)]
mod tests {
    use super::*;

    const F32: u64 = 4;

    fn staging(nranks: u32, channels: u32, slot_bytes: u64) -> Staging {
        Staging { nranks, channels, slot_bytes }
    }

    /// Auto follows the table's rows on both sides of each threshold.
    #[test]
    fn auto_follows_the_thresholds() {
        let big = staging(4, 24, 4 << 20);
        let at = |function, bytes: u64| plan(function, F32, bytes / F32, big, AlgorithmChoice::Auto).unwrap().algorithm;
        let one = THRESHOLDS.all_reduce_one_shot_max[2];
        let two = THRESHOLDS.all_reduce_two_shot_max[2];
        assert_eq!(at(CollFunction::AllReduce, one), Algorithm::OneShot);
        assert_eq!(at(CollFunction::AllReduce, one + 16), Algorithm::TwoShot);
        assert_eq!(at(CollFunction::AllReduce, two), Algorithm::TwoShot);
        assert_eq!(at(CollFunction::AllReduce, two + 16), Algorithm::Ring);
        // all_gather and reduce_scatter count the whole buffer: 4 ranks × count.
        for (function, most) in [(CollFunction::AllGather, THRESHOLDS.all_gather_one_shot_max[2]), (CollFunction::ReduceScatter, THRESHOLDS.reduce_scatter_one_shot_max[2])] {
            assert_eq!(at(function, most / 4), Algorithm::OneShot, "{function:?}");
            assert_eq!(at(function, most / 4 + 16), Algorithm::Ring, "{function:?}");
        }
        // On 2 ranks with the default communicator's staging (64 collective channels, 48 MiB
        // over the 63 a one-shot/two-shot call takes), all_gather stays one-shot to 64 MiB
        // (its input is half of it) and reduce_scatter to 32 MiB.
        let two = staging(2, 64, (48u64 << 20).div_ceil(63).next_multiple_of(4096));
        let on_two = |function, bytes: u64| plan(function, F32, bytes / 2 / F32, two, AlgorithmChoice::Auto).unwrap().algorithm;
        assert_eq!(on_two(CollFunction::AllGather, 64 << 20), Algorithm::OneShot);
        assert_eq!(on_two(CollFunction::AllGather, 128 << 20), Algorithm::Ring);
        assert_eq!(on_two(CollFunction::ReduceScatter, 32 << 20), Algorithm::OneShot);
        assert_eq!(on_two(CollFunction::ReduceScatter, 64 << 20), Algorithm::Ring);
        // all_reduce: one-shot to 8 MiB, two-shot to 32 MiB, the ring above.
        let all_reduce = |bytes: u64| plan(CollFunction::AllReduce, F32, bytes / F32, two, AlgorithmChoice::Auto).unwrap().algorithm;
        assert_eq!([8 << 20, (8 << 20) + 16, 32 << 20, (32 << 20) + 16].map(all_reduce), [Algorithm::OneShot, Algorithm::TwoShot, Algorithm::TwoShot, Algorithm::Ring]);
        // On 3 and 4 ranks with the default staging (48 MiB over 63 channels) a 32 MiB
        // all_reduce is two-shot, in the push form.
        let default = |nranks| staging(nranks, 64, (48u64 << 20).div_ceil(63).next_multiple_of(4096));
        for nranks in [3, 4] {
            let p = plan(CollFunction::AllReduce, F32, (32 << 20) / F32, default(nranks), AlgorithmChoice::Auto).unwrap();
            assert_eq!(p.algorithm, Algorithm::TwoShot, "{nranks} ranks");
            assert!(push_fits(CollFunction::AllReduce, Algorithm::TwoShot, F32, p.share, nranks, default(nranks).slot_bytes), "{nranks} ranks: {p:?}");
            let over = plan(CollFunction::AllReduce, F32, (32 << 20) / F32 + 4, default(nranks), AlgorithmChoice::Auto).unwrap();
            assert_eq!(over.algorithm, Algorithm::Ring, "{nranks} ranks");
        }
        let rooted = THRESHOLDS.rooted_one_shot_max[2];
        for function in [CollFunction::Broadcast, CollFunction::Reduce] {
            assert_eq!(at(function, rooted), Algorithm::OneShot);
            assert_eq!(at(function, rooted + 16), Algorithm::Ring);
        }
        let nine = staging(9, 24, 1 << 20);
        assert_eq!(plan(CollFunction::AllReduce, F32, 2, nine, AlgorithmChoice::Auto).unwrap().algorithm, Algorithm::Ring, "over 8 ranks: the ring");
    }

    /// A one-shot/two-shot plan takes at most `shot_channels_max` channels, and its buffers
    /// still hold the call a communicator's staging bytes were sized for.
    #[test]
    fn shot_plans_keep_to_the_most_channels() {
        let max = THRESHOLDS.shot_channels_max;
        let s = staging(2, 80, 256 << 10);
        assert_eq!(s.shot_channels(), max);
        assert_eq!(staging(2, 5, 256 << 10).shot_channels(), 5, "fewer channels: all of them");
        let big = plan(CollFunction::AllReduce, F32, (4 << 20) / F32, s, AlgorithmChoice::OneShot).unwrap();
        assert_eq!(big.channels, max, "4 MiB wants 256 channels of 16 KiB: {big:?}");
        let full = u64::from(max) * (256 << 10) / F32;
        assert_eq!(plan(CollFunction::AllReduce, F32, full, s, AlgorithmChoice::OneShot).unwrap().channels, max);
        assert!(matches!(plan(CollFunction::AllReduce, F32, full + 4, s, AlgorithmChoice::OneShot), Err(Unfit::TooLarge { .. })));
        assert_eq!(plan(CollFunction::AllReduce, F32, full + 4, s, AlgorithmChoice::Auto).unwrap().algorithm, Algorithm::Ring);
    }

    /// Channels grow with the size, one per `bytes_per_channel`, and every channel that
    /// takes part holds data; shares are whole packs.
    #[test]
    fn channels_follow_the_size_and_every_one_holds_data() {
        let s = staging(2, 24, 1 << 20);
        let per = THRESHOLDS.one_shot_bytes_per_channel;
        let channels = |bytes: u64| plan(CollFunction::AllReduce, F32, bytes / F32, s, AlgorithmChoice::OneShot).unwrap().channels;
        assert_eq!(channels(per), 1);
        assert_eq!(channels(per + 16), 2);
        assert_eq!(channels(5 * per), 5);
        assert_eq!(channels(1 << 30 >> 6), 24, "at most every channel");
        for count in [1u64, 3, 4, 5, 7, 1021, 16_384, 16_389, 100_003] {
            for elt in [1, 2, 4, 8] {
                let p = plan(CollFunction::AllReduce, elt, count, staging(3, 5, 256 << 10), AlgorithmChoice::OneShot).unwrap();
                assert!((p.share * elt).is_multiple_of(16) && p.channels >= 1, "{count} {elt}: {p:?}");
                let covered: u64 = (0..p.channels).map(|c| p.range(c, count).1).sum();
                assert_eq!(covered, count, "{count} {elt}: {p:?}");
                assert!((0..p.channels).all(|c| p.range(c, count).1 > 0), "{count} {elt}: {p:?}");
                assert!(p.share * elt <= 256 << 10, "a share fits its channel's buffer: {p:?}");
            }
        }
        assert_eq!(plan(CollFunction::AllReduce, F32, 0, s, AlgorithmChoice::OneShot).unwrap().channels, 0, "nothing to do: no channel");
    }

    /// On two ranks every one-shot plan of all_reduce, all_gather and reduce_scatter has
    /// room to push; on more, a channel's buffer must hold a share from every peer, or a
    /// two-shot block from every peer twice; broadcast and reduce never push.
    #[test]
    fn pushing_needs_room_for_every_peer() {
        let s = staging(2, 5, 256 << 10);
        for function in [CollFunction::AllReduce, CollFunction::AllGather, CollFunction::ReduceScatter] {
            for count in [1u64, 7, 1021, 16_384, 100_003, 5 * (64 << 10), 5 * (32 << 10)] {
                if let Ok(p) = plan(function, F32, count, s, AlgorithmChoice::OneShot) {
                    assert!(push_fits(function, Algorithm::OneShot, F32, p.share, 2, s.slot_bytes), "{function:?} {count}: {p:?}");
                }
            }
        }
        let slot = 3 * 4096;
        assert!(push_fits(CollFunction::AllReduce, Algorithm::OneShot, F32, 1024, 4, slot), "3 peers × 4 KiB");
        assert!(!push_fits(CollFunction::AllReduce, Algorithm::OneShot, F32, 1028, 4, slot));
        assert!(push_fits(CollFunction::AllGather, Algorithm::OneShot, 2, 2048, 4, slot));
        assert!(!push_fits(CollFunction::ReduceScatter, Algorithm::OneShot, 8, 520, 4, slot));
        // Two-shot: 2 × 3 blocks of 512 floats (a share of 2048 in 4 blocks) fill 12 KiB; a
        // share of 2049 has blocks of 516 (whole packs).
        assert_eq!(two_shot_block(2049, 4, F32), 516);
        assert!(push_fits(CollFunction::AllReduce, Algorithm::TwoShot, F32, 2048, 4, slot));
        assert!(!push_fits(CollFunction::AllReduce, Algorithm::TwoShot, F32, 2049, 4, slot));
        for function in [CollFunction::Broadcast, CollFunction::Reduce] {
            assert!(!push_fits(function, Algorithm::OneShot, F32, 1, 2, 1 << 20), "{function:?}");
        }
    }

    /// A forced algorithm is refused where it cannot run; Auto falls back to the ring.
    /// The one-shot/two-shot plan with plain 64-bit arithmetic, as `shot_plan` computed it
    /// before it shifted, masked and divided in 32 bits.
    fn shot_plan_plain(function: CollFunction, elt: u64, count: u64, staging: Staging, algorithm: Algorithm) -> Result<Plan, Unfit> {
        if !staging.available() {
            return Err(Unfit::NoStaging);
        }
        let copies = if function == CollFunction::ReduceScatter { u64::from(staging.nranks) } else { 1 };
        let align = 16 / elt;
        let per_channel = staging.slot_bytes / elt / copies / align * align;
        let channels = u64::from(staging.shot_channels());
        let needed = match (count, per_channel) {
            (0, _) => 0,
            (_, 0) => u64::MAX,
            _ => count.div_ceil(per_channel),
        };
        if needed > channels {
            let staged = |n: u64| n.saturating_mul(elt).saturating_mul(copies);
            return Err(Unfit::TooLarge { bytes: staged(count), capacity: staged(per_channel * channels) });
        }
        if count == 0 {
            return Ok(Plan { algorithm, channels: 0, share: 0 });
        }
        let per = if algorithm == Algorithm::TwoShot { THRESHOLDS.two_shot_bytes_per_channel } else { THRESHOLDS.one_shot_bytes_per_channel };
        let wanted = size_bytes(function, elt, count, staging.nranks).div_ceil(per).clamp(1, channels);
        let share = count.div_ceil(wanted.max(needed)).div_ceil(align) * align;
        Ok(Plan { algorithm, channels: count.div_ceil(share) as u32, share })
    }

    #[test]
    fn narrow_arithmetic_plans_as_plain_arithmetic() {
        let counts = [0u64, 1, 2, 3, 5, 7, 15, 16, 17, 1021, 4096, 16_383, 16_384, 16_389, 100_003, 1 << 20, (1 << 20) + 3, 1 << 28, (1 << 32) + 5, 1 << 40];
        let slots = [0u64, 4096, 8192, 65_536, 256 << 10, 1 << 20, 3 << 20, 1 << 32, (1 << 33) + 4096];
        let functions = [CollFunction::AllReduce, CollFunction::ReduceScatter, CollFunction::AllGather, CollFunction::Broadcast];
        let mut planned = 0;
        for (nranks, channels) in [(2, 1), (2, 48), (3, 5), (4, 32), (8, 15), (8, 64)] {
            for slot_bytes in slots {
                let s = staging(nranks, channels, slot_bytes);
                for function in functions {
                    for algorithm in [Algorithm::OneShot, Algorithm::TwoShot] {
                        if algorithm == Algorithm::TwoShot && function != CollFunction::AllReduce {
                            continue;
                        }
                        for elt in [1, 2, 4, 8] {
                            for count in counts {
                                let got = shot_plan(function, elt, count, s, algorithm);
                                assert_eq!(got, shot_plan_plain(function, elt, count, s, algorithm), "{function:?} {algorithm:?} elt {elt} count {count} {s:?}");
                                planned += u32::from(got.is_ok());
                            }
                        }
                    }
                }
            }
        }
        assert!(planned > 1000, "the grid plans many calls, not only refusals: {planned}");
    }

    #[test]
    fn a_forced_algorithm_that_cannot_run_is_unfit() {
        let s = staging(4, 2, 4096);
        let one = AlgorithmChoice::OneShot;
        assert_eq!(plan(CollFunction::AllReduce, F32, 2048, s, one).unwrap().channels, 2, "two full buffers");
        assert_eq!(plan(CollFunction::AllReduce, F32, 2049, s, one), Err(Unfit::TooLarge { bytes: 8196, capacity: 8192 }));
        assert_eq!(plan(CollFunction::AllReduce, F32, 2049, s, AlgorithmChoice::Auto).unwrap().algorithm, Algorithm::Ring);
        assert_eq!(plan(CollFunction::ReduceScatter, F32, 512, s, one).unwrap().channels, 2, "4 ranks' blocks per channel");
        assert_eq!(plan(CollFunction::ReduceScatter, F32, 513, s, one), Err(Unfit::TooLarge { bytes: 8208, capacity: 8192 }));
        assert_eq!(plan(CollFunction::AllGather, F32, 8, s, AlgorithmChoice::TwoShot), Err(Unfit::NotForFunction));
        assert_eq!(plan(CollFunction::Reduce, F32, 8, s, AlgorithmChoice::TwoShot), Err(Unfit::NotForFunction));
        assert_eq!(plan(CollFunction::Broadcast, F32, 2048, s, one).unwrap().channels, 2);
        assert_eq!(plan(CollFunction::AllReduce, F32, 8, staging(4, 2, 0), one), Err(Unfit::NoStaging));
        assert_eq!(plan(CollFunction::AllReduce, F32, 8, staging(9, 2, 4096), one), Err(Unfit::NoStaging));
        assert_eq!(plan(CollFunction::SendRecv, F32, 1 << 40, s, one).unwrap().algorithm, Algorithm::Ring, "point-to-point has one way");
        assert_eq!(plan(CollFunction::Broadcast, F32, 8, staging(1, 2, 0), one).unwrap().algorithm, Algorithm::Ring, "one rank: a local copy");
        assert_eq!(plan(CollFunction::AllReduce, F32, 1 << 40, s, AlgorithmChoice::Ring).unwrap().algorithm, Algorithm::Ring);
        for c in AlgorithmChoice::ALL {
            assert_eq!(AlgorithmChoice::from_u32(c as u32), Some(c));
        }
    }

    /// A one-rank collective copies on one channel per 64 KiB, at least one, at most the
    /// communicator's.
    #[test]
    fn one_rank_copies_on_the_channels_its_bytes_need() {
        assert_eq!(local_channels(F32, 0, 64), 1);
        assert_eq!(local_channels(F32, 2, 64), 1);
        assert_eq!(local_channels(F32, 16 << 10, 64), 1, "64 KiB");
        assert_eq!(local_channels(F32, (16 << 10) + 1, 64), 2);
        assert_eq!(local_channels(2, 1 << 20, 64), 32, "2 MiB");
        assert_eq!(local_channels(8, 1 << 30, 64), 64);
        assert_eq!(local_channels(1, 1 << 20, 4), 4);
        assert_eq!(local_channels(F32, u64::MAX, 3), 3, "no overflow");
        assert_eq!(local_channels(F32, 1 << 20, 0), 1);
        assert_eq!(plan(CollFunction::AllReduce, F32, 8, staging(1, 64, 0), AlgorithmChoice::Auto).unwrap().channels, 64, "the plan stays the ring's");
    }

    /// NVLS runs only when forced, for all_reduce, reduce_scatter and all_gather on 2 to 8
    /// ranks, on every channel, whatever the size; Auto never picks it.
    #[test]
    fn nvls_is_forced_only_and_for_its_functions() {
        let nvls = AlgorithmChoice::Nvls;
        for nranks in 2..=8 {
            let s = staging(nranks, 3, 0);
            for function in [CollFunction::AllReduce, CollFunction::ReduceScatter, CollFunction::AllGather] {
                for count in [0, 1, 1 << 40] {
                    assert_eq!(plan(function, F32, count, s, nvls), Ok(Plan { algorithm: Algorithm::Nvls, channels: 3, share: 0 }));
                }
            }
            for function in [CollFunction::Broadcast, CollFunction::Reduce] {
                assert_eq!(plan(function, F32, 8, s, nvls), Err(Unfit::NotForFunction));
            }
            for bytes in [0u64, 16, 1 << 20, 1 << 30] {
                for function in CollFunction::ALL {
                    let auto = plan(function, F32, bytes / F32, staging(nranks, 3, 1 << 20), AlgorithmChoice::Auto).unwrap();
                    assert_ne!(auto.algorithm, Algorithm::Nvls);
                }
            }
        }
        assert_eq!(plan(CollFunction::AllReduce, F32, 8, staging(9, 3, 0), nvls), Err(Unfit::NoNvls));
        assert_eq!(plan(CollFunction::AllReduce, F32, 8, staging(1, 3, 0), nvls).unwrap().algorithm, Algorithm::Ring, "one rank: a local copy");
        assert_eq!(plan(CollFunction::SendRecv, F32, 8, staging(4, 3, 0), nvls).unwrap().algorithm, Algorithm::Ring);
    }
}
