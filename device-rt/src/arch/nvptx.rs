//! `arch` on the GPU: [`Nvptx`], the implementation of [`Arch`], [`Multimem`] and the
//! word traits as thin, `#[inline(always)]` wrappers around single PTX instructions.
//! What each function does and the ordering it gives are documented once, on the
//! contract in `arch/mod.rs`; this file holds only the instructions.
//!
//! Conventions:
//! - Pointers are generic addresses (what `cuMemAlloc` returns); functions that use the
//!   `.global` state space convert with `cvta.to.global` inside the same asm block, which
//!   ptxas folds away.
//! - Every `asm!` here keeps the default (memory-clobbering) semantics unless it is a pure
//!   register read, so the compiler never moves ordinary loads and stores across a fence,
//!   barrier or ordered access.

use core::arch::{asm, global_asm};

use super::{Arch, AtomicWord, GlobalWord, Multimem, Site};

/// The GPU: every function is one PTX instruction (or a short fixed sequence).
pub struct Nvptx;

macro_rules! special_register_u32 {
    ($name:ident, $reg:literal) => {
        #[inline(always)]
        fn $name() -> u32 {
            let v: u32;
            // SAFETY: reading a special register has no side effects.
            unsafe { asm!(concat!("mov.u32 {0}, ", $reg, ";"), out(reg32) v, options(nomem, nostack, pure)) };
            v
        }
    };
}

macro_rules! sized_access {
    ($ld:ident, $st:ident, $t:ty, $reg:ident, $b:literal) => {
        #[inline(always)]
        unsafe fn $ld(addr: u64) -> $t {
            let v: $t;
            // SAFETY: the caller gives an aligned global address of a readable value of this size
            // (the `Arch` contract), which this one load reads; `readonly` is right: it writes no
            // memory.
            unsafe { asm!(concat!("ld.volatile.global.", $b, " {0}, [{1}];"), out($reg) v, in(reg64) addr, options(nostack, readonly)) };
            v
        }

        #[inline(always)]
        unsafe fn $st(addr: u64, v: $t) {
            // SAFETY: the caller gives an aligned global address of a writable value of this size
            // (the `Arch` contract), which this one store writes; the default clobber keeps the
            // compiler from moving other accesses across it.
            unsafe { asm!(concat!("st.global.", $b, " [{0}], {1};"), in(reg64) addr, in($reg) v, options(nostack)) };
        }
    };
}

macro_rules! half_binary {
    ($name:ident, $t:ty, $reg:ident, $instr:literal) => {
        #[inline(always)]
        fn $name(a: $t, b: $t) -> $t {
            let r: $t;
            // SAFETY: register-only arithmetic.
            unsafe { asm!(concat!($instr, " {0}, {1}, {2};"), out($reg) r, in($reg) a, in($reg) b, options(pure, nomem, nostack)) };
            r
        }
    };
}

macro_rules! half_convert {
    ($name:ident, $from:ty, $from_reg:ident, $to:ty, $to_reg:ident, $instr:literal) => {
        #[inline(always)]
        fn $name(x: $from) -> $to {
            let r: $to;
            // SAFETY: register-only conversion.
            unsafe { asm!(concat!($instr, " {0}, {1};"), out($to_reg) r, in($from_reg) x, options(pure, nomem, nostack)) };
            r
        }
    };
}

macro_rules! fence {
    ($name:ident, $instr:literal) => {
        #[inline(always)]
        fn $name() {
            // SAFETY: a fence has no operands.
            unsafe { asm!($instr, options(nostack)) };
        }
    };
}

impl Arch for Nvptx {
    special_register_u32!(thread_idx, "%tid.x");
    special_register_u32!(block_dim, "%ntid.x");
    special_register_u32!(block_idx, "%ctaid.x");
    special_register_u32!(grid_dim, "%nctaid.x");
    special_register_u32!(lane_id, "%laneid");
    special_register_u32!(sm_id, "%smid");
    special_register_u32!(dynamic_smem_size, "%dynamic_smem_size");

    #[inline(always)]
    fn barrier_sync(id: u32, nthreads: u32) {
        // SAFETY: a barrier only blocks; the caller's thread counts decide progress.
        unsafe { asm!("barrier.sync {0}, {1};", in(reg32) id, in(reg32) nthreads, options(nostack)) };
    }

