//! `reduce_copy`: reduce `nsrcs` buffers element-wise and write the result to `ndsts`
//! buffers, with every thread of a group taking part
//! ([NCCL](https://github.com/NVIDIA/nccl)'s `reduceCopy`).
//!
//! The work is cut into *hunks*: `UNROLL × 32 × N` contiguous bytes that one warp moves
//! per loop iteration, each lane `UNROLL` packs of `N` bytes, 32 packs apart, so every
//! load and store of a warp is coalesced and `UNROLL` loads per source are in flight.
//! Passes, each picking up where the last stopped:
//!
//! 1. big packs (16 bytes, or the multicast flavour's widest), `UNROLL` hunks — only
//!    when the whole warp votes that every pointer is aligned to the big pack;
//! 2. big packs, `UNROLL = 1`, which may leave some lanes without a pack (partial hunk);
//! 3. element-size packs, `UNROLL` hunks;
//! 4. element-size packs, `UNROLL = 1`: the rest.
//!
//! Between passes the warps are rotated so the warp that got the least work becomes
//! warp 0 of the next pass. Unlike NCCL, the element pass keeps `UNROLL` rather than
//! scaling it by `16 / size_of::<T>() / 2` (that needs `generic_const_exprs`).
//!
//! Ordering: sources are read with `ld.volatile` (NCCL: so data published by a peer whose
//! flag was polled with a volatile load is never read from a stale L1 line), results
//! written with weak stores; the caller publishes them (fence + flag) afterwards.

use core::mem::size_of;

use crate::arch::{self, WARP_SIZE};
use crate::multicast::Multicast;
use crate::pack::{self, BytePack, PackIo, PackSize, Size};
use crate::redop::{Elem, RedOp};

mod standalone;
pub use standalone::{UNROLL, op_kind, reduce_copy_args, reduce_copy_fixed, reduce_copy_grid, reduce_copy_share};

/// The buffers of one `reduce_copy`: addresses (global, or multicast handles for the
/// first `MULTIMEM_SRCS`/`MULTIMEM_DSTS`), how many are used, and each source's pre-op
/// argument.
#[derive(Clone, Copy, Debug)]
pub struct Operands<const MAX_SRCS: usize, const MAX_DSTS: usize> {
    /// Source addresses; `srcs[..nsrcs]` are used.
    pub srcs: [u64; MAX_SRCS],
    /// Sources used.
    pub nsrcs: usize,
    /// Destination addresses; `dsts[..ndsts]` are used.
    pub dsts: [u64; MAX_DSTS],
    /// Destinations used.
    pub ndsts: usize,
    /// The pre-op argument of each source below `PRE_OP_SRCS`.
    pub pre_op_args: [u64; MAX_SRCS],
    /// Byte offset into every buffer (multicast ones included) where this call starts.
    pub offset: u64,
}

/// Reduces `x.srcs` into every one of `x.dsts`, `n_elts` elements of `Op::Elt`, with
/// threads `0..nthreads` of the caller's group (`thread` is this thread's index in it).
///
/// - `MULTIMEM_SRCS`/`MULTIMEM_DSTS`: how many of the first sources/destinations are
///   `M` multicast handles (0 or 1 in practice).
/// - `MIN_SRCS..=MAX_SRCS`, `MIN_DSTS..=MAX_DSTS`: the counts the caller may pass; the
///   first `MIN_*` are unrolled at compile time.
/// - `PRE_OP_SRCS`: sources (unicast ones) that get `Op`'s pre-op with their own argument.
/// - `post_op`: apply `Op`'s post-op (with argument `red_arg`) to the result.
///
/// # Safety
/// `nthreads` is a multiple of 32 and every thread `0..nthreads` of the group calls this
/// with the same arguments (warp votes are taken); `MIN_SRCS <= x.nsrcs <= MAX_SRCS`,
/// `MIN_DSTS <= x.ndsts <= MAX_DSTS`, `MULTIMEM_SRCS <= MIN_SRCS`, `MULTIMEM_DSTS <=
/// MIN_DSTS`; the first `MULTIMEM_SRCS` sources and `MULTIMEM_DSTS` destinations are valid
/// `M` handles; every source and destination holds `n_elts` elements from byte `x.offset`
/// and is aligned (with the offset) to the element size; destinations do not overlap
/// sources except exactly (in place).
#[inline(always)]
pub unsafe fn reduce_copy<
    const UNROLL: usize,
    Op: RedOp,
    M: Multicast,
    const MULTIMEM_SRCS: usize,
    const MIN_SRCS: usize,
    const MAX_SRCS: usize,
    const MULTIMEM_DSTS: usize,
    const MIN_DSTS: usize,
    const MAX_DSTS: usize,
    const PRE_OP_SRCS: usize,
