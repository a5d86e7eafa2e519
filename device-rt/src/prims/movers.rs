//! The data movers behind the primitives and the one-shot/two-shot algorithms: the only
//! code instantiated per type and operator. The protocol code above them (waits, posts,
//! chunking) is written once; each slice picks its mover at run time (one `match` per
//! slice), so the module holds one reducing mover per type × operator for each of the two
//! source shapes (the ring's two sources, the one-shot/two-shot algorithms' up to eight),
//! one pre/post-op copy per type of the operators that have them, and one plain copy per
//! element size. NVLS's multicast moves ([`MulticastMovers`]) reuse them in the software
//! twin; the hardware flavour has movers of its own (a `multimem` load-reduce per type ×
//! operator of its table, a `multimem` store per element size), on the GPU only.

use crate::copy::{Operands, reduce_copy};
use crate::dtype::{Bf16, DataType, F16};
use crate::conn::MAX_SHOT_RANKS;
use crate::multicast::{MAX_MULTICAST_PEERS, Multicast, SwMulticast, SwMulticastTable};
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
/// As `copy`, with `elt = size_of::<T>()`.
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
/// (`<2, 1>`), the one-shot/two-shot algorithms every rank's staged data, whose pre-op was
/// applied when it was staged (`<MAX_SHOT_RANKS, 0>`).
///
/// # Safety
/// As `copy`, with `2 <= nsrcs <= MAX_SRCS` sources each holding `n` elements of
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
/// As `copy`, with elements of `d.dtype`.
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


/// NVLS's data movement for a multicast flavour: `n` elements from `src` to `dst`, where
/// `src` is a multicast handle when `mc_src` (every device's copy loaded and reduced in
/// device order) and `dst` one when `mc_dst` (stored to every device's copy); the other
/// side is a unicast address. With a multicast source the operator reduces without its
/// pre-op (NVLS applies it when scattering) and `post_op` applies its post-op; a unicast
/// source is copied as bits.
pub trait MulticastMovers: Multicast {
    /// See [`MulticastMovers`].
    ///
    /// # Safety
    /// As `copy`, with `mc_src || mc_dst`; a multicast side is a valid handle of this
    /// flavour naming buffers of `n` elements of `d.dtype` (element-aligned) on 2 or more
    /// devices, a unicast side holds them; destinations overlap no source.
    #[allow(clippy::too_many_arguments)]
    unsafe fn multimem(w: Movers, d: DataOp, mc_src: bool, mc_dst: bool, post_op: bool, src: u64, dst: u64, n: usize);
}

static_assertions::const_assert_eq!(MAX_MULTICAST_PEERS, MAX_SHOT_RANKS);

/// The software twin moves through the unicast movers above (no code of its own): a
/// multicast source is [`reduce`]'s sources (every peer, in peer order: the bits of
/// `SwMulticast::ld_reduce`), a multicast destination its destinations two at a time
/// (each pair reduced from the sources again, so no thread reads another's stores).
/// Inlined into the primitives' operations: as a function of its own, one more call level
/// under the work loop, it pushed the loop into spills (ptxas 13.0).
impl MulticastMovers for SwMulticast {
    #[inline(always)]
    unsafe fn multimem(w: Movers, d: DataOp, mc_src: bool, mc_dst: bool, post_op: bool, src: u64, dst: u64, n: usize) {
        // SAFETY: a multicast side is a valid `SwMulticast` handle (this function's contract),
        // which is `resolve`'s.
        let table = |handle: u64| unsafe { Self::resolve(handle) };
        let one = |addr: u64| SwMulticastTable { npeers: 1, peers: [addr; MAX_MULTICAST_PEERS], ..SwMulticastTable::default() };
        let targets = if mc_dst { table(dst) } else { one(dst) };
        let sources = if mc_src { table(src) } else { one(src) };
        if (mc_src && sources.npeers < 2) || !(mc_src || mc_dst) {
            crate::arch::trap();
        }
        let ntargets = targets.npeers as usize;
        for k in (0..ntargets).step_by(2) {
            let pair = [targets.peers[k], targets.peers[(k + 1).min(ntargets - 1)]];
            let ndsts = if k + 1 < ntargets { 2 } else { 1 };
            // SAFETY: the sources are every peer's copy (or the one unicast source) and the pair
            // two peers' copies (or the one unicast destination), each holding `n` elements of
            // `d.dtype`, element-aligned, disjoint from the sources, and every worker calls this
            // with the same arguments (this function's contract): `reduce`'s contract with
            // `2 <= npeers <= MAX_SHOT_RANKS` sources, and `copy`'s.
            unsafe {
                if mc_src {
                    reduce::<MAX_SHOT_RANKS, 0>(w, d, post_op, sources.peers, sources.npeers as usize, pair, ndsts, n);
                } else {
                    copy(w, d.elt(), sources.peers[0], pair, ndsts, n);
                }
            }
        }
    }
}
/// The hardware flavour: `multimem.ld_reduce` and `multimem.st` through `reduce_copy`,
/// for the types and operators NCCL's table has (PreMulSum and Prod have none).
/// Compiled for the GPU only; never launched on shared machines (docs/nvls.md).
#[cfg(target_arch = "nvptx64")]
impl MulticastMovers for crate::multicast::HwMulticast {
    #[inline(never)]
    unsafe fn multimem(w: Movers, d: DataOp, mc_src: bool, mc_dst: bool, post_op: bool, src: u64, dst: u64, n: usize) {
        // SAFETY: forwarded: this function's contract is `multimem_generic`'s.
        unsafe { multimem_generic::<Self>(w, d, mc_src, mc_dst, post_op, src, dst, n) }
    }
}