    #[inline(always)]
    fn barrier_sync_all() {
        // SAFETY: as for `barrier_sync`.
        unsafe { asm!("barrier.sync 0;", options(nostack)) };
    }

    #[inline(always)]
    fn warp_sync(mask: u32) {
        // SAFETY: a warp barrier only blocks; the caller's mask decides progress.
        unsafe { asm!("bar.warp.sync {0};", in(reg32) mask, options(nostack)) };
    }

    fence!(fence_acq_rel_sys, "fence.acq_rel.sys;");
    fence!(fence_acq_rel_gpu, "fence.acq_rel.gpu;");
    fence!(fence_acq_rel_cta, "fence.acq_rel.cta;");
    fence!(fence_sc_sys, "fence.sc.sys;");

    #[inline(always)]
    unsafe fn ld_volatile_global_b8(addr: u64) -> u8 {
        let v: u16;
        // SAFETY: the caller gives a global address of a readable byte (the `Arch` contract), which
        // this one load reads into the low half of a 16-bit register (PTX has no 8-bit registers);
        // it writes no memory.
        unsafe { asm!("ld.volatile.global.u8 {0}, [{1}];", out(reg16) v, in(reg64) addr, options(nostack, readonly)) };
        v as u8
    }

    #[inline(always)]
    unsafe fn st_global_b8(addr: u64, v: u8) {
        // SAFETY: the caller gives a global address of a writable byte (the `Arch` contract); the
        // store writes the low 8 bits of the 16-bit register only.
        unsafe { asm!("st.global.u8 [{0}], {1};", in(reg64) addr, in(reg16) v as u16, options(nostack)) };
    }

    sized_access!(ld_volatile_global_b16, st_global_b16, u16, reg16, "b16");
    sized_access!(ld_volatile_global_b32, st_global_b32, u32, reg32, "b32");
    sized_access!(ld_volatile_global_b64, st_global_b64, u64, reg64, "b64");

    #[inline(always)]
    unsafe fn ld_volatile_global_v2b64(addr: u64) -> [u64; 2] {
        let (a, b): (u64, u64);
        // SAFETY: the caller gives a 16-byte aligned global address of 16 readable bytes (the
        // `Arch` contract), which this one vector load reads; it writes no memory.
        unsafe { asm!("ld.volatile.global.v2.b64 {{{0}, {1}}}, [{2}];", out(reg64) a, out(reg64) b, in(reg64) addr, options(nostack, readonly)) };
        [a, b]
    }

    #[inline(always)]
    unsafe fn ld_acquire_sys_global_v2b64(addr: u64) -> [u64; 2] {
        let (a, b): (u64, u64);
        // SAFETY: as for `ld_volatile_global_v2b64`; not `readonly`, so that the compiler keeps
        // later accesses after this acquire.
        unsafe { asm!("ld.acquire.sys.global.v2.b64 {{{0}, {1}}}, [{2}];", out(reg64) a, out(reg64) b, in(reg64) addr, options(nostack)) };
        [a, b]
    }

    #[inline(always)]
    unsafe fn ld_cv_global_v2b64(addr: u64) -> [u64; 2] {
        let (a, b): (u64, u64);
        // SAFETY: as for `ld_volatile_global_v2b64`: 16 aligned, readable bytes at a global
        // address; it writes no memory.
        unsafe { asm!("ld.global.cv.v2.b64 {{{0}, {1}}}, [{2}];", out(reg64) a, out(reg64) b, in(reg64) addr, options(nostack, readonly)) };
        [a, b]
    }

    #[inline(always)]
    unsafe fn st_global_v2b64(addr: u64, v: [u64; 2]) {
        // SAFETY: the caller gives a 16-byte aligned global address of 16 writable bytes (the
        // `Arch` contract), which this one vector store writes.
        unsafe { asm!("st.global.v2.b64 [{0}], {{{1}, {2}}};", in(reg64) addr, in(reg64) v[0], in(reg64) v[1], options(nostack)) };
    }

    #[inline(always)]
    unsafe fn st_volatile_global_v2b64(addr: u64, v: [u64; 2]) {
        // SAFETY: as for `st_global_v2b64`: 16 aligned, writable bytes at a global address.
        unsafe { asm!("st.volatile.global.v2.b64 [{0}], {{{1}, {2}}};", in(reg64) addr, in(reg64) v[0], in(reg64) v[1], options(nostack)) };
    }

