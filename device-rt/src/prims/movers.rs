//! The data movers behind the primitives and the staged algorithms: the only code
//! instantiated per type and operator. The protocol code above them (waits, posts,
//! chunking) is written once; each slice picks its mover at run time (one `match` per
//! slice), so the module holds one reducing mover per type × operator for each of the two
//! source shapes (the ring's two sources, the staged algorithms' up to eight), one
//! pre/post-op copy per type of the operators that have them, and one plain copy per
//! element size.

use crate::copy::{Operands, reduce_copy};
use crate::dtype::{Bf16, DataType, F16};
use crate::multicast::SwMulticast;
use crate::redop::{Elem, Max, Min, PreMulSum, Prod, RedOp, RedOpKind, Sum, SumPostDiv};

/// Hunks per warp iteration of the data copies (NCCL's `COLL_UNROLL`).
pub const UNROLL: usize = 8;

/// What a primitives group computes on the data it moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataOp {
    /// The element type.
    pub dtype: DataType,
    /// The operator (Sum for functions that only move data).
    pub op: RedOpKind,
    /// The operator's argument (PreMulSum's scalar bits, SumPostDiv's divisor).
    pub arg: u64,
}

impl DataOp {
    /// Bytes per element.
    pub const fn elt(&self) -> u64 {
        self.dtype.size() as u64
    }

    /// True when the operator transforms the user input before reducing it.
    pub const fn has_pre_op(&self) -> bool {
        matches!(self.op, RedOpKind::PreMulSum)
    }

    /// True when the operator transforms the reduced result.
    pub const fn has_post_op(&self) -> bool {
        matches!(self.op, RedOpKind::SumPostDiv)
    }
}

/// Who moves a slice: threads `0..nthreads` of a group, this one being `tid`.
#[derive(Clone, Copy)]
pub struct Movers {
    pub tid: u32,
    pub nthreads: u32,
}

/// Copies `n` elements from `src` to the first `ndsts` (1 or 2) of `dsts`, moving bits:
/// one instance per element size.
///
/// # Safety
/// `w.nthreads` is a multiple of 32 and every thread `0..w.nthreads` of the group calls
/// it with the same arguments; `elt` is 1, 2, 4 or 8; `ndsts` is 1 or 2; `src` and the
/// first `ndsts` of `dsts` each hold `n` elements of `elt` bytes and are aligned to
/// `elt`; destinations overlap the source only exactly (as [`reduce_copy`] requires).
#[inline(never)]
pub unsafe fn copy(w: Movers, elt: u64, src: u64, dsts: [u64; 2], ndsts: usize, n: usize) {
    // SAFETY: `elt` picks an element type of exactly `elt` bytes (the last arm: 8), so
    // `copy_typed`'s contract is this function's, which the caller keeps.
    unsafe {
        match elt {
            1 => copy_typed::<u8>(w, src, dsts, ndsts, n),
            2 => copy_typed::<F16>(w, src, dsts, ndsts, n),
            4 => copy_typed::<u32>(w, src, dsts, ndsts, n),
            _ => copy_typed::<u64>(w, src, dsts, ndsts, n),
        }
    }
}

/// [`copy`] with the element type `T`.
///
/// # Safety
/// As [`copy`], with `elt = size_of::<T>()`.
#[inline(never)]
unsafe fn copy_typed<T: Elem>(w: Movers, src: u64, dsts: [u64; 2], ndsts: usize, n: usize) {
    let x = Operands::<1, 2> { srcs: [src], nsrcs: 1, dsts, ndsts, pre_op_args: [0], offset: 0 };
    // SAFETY: one source and `ndsts` (1 or 2) destinations of `n` elements of `T`, element-
    // aligned, no multicast, called by every thread `0..w.nthreads` (a multiple of 32) with the
    // same arguments: `reduce_copy`'s contract for these bounds, which this function's caller
    // keeps.
    unsafe { reduce_copy::<UNROLL, Sum<T>, SwMulticast, 0, 1, 1, 0, 1, 2, 0>(w.tid, w.nthreads, 0, false, &x, n) }
}

