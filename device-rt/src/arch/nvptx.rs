//! `arch` on the GPU: thin, `#[inline(always)]` wrappers around single PTX instructions.
//!
//! Conventions:
//! - Pointers are generic addresses (what `cuMemAlloc` returns); functions that use the
//!   `.global` state space convert with `cvta.to.global` inside the same asm block, which
//!   ptxas folds away.
//! - Every `asm!` here keeps the default (memory-clobbering) semantics unless it is a pure
//!   register read, so the compiler never moves ordinary loads and stores across a fence,
//!   barrier or ordered access.

use core::arch::{asm, global_asm};

/// Threads per warp on every NVIDIA GPU we target.
pub const WARP_SIZE: u32 = 32;

// ---------------------------------------------------------------------------------------
// Thread, block and grid indices (x dimension only: ferroccl launches 1-D grids).
// ---------------------------------------------------------------------------------------

macro_rules! special_register_u32 {
    ($(#[$doc:meta])* $name:ident, $reg:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name() -> u32 {
            let v: u32;
            // SAFETY: reading a special register has no side effects.
            unsafe { asm!(concat!("mov.u32 {0}, ", $reg, ";"), out(reg32) v, options(nomem, nostack, pure)) };
            v
        }
    };
}

special_register_u32!(
    /// `%tid.x`: this thread's index in its CTA.
    thread_idx, "%tid.x");
special_register_u32!(
    /// `%ntid.x`: threads per CTA.
    block_dim, "%ntid.x");
special_register_u32!(
    /// `%ctaid.x`: this CTA's index in the grid.
    block_idx, "%ctaid.x");
special_register_u32!(
    /// `%nctaid.x`: CTAs in the grid.
    grid_dim, "%nctaid.x");
special_register_u32!(
    /// `%laneid`: this thread's lane in its warp.
    lane_id, "%laneid");
special_register_u32!(
    /// `%smid`: the SM this thread runs on (may change across preemption; diagnostics only).
    sm_id, "%smid");
special_register_u32!(
    /// `%dynamic_smem_size`: bytes of dynamic shared memory this launch was given.
    dynamic_smem_size, "%dynamic_smem_size");

/// This thread's warp within its CTA (`thread_idx() / 32`, not the physical `%warpid`).
#[inline(always)]
pub fn warp_idx() -> u32 {
    thread_idx() / WARP_SIZE
}

// ---------------------------------------------------------------------------------------
// Barriers.
// ---------------------------------------------------------------------------------------

/// `barrier.sync id, nthreads`: waits until `nthreads` threads (a multiple of 32) have
/// arrived at named barrier `id` (0..16).
///
/// Ordering: memory accesses made by the participating threads before the barrier are
/// performed, at CTA scope, before any participant continues past it.
///
/// The unaligned `barrier.sync` form is used on purpose: `bar.sync` is `.aligned` and is
/// undefined where the compiler may have split a convergent path.
#[inline(always)]
pub fn barrier_sync(id: u32, nthreads: u32) {
    // SAFETY: a barrier only blocks; the caller's thread counts decide progress.
    unsafe { asm!("barrier.sync {0}, {1};", in(reg32) id, in(reg32) nthreads, options(nostack)) };
}

/// `barrier.sync 0`: every thread of the CTA. Same ordering as [`barrier_sync`].
#[inline(always)]
pub fn barrier_sync_all() {
    // SAFETY: as for `barrier_sync`.
    unsafe { asm!("barrier.sync 0;", options(nostack)) };
}

// ---------------------------------------------------------------------------------------
// Fences.
// ---------------------------------------------------------------------------------------

/// `fence.acq_rel.sys`: this thread's earlier accesses are ordered before its later ones
/// for every observer in the system (other GPUs, the host). Use before publishing data
/// that a peer GPU or the CPU will read after seeing a flag.
#[inline(always)]
pub fn fence_acq_rel_sys() {
    // SAFETY: a fence has no operands.
    unsafe { asm!("fence.acq_rel.sys;", options(nostack)) };
}

/// `fence.acq_rel.gpu`: as [`fence_acq_rel_sys`] for observers on this GPU only.
#[inline(always)]
pub fn fence_acq_rel_gpu() {
    // SAFETY: a fence has no operands.
    unsafe { asm!("fence.acq_rel.gpu;", options(nostack)) };
}

/// `fence.acq_rel.cta`: as [`fence_acq_rel_sys`] for observers in this CTA only.
#[inline(always)]
pub fn fence_acq_rel_cta() {
    // SAFETY: a fence has no operands.
    unsafe { asm!("fence.acq_rel.cta;", options(nostack)) };
}