    #[inline(always)]
    unsafe fn red_add_relaxed_gpu_f32(addr: u64, v: f32) {
        // SAFETY: the caller gives the generic address of an aligned, writable f32 in global
        // memory (the `Arch` contract), which `cvta.to.global` maps to its global-window
        // address for this one atomic reduction.
        unsafe { asm!("{{ .reg .u64 g; cvta.to.global.u64 g, {0}; red.relaxed.gpu.global.add.f32 [g], {1}; }}", in(reg64) addr, in(reg32) v, options(nostack)) };
    }

    half_binary!(add_f16, u16, reg16, "add.rn.f16");
    half_binary!(mul_f16, u16, reg16, "mul.rn.f16");
    half_binary!(min_f16, u16, reg16, "min.f16");
    half_binary!(max_f16, u16, reg16, "max.f16");
    half_binary!(add_bf16, u16, reg16, "add.rn.bf16");
    half_binary!(mul_bf16, u16, reg16, "mul.rn.bf16");
    half_binary!(min_bf16, u16, reg16, "min.bf16");
    half_binary!(max_bf16, u16, reg16, "max.bf16");
    half_binary!(add_f16x2, u32, reg32, "add.rn.f16x2");
    half_binary!(mul_f16x2, u32, reg32, "mul.rn.f16x2");
    half_binary!(min_f16x2, u32, reg32, "min.f16x2");
    half_binary!(max_f16x2, u32, reg32, "max.f16x2");
    half_binary!(add_bf16x2, u32, reg32, "add.rn.bf16x2");
    half_binary!(mul_bf16x2, u32, reg32, "mul.rn.bf16x2");
    half_binary!(min_bf16x2, u32, reg32, "min.bf16x2");
    half_binary!(max_bf16x2, u32, reg32, "max.bf16x2");
    half_convert!(f16_to_f32, u16, reg16, f32, reg32, "cvt.f32.f16");
    half_convert!(f32_to_f16, f32, reg32, u16, reg16, "cvt.rn.f16.f32");
    half_convert!(bf16_to_f32, u16, reg16, f32, reg32, "cvt.f32.bf16");
    half_convert!(f32_to_bf16, f32, reg32, u16, reg16, "cvt.rn.bf16.f32");

    #[inline(always)]
    fn dyn_smem() -> *mut u8 {
        let p: u64;
        // SAFETY: takes an address; touches no memory.
        unsafe { asm!("cvta.shared.u64 {0}, ferroccl_dyn_smem;", out(reg64) p, options(nomem, nostack, pure)) };
        p as *mut u8
    }

    // Shared words are accessed through Rust's volatile accesses, not `asm!`: LLVM emits one
    // generic `ld/st.volatile.b64` (the address comes out of `dyn_smem`'s asm, so it cannot
    // infer the shared space; the hardware resolves the window) with the offset folded into
    // it, where an asm block would need the address in a register of its own.

    #[inline(always)]
    unsafe fn ld_volatile_shared_b64(p: *const u64) -> u64 {
        // SAFETY: the caller gives an aligned word of this CTA's shared memory (the `Arch`
        // contract), which this one volatile load reads.
        unsafe { p.read_volatile() }
    }

    #[inline(always)]
    unsafe fn st_volatile_shared_b64(p: *mut u64, v: u64) {
        // SAFETY: the caller gives an aligned, writable word of this CTA's shared memory (the
        // `Arch` contract), which this one volatile store writes.
        unsafe { p.write_volatile(v) }
    }

    #[inline(always)]
    fn cvta_to_shared<T>(p: *const T) -> u32 {
        let a: u64;
        // SAFETY: address arithmetic only: the asm takes the address as an integer and
        // touches no memory.
        unsafe { asm!("cvta.to.shared.u64 {0}, {1};", out(reg64) a, in(reg64) p.addr(), options(nomem, nostack, pure)) };
        a as u32
    }

    #[inline(always)]
    fn cvta_to_global<T>(p: *const T) -> u64 {
        let a: u64;
        // SAFETY: address arithmetic only: the asm takes the address as an integer and
        // touches no memory.
        unsafe { asm!("cvta.to.global.u64 {0}, {1};", out(reg64) a, in(reg64) p.addr(), options(nomem, nostack, pure)) };
        a
    }