>(
    thread: u32,
    nthreads: u32,
    red_arg: u64,
    post_op: bool,
    x: &Operands<MAX_SRCS, MAX_DSTS>,
    n_elts: usize,
) {
    let mut pass = Pass::<Op, M, MULTIMEM_SRCS, MIN_SRCS, MAX_SRCS, MULTIMEM_DSTS, MIN_DSTS, MAX_DSTS, PRE_OP_SRCS> {
        op: Op::new(red_arg),
        post_op: Op::HAS_POST_OP && post_op,
        x,
        // SAFETY: `s < MULTIMEM_SRCS <= MIN_SRCS <= x.nsrcs`, and the caller gives the first
        // `MULTIMEM_SRCS` sources as valid `M` handles (this function's contract).
        mc_srcs: core::array::from_fn(|s| unsafe { M::resolve(x.srcs[s]) }),
        // SAFETY: as above, for the first `MULTIMEM_DSTS <= MIN_DSTS <= x.ndsts` destinations.
        mc_dsts: core::array::from_fn(|d| unsafe { M::resolve(x.dsts[d]) }),
        nthreads,
        thread,
        bytes_behind: 0,
        bytes_ahead: n_elts * size_of::<Op::Elt>(),
    };
    let elt = size_of::<Op::Elt>();
    let big = if MULTIMEM_SRCS == 0 { 16 } else { M::big_pack_size(Op::KIND, <Op::Elt as Elem>::DTYPE) };
    if big > elt && pass.warp_aligned_to(big as u64) {
        match big {
            16 => pass.run_pair::<UNROLL, 16>(),
            8 => pass.run_pair::<UNROLL, 8>(),
            4 => pass.run_pair::<UNROLL, 4>(),
            _ => {}
        }
        if pass.bytes_ahead == 0 {
            return;
        }
    }
    match elt {
        1 => pass.run_pair::<UNROLL, 1>(),
        2 => pass.run_pair::<UNROLL, 2>(),
        4 => pass.run_pair::<UNROLL, 4>(),
        _ => pass.run_pair::<UNROLL, 8>(),
    }
}

/// The state `reduce_copy`'s passes share: NCCL's `nBytesBehind`/`nBytesAhead` and the
/// (rotated) thread index.
struct Pass<
    'a,
    Op: RedOp,
    M: Multicast,
    const MULTIMEM_SRCS: usize,
    const MIN_SRCS: usize,
    const MAX_SRCS: usize,
    const MULTIMEM_DSTS: usize,
    const MIN_DSTS: usize,
    const MAX_DSTS: usize,
    const PRE_OP_SRCS: usize,
> {
    op: Op,
    post_op: bool,
    x: &'a Operands<MAX_SRCS, MAX_DSTS>,
    mc_srcs: [M::Target; MULTIMEM_SRCS],
    mc_dsts: [M::Target; MULTIMEM_DSTS],
    nthreads: u32,
    thread: u32,
    bytes_behind: usize,
    bytes_ahead: usize,
}

impl<
    Op: RedOp,
    M: Multicast,
    const MULTIMEM_SRCS: usize,
    const MIN_SRCS: usize,
    const MAX_SRCS: usize,
    const MULTIMEM_DSTS: usize,
    const MIN_DSTS: usize,
    const MAX_DSTS: usize,
    const PRE_OP_SRCS: usize,