/// Reduces the first `nsrcs` (2..=`MAX_SRCS`) of `srcs` in order, `srcs[0]` first (every
/// element rounded after each operation: `((s0 ⊕ s1) ⊕ s2) ⊕ …`), into the first `ndsts`
/// (1 or 2) of `dsts`. The first `PRE_OP_SRCS` sources get the operator's pre-op, the
/// result its post-op when `post_op`. One instance per type × operator of each of the two
/// shapes used: the ring reduces the user input (pre-op) with one received source
/// (`<2, 1>`), the staged algorithms every rank's staged data, whose pre-op was applied
/// when it was staged (`<MAX_STAGED_RANKS, 0>`).
///
/// # Safety
/// As [`copy`], with `2 <= nsrcs <= MAX_SRCS` sources each holding `n` elements of
/// `d.dtype`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce<const MAX_SRCS: usize, const PRE_OP_SRCS: usize>(
    w: Movers,
    d: DataOp,
    post_op: bool,
    srcs: [u64; MAX_SRCS],
    nsrcs: usize,
    dsts: [u64; 2],
    ndsts: usize,
    n: usize,
) {
    let x = Operands::<MAX_SRCS, 2> { srcs, nsrcs, dsts, ndsts, pre_op_args: [d.arg; MAX_SRCS], offset: 0 };
    // SAFETY: each arm's type is `d.dtype`'s, so `reduce_op`'s contract is this function's.
    unsafe {
        match d.dtype {
            DataType::I8 => reduce_op::<i8, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
            DataType::U8 => reduce_op::<u8, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
            DataType::I32 => reduce_op::<i32, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
            DataType::U32 => reduce_op::<u32, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
            DataType::I64 => reduce_op::<i64, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
            DataType::U64 => reduce_op::<u64, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
            DataType::F16 => reduce_op::<F16, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
            DataType::F32 => reduce_op::<f32, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
            DataType::F64 => reduce_op::<f64, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
            DataType::Bf16 => reduce_op::<Bf16, MAX_SRCS, PRE_OP_SRCS>(w, d, post_op, &x, n),
        }
    }
}

/// [`reduce`] with the element type `T`.
///
/// # Safety
/// As [`reduce`], for `x`'s buffers, with `T` the type `d.dtype` names.
unsafe fn reduce_op<T: Elem, const MAX_SRCS: usize, const PRE_OP_SRCS: usize>(w: Movers, d: DataOp, post_op: bool, x: &Operands<MAX_SRCS, 2>, n: usize) {
    // SAFETY: each arm's operator is `d.op`'s, and `reduce_typed`'s contract is this
    // function's.
    unsafe {
        match d.op {
            RedOpKind::Sum => reduce_typed::<Sum<T>, MAX_SRCS, PRE_OP_SRCS>(w, d.arg, post_op, x, n),
            RedOpKind::Prod => reduce_typed::<Prod<T>, MAX_SRCS, PRE_OP_SRCS>(w, d.arg, post_op, x, n),
            RedOpKind::Max => reduce_typed::<Max<T>, MAX_SRCS, PRE_OP_SRCS>(w, d.arg, post_op, x, n),
            RedOpKind::Min => reduce_typed::<Min<T>, MAX_SRCS, PRE_OP_SRCS>(w, d.arg, post_op, x, n),
            RedOpKind::PreMulSum => reduce_typed::<PreMulSum<T>, MAX_SRCS, PRE_OP_SRCS>(w, d.arg, post_op, x, n),
            RedOpKind::SumPostDiv => reduce_typed::<SumPostDiv<T>, MAX_SRCS, PRE_OP_SRCS>(w, d.arg, post_op, x, n),
        }
    }
}