    #[inline(always)]
    fn vote_ballot(mask: u32, pred: bool) -> u32 {
        let r: u32;
        // SAFETY: register-only warp operation.
        unsafe {
            asm!("{{ .reg .pred p; setp.ne.u32 p, {1}, 0; vote.sync.ballot.b32 {0}, p, {2}; }}",
                 out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nomem, nostack))
        };
        r
    }

    #[inline(always)]
    fn vote_all(mask: u32, pred: bool) -> bool {
        let r: u32;
        // SAFETY: register-only warp operation.
        unsafe {
            asm!("{{ .reg .pred p, q; setp.ne.u32 p, {1}, 0; vote.sync.all.pred q, p, {2}; selp.u32 {0}, 1, 0, q; }}",
                 out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nomem, nostack))
        };
        r != 0
    }

    #[inline(always)]
    fn vote_any(mask: u32, pred: bool) -> bool {
        let r: u32;
        // SAFETY: register-only warp operation.
        unsafe {
            asm!("{{ .reg .pred p, q; setp.ne.u32 p, {1}, 0; vote.sync.any.pred q, p, {2}; selp.u32 {0}, 1, 0, q; }}",
                 out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nomem, nostack))
        };
        r != 0
    }

    #[inline(always)]
    fn shfl_idx(mask: u32, v: u32, src_lane: u32) -> u32 {
        let r: u32;
        // SAFETY: register-only warp operation.
        unsafe { asm!("shfl.sync.idx.b32 {0}, {1}, {2}, 0x1f, {3};", out(reg32) r, in(reg32) v, in(reg32) src_lane, in(reg32) mask, options(nomem, nostack)) };
        r
    }

    #[inline(always)]
    fn shfl_xor(mask: u32, v: u32, lane_mask: u32) -> u32 {
        let r: u32;
        // SAFETY: register-only warp operation.
        unsafe { asm!("shfl.sync.bfly.b32 {0}, {1}, {2}, 0x1f, {3};", out(reg32) r, in(reg32) v, in(reg32) lane_mask, in(reg32) mask, options(nomem, nostack)) };
        r
    }

    #[inline(always)]
    fn clock64() -> u64 {
        let v: u64;
        // SAFETY: reads a counter. Not `pure`: two reads must not be merged.
        unsafe { asm!("mov.u64 {0}, %clock64;", out(reg64) v, options(nomem, nostack)) };
        v
    }

    #[inline(always)]
    fn globaltimer_ns() -> u64 {
        let v: u64;
        // SAFETY: reads a counter. Not `pure`: two reads must not be merged.
        unsafe { asm!("mov.u64 {0}, %globaltimer;", out(reg64) v, options(nomem, nostack)) };
        v
    }

    #[inline(always)]
    fn nanosleep(ns: u32) {
        // SAFETY: only delays the thread.
        unsafe { asm!("nanosleep.u32 {0};", in(reg32) ns, options(nomem, nostack)) };
    }

    #[inline(always)]
    fn spin_pause() {}

    #[inline(always)]
    fn launch_dependents() {
        // SAFETY: a hint to the scheduler; no memory is accessed.
        unsafe { asm!("griddepcontrol.launch_dependents;", options(nostack)) }
    }

    #[inline(always)]
    fn grid_dependency_wait() {
        // SAFETY: waits for the grids this one depends on; no memory is accessed by it, and
        // the compiler keeps memory accesses on their side of it (no `nomem`).
        unsafe { asm!("griddepcontrol.wait;", options(nostack)) }
    }

    #[inline(always)]
    fn trap() -> ! {
        // SAFETY: ends the kernel.
        unsafe { asm!("trap;", options(noreturn, nostack)) }
    }

    #[inline(always)]
    fn site(_site: Site) {}
}

global_asm!(".extern .shared .align 16 .b8 ferroccl_dyn_smem[];");

// ---------------------------------------------------------------------------------------
// Ordered loads and stores, and atomics, of 32- and 64-bit words in global memory.
// ---------------------------------------------------------------------------------------