/// [`MulticastMovers::multimem`] through `reduce_copy` with flavour `M`'s instructions.
///
/// # Safety
/// As [`MulticastMovers::multimem`].
#[cfg(target_arch = "nvptx64")]
#[allow(clippy::too_many_arguments)]
unsafe fn multimem_generic<M: Multicast>(w: Movers, d: DataOp, mc_src: bool, mc_dst: bool, post_op: bool, src: u64, dst: u64, n: usize) {
    let x = Operands::<1, 1> { srcs: [src], nsrcs: 1, dsts: [dst], ndsts: 1, pre_op_args: [d.arg], offset: 0 };
    // SAFETY: each arm passes the handles as this function's contract gives them (a multicast
    // source when `mc_src`, a multicast destination when `mc_dst`), which is the callees'
    // contract; the `multicast_store` types have `d.elt()` bytes (the last arm: 8). 1-byte
    // elements have no `multimem.st` (the host refuses them).
    unsafe {
        match (mc_src, mc_dst) {
            (true, true) => multimem_reduce::<M, 1>(w, d, post_op, &x, n),
            (true, false) => multimem_reduce::<M, 0>(w, d, post_op, &x, n),
            (false, true) => match d.elt() {
                1 => crate::arch::trap(),
                2 => multicast_store::<M, F16>(w, &x, n),
                4 => multicast_store::<M, u32>(w, &x, n),
                _ => multicast_store::<M, u64>(w, &x, n),
            },
            (false, false) => crate::arch::trap(),
        }
    }
}

/// [`multimem_generic`] with a multicast source (and a multicast destination when
/// `MULTIMEM_DSTS` is 1), for the types and operators `multimem.ld_reduce` has
/// (`multimem_big_pack_size`; the host refuses the others: they trap here, so no code is
/// built for them).
///
/// # Safety
/// As [`MulticastMovers::multimem`], with `x.srcs[0]` a multicast handle (and `x.dsts[0]`
/// one when `MULTIMEM_DSTS` is 1).
#[cfg(target_arch = "nvptx64")]
unsafe fn multimem_reduce<M: Multicast, const MULTIMEM_DSTS: usize>(w: Movers, d: DataOp, post_op: bool, x: &Operands<1, 1>, n: usize) {
    // SAFETY: each arm's type is `d.dtype`'s, so the callees' contract is this function's.
    unsafe {
        match d.dtype {
            DataType::I8 | DataType::U8 => crate::arch::trap(),
            DataType::F32 => multimem_sum::<M, f32, MULTIMEM_DSTS>(w, d, post_op, x, n),
            DataType::F64 => multimem_sum::<M, f64, MULTIMEM_DSTS>(w, d, post_op, x, n),
            DataType::I32 => multimem_reduce_op::<M, i32, MULTIMEM_DSTS>(w, d, post_op, x, n),
            DataType::U32 => multimem_reduce_op::<M, u32, MULTIMEM_DSTS>(w, d, post_op, x, n),
            DataType::I64 => multimem_reduce_op::<M, i64, MULTIMEM_DSTS>(w, d, post_op, x, n),
            DataType::U64 => multimem_reduce_op::<M, u64, MULTIMEM_DSTS>(w, d, post_op, x, n),
            DataType::F16 => multimem_reduce_op::<M, F16, MULTIMEM_DSTS>(w, d, post_op, x, n),
            DataType::Bf16 => multimem_reduce_op::<M, Bf16, MULTIMEM_DSTS>(w, d, post_op, x, n),
        }
    }
}