> Pass<'_, Op, M, MULTIMEM_SRCS, MIN_SRCS, MAX_SRCS, MULTIMEM_DSTS, MIN_DSTS, MAX_DSTS, PRE_OP_SRCS>
{
    /// The warp-wide vote: true when every source and destination address (all the
    /// peers' behind a multicast handle) is aligned to `align` bytes.
    #[inline(always)]
    fn warp_aligned_to(&self, align: u64) -> bool {
        let lane = (self.thread % WARP_SIZE) as usize;
        let x = self.x;
        let src_bits = if lane >= x.nsrcs.min(MAX_SRCS) {
            0
        } else if lane < MULTIMEM_SRCS {
            M::address_bits(&self.mc_srcs[lane])
        } else {
            x.srcs[lane]
        };
        let dst_bits = if lane >= x.ndsts.min(MAX_DSTS) {
            0
        } else if lane < MULTIMEM_DSTS {
            M::address_bits(&self.mc_dsts[lane])
        } else {
            x.dsts[lane]
        };
        arch::vote_all(arch::FULL_MASK, (src_bits | dst_bits | x.offset).is_multiple_of(align))
    }

    /// Passes 1 and 2 (or 3 and 4 when `N` is the element size): `UNROLL` full hunks,
    /// then, if bytes remain, single packs.
    #[inline(always)]
    fn run_pair<const UNROLL: usize, const N: usize>(&mut self)
    where
        Size<N>: PackIo<N> + PackSize,
    {
        // SAFETY: a `Pass` is built only by `reduce_copy`, whose caller keeps its contract for
        // the pass's whole life; `bytes_behind` is 0 or a multiple of the big pack (which `N`
        // divides) when this pass starts, and for `N` above the element size `reduce_copy` runs
        // it only after `warp_aligned_to(N)` found every address `N`-aligned.
        unsafe { self.packs::<UNROLL, N>() };
        if self.bytes_ahead != 0 {
            // SAFETY: as above: `packs::<UNROLL, N>` left `bytes_behind` a multiple of `N`.
            unsafe { self.packs::<1, N>() };
        }
    }

    /// One pass with packs of `N` bytes (NCCL's `reduceCopyPacks`).
    ///
    /// # Safety
    /// `reduce_copy`'s contract holds for `self`'s operands (it built `self`);
    /// `self.bytes_behind` is a multiple of `N`; and when `N` is wider than the element,
    /// every address behind `self` plus `x.offset` is `N`-aligned.
    #[inline(always)]
    unsafe fn packs<const UNROLL: usize, const N: usize>(&mut self)
    where
        Size<N>: PackIo<N> + PackSize,
    {
        let hunk = UNROLL * WARP_SIZE as usize * N;
        let nwarps = (self.nthreads / WARP_SIZE) as isize;
        let warp = (self.thread / WARP_SIZE) as usize;
        let lane = (self.thread % WARP_SIZE) as usize;
        let start = warp * hunk + lane * N;
        let mut thread_behind = self.bytes_behind + start;
        let mut thread_ahead = self.bytes_ahead as isize - start as isize;
        let mut hunks = (self.bytes_ahead / hunk) as isize;
        self.bytes_behind += hunks as usize * hunk;
        self.bytes_ahead -= hunks as usize * hunk;
        if UNROLL == 1 && N <= self.bytes_ahead {
            // Only single packs can do a partial hunk, where some lanes have no pack.
            hunks += 1;
            self.bytes_behind += self.bytes_ahead - self.bytes_ahead % N;
            self.bytes_ahead %= N;
        }
        hunks -= warp as isize;
        while hunks > 0 {
            // Every lane of a warp runs the same iterations (so the rotation below is the
            // same for the whole warp); in a partial hunk, lanes past the end skip the body.
            if UNROLL != 1 || N as isize <= thread_ahead {
                // SAFETY: this pack's hunk lies in the `bytes_ahead` this pass took (whole
                // hunks, or in a partial hunk `N <= thread_ahead` checked just above), so
                // `thread_behind + u·32·N + N` stays within `n_elts` elements, and
                // `thread_behind` is a multiple of `N`; `packs`' own contract gives the rest.
                unsafe { self.hunk::<UNROLL, N>(self.x.offset + thread_behind as u64) };
            }
            thread_behind += nwarps as usize * hunk;
            thread_ahead -= nwarps * hunk as isize;
            hunks -= nwarps;
        }
        // Rotate warps so the one that got the least work here is warp 0 of the next
        // pass: hunks is now in (-nwarps, 0].
        self.thread = (-hunks) as u32 * WARP_SIZE + lane as u32;
    }

    /// This lane's `UNROLL` packs of one hunk, at byte `offset` of every buffer (then
    /// every `32 × N`).
    ///
    /// # Safety
    /// As [`Self::packs`], and the `UNROLL` packs, `offset + u·32·N` for `u < UNROLL`,
    /// lie in the buffers' first `n_elts` elements from `x.offset` and are `N`-aligned.
    #[inline(always)]
    unsafe fn hunk<const UNROLL: usize, const N: usize>(&self, offset: u64)
    where
        Size<N>: PackIo<N> + PackSize,
    {
        let stride = (WARP_SIZE as usize * N) as u64;
        let x = self.x;
        let mut acc = [BytePack::<N>::zeroed(); UNROLL];
        for (u, a) in acc.iter_mut().enumerate() {
            let off = offset + u as u64 * stride;
            *a = if MULTIMEM_SRCS > 0 {
                // SAFETY: `hunk`'s contract: `mc_srcs[0]` is a resolved handle of the caller's
                // first source, `off` stays inside it and keeps `N`-alignment, and `N` is the
                // element size or the big pack that `M::big_pack_size` allowed.
                unsafe { M::ld_reduce::<Op, N>(&self.op, &self.mc_srcs[0], off) }
            } else {
                // SAFETY: `hunk`'s contract: `srcs[0] + off` is an `N`-aligned address of `N`
                // bytes inside source 0 (`nsrcs >= MIN_SRCS >= 1` when there is no multicast
                // source).
                let v = unsafe { pack::ld_volatile_global::<N>(x.srcs[0] + off) };
                if PRE_OP_SRCS > 0 { Op::new(x.pre_op_args[0]).pre_op_pack(v) } else { v }
            };
        }
        for s in 1..MIN_SRCS {
            // SAFETY: `s < MIN_SRCS <= x.nsrcs`, and `hunk`'s contract is `reduce_src`'s but
            // for that bound.
            unsafe { self.reduce_src::<UNROLL, N>(&mut acc, s, offset) };
        }
        for s in MIN_SRCS..x.nsrcs.min(MAX_SRCS) {
            // SAFETY: `s < x.nsrcs`, and `hunk`'s contract is `reduce_src`'s but for that
            // bound.
            unsafe { self.reduce_src::<UNROLL, N>(&mut acc, s, offset) };
        }
        if self.post_op {
            for a in acc.iter_mut() {
                *a = self.op.post_op_pack(*a);
            }
        }
        for d in 0..MIN_DSTS {
            for (u, a) in acc.iter().enumerate() {
                let off = offset + u as u64 * stride;
                if d < MULTIMEM_DSTS {
                    // SAFETY: `d < MULTIMEM_DSTS`, so `mc_dsts[d]` is a resolved handle of
                    // destination `d`; `off` stays inside it and keeps `N`-alignment (`hunk`'s
                    // contract), and `M::st` has an instruction for every pack size
                    // `reduce_copy` picks.
                    unsafe { M::st::<N>(&self.mc_dsts[d], off, *a) };
                } else {
                    // SAFETY: `d < MIN_DSTS <= x.ndsts` is a unicast destination; `dsts[d] +
                    // off` is an `N`-aligned address of `N` bytes inside it (`hunk`'s
                    // contract), and no other lane stores these bytes.
                    unsafe { pack::st_global::<N>(x.dsts[d] + off, *a) };
                }
            }
        }
        for d in MIN_DSTS..x.ndsts.min(MAX_DSTS) {
            for (u, a) in acc.iter().enumerate() {
                // SAFETY: as above, for `d < x.ndsts`.
                unsafe { pack::st_global::<N>(x.dsts[d] + offset + u as u64 * stride, *a) };
            }
        }
    }

    /// Loads source `s`'s `UNROLL` packs (all in flight), then reduces them into `acc`.
    ///
    /// # Safety
    /// As [`Self::hunk`], and `s < x.nsrcs`.
    #[inline(always)]
    unsafe fn reduce_src<const UNROLL: usize, const N: usize>(&self, acc: &mut [BytePack<N>; UNROLL], s: usize, offset: u64)
    where
        Size<N>: PackIo<N> + PackSize,
    {
        let stride = (WARP_SIZE as usize * N) as u64;
        let x = self.x;
        let mut tmp = [BytePack::<N>::zeroed(); UNROLL];
        for (u, t) in tmp.iter_mut().enumerate() {
            let off = offset + u as u64 * stride;
            *t = if s < MULTIMEM_SRCS {
                // SAFETY: `s < MULTIMEM_SRCS`, so `mc_srcs[s]` is a resolved handle of source
                // `s`; `off` stays inside it and keeps `N`-alignment, and `N` is the element
                // size or the big pack that `M::big_pack_size` allowed (`reduce_src`'s
                // contract).
                unsafe { M::ld_reduce::<Op, N>(&self.op, &self.mc_srcs[s], off) }
            } else {
                // SAFETY: `s` is a unicast source below `x.nsrcs`, and `srcs[s] + off` is an
                // `N`-aligned address of `N` bytes inside it (`reduce_src`'s contract).
                unsafe { pack::ld_volatile_global::<N>(x.srcs[s] + off) }
            };
        }
        let pre = (s < PRE_OP_SRCS).then(|| Op::new(x.pre_op_args[s]));
        for u in 0..UNROLL {
            let t = match &pre {
                Some(p) if s >= MULTIMEM_SRCS => p.pre_op_pack(tmp[u]),
                _ => tmp[u],
            };
            acc[u] = self.op.reduce_pack(acc[u], t);
        }
    }
}
