//! Multicast as a type parameter: one generic data path, two ways to reach every
//! device's copy of a buffer.
//!
//! - `HwMulticast` (GPU only): the handle is a multicast address; `ld_reduce` is one
//!   `multimem.ld_reduce` and `st` one `multimem.st`, done by the NVLink switch. It has no
//!   PreMulSum (the switch sums before any pre-op could apply): `ld_reduce` refuses it at
//!   compile time.
//! - [`SwMulticast`]: the handle is the address of a [`SwMulticastTable`] listing each
//!   device's unicast address; `ld_reduce` loads from every peer and reduces in peer
//!   order (so every rank computes bit-identical results), `st` stores to every peer.
//!
//! The work loop runs `SwMulticast`; `HwMulticast` runs in the `ferroccl_nvls_hardware`
//! kernel that `host_shim::nvls_hw` launches once a caller opts in to multicast objects.
//! ferroccl never creates one on shared machines (docs/nvls.md), so there `HwMulticast` is
//! compiled and checked by ptxas only.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// Most devices one multicast handle can reach (one node).
pub const MAX_MULTICAST_PEERS: usize = 8;

/// What a [`SwMulticast`] handle points to, in device memory: the unicast address of the
/// same buffer on each peer. Written by the host before use, read-only on the device.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct SwMulticastTable {
    /// Peers in `peers` (1..=MAX_MULTICAST_PEERS).
    pub npeers: u32,
    /// Zero.
    pub reserved: u32,
    /// Each peer's address of the buffer (generic addresses; peer access enabled).
    pub peers: [u64; MAX_MULTICAST_PEERS],
}

static_assertions::const_assert_eq!(core::mem::size_of::<SwMulticastTable>(), 72);
static_assertions::const_assert_eq!(core::mem::offset_of!(SwMulticastTable, peers), 8);