/// [`reduce`] with the operator `Op`.
///
/// # Safety
/// As [`reduce`], for `x`'s buffers, with elements of `Op::Elt`.
#[inline(never)]
unsafe fn reduce_typed<Op: RedOp, const MAX_SRCS: usize, const PRE_OP_SRCS: usize>(w: Movers, arg: u64, post_op: bool, x: &Operands<MAX_SRCS, 2>, n: usize) {
    // SAFETY: 2..=MAX_SRCS unicast sources, `ndsts` (1 or 2) destinations, each holding `n`
    // elements of `Op::Elt` and element-aligned, every thread of the group calling with the
    // same arguments (`reduce_typed`'s contract): `reduce_copy`'s contract for these bounds.
    unsafe { reduce_copy::<UNROLL, Op, SwMulticast, 0, 2, MAX_SRCS, 0, 1, 2, PRE_OP_SRCS>(w.tid, w.nthreads, arg, post_op, x, n) }
}

/// Copies `n` elements from `src` to the first `ndsts` of `dsts` through the operator's
/// pre-op (when `pre_op`) and post-op (when `post_op`): a one-source reduction. Operators
/// without either are plain copies.
///
/// # Safety
/// As [`copy`], with elements of `d.dtype`.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn transform(w: Movers, d: DataOp, pre_op: bool, post_op: bool, src: u64, dsts: [u64; 2], ndsts: usize, n: usize) {
    let pre = pre_op && d.has_pre_op();
    let post = post_op && d.has_post_op();
    if !pre && !post {
        // SAFETY: a plain copy of `n` elements of `d.elt()` bytes: the same buffers and callers
        // as this function's contract, which is `copy`'s.
        return unsafe { copy(w, d.elt(), src, dsts, ndsts, n) };
    }
    // SAFETY: each arm's type is `d.dtype`'s, so `transform_op`'s contract is this function's.
    unsafe {
        match d.dtype {
            DataType::I8 => transform_op::<i8>(w, d, src, dsts, ndsts, n),
            DataType::U8 => transform_op::<u8>(w, d, src, dsts, ndsts, n),
            DataType::I32 => transform_op::<i32>(w, d, src, dsts, ndsts, n),
            DataType::U32 => transform_op::<u32>(w, d, src, dsts, ndsts, n),
            DataType::I64 => transform_op::<i64>(w, d, src, dsts, ndsts, n),
            DataType::U64 => transform_op::<u64>(w, d, src, dsts, ndsts, n),
            DataType::F16 => transform_op::<F16>(w, d, src, dsts, ndsts, n),
            DataType::F32 => transform_op::<f32>(w, d, src, dsts, ndsts, n),
            DataType::F64 => transform_op::<f64>(w, d, src, dsts, ndsts, n),
            DataType::Bf16 => transform_op::<Bf16>(w, d, src, dsts, ndsts, n),
        }
    }
}

/// [`transform`] with the element type `T`, for the operators that have a pre- or
/// post-op (traps on the others).
///
/// # Safety
/// As [`transform`], with `T` the type `d.dtype` names.
unsafe fn transform_op<T: Elem>(w: Movers, d: DataOp, src: u64, dsts: [u64; 2], ndsts: usize, n: usize) {
    let x = Operands::<1, 2> { srcs: [src], nsrcs: 1, dsts, ndsts, pre_op_args: [d.arg], offset: 0 };
    // SAFETY: each arm's operator is `d.op`'s, and `transform_typed`'s contract is this
    // function's.
    unsafe {
        match d.op {
            RedOpKind::PreMulSum => transform_typed::<PreMulSum<T>>(w, d.arg, &x, n),
            RedOpKind::SumPostDiv => transform_typed::<SumPostDiv<T>>(w, d.arg, &x, n),
            _ => crate::arch::trap(),
        }
    }
}

/// [`transform`] with the operator `Op`.
///
/// # Safety
/// As [`transform`], for `x`'s buffers, with elements of `Op::Elt`.
#[inline(never)]
unsafe fn transform_typed<Op: RedOp>(w: Movers, arg: u64, x: &Operands<1, 2>, n: usize) {
    // SAFETY: one unicast source, `ndsts` (1 or 2) destinations, each holding `n` elements of
    // `Op::Elt` and element-aligned, every thread of the group calling with the same arguments
    // (`transform_typed`'s contract): `reduce_copy`'s contract for these bounds.
    unsafe { reduce_copy::<UNROLL, Op, SwMulticast, 0, 1, 1, 0, 1, 2, 1>(w.tid, w.nthreads, arg, true, x, n) }
}