macro_rules! global_word {
    ($t:ty, $reg:ident, $b:literal) => {
        impl GlobalWord for $t {
            #[inline(always)]
            unsafe fn ld_volatile(p: *const Self) -> Self {
                let v: $t;
                // SAFETY: the caller gives a valid, aligned pointer to a readable word in global
                // memory (the `GlobalWord` contract), which `cvta.to.global` maps to its global-
                // window address for this one load.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.volatile.global.", $b, " {0}, [g]; }}"), out($reg) v, in(reg64) p, options(nostack)) };
                v
            }
            #[inline(always)]
            unsafe fn ld_relaxed_gpu(p: *const Self) -> Self {
                let v: $t;
                // SAFETY: as for `ld_volatile`; not `readonly`, so the compiler keeps the strong
                // load in program order.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.relaxed.gpu.global.", $b, " {0}, [g]; }}"), out($reg) v, in(reg64) p, options(nostack)) };
                v
            }
            #[inline(always)]
            unsafe fn ld_relaxed_sys(p: *const Self) -> Self {
                let v: $t;
                // SAFETY: as for `ld_volatile`; not `readonly`, so the compiler keeps the strong
                // load in program order.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.relaxed.sys.global.", $b, " {0}, [g]; }}"), out($reg) v, in(reg64) p, options(nostack)) };
                v
            }
            #[inline(always)]
            unsafe fn ld_acquire_sys(p: *const Self) -> Self {
                let v: $t;
                // SAFETY: as for `ld_volatile`; not `readonly`, so that the compiler keeps later
                // accesses after this acquire.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.acquire.sys.global.", $b, " {0}, [g]; }}"), out($reg) v, in(reg64) p, options(nostack)) };
                v
            }
            #[inline(always)]
            unsafe fn ld_acquire_gpu(p: *const Self) -> Self {
                let v: $t;
                // SAFETY: as for `ld_volatile`; not `readonly`, so that the compiler keeps later
                // accesses after this acquire.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; ld.acquire.gpu.global.", $b, " {0}, [g]; }}"), out($reg) v, in(reg64) p, options(nostack)) };
                v
            }
            #[inline(always)]
            unsafe fn st_volatile(p: *mut Self, v: Self) {
                // SAFETY: the caller gives a valid, aligned pointer to a writable word in global
                // memory (the `GlobalWord` contract), which `cvta.to.global` maps to its global-
                // window address for this one store.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {0}; st.volatile.global.", $b, " [g], {1}; }}"), in(reg64) p, in($reg) v, options(nostack)) };
            }
            #[inline(always)]
            unsafe fn st_relaxed_sys(p: *mut Self, v: Self) {
                // SAFETY: as for `st_volatile`.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {0}; st.relaxed.sys.global.", $b, " [g], {1}; }}"), in(reg64) p, in($reg) v, options(nostack)) };
            }
            #[inline(always)]
            unsafe fn st_release_sys(p: *mut Self, v: Self) {
                // SAFETY: as for `st_volatile`; the default clobber keeps the compiler from moving
                // earlier accesses after this release.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {0}; st.release.sys.global.", $b, " [g], {1}; }}"), in(reg64) p, in($reg) v, options(nostack)) };
            }
            #[inline(always)]
            unsafe fn st_release_gpu(p: *mut Self, v: Self) {
                // SAFETY: as for `st_volatile`; the default clobber keeps the compiler from moving
                // earlier accesses after this release.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {0}; st.release.gpu.global.", $b, " [g], {1}; }}"), in(reg64) p, in($reg) v, options(nostack)) };
            }
        }
    };
}

global_word!(u32, reg32, "b32");
global_word!(u64, reg64, "b64");

