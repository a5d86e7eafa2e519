//! `reduce_copy` over a whole grid, driven by a [`ReduceCopyArgs`] block: the bodies of
//! the standalone `reduce_copy_<dtype>` kernels (self-tests, benchmark), shared by the
//! GPU entry points and the host twin.

use core::mem::size_of;

use super::{Operands, reduce_copy};
use crate::arch;
use crate::multicast::{Multicast, SwMulticast};
use crate::redop::{Elem, Max, Min, PreMulSum, Prod, RedOp, RedOpKind, Sum, SumPostDiv};
use crate::abi::{REDUCE_COPY_MAX_BUFFERS as MAX_BUFFERS, ReduceCopyArgs};

/// Hunks per warp iteration (NCCL's `COLL_UNROLL` on Hopper).
pub const UNROLL: usize = 4;

/// Share `index` of `count`, `[begin, end)`, of `n` elements of `elt` bytes: equal
/// shares, each starting on a 16-byte boundary of the buffers.
fn share_of(n: u64, elt: usize, (index, count): (u32, u32)) -> (u64, u64) {
    let quantum = (16 / elt) as u64;
    let per = n.div_ceil(u64::from(count.max(1))).div_ceil(quantum) * quantum;
    let begin = (u64::from(index) * per).min(n);
    (begin, (begin + per).min(n))
}

/// This CTA's share of a grid-wide job: its index and the grid's CTAs.
fn cta_part() -> (u32, u32) {
    (arch::block_idx(), arch::grid_dim())
}

/// Runs `reduce_copy` with operator `Op` and multicast flavour `M` on this CTA's share
/// of `a`'s elements, with all threads of the CTA.
///
/// # Safety
/// `a` is a valid block as [`ReduceCopyArgs`] documents it (`nsrcs` and `ndsts` in
/// `1..=8`); its buffers hold `n_elts` elements aligned to the element size (the first
/// `MULTIMEM_SRCS` sources and `MULTIMEM_DSTS` destinations are `M` handles of such
/// buffers, at most one of each); the block is a multiple of 32 threads and every thread
/// calls this.
#[inline(always)]
pub unsafe fn reduce_copy_share<Op: RedOp, M: Multicast, const MULTIMEM_SRCS: usize, const MULTIMEM_DSTS: usize>(
    a: &ReduceCopyArgs,
) {
    let elt = size_of::<Op::Elt>();
    let (begin, end) = share_of(a.n_elts, elt, cta_part());
    let x = Operands::<MAX_BUFFERS, MAX_BUFFERS> {
        srcs: a.srcs,
        nsrcs: a.nsrcs as usize,
        dsts: a.dsts,
        ndsts: a.ndsts as usize,
        pre_op_args: a.pre_op_args,
        offset: begin * elt as u64,
    };
    // SAFETY: `a` is a valid argument block (this function's contract), so `1 <= nsrcs, ndsts
    // <= MAX_BUFFERS` and `MULTIMEM_* <= 1 = MIN_*`, and its first `MULTIMEM_*` buffers are `M`
    // handles; `share_of` gives a share `[begin, end)` of `n_elts` that starts on a 16-byte
    // boundary, so every buffer holds the `end - begin` elements from `x.offset`, aligned to
    // the element size; and every thread of the block (a multiple of 32) calls this with the
    // same `a`.
    unsafe {
        reduce_copy::<UNROLL, Op, M, MULTIMEM_SRCS, 1, MAX_BUFFERS, MULTIMEM_DSTS, 1, MAX_BUFFERS, MAX_BUFFERS>(
            arch::thread_idx(),
            arch::block_dim(),
            a.red_arg,
            a.post_op != 0,
            &x,
            (end - begin) as usize,
        )
    }
}