/// `fence.sc.sys`: a sequentially consistent fence at system scope (the strongest, and
/// slowest, fence; `__threadfence_system()`).
#[inline(always)]
pub fn fence_sc_sys() {
    // SAFETY: a fence has no operands.
    unsafe { asm!("fence.sc.sys;", options(nostack)) };
}

// ---------------------------------------------------------------------------------------
// Ordered loads and stores of 32- and 64-bit words in global memory.
// ---------------------------------------------------------------------------------------

/// A word that global-memory loads and stores with an explicit ordering can move.
///
/// Implemented for `u32` and `u64`; use the free functions ([`ld_acquire_sys_global`],
/// …), which carry NCCL's names.
pub trait GlobalWord: Copy + sealed::Sealed {
    /// See [`ld_volatile_global`].
    unsafe fn ld_volatile(p: *const Self) -> Self;
    /// See [`ld_relaxed_gpu_global`].
    unsafe fn ld_relaxed_gpu(p: *const Self) -> Self;
    /// See [`ld_relaxed_sys_global`].
    unsafe fn ld_relaxed_sys(p: *const Self) -> Self;
    /// See [`ld_acquire_sys_global`].
    unsafe fn ld_acquire_sys(p: *const Self) -> Self;
    /// See [`st_volatile_global`].
    unsafe fn st_volatile(p: *mut Self, v: Self);
    /// See [`st_relaxed_sys_global`].
    unsafe fn st_relaxed_sys(p: *mut Self, v: Self);
    /// See [`st_release_sys_global`].
    unsafe fn st_release_sys(p: *mut Self, v: Self);
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

macro_rules! global_word {
    ($t:ty, $reg:ident, $b:literal) => {
        impl GlobalWord for $t {
            #[inline(always)]
            unsafe fn ld_volatile(p: *const Self) -> Self {
                let v: $t;
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.volatile.global.", $b, " {0}, [g]; }}"), out($reg) v, in(reg64) p, options(nostack)) };
                v
            }
            #[inline(always)]
            unsafe fn ld_relaxed_gpu(p: *const Self) -> Self {
                let v: $t;
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.relaxed.gpu.global.", $b, " {0}, [g]; }}"), out($reg) v, in(reg64) p, options(nostack)) };
                v
            }
            #[inline(always)]
            unsafe fn ld_relaxed_sys(p: *const Self) -> Self {
                let v: $t;
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.relaxed.sys.global.", $b, " {0}, [g]; }}"), out($reg) v, in(reg64) p, options(nostack)) };
                v
            }
            #[inline(always)]
            unsafe fn ld_acquire_sys(p: *const Self) -> Self {
                let v: $t;
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.acquire.sys.global.", $b, " {0}, [g]; }}"), out($reg) v, in(reg64) p, options(nostack)) };
                v
            }
            #[inline(always)]
            unsafe fn st_volatile(p: *mut Self, v: Self) {
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {0}; st.volatile.global.", $b, " [g], {1}; }}"), in(reg64) p, in($reg) v, options(nostack)) };
            }
            #[inline(always)]
            unsafe fn st_relaxed_sys(p: *mut Self, v: Self) {
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {0}; st.relaxed.sys.global.", $b, " [g], {1}; }}"), in(reg64) p, in($reg) v, options(nostack)) };
            }
            #[inline(always)]
            unsafe fn st_release_sys(p: *mut Self, v: Self) {
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {0}; st.release.sys.global.", $b, " [g], {1}; }}"), in(reg64) p, in($reg) v, options(nostack)) };
            }
        }
    };
}

global_word!(u32, reg32, "b32");
global_word!(u64, reg64, "b64");

/// `ld.volatile.global`: a load the compiler may not cache or elide; no ordering with
/// respect to other addresses. Use for polling, followed by a fence where data is read
/// after the flag.
///
/// # Safety
/// `p` must be a valid, aligned address in global memory (device, peer or host-mapped).
#[inline(always)]
pub unsafe fn ld_volatile_global<T: GlobalWord>(p: *const T) -> T {
    unsafe { T::ld_volatile(p) }
}

/// `ld.relaxed.gpu.global`: a strong load at GPU scope without ordering of other accesses.
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline(always)]
pub unsafe fn ld_relaxed_gpu_global<T: GlobalWord>(p: *const T) -> T {
    unsafe { T::ld_relaxed_gpu(p) }
}

