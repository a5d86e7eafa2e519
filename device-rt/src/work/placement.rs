//! Which CTA of a loop's grid is which channel, and so on which SM each channel runs.
//!
//! By default the grid is the channels: CTA `i` is channel `i`, wherever the hardware put
//! it. Where the host wants to choose the SMs (under NVLink saturation a channel's share
//! of bandwidth depends on where it runs, and the slowest channel sets a collective's
//! time), it launches more CTAs than channels, with a table naming the SM of each
//! channel. Each CTA then reads its SM: the CTA on a listed SM claims that SM's channel;
//! the others are spares. A spare waits (up to the grace period) until every channel is
//! claimed, then leaves without touching anything else; if the grace period ends first
//! (a listed SM was busy or absent), it claims a channel still free. So every channel
//! gets exactly one CTA, and no channel waits for an SM that never comes.

use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::abi::MAX_CHANNELS;

/// SM ids a placement table covers.
pub const MAX_SMS: usize = 256;

/// How a loop's channels are placed on SMs, in the loop's device memory: written by the
/// host before the launch (`nchannels`, `grace_ns`, `sm_channel`), claimed by the CTAs.
#[repr(C)]
#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct ChannelPlacement {
    /// 0: the grid is the channels (CTA `i` is channel `i`; the table is unused).
    /// Otherwise the loop's channel count, at most the grid and [`MAX_CHANNELS`].
    pub nchannels: u32,
    /// How long a spare waits for the listed SMs' CTAs before claiming a free channel.
    pub grace_ns: u32,
    /// Channels claimed so far (device only).
    pub claimed: u64,
    /// Per channel: nonzero once a CTA is it (device only).
    pub claims: [u64; MAX_CHANNELS],
    /// Per SM id: 1 + the channel a CTA on that SM claims; 0: none.
    pub sm_channel: [u8; MAX_SMS],
}

static_assertions::const_assert_eq!(core::mem::size_of::<ChannelPlacement>(), 16 + 8 * MAX_CHANNELS + MAX_SMS);
static_assertions::const_assert!(MAX_CHANNELS < u8::MAX as usize);

impl Default for ChannelPlacement {
    fn default() -> Self {
        Self::new_zeroed()
    }
}