/// Runs `reduce_copy` with exactly `NSRCS` unicast sources and `NDSTS` destinations,
/// all unrolled at compile time, and no pre- or post-op, on share `part.0` of `part.1`
/// equal shares of `n_elts`: the shapes collectives move data with (copy,
/// recv-reduce-send, …).
///
/// # Safety
/// Every buffer holds `n_elts` elements aligned to the element size; the block is a
/// multiple of 32 threads and every thread calls this.
#[inline(always)]
pub unsafe fn reduce_copy_grid<Op: RedOp, const NSRCS: usize, const NDSTS: usize>(
    srcs: [u64; NSRCS],
    dsts: [u64; NDSTS],
    n_elts: u64,
    part: (u32, u32),
) {
    let elt = size_of::<Op::Elt>();
    let (begin, end) = share_of(n_elts, elt, part);
    let x = Operands::<NSRCS, NDSTS> {
        srcs,
        nsrcs: NSRCS,
        dsts,
        ndsts: NDSTS,
        pre_op_args: [0; NSRCS],
        offset: begin * elt as u64,
    };
    // SAFETY: the share `[begin, end)` is inside the `n_elts` elements every buffer holds and
    // starts on a 16-byte boundary (`share_of`), so the buffers stay element-aligned from
    // `x.offset`; the counts are exactly `NSRCS`/`NDSTS` with no multicast; and every thread of
    // the block (a multiple of 32) calls this with the same arguments (this function's
    // contract).
    unsafe {
        reduce_copy::<UNROLL, Op, SwMulticast, 0, NSRCS, NSRCS, 0, NDSTS, NDSTS, 0>(
            arch::thread_idx(),
            arch::block_dim(),
            0,
            false,
            &x,
            (end - begin) as usize,
        )
    }
}

/// [`reduce_copy_grid`] over the first `NSRCS` sources and `NDSTS` destinations of `a`
/// (its counts and operator are ignored): the fixed-shape benchmark kernels' body.
///
/// # Safety
/// As [`reduce_copy_grid`].
#[inline(always)]
pub unsafe fn reduce_copy_fixed<Op: RedOp, const NSRCS: usize, const NDSTS: usize>(a: &ReduceCopyArgs) {
    // SAFETY: the first `NSRCS` sources and `NDSTS` destinations of `a` are the buffers this
    // function's contract (`reduce_copy_grid`'s) speaks of, and `cta_part` is a valid share of
    // the grid.
    unsafe {
        reduce_copy_grid::<Op, NSRCS, NDSTS>(
            core::array::from_fn(|s| a.srcs[s]),
            core::array::from_fn(|d| a.dsts[d]),
            a.n_elts,
            cta_part(),
        )
    }
}

/// The operator a raw argument names.
pub fn op_kind(op: u32) -> Option<RedOpKind> {
    u8::try_from(op).ok().and_then(RedOpKind::from_u8)
}

/// `reduce_copy` over `a` with elements of type `T` and the operator `a.op` names:
/// unicast buffers with any operator, or a software multicast source or destination
/// with Sum. Traps on arguments the host must have refused.
///
/// # Safety
/// As [`reduce_copy_share`].
#[inline(always)]
pub unsafe fn reduce_copy_args<T: Elem>(a: &ReduceCopyArgs) {
    type Sw = SwMulticast;
    // SAFETY: each arm passes `a` to `reduce_copy_share` with the multicast flavour and counts
    // its flags name (a flag set means that buffer is a `SwMulticast` handle, as
    // `ReduceCopyArgs` documents), which is that function's contract, the caller's.
    unsafe {
        match (op_kind(a.op), a.multicast_src, a.multicast_dst) {
            (Some(RedOpKind::Sum), 0, 0) => reduce_copy_share::<Sum<T>, Sw, 0, 0>(a),
            (Some(RedOpKind::Prod), 0, 0) => reduce_copy_share::<Prod<T>, Sw, 0, 0>(a),
            (Some(RedOpKind::Min), 0, 0) => reduce_copy_share::<Min<T>, Sw, 0, 0>(a),
            (Some(RedOpKind::Max), 0, 0) => reduce_copy_share::<Max<T>, Sw, 0, 0>(a),
            (Some(RedOpKind::PreMulSum), 0, 0) => reduce_copy_share::<PreMulSum<T>, Sw, 0, 0>(a),
            (Some(RedOpKind::SumPostDiv), 0, 0) => reduce_copy_share::<SumPostDiv<T>, Sw, 0, 0>(a),
            (Some(RedOpKind::Sum), 1, 0) => reduce_copy_share::<Sum<T>, Sw, 1, 0>(a),
            (Some(RedOpKind::Sum), 0, 1) => reduce_copy_share::<Sum<T>, Sw, 0, 1>(a),
            _ => arch::trap(),
        }
    }
}