/// `ld.relaxed.sys.global`: a strong load at system scope without ordering of other
/// accesses.
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline(always)]
pub unsafe fn ld_relaxed_sys_global<T: GlobalWord>(p: *const T) -> T {
    unsafe { T::ld_relaxed_sys(p) }
}

/// `ld.acquire.sys.global`: this load happens before every later access of this thread,
/// for all observers in the system; pairs with [`st_release_sys_global`].
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline(always)]
pub unsafe fn ld_acquire_sys_global<T: GlobalWord>(p: *const T) -> T {
    unsafe { T::ld_acquire_sys(p) }
}

/// `st.volatile.global`: a store the compiler may not elide or merge; no ordering.
///
/// # Safety
/// As [`ld_volatile_global`], and `p` must be writable.
#[inline(always)]
pub unsafe fn st_volatile_global<T: GlobalWord>(p: *mut T, v: T) {
    unsafe { T::st_volatile(p, v) }
}

/// `st.relaxed.sys.global`: a strong store at system scope without ordering of other
/// accesses; publish data with a preceding [`fence_acq_rel_sys`] (NCCL's `postPeer`).
///
/// # Safety
/// As [`st_volatile_global`].
#[inline(always)]
pub unsafe fn st_relaxed_sys_global<T: GlobalWord>(p: *mut T, v: T) {
    unsafe { T::st_relaxed_sys(p, v) }
}

/// `st.release.sys.global`: every earlier access of this thread (and, through barriers,
/// those it has synchronised with) is visible system-wide before this store is; pairs
/// with [`ld_acquire_sys_global`].
///
/// # Safety
/// As [`st_volatile_global`].
#[inline(always)]
pub unsafe fn st_release_sys_global<T: GlobalWord>(p: *mut T, v: T) {
    unsafe { T::st_release_sys(p, v) }
}

// ---------------------------------------------------------------------------------------
// Sized loads and stores (1, 2, 4, 8 and 16 bytes) at global addresses: what BytePack
// moves. Addresses are global-window addresses (`cvta_to_global`), aligned to the size.
// ---------------------------------------------------------------------------------------

macro_rules! sized_access {
    ($ld:ident, $st:ident, $t:ty, $reg:ident, $b:literal) => {
        /// `ld.volatile.global` of one naturally aligned value: never cached in L1 or
        /// elided, so data a peer wrote is seen once its flag was; no ordering by itself.
        ///
        /// # Safety
        /// `addr` must be a global address of a readable, aligned value.
        #[inline(always)]
        pub unsafe fn $ld(addr: u64) -> $t {
            let v: $t;
            unsafe { asm!(concat!("ld.volatile.global.", $b, " {0}, [{1}];"), out($reg) v, in(reg64) addr, options(nostack, readonly)) };
            v
        }

        /// `st.global` of one naturally aligned value (weak; order it with a fence or a
        /// release before publishing).
        ///
        /// # Safety
        /// `addr` must be a global address of a writable, aligned value.
        #[inline(always)]
        pub unsafe fn $st(addr: u64, v: $t) {
            unsafe { asm!(concat!("st.global.", $b, " [{0}], {1};"), in(reg64) addr, in($reg) v, options(nostack)) };
        }
    };
}

sized_access!(ld_volatile_global_b16, st_global_b16, u16, reg16, "b16");
sized_access!(ld_volatile_global_b32, st_global_b32, u32, reg32, "b32");
sized_access!(ld_volatile_global_b64, st_global_b64, u64, reg64, "b64");

/// `ld.volatile.global.u8`: as [`ld_volatile_global_b16`] for one byte.
///
/// # Safety
/// `addr` must be a global address of a readable byte.
#[inline(always)]
pub unsafe fn ld_volatile_global_b8(addr: u64) -> u8 {
    let v: u16;
    unsafe { asm!("ld.volatile.global.u8 {0}, [{1}];", out(reg16) v, in(reg64) addr, options(nostack, readonly)) };
    v as u8
}

/// `st.global.u8`: as [`st_global_b16`] for one byte.
///
/// # Safety
/// `addr` must be a global address of a writable byte.
#[inline(always)]
pub unsafe fn st_global_b8(addr: u64, v: u8) {
    unsafe { asm!("st.global.u8 [{0}], {1};", in(reg64) addr, in(reg16) v as u16, options(nostack)) };
}