impl ChannelPlacement {
    /// Channel `c` runs on SM `sms[c]`, for each of `sms.len()` channels; spares wait
    /// `grace_ns` for them. `None` when there are no channels, more than
    /// [`MAX_CHANNELS`], an SM id of [`MAX_SMS`] or more, or one SM named twice.
    pub fn on_sms(sms: &[u32], grace_ns: u32) -> Option<Self> {
        if sms.is_empty() || sms.len() > MAX_CHANNELS {
            return None;
        }
        let mut p = Self { nchannels: sms.len() as u32, grace_ns, ..Self::default() };
        for (channel, &sm) in sms.iter().enumerate() {
            let entry = p.sm_channel.get_mut(sm as usize)?;
            if *entry != 0 {
                return None;
            }
            *entry = channel as u8 + 1;
        }
        Some(p)
    }
}

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use election::elect_channel;

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod election {
    use super::ChannelPlacement;
    use crate::arch::{self, AtomicWord};

    /// This CTA's channel and the loop's channel count, or `None`: a spare, which must
    /// leave at once. Every thread of the CTA calls it; `slot` is a shared-memory word of
    /// the CTA, `abort` the host's abort flag (a spare stops waiting on it).
    ///
    /// Ordering: a claim is an acq_rel compare-and-swap and the claimed count an acq_rel
    /// add, both at system scope, so a spare that counts every channel claimed never
    /// claims one; the channel reaches the CTA's threads through `slot` and a barrier.
    ///
    /// # Safety
    /// `p` is the loop's placement (see [`ChannelPlacement`]), valid for the launch;
    /// `abort` is readable; `slot` is this CTA's.
    pub unsafe fn elect_channel(p: *mut ChannelPlacement, abort: *const u64, slot: *mut u64) -> Option<(u32, u32)> {
        // SAFETY: `p` is the loop's placement in device memory, valid for the launch (this
        // function's contract); `nchannels` is an aligned `u32` in it that the host wrote
        // before the launch.
        let nchannels = unsafe { arch::ld_volatile_global((&raw const (*p).nchannels).cast::<u32>()) };
        if nchannels == 0 {
            return Some((arch::block_idx(), arch::grid_dim()));
        }
        if arch::thread_idx() == 0 {
            // SAFETY: thread 0 alone runs the claim, with the same `p` and `abort` this
            // function's contract makes valid, and `nchannels` read from `p`.
            let channel = unsafe { claim_for_this_sm(p, nchannels, abort) };
            // SAFETY: `slot` is this CTA's shared-memory word (this function's contract);
            // thread 0 alone writes it, before the barrier below.
            unsafe { slot.write_volatile(channel.map_or(u64::MAX, u64::from)) };
        }
        arch::barrier_sync_all();
        // SAFETY: the barrier above orders thread 0's write of `slot` before every thread's
        // read, and nothing writes it again during this call.
        match unsafe { slot.read_volatile() } {
            u64::MAX => None,
            channel => Some((channel as u32, nchannels)),
        }
    }

    /// Thread 0's part of [`elect_channel`].
    ///
    /// # Safety
    /// As [`elect_channel`] for `p` and `abort`; `nchannels` is `p`'s, nonzero and at most
    /// [`MAX_CHANNELS`](crate::abi::MAX_CHANNELS) (the placement's invariant).
    unsafe fn claim_for_this_sm(p: *mut ChannelPlacement, nchannels: u32, abort: *const u64) -> Option<u32> {
        let sm = arch::sm_id() as usize;
        // SAFETY: `p` is the loop's placement, valid for the launch (this function's contract);
        // only the address of its `sm_channel` table is taken.
        let table = unsafe { (&raw const (*p).sm_channel).cast::<u8>() };
        // SAFETY: `sm < MAX_SMS`, the table's length; the host wrote it before the launch and
        // the device never writes it.
        let listed = if sm < super::MAX_SMS { unsafe { table.add(sm).read_volatile() } } else { 0 };
        // SAFETY: `listed - 1 < nchannels <= MAX_CHANNELS` (the placement's invariant, kept by
        // the host), as `claim` requires.
        if listed != 0 && u32::from(listed) <= nchannels && unsafe { claim(p, u32::from(listed) - 1) } {
            return Some(u32::from(listed) - 1);
        }
        // SAFETY: `grace_ns` is an aligned `u32` of the valid placement (this function's
        // contract), written by the host before the launch.
        let grace_ns = u64::from(unsafe { arch::ld_volatile_global((&raw const (*p).grace_ns).cast::<u32>()) });
        // SAFETY: only the address of the placement's `claimed` counter is taken.
        let claimed = unsafe { &raw const (*p).claimed };
        let started = arch::globaltimer_ns();
        while arch::globaltimer_ns().wrapping_sub(started) < grace_ns {
            // SAFETY: `claimed` is an aligned `u64` in the valid placement, updated by CTAs
            // only through `arch` atomics.
            if unsafe { arch::ld_acquire_sys_global(claimed) } >= u64::from(nchannels) {
                return None;
            }
            // SAFETY: `abort` is the host's abort flag, readable for the launch (this
            // function's contract), read only through `arch`.
            if unsafe { arch::ld_volatile_global(abort) } != 0 {
                break;
            }
            arch::nanosleep(1000);
        }
        // SAFETY: `c < nchannels <= MAX_CHANNELS`, as `claim` requires.
        (0..nchannels).find(|&c| unsafe { claim(p, c) })
    }

    /// Claims channel `c` for this CTA: true when no CTA had it.
    ///
    /// # Safety
    /// `p` is the loop's placement, valid for the launch, and `c < MAX_CHANNELS`.
    unsafe fn claim(p: *mut ChannelPlacement, c: u32) -> bool {
        // SAFETY: `c < MAX_CHANNELS` (this function's contract), so the word is inside the
        // valid placement's `claims`.
        let word = unsafe { (&raw mut (*p).claims).cast::<u64>().add(c as usize) };
        // SAFETY: `word` is an aligned `u64` of the placement in device memory, changed by CTAs
        // only through `arch` atomics.
        if unsafe { u64::atomic_cas_acq_rel_sys(word, 0, 1) } != 0 {
            return false;
        }
        // SAFETY: `claimed` is an aligned `u64` of the valid placement, changed only through
        // `arch` atomics.
        unsafe { u64::atomic_add_acq_rel_sys(&raw mut (*p).claimed, 1) };
        true
    }
}