macro_rules! atomic_rmw {
    ($name:ident, $t:ty, $reg:ident, $instr:literal, $ty:literal) => {
        #[inline(always)]
        unsafe fn $name(p: *mut Self, v: Self) -> Self {
            let old: $t;
            // SAFETY: the caller gives a valid, aligned pointer to a writable word in global memory
            // (the `AtomicWord` contract), which `cvta.to.global` maps to its global-window address
            // for this one atomic read-modify-write.
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
            atomic_rmw!(atomic_add_acq_rel_gpu, $t, $reg, "atom.acq_rel.gpu.global.add.", $u);
            atomic_rmw!(atomic_max_relaxed_gpu, $t, $reg, "atom.relaxed.gpu.global.max.", $u);
            atomic_rmw!(atomic_min_relaxed_gpu, $t, $reg, "atom.relaxed.gpu.global.min.", $u);
            atomic_rmw!(atomic_exch_acq_rel_sys, $t, $reg, "atom.acq_rel.sys.global.exch.", $b);
            atomic_rmw!(atomic_exch_relaxed_sys, $t, $reg, "atom.relaxed.sys.global.exch.", $b);
            #[inline(always)]
            unsafe fn atomic_cas_relaxed_sys(p: *mut Self, expected: Self, new: Self) -> Self {
                let old: $t;
                // SAFETY: as for `atomic_cas_acq_rel_sys`.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; atom.relaxed.sys.global.cas.", $b, " {0}, [g], {2}, {3}; }}"), out($reg) old, in(reg64) p, in($reg) expected, in($reg) new, options(nostack)) };
                old
            }
            #[inline(always)]
            unsafe fn atomic_cas_acq_rel_sys(p: *mut Self, expected: Self, new: Self) -> Self {
                let old: $t;
                // SAFETY: as for the other read-modify-writes: a valid, aligned, writable word in
                // global memory (the `AtomicWord` contract), accessed by this one atomic compare-
                // and-swap.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; atom.acq_rel.sys.global.cas.", $b, " {0}, [g], {2}, {3}; }}"), out($reg) old, in(reg64) p, in($reg) expected, in($reg) new, options(nostack)) };
                old
            }
            #[inline(always)]
            unsafe fn atomic_cas_acq_rel_gpu(p: *mut Self, expected: Self, new: Self) -> Self {
                let old: $t;
                // SAFETY: as for `atomic_cas_acq_rel_sys`.
                unsafe { asm!(concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {1}; atom.acq_rel.gpu.global.cas.", $b, " {0}, [g], {2}, {3}; }}"), out($reg) old, in(reg64) p, in($reg) expected, in($reg) new, options(nostack)) };
                old
            }
        }
    };
}

atomic_word!(u32, reg32, "u32", "b32");
atomic_word!(u64, reg64, "u64", "b64");

// ---------------------------------------------------------------------------------------
// NVLink SHARP (multimem).
// ---------------------------------------------------------------------------------------

macro_rules! multimem_ld_reduce_v4 {
    ($name:ident, $op:literal) => {
        #[inline(always)]
        unsafe fn $name(addr: u64) -> [u32; 4] {
            let (a, b, c, d): (u32, u32, u32, u32);
            // SAFETY: the caller gives a 16-byte aligned multicast address (the `Multimem`
            // contract), which this one `multimem` load reads; the result is four 32-bit registers.
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
        #[inline(always)]
        unsafe fn $name(addr: u64) -> $t {
            let v: $t;
            // SAFETY: the caller gives a naturally aligned multicast address (the `Multimem`
            // contract), which this one `multimem` load reads.
            unsafe { asm!(concat!("multimem.ld_reduce.relaxed.sys.global.", $op, " {0}, [{1}];"), out($reg) v, in(reg64) addr, options(nostack)) };
            v
        }
    };
}

impl Multimem for Nvptx {
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

    #[inline(always)]
    unsafe fn multimem_ld_reduce_acquire_min_u64(addr: u64) -> u64 {
        let v: u64;
        // SAFETY: the caller gives an 8-byte aligned multicast address (the `Multimem` contract);
        // not `readonly`, so that the compiler keeps later accesses after this acquire.
        unsafe { asm!("multimem.ld_reduce.acquire.sys.global.min.u64 {0}, [{1}];", out(reg64) v, in(reg64) addr, options(nostack)) };
        v
    }

    #[inline(always)]
    unsafe fn multimem_st_v4(addr: u64, v: [u32; 4]) {
        // SAFETY: the caller gives a 16-byte aligned multicast address (the `Multimem` contract),
        // which this one `multimem` store writes on every device.
        unsafe {
            asm!("multimem.st.relaxed.sys.global.v4.f32 [{0}], {{{1}, {2}, {3}, {4}}};",
                 in(reg64) addr, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3], options(nostack))
        };
    }

    #[inline(always)]
    unsafe fn multimem_st_b64(addr: u64, v: u64) {
        // SAFETY: the caller gives an 8-byte aligned multicast address (the `Multimem` contract).
        unsafe { asm!("multimem.st.relaxed.sys.global.b64 [{0}], {1};", in(reg64) addr, in(reg64) v, options(nostack)) };
    }

    #[inline(always)]
    unsafe fn multimem_st_b32(addr: u64, v: u32) {
        // SAFETY: the caller gives a 4-byte aligned multicast address (the `Multimem` contract).
        unsafe { asm!("multimem.st.relaxed.sys.global.b32 [{0}], {1};", in(reg64) addr, in(reg32) v, options(nostack)) };
    }
}