/// `ld.volatile.global.v2.b64`: 16 bytes in one access; see [`ld_volatile_global_b16`].
///
/// # Safety
/// `addr` must be a 16-byte aligned global address of 16 readable bytes.
#[inline(always)]
pub unsafe fn ld_volatile_global_v2b64(addr: u64) -> [u64; 2] {
    let (a, b): (u64, u64);
    unsafe { asm!("ld.volatile.global.v2.b64 {{{0}, {1}}}, [{2}];", out(reg64) a, out(reg64) b, in(reg64) addr, options(nostack, readonly)) };
    [a, b]
}

/// `ld.acquire.sys.global.v2.b64`: 16 bytes, two 8-byte acquire loads in one access (each
/// word single-copy atomic; no order between the two): later memory operations of this
/// thread see everything released before either value was written. No fence.
///
/// # Safety
/// `addr` must be a 16-byte aligned global address of 16 readable bytes.
#[inline(always)]
pub unsafe fn ld_acquire_sys_global_v2b64(addr: u64) -> [u64; 2] {
    let (a, b): (u64, u64);
    unsafe { asm!("ld.acquire.sys.global.v2.b64 {{{0}, {1}}}, [{2}];", out(reg64) a, out(reg64) b, in(reg64) addr, options(nostack)) };
    [a, b]
}

/// `ld.global.cv.v2.b64`: 16 bytes, a weak load that treats cached lines as stale and
/// fetches again (for host memory the host rewrites). Weak: order it after an acquire
/// (or a barrier after one); unlike `ld.volatile`, consecutive ones are pipelined.
///
/// # Safety
/// `addr` must be a 16-byte aligned global address of 16 readable bytes.
#[inline(always)]
pub unsafe fn ld_cv_global_v2b64(addr: u64) -> [u64; 2] {
    let (a, b): (u64, u64);
    unsafe { asm!("ld.global.cv.v2.b64 {{{0}, {1}}}, [{2}];", out(reg64) a, out(reg64) b, in(reg64) addr, options(nostack, readonly)) };
    [a, b]
}

/// `st.global.v2.b64`: 16 bytes in one access; see [`st_global_b16`].
///
/// # Safety
/// `addr` must be a 16-byte aligned global address of 16 writable bytes.
#[inline(always)]
pub unsafe fn st_global_v2b64(addr: u64, v: [u64; 2]) {
    unsafe { asm!("st.global.v2.b64 [{0}], {{{1}, {2}}};", in(reg64) addr, in(reg64) v[0], in(reg64) v[1], options(nostack)) };
}

// ---------------------------------------------------------------------------------------
// Half-precision arithmetic (f16 and bf16 as raw bits), scalar and packed pairs; the
// hardware rounds to nearest even. `min`/`max` return the non-NaN operand when one is NaN.
// ---------------------------------------------------------------------------------------