/// The widest pack (bytes) `multimem.ld_reduce` loads for operator `kind` on `dtype`, 0
/// where it has no form (NCCL's `LoadMultimem_BigPackSize`): 16-bit floats and f32
/// sum in 16-byte packs, f64 sum in 8, 16-bit floats min and max in 16, 32- and 64-bit
/// integers sum, min and max in their own size; nothing for 8-bit integers, float min
/// and max wider than 16 bits, Prod and PreMulSum (its pre-op applies to each input,
/// which the switch sums first). SumPostDiv loads as a sum (its division is a post-op).
/// Always compiled: the hardware flavour uses it, and the host refuses with it what the
/// hardware cannot reduce.
pub const fn multimem_big_pack_size(kind: crate::redop::RedOpKind, dtype: crate::dtype::DataType) -> usize {
    let sum = kind.is_sum() && !matches!(kind, crate::redop::RedOpKind::PreMulSum);
    let (min_max, float, size) = (kind.is_min_max(), dtype.is_float(), dtype.size());
    if float && sum && size < 8 {
        16
    } else if float && sum {
        8
    } else if float && min_max && size == 2 {
        16
    } else if !float && (sum || min_max) && size >= 4 {
        size
    } else {
        0
    }
}

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod flavours {
    use super::{MAX_MULTICAST_PEERS, SwMulticastTable};
    use crate::dtype::DataType;
    use crate::pack::{self, BytePack, PackIo, PackSize, Size};
    #[cfg(target_arch = "nvptx64")]
    use crate::redop::Elem;
    use crate::redop::{RedOp, RedOpKind};

    /// A way to load-and-reduce from, and store to, every device's copy of a buffer.
    pub trait Multicast {
        /// The handle resolved once per thread (registers), then used for every pack.
        type Target: Copy;

        /// Reads what `handle` names (once per call of `reduce_copy`).
        ///
        /// # Safety
        /// `handle` must be a valid handle of this flavour.
        unsafe fn resolve(handle: u64) -> Self::Target;

        /// The bitwise OR of every address behind `target`: its low bits tell the
        /// alignment every access through it has.
        fn address_bits(target: &Self::Target) -> u64;

        /// The widest pack (bytes) that [`Multicast::ld_reduce`] supports for operator
        /// `kind` on `dtype`, 0 when it supports none (NCCL's
        /// `LoadMultimem_BigPackSize`).
        fn big_pack_size(kind: RedOpKind, dtype: DataType) -> usize;

        /// Loads the `N` bytes at `offset` from every device's copy and reduces them.
        /// Ordering: relaxed (like `ld_volatile_global`).
        ///
        /// # Safety
        /// `offset` must stay inside the buffer and keep `N`-byte alignment; `N` must be
        /// an element size or at most `big_pack_size`.
        unsafe fn ld_reduce<Op: RedOp, const N: usize>(op: &Op, target: &Self::Target, offset: u64) -> BytePack<N>
        where
            Size<N>: PackIo<N> + PackSize;

        /// Stores `v` at `offset` in every device's copy. Ordering: weak stores.
        ///
        /// # Safety
        /// As [`Multicast::ld_reduce`].
        unsafe fn st<const N: usize>(target: &Self::Target, offset: u64, v: BytePack<N>)
        where
            Size<N>: PackIo<N> + PackSize;

        /// The smallest of every device's `u64` at `handle` (NCCL's `NvlsMinPolling`: a
        /// step counter that every peer advances). Ordering: acquire at system scope on
        /// each peer's word, so data a peer published before its counter is visible.
        ///
        /// # Safety
        /// `handle` must be a valid handle of this flavour naming 8-byte-aligned words.
        unsafe fn ld_acquire_min_u64(handle: u64) -> u64;

        /// Stores `v` to every device's `u64` at `handle` (a post to a multicast step
        /// counter). Ordering: a relaxed system-scope store to each device's word, in no
        /// particular order among them; the caller's earlier `fence.acq_rel.sys` orders
        /// what it published before every one of them (with [`Multicast::ld_acquire_min_u64`]
        /// on the other side, a release/acquire pair per device).
        ///
        /// # Safety
        /// `handle` must be a valid handle of this flavour naming 8-byte-aligned words that
        /// the caller may write.
        unsafe fn st_relaxed_u64(handle: u64, v: u64);
    }

    /// Multicast done as loops over the peers' unicast addresses.
    pub struct SwMulticast;

    impl Multicast for SwMulticast {
        type Target = SwMulticastTable;

        #[inline(always)]
        unsafe fn resolve(handle: u64) -> SwMulticastTable {
            // SAFETY: a valid `SwMulticast` handle (the caller's contract) is the address of a
            // `SwMulticastTable` in device memory, 8-byte aligned as the type is, which the
            // host wrote before the launch and nothing writes while the kernel runs.
            let table = unsafe { (handle as *const SwMulticastTable).read() };
            if table.npeers == 0 || table.npeers as usize > MAX_MULTICAST_PEERS {
                crate::arch::trap();
            }
            table
        }

        #[inline(always)]
        fn address_bits(target: &SwMulticastTable) -> u64 {
            let mut bits = 0;
            for p in 0..target.npeers as usize {
                bits |= target.peers[p];
            }
            bits
        }

        #[inline(always)]
        fn big_pack_size(_kind: RedOpKind, _dtype: DataType) -> usize {
            16
        }

        #[inline(always)]
        unsafe fn ld_reduce<Op: RedOp, const N: usize>(op: &Op, target: &SwMulticastTable, offset: u64) -> BytePack<N>
        where
            Size<N>: PackIo<N> + PackSize,
        {
            // SAFETY: `target` is a resolved table (`npeers >= 1`, checked by `resolve`)
            // whose `peers[p]`, `p < npeers`, are the peers' addresses of the buffer; the
            // caller keeps `offset` inside that buffer and every `peers[p] + offset`
            // `N`-aligned (this function's contract), and the copies are global memory
            // accessed only through `arch`.
            let mut acc = unsafe { pack::ld_volatile_global::<N>(target.peers[0] + offset) };
            for p in 1..target.npeers as usize {
                // SAFETY: as for `peers[0]` above; `p < npeers`.
                let v = unsafe { pack::ld_volatile_global::<N>(target.peers[p] + offset) };
                acc = op.reduce_pack(acc, v);
            }
            acc
        }

        #[inline(always)]
        unsafe fn st<const N: usize>(target: &SwMulticastTable, offset: u64, v: BytePack<N>)
        where
            Size<N>: PackIo<N> + PackSize,
        {
            for p in 0..target.npeers as usize {
                // SAFETY: as in `ld_reduce`: `peers[p]` (`p < npeers`) is peer `p`'s address of
                // the buffer, and the caller keeps `offset` inside it and the address
                // `N`-aligned and writable.
                unsafe { pack::st_global::<N>(target.peers[p] + offset, v) };
            }
        }

        #[inline(always)]
        unsafe fn ld_acquire_min_u64(handle: u64) -> u64 {
            // SAFETY: this function's contract requires a valid `SwMulticast` handle, which is
            // `resolve`'s.
            let table = unsafe { Self::resolve(handle) };
            let mut min = u64::MAX;
            for p in 0..table.npeers as usize {
                // SAFETY: `peers[p]` (`p < npeers`) names peer `p`'s copy of the counter, an
                // 8-byte-aligned `u64` in global memory (this function's contract), accessed
                // only through `arch`.
                min = min.min(unsafe { crate::arch::ld_acquire_sys_global(table.peers[p] as *const u64) });
            }
            min
        }

        #[inline(always)]
        unsafe fn st_relaxed_u64(handle: u64, v: u64) {
            // SAFETY: this function's contract requires a valid `SwMulticast` handle, which is
            // `resolve`'s.
            let table = unsafe { Self::resolve(handle) };
            for p in 0..table.npeers as usize {
                // SAFETY: `peers[p]` (`p < npeers`) names peer `p`'s copy of the word, an
                // 8-byte-aligned `u64` in global memory the caller may write (this function's
                // contract), accessed only through `arch`.
                unsafe { crate::arch::st_relaxed_sys_global(table.peers[p] as *mut u64, v) };
            }
        }
    }

    /// Multicast through NVLink SHARP's `multimem` instructions (GPU only).
    #[cfg(target_arch = "nvptx64")]
    pub struct HwMulticast;

    #[cfg(target_arch = "nvptx64")]
    impl Multicast for HwMulticast {
        type Target = u64;

        #[inline(always)]
        unsafe fn resolve(handle: u64) -> u64 {
            handle
        }

        #[inline(always)]
        fn address_bits(target: &u64) -> u64 {
            *target
        }

        #[inline(always)]
        fn big_pack_size(kind: RedOpKind, dtype: DataType) -> usize {
            super::multimem_big_pack_size(kind, dtype)
        }

        #[inline(always)]
        unsafe fn ld_reduce<Op: RedOp, const N: usize>(_op: &Op, target: &u64, offset: u64) -> BytePack<N>
        where
            Size<N>: PackIo<N> + PackSize,
        {
            use crate::arch::*;
            use DataType as D;
            use RedOpKind as K;
            // `multimem.ld_reduce` sums in the switch: PreMulSum's pre-op cannot be applied
            // to each device's value first, and reducing without it would be a plain Sum.
            // Refused at compile time for every instantiation.
            const {
                assert!(!matches!(Op::KIND, RedOpKind::PreMulSum), "HwMulticast cannot load-reduce with PreMulSum");
            }
            let a = *target + offset;
            // SumPostDiv is a sum here; its division is the caller's post-op.
            let kind = if Op::KIND == K::SumPostDiv { K::Sum } else { Op::KIND };
            // SAFETY: `a` is the multicast address `target` plus an `offset` that the caller
            // keeps inside the buffer and `N`-aligned (this function's contract), and each
            // arm's instruction moves exactly `N` bytes, so every `multimem` load here gets a
            // multicast address aligned as it requires.
            unsafe {
                match (kind, <Op::Elt as Elem>::DTYPE, N) {
                    (K::Sum, D::F32, 16) => BytePack::from_value(multimem_ld_reduce_add_v4_f32(a)),
                    (K::Sum, D::F16, 16) => BytePack::from_value(multimem_ld_reduce_add_v4_f16x2(a)),
                    (K::Sum, D::Bf16, 16) => BytePack::from_value(multimem_ld_reduce_add_v4_bf16x2(a)),
                    (K::Min, D::F16, 16) => BytePack::from_value(multimem_ld_reduce_min_v4_f16x2(a)),
                    (K::Max, D::F16, 16) => BytePack::from_value(multimem_ld_reduce_max_v4_f16x2(a)),
                    (K::Min, D::Bf16, 16) => BytePack::from_value(multimem_ld_reduce_min_v4_bf16x2(a)),
                    (K::Max, D::Bf16, 16) => BytePack::from_value(multimem_ld_reduce_max_v4_bf16x2(a)),
                    (K::Sum, D::F64, 8) => BytePack::from_value(multimem_ld_reduce_add_f64(a)),
                    (K::Sum, D::F32, 4) => BytePack::from_value(multimem_ld_reduce_add_f32(a)),
                    (K::Sum, D::U32 | D::I32, 4) => BytePack::from_value(multimem_ld_reduce_add_u32(a)),
                    (K::Min, D::U32, 4) => BytePack::from_value(multimem_ld_reduce_min_u32(a)),
                    (K::Max, D::U32, 4) => BytePack::from_value(multimem_ld_reduce_max_u32(a)),
                    (K::Min, D::I32, 4) => BytePack::from_value(multimem_ld_reduce_min_s32(a)),
                    (K::Max, D::I32, 4) => BytePack::from_value(multimem_ld_reduce_max_s32(a)),
                    (K::Sum, D::U64 | D::I64, 8) => BytePack::from_value(multimem_ld_reduce_add_u64(a)),
                    (K::Min, D::U64, 8) => BytePack::from_value(multimem_ld_reduce_min_u64(a)),
                    (K::Max, D::U64, 8) => BytePack::from_value(multimem_ld_reduce_max_u64(a)),
                    (K::Min, D::I64, 8) => BytePack::from_value(multimem_ld_reduce_min_s64(a)),
                    (K::Max, D::I64, 8) => BytePack::from_value(multimem_ld_reduce_max_s64(a)),
                    // No multimem form (e.g. a single 16-bit float: multimem
                    // reduces them only in pairs): the host
                    // refuses such work before it reaches the device.
                    _ => trap(),
                }
            }
        }

        #[inline(always)]
        unsafe fn st<const N: usize>(target: &u64, offset: u64, v: BytePack<N>)
        where
            Size<N>: PackIo<N> + PackSize,
        {
            use crate::arch::*;
            let a = *target + offset;
            // SAFETY: as in `ld_reduce`: `a` is an `N`-aligned multicast address inside the
            // buffer, and each arm stores exactly `N` bytes.
            unsafe {
                match N {
                    16 => multimem_st_v4(a, v.to_value()),
                    8 => multimem_st_b64(a, v.to_value()),
                    4 => multimem_st_b32(a, v.to_value()),
                    // No 16-bit (nor 8-bit) `multimem.st`: the host refuses calls that would
                    // need one (`host_shim::multicast::check_hardware_nvls`).
                    _ => trap(),
                }
            }
        }

        #[inline(always)]
        unsafe fn ld_acquire_min_u64(handle: u64) -> u64 {
            // SAFETY: a valid `HwMulticast` handle naming 8-byte-aligned words (this function's
            // contract) is an 8-byte-aligned multicast address.
            unsafe { crate::arch::multimem_ld_reduce_acquire_min_u64(handle) }
        }

        #[inline(always)]
        unsafe fn st_relaxed_u64(handle: u64, v: u64) {
            // A plain store to the multicast address reaches every device's copy (NCCL's
            // `postPeer` on an NVLS connection does the same).
            // SAFETY: a valid `HwMulticast` handle naming 8-byte-aligned words the caller may
            // write (this function's contract) is an 8-byte-aligned global address.
            unsafe { crate::arch::st_relaxed_sys_global(handle as *mut u64, v) }
        }
    }
}

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use flavours::*;