/// [`multimem_reduce`] for a type `multimem.ld_reduce` sums only (f32, f64).
///
/// # Safety
/// As [`multimem_reduce`], with `T` the type `d.dtype` names.
#[cfg(target_arch = "nvptx64")]
unsafe fn multimem_sum<M: Multicast, T: Elem, const MULTIMEM_DSTS: usize>(w: Movers, d: DataOp, post_op: bool, x: &Operands<1, 1>, n: usize) {
    // SAFETY: each arm's operator reduces as `d.op` does, and `multimem_reduce_typed`'s
    // contract is this function's.
    unsafe {
        match d.op {
            RedOpKind::Sum => multimem_reduce_typed::<M, Sum<T>, MULTIMEM_DSTS>(w, d.arg, post_op, x, n),
            RedOpKind::SumPostDiv => multimem_reduce_typed::<M, SumPostDiv<T>, MULTIMEM_DSTS>(w, d.arg, post_op, x, n),
            _ => crate::arch::trap(),
        }
    }
}

/// [`multimem_reduce`] for a type `multimem.ld_reduce` sums, and takes the min and max of.
///
/// # Safety
/// As [`multimem_reduce`], with `T` the type `d.dtype` names.
#[cfg(target_arch = "nvptx64")]
unsafe fn multimem_reduce_op<M: Multicast, T: Elem, const MULTIMEM_DSTS: usize>(w: Movers, d: DataOp, post_op: bool, x: &Operands<1, 1>, n: usize) {
    // SAFETY: each arm's operator reduces as `d.op` does, and `multimem_reduce_typed`'s
    // contract is this function's.
    unsafe {
        match d.op {
            RedOpKind::Sum => multimem_reduce_typed::<M, Sum<T>, MULTIMEM_DSTS>(w, d.arg, post_op, x, n),
            RedOpKind::SumPostDiv => multimem_reduce_typed::<M, SumPostDiv<T>, MULTIMEM_DSTS>(w, d.arg, post_op, x, n),
            RedOpKind::Max => multimem_reduce_typed::<M, Max<T>, MULTIMEM_DSTS>(w, d.arg, post_op, x, n),
            RedOpKind::Min => multimem_reduce_typed::<M, Min<T>, MULTIMEM_DSTS>(w, d.arg, post_op, x, n),
            _ => crate::arch::trap(),
        }
    }
}

/// [`multimem_reduce`] with the operator `Op`.
///
/// # Safety
/// As [`multimem_reduce`], with elements of `Op::Elt`.
#[cfg(target_arch = "nvptx64")]
#[inline(never)]
unsafe fn multimem_reduce_typed<M: Multicast, Op: RedOp, const MULTIMEM_DSTS: usize>(w: Movers, arg: u64, post_op: bool, x: &Operands<1, 1>, n: usize) {
    // SAFETY: one multicast source, one destination (a multicast handle when `MULTIMEM_DSTS`
    // is 1), each naming `n` elements of `Op::Elt`, element-aligned, every thread of the group
    // calling with the same arguments (this function's contract): `reduce_copy`'s contract
    // for these bounds.
    unsafe { reduce_copy::<UNROLL, Op, M, 1, 1, 1, MULTIMEM_DSTS, 1, 1, 0>(w.tid, w.nthreads, arg, post_op, x, n) }
}

/// Stores `n` elements of `T` from the unicast `x.srcs[0]` to every device's copy of the
/// multicast `x.dsts[0]`, moving bits.
///
/// # Safety
/// As [`MulticastMovers::multimem`], with `x.dsts[0]` a multicast handle and elements of `T`'s size.
#[cfg(target_arch = "nvptx64")]
#[inline(never)]
unsafe fn multicast_store<M: Multicast, T: Elem>(w: Movers, x: &Operands<1, 1>, n: usize) {
    // SAFETY: one unicast source, one multicast destination, each naming `n` elements of `T`,
    // element-aligned, every thread of the group calling with the same arguments (this
    // function's contract): `reduce_copy`'s contract for these bounds.
    unsafe { reduce_copy::<UNROLL, Sum<T>, M, 0, 1, 1, 1, 1, 1, 0>(w.tid, w.nthreads, 0, false, x, n) }
}