macro_rules! half_binary {
    ($(#[$doc:meta])* $name:ident, $t:ty, $reg:ident, $instr:literal) => {
        $(#[$doc])*
        #[inline(always)]
        pub fn $name(a: $t, b: $t) -> $t {
            let r: $t;
            // SAFETY: register-only arithmetic.
            unsafe { asm!(concat!($instr, " {0}, {1}, {2};"), out($reg) r, in($reg) a, in($reg) b, options(pure, nomem, nostack)) };
            r
        }
    };
}

half_binary!(/** `add.rn.f16`. */ add_f16, u16, reg16, "add.rn.f16");
half_binary!(/** `mul.rn.f16`. */ mul_f16, u16, reg16, "mul.rn.f16");
half_binary!(/** `min.f16`. */ min_f16, u16, reg16, "min.f16");
half_binary!(/** `max.f16`. */ max_f16, u16, reg16, "max.f16");
half_binary!(/** `add.rn.bf16`. */ add_bf16, u16, reg16, "add.rn.bf16");
half_binary!(/** `mul.rn.bf16`. */ mul_bf16, u16, reg16, "mul.rn.bf16");
half_binary!(/** `min.bf16`. */ min_bf16, u16, reg16, "min.bf16");
half_binary!(/** `max.bf16`. */ max_bf16, u16, reg16, "max.bf16");
half_binary!(/** `add.rn.f16x2`: two lanes at once. */ add_f16x2, u32, reg32, "add.rn.f16x2");
half_binary!(/** `mul.rn.f16x2`. */ mul_f16x2, u32, reg32, "mul.rn.f16x2");
half_binary!(/** `min.f16x2`. */ min_f16x2, u32, reg32, "min.f16x2");
half_binary!(/** `max.f16x2`. */ max_f16x2, u32, reg32, "max.f16x2");
half_binary!(/** `add.rn.bf16x2`. */ add_bf16x2, u32, reg32, "add.rn.bf16x2");
half_binary!(/** `mul.rn.bf16x2`. */ mul_bf16x2, u32, reg32, "mul.rn.bf16x2");
half_binary!(/** `min.bf16x2`. */ min_bf16x2, u32, reg32, "min.bf16x2");
half_binary!(/** `max.bf16x2`. */ max_bf16x2, u32, reg32, "max.bf16x2");

/// `cvt.f32.f16`: exact widening.
#[inline(always)]
pub fn f16_to_f32(h: u16) -> f32 {
    let r: f32;
    // SAFETY: register-only conversion.
    unsafe { asm!("cvt.f32.f16 {0}, {1};", out(reg32) r, in(reg16) h, options(pure, nomem, nostack)) };
    r
}

/// `cvt.rn.f16.f32`: round to nearest even.
#[inline(always)]
pub fn f32_to_f16(f: f32) -> u16 {
    let r: u16;
    // SAFETY: register-only conversion.
    unsafe { asm!("cvt.rn.f16.f32 {0}, {1};", out(reg16) r, in(reg32) f, options(pure, nomem, nostack)) };
    r
}

/// `cvt.f32.bf16`: exact widening.
#[inline(always)]
pub fn bf16_to_f32(h: u16) -> f32 {
    let r: f32;
    // SAFETY: register-only conversion.
    unsafe { asm!("cvt.f32.bf16 {0}, {1};", out(reg32) r, in(reg16) h, options(pure, nomem, nostack)) };
    r
}

/// `cvt.rn.bf16.f32`: round to nearest even.
#[inline(always)]
pub fn f32_to_bf16(f: f32) -> u16 {
    let r: u16;
    // SAFETY: register-only conversion.
    unsafe { asm!("cvt.rn.bf16.f32 {0}, {1};", out(reg16) r, in(reg32) f, options(pure, nomem, nostack)) };
    r
}

// ---------------------------------------------------------------------------------------
// NVLink SHARP: multimem loads-with-reduce and stores on a multicast address. Only valid
// on an address bound to a multicast object; ferroccl issues these only through
// `HwMulticast`, which is enabled where the device supports multicast and the user opts in.
// Ordering: `.relaxed.sys` (data; publish with a fence and a flag), except
// `multimem_ld_reduce_acquire_min_u64` (NCCL's NvlsMinPolling), an acquire at system scope.
// ---------------------------------------------------------------------------------------

macro_rules! multimem_ld_reduce_v4 {
    ($name:ident, $op:literal) => {
        /// `multimem.ld_reduce.relaxed.sys.global` of 16 bytes: every device's copy,
        /// reduced.
        ///
        /// # Safety
        /// `addr` must be a 16-byte aligned multicast address.
        #[inline(always)]
        pub unsafe fn $name(addr: u64) -> [u32; 4] {
            let (a, b, c, d): (u32, u32, u32, u32);
            unsafe {
                asm!(concat!("multimem.ld_reduce.relaxed.sys.global.", $op, " {{{0}, {1}, {2}, {3}}}, [{4}];"),
                     out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) addr, options(nostack))
            };
            [a, b, c, d]
        }
    };
}

macro_rules! multimem_ld_reduce_scalar {
    ($name:ident, $t:ty, $reg:ident, $op:literal) => {
        /// `multimem.ld_reduce.relaxed.sys.global` of one value: every device's copy,
        /// reduced.
        ///
        /// # Safety
        /// `addr` must be a naturally aligned multicast address.
        #[inline(always)]
        pub unsafe fn $name(addr: u64) -> $t {
            let v: $t;
            unsafe { asm!(concat!("multimem.ld_reduce.relaxed.sys.global.", $op, " {0}, [{1}];"), out($reg) v, in(reg64) addr, options(nostack)) };
            v
        }
    };
}

multimem_ld_reduce_v4!(multimem_ld_reduce_add_v4_f32, "add.v4.f32");
multimem_ld_reduce_v4!(multimem_ld_reduce_add_v4_f16x2, "add.v4.f16x2");
multimem_ld_reduce_v4!(multimem_ld_reduce_add_v4_bf16x2, "add.v4.bf16x2");
multimem_ld_reduce_v4!(multimem_ld_reduce_min_v4_f16x2, "min.v4.f16x2");
multimem_ld_reduce_v4!(multimem_ld_reduce_max_v4_f16x2, "max.v4.f16x2");
multimem_ld_reduce_v4!(multimem_ld_reduce_min_v4_bf16x2, "min.v4.bf16x2");
multimem_ld_reduce_v4!(multimem_ld_reduce_max_v4_bf16x2, "max.v4.bf16x2");
multimem_ld_reduce_scalar!(multimem_ld_reduce_add_f64, u64, reg64, "add.f64");
multimem_ld_reduce_scalar!(multimem_ld_reduce_add_f32, u32, reg32, "add.f32");
multimem_ld_reduce_scalar!(multimem_ld_reduce_add_u32, u32, reg32, "add.u32");
multimem_ld_reduce_scalar!(multimem_ld_reduce_min_u32, u32, reg32, "min.u32");
multimem_ld_reduce_scalar!(multimem_ld_reduce_max_u32, u32, reg32, "max.u32");
multimem_ld_reduce_scalar!(multimem_ld_reduce_min_s32, u32, reg32, "min.s32");
multimem_ld_reduce_scalar!(multimem_ld_reduce_max_s32, u32, reg32, "max.s32");
multimem_ld_reduce_scalar!(multimem_ld_reduce_add_u64, u64, reg64, "add.u64");
multimem_ld_reduce_scalar!(multimem_ld_reduce_min_u64, u64, reg64, "min.u64");
multimem_ld_reduce_scalar!(multimem_ld_reduce_max_u64, u64, reg64, "max.u64");
multimem_ld_reduce_scalar!(multimem_ld_reduce_min_s64, u64, reg64, "min.s64");
multimem_ld_reduce_scalar!(multimem_ld_reduce_max_s64, u64, reg64, "max.s64");

/// `multimem.ld_reduce.acquire.sys.global.min.u64`: the smallest of every device's copy
/// of a step counter, as an acquire at system scope (NCCL's NvlsMinPolling).
///
/// # Safety
/// `addr` must be an 8-byte aligned multicast address.
#[inline(always)]
pub unsafe fn multimem_ld_reduce_acquire_min_u64(addr: u64) -> u64 {
    let v: u64;
    unsafe { asm!("multimem.ld_reduce.acquire.sys.global.min.u64 {0}, [{1}];", out(reg64) v, in(reg64) addr, options(nostack)) };
    v
}

/// `multimem.st.relaxed.sys.global.v4.f32`: stores 16 bytes to every device's copy (the
/// float type only names the width; bits are stored unchanged).
///
/// # Safety
/// `addr` must be a 16-byte aligned multicast address.
#[inline(always)]
pub unsafe fn multimem_st_v4(addr: u64, v: [u32; 4]) {
    unsafe {
        asm!("multimem.st.relaxed.sys.global.v4.f32 [{0}], {{{1}, {2}, {3}, {4}}};",
             in(reg64) addr, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3], options(nostack))
    };
}

/// `multimem.st.relaxed.sys.global.b64`: stores 8 bytes to every device's copy.
///
/// # Safety
/// `addr` must be an 8-byte aligned multicast address.
#[inline(always)]
pub unsafe fn multimem_st_b64(addr: u64, v: u64) {
    unsafe { asm!("multimem.st.relaxed.sys.global.b64 [{0}], {1};", in(reg64) addr, in(reg64) v, options(nostack)) };
}

/// `multimem.st.relaxed.sys.global.f16`: stores 2 bytes to every device's copy.
///
/// # Safety
/// `addr` must be a 2-byte aligned multicast address.
#[inline(always)]
pub unsafe fn multimem_st_b16(addr: u64, v: u16) {
    unsafe { asm!("multimem.st.relaxed.sys.global.f16 [{0}], {1};", in(reg64) addr, in(reg16) v, options(nostack)) };
}

/// `multimem.st.relaxed.sys.global.b32`: stores 4 bytes to every device's copy.
///
/// # Safety
/// `addr` must be a 4-byte aligned multicast address.
#[inline(always)]
pub unsafe fn multimem_st_b32(addr: u64, v: u32) {
    unsafe { asm!("multimem.st.relaxed.sys.global.b32 [{0}], {1};", in(reg64) addr, in(reg32) v, options(nostack)) };
}

// ---------------------------------------------------------------------------------------
// Atomics.
// ---------------------------------------------------------------------------------------

/// Read-modify-write operations on 32- and 64-bit words in global memory, at GPU or
/// system scope. Every method returns the value before the operation.
///
/// Ordering: `*_relaxed_*` methods are atomic but order nothing else; `*_acq_rel_*`
/// methods are both an acquire and a release at their scope.
pub trait AtomicWord: GlobalWord {
    /// `atom.relaxed.gpu.global.add`.
    unsafe fn atomic_add_relaxed_gpu(p: *mut Self, v: Self) -> Self;
    /// `atom.relaxed.sys.global.add`.
    unsafe fn atomic_add_relaxed_sys(p: *mut Self, v: Self) -> Self;
    /// `atom.acq_rel.sys.global.add`.
    unsafe fn atomic_add_acq_rel_sys(p: *mut Self, v: Self) -> Self;
    /// `atom.relaxed.gpu.global.max`.
    unsafe fn atomic_max_relaxed_gpu(p: *mut Self, v: Self) -> Self;
    /// `atom.relaxed.gpu.global.min`.
    unsafe fn atomic_min_relaxed_gpu(p: *mut Self, v: Self) -> Self;
    /// `atom.acq_rel.sys.global.exch`.
    unsafe fn atomic_exch_acq_rel_sys(p: *mut Self, v: Self) -> Self;
    /// `atom.acq_rel.sys.global.cas`: stores `new` if the word equals `expected`.
    unsafe fn atomic_cas_acq_rel_sys(p: *mut Self, expected: Self, new: Self) -> Self;
}

macro_rules! atomic_rmw {
    ($name:ident, $t:ty, $reg:ident, $instr:literal, $ty:literal) => {
        #[inline(always)]
        unsafe fn $name(p: *mut Self, v: Self) -> Self {
            let old: $t;
            unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ", $instr, $ty, " {0}, [g], {2}; }}"), out($reg) old, in(reg64) p, in($reg) v, options(nostack)) };
            old
        }
    };
}

macro_rules! atomic_word {
    ($t:ty, $reg:ident, $u:literal, $b:literal) => {
        impl AtomicWord for $t {
            atomic_rmw!(atomic_add_relaxed_gpu, $t, $reg, "atom.relaxed.gpu.global.add.", $u);
            atomic_rmw!(atomic_add_relaxed_sys, $t, $reg, "atom.relaxed.sys.global.add.", $u);
            atomic_rmw!(atomic_add_acq_rel_sys, $t, $reg, "atom.acq_rel.sys.global.add.", $u);
            atomic_rmw!(atomic_max_relaxed_gpu, $t, $reg, "atom.relaxed.gpu.global.max.", $u);
            atomic_rmw!(atomic_min_relaxed_gpu, $t, $reg, "atom.relaxed.gpu.global.min.", $u);
            atomic_rmw!(atomic_exch_acq_rel_sys, $t, $reg, "atom.acq_rel.sys.global.exch.", $b);
            #[inline(always)]
            unsafe fn atomic_cas_acq_rel_sys(p: *mut Self, expected: Self, new: Self) -> Self {
                let old: $t;
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; atom.acq_rel.sys.global.cas.", $b, " {0}, [g], {2}, {3}; }}"), out($reg) old, in(reg64) p, in($reg) expected, in($reg) new, options(nostack)) };
                old
            }
        }
    };
}

atomic_word!(u32, reg32, "u32", "b32");
atomic_word!(u64, reg64, "u64", "b64");

// ---------------------------------------------------------------------------------------
// Shared memory.
// ---------------------------------------------------------------------------------------

global_asm!(".extern .shared .align 16 .b8 ferroccl_dyn_smem[];");

/// The generic address of this CTA's dynamic shared memory ([`dynamic_smem_size`] bytes,
/// 16-byte aligned). Plain loads and stores through it are ordered across the CTA by
/// [`barrier_sync`].
#[inline(always)]
pub fn dyn_smem() -> *mut u8 {
    let p: u64;
    // SAFETY: takes an address; touches no memory.
    unsafe { asm!("cvta.shared.u64 {0}, ferroccl_dyn_smem;", out(reg64) p, options(nomem, nostack, pure)) };
    p as *mut u8
}

/// `cvta.to.shared`: the 32-bit shared-window address of a generic pointer into shared
/// memory (what `ld.shared`/`st.shared` take).
#[inline(always)]
pub fn cvta_to_shared<T>(p: *const T) -> u32 {
    let a: u64;
    // SAFETY: address arithmetic only.
    unsafe { asm!("cvta.to.shared.u64 {0}, {1};", out(reg64) a, in(reg64) p, options(nomem, nostack, pure)) };
    a as u32
}

/// `cvta.to.global`: the global-window address of a generic pointer.
#[inline(always)]
pub fn cvta_to_global<T>(p: *const T) -> u64 {
    let a: u64;
    // SAFETY: address arithmetic only.
    unsafe { asm!("cvta.to.global.u64 {0}, {1};", out(reg64) a, in(reg64) p, options(nomem, nostack, pure)) };
    a
}

// ---------------------------------------------------------------------------------------
// Warp vote and shuffle.
// ---------------------------------------------------------------------------------------

/// Lanes taking part in a warp-wide operation: all 32.
pub const FULL_MASK: u32 = u32::MAX;

/// `vote.sync.ballot.b32`: bit `i` of the result is set when lane `i` of `mask` passed a
/// true `pred`. Every lane in `mask` must execute it.
#[inline(always)]
pub fn vote_ballot(mask: u32, pred: bool) -> u32 {
    let r: u32;
    // SAFETY: register-only warp operation.
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {1}, 0; vote.sync.ballot.b32 {0}, p, {2}; }}",
             out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nomem, nostack))
    };
    r
}

/// `vote.sync.all`: true when `pred` holds on every lane of `mask`.
#[inline(always)]
pub fn vote_all(mask: u32, pred: bool) -> bool {
    let r: u32;
    // SAFETY: register-only warp operation.
    unsafe {
        asm!("{{ .reg .pred p, q; setp.ne.u32 p, {1}, 0; vote.sync.all.pred q, p, {2}; selp.u32 {0}, 1, 0, q; }}",
             out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nomem, nostack))
    };
    r != 0
}

/// `vote.sync.any`: true when `pred` holds on some lane of `mask`.
#[inline(always)]
pub fn vote_any(mask: u32, pred: bool) -> bool {
    let r: u32;
    // SAFETY: register-only warp operation.
    unsafe {
        asm!("{{ .reg .pred p, q; setp.ne.u32 p, {1}, 0; vote.sync.any.pred q, p, {2}; selp.u32 {0}, 1, 0, q; }}",
             out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nomem, nostack))
    };
    r != 0
}

/// `shfl.sync.idx.b32`: the value of `v` held by lane `src_lane`.
#[inline(always)]
pub fn shfl_idx(mask: u32, v: u32, src_lane: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only warp operation.
    unsafe { asm!("shfl.sync.idx.b32 {0}, {1}, {2}, 0x1f, {3};", out(reg32) r, in(reg32) v, in(reg32) src_lane, in(reg32) mask, options(nomem, nostack)) };
    r
}

/// `shfl.sync.bfly.b32`: the value of `v` held by lane `lane_id() ^ lane_mask`.
#[inline(always)]
pub fn shfl_xor(mask: u32, v: u32, lane_mask: u32) -> u32 {
    let r: u32;
    // SAFETY: register-only warp operation.
    unsafe { asm!("shfl.sync.bfly.b32 {0}, {1}, {2}, 0x1f, {3};", out(reg32) r, in(reg32) v, in(reg32) lane_mask, in(reg32) mask, options(nomem, nostack)) };
    r
}

// ---------------------------------------------------------------------------------------
// Time, sleep, trap.
// ---------------------------------------------------------------------------------------

/// `%clock64`: this SM's cycle counter.
#[inline(always)]
pub fn clock64() -> u64 {
    let v: u64;
    // SAFETY: reads a counter. Not `pure`: two reads must not be merged.
    unsafe { asm!("mov.u64 {0}, %clock64;", out(reg64) v, options(nomem, nostack)) };
    v
}

/// `%globaltimer`: nanoseconds, shared by the whole GPU (updates every ~µs).
#[inline(always)]
pub fn globaltimer_ns() -> u64 {
    let v: u64;
    // SAFETY: reads a counter. Not `pure`: two reads must not be merged.
    unsafe { asm!("mov.u64 {0}, %globaltimer;", out(reg64) v, options(nomem, nostack)) };
    v
}

/// `nanosleep.u32`: suspends this thread for about `ns` nanoseconds (0..=2·ns).
#[inline(always)]
pub fn nanosleep(ns: u32) {
    // SAFETY: only delays the thread.
    unsafe { asm!("nanosleep.u32 {0};", in(reg32) ns, options(nomem, nostack)) };
}

/// One iteration of a busy-wait: nothing on the GPU (the poll itself is the back-off);
/// the host twin yields the CPU here so that thousands of emulated threads can progress.
#[inline(always)]
pub fn spin_pause() {}

/// `trap`: aborts the kernel; the host sees `CUDA_ERROR_LAUNCH_FAILED`. For broken
/// invariants only: recoverable faults are reported through error codes.
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: ends the kernel.
    unsafe { asm!("trap;", options(noreturn, nostack)) }
}
