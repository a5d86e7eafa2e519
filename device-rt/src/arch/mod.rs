//! The hardware layer: the only module with inline PTX.
//!
//! Names and semantics follow NCCL's `op128.h` so the two can be read side by side
//! (`ld_volatile_global`, `ld_acquire_sys_global`, `st_release_sys_global`,
//! `fence_acq_rel_sys`, …). Every function states the memory ordering it gives.
//! Nothing above this module may use `asm!` or nvptx intrinsics, and nothing here may
//! import from the rest of the crate.
//!
//! Two implementations of one contract: `nvptx.rs` on the GPU, and `host.rs` (feature
//! `host-emu`), its twin on CPU threads. The contract is the trait [`Arch`] (with the
//! word traits [`GlobalWord`] and [`AtomicWord`], implemented for `u32` and `u64`), which
//! each implementation's type implements; the free functions the rest of the crate calls
//! are written here once, each forwarding to the implementation this build selected. So
//! a function that is missing, or typed differently, on either side fails to compile,
//! and every function's documentation (its ordering, its `# Safety`) is written once,
//! here. Beyond the contract, the GPU implements `Multimem` (there is no multicast
//! address on the host), and the twin adds `launch` and `launch_in`, its stand-ins for a
//! kernel launch, and `WeakMemory` (`weak/`), the world of its weak-memory mode, in
//! which the ordering operations that protocols name with [`site`] can be weakened.

#[cfg_attr(target_arch = "nvptx64", path = "nvptx.rs")]
#[cfg_attr(not(target_arch = "nvptx64"), path = "host.rs")]
mod imp;

#[cfg(not(target_arch = "nvptx64"))]
mod pool;
#[cfg(not(target_arch = "nvptx64"))]
mod weak;

#[cfg(not(target_arch = "nvptx64"))]
pub use imp::{GridDependency, launch, launch_after, launch_in};
#[cfg(not(target_arch = "nvptx64"))]
pub use weak::{WeakMemory, WeakStats};

/// The implementation this build runs on.
#[cfg(target_arch = "nvptx64")]
type Imp = imp::Nvptx;
/// The implementation this build runs on.
#[cfg(not(target_arch = "nvptx64"))]
type Imp = imp::HostTwin;

/// Threads per warp on every NVIDIA GPU we target.
pub const WARP_SIZE: u32 = 32;

/// Lanes taking part in a warp-wide operation: all 32.
pub const FULL_MASK: u32 = u32::MAX;

/// Declares a contract trait and, for each of its functions, the free function of the same
/// name and signature that forwards to [`Imp`]'s implementation; the documentation of
/// each function goes to both.
macro_rules! contract {
    ($(#[$doc:meta])* pub trait $trait:ident { $($items:tt)* }) => {
        $(#[$doc])*
        pub trait $trait {
            contract!(@decl $($items)*);
        }
        contract!(@free $trait; $($items)*);
    };
    (@decl) => {};
    (@decl $(#[$m:meta])* unsafe fn $name:ident $(<$g:ident>)? ($($a:ident: $t:ty),*) $(-> $r:ty)?; $($rest:tt)*) => {
        $(#[$m])*
        unsafe fn $name $(<$g>)? ($($a: $t),*) $(-> $r)?;
        contract!(@decl $($rest)*);
    };
    (@decl $(#[$m:meta])* fn $name:ident $(<$g:ident>)? ($($a:ident: $t:ty),*) $(-> $r:ty)?; $($rest:tt)*) => {
        $(#[$m])*
        fn $name $(<$g>)? ($($a: $t),*) $(-> $r)?;
        contract!(@decl $($rest)*);
    };
    (@free $trait:ident;) => {};
    (@free $trait:ident; $(#[$m:meta])* unsafe fn $name:ident $(<$g:ident>)? ($($a:ident: $t:ty),*) $(-> $r:ty)?; $($rest:tt)*) => {
        $(#[$m])*
        #[inline(always)]
        pub unsafe fn $name $(<$g>)? ($($a: $t),*) $(-> $r)? {
            // SAFETY: forwarded; the caller keeps this function's contract.
            unsafe { <Imp as $trait>::$name $(::<$g>)? ($($a),*) }
        }
        contract!(@free $trait; $($rest)*);
    };
    (@free $trait:ident; $(#[$m:meta])* fn $name:ident $(<$g:ident>)? ($($a:ident: $t:ty),*) $(-> $r:ty)?; $($rest:tt)*) => {
        $(#[$m])*
        #[inline(always)]
        pub fn $name $(<$g>)? ($($a: $t),*) $(-> $r)? {
            <Imp as $trait>::$name $(::<$g>)? ($($a),*)
        }
        contract!(@free $trait; $($rest)*);
    };
}

contract! {
    /// What both implementations of `arch` offer, function for function; the free
    /// functions of the same names (which the rest of the crate calls) forward to the
    /// implementation this build selected.
    ///
    /// Addresses are generic addresses (what `cuMemAlloc` returns) unless a function says
    /// global-window (`cvta_to_global`). On the host twin every access is a Rust atomic
    /// and the CPU may order more strongly than PTX (see `host.rs`): a missing fence may
    /// pass there and fail on a GPU, unless the launch runs in a weak-memory world
    /// (`weak/`).
    pub trait Arch {
        // Thread, block and grid indices (x dimension only: ferroccl launches 1-D grids).

        /// `%tid.x`: this thread's index in its CTA.
        fn thread_idx() -> u32;
        /// `%ntid.x`: threads per CTA.
        fn block_dim() -> u32;
        /// `%ctaid.x`: this CTA's index in the grid.
        fn block_idx() -> u32;
        /// `%nctaid.x`: CTAs in the grid.
        fn grid_dim() -> u32;
        /// `%laneid`: this thread's lane in its warp.
        fn lane_id() -> u32;
        /// `%smid`: the SM this thread runs on (may change across preemption; diagnostics
        /// only; always 0 on the host twin).
        fn sm_id() -> u32;
        /// `%dynamic_smem_size`: bytes of dynamic shared memory this launch was given.
        fn dynamic_smem_size() -> u32;

        // Barriers.

        /// `barrier.sync id, nthreads`: waits until `nthreads` threads (a multiple of 32,
        /// at most the CTA's) have arrived at named barrier `id` (0..16).
        ///
        /// Ordering: memory accesses made by the participating threads before the barrier
        /// are performed, at CTA scope, before any participant continues past it.
        ///
        /// The unaligned `barrier.sync` form is used on purpose: `bar.sync` is `.aligned`
        /// and is undefined where the compiler may have split a convergent path. The host
        /// twin panics on a bad `id` or `nthreads`, or when the threads of one generation
        /// pass different counts (undefined on the GPU).
        fn barrier_sync(id: u32, nthreads: u32);
        /// `barrier.sync 0`: every thread of the CTA. Same ordering as [`barrier_sync`].
        fn barrier_sync_all();
        /// `bar.warp.sync mask`: waits until every lane of `mask` (of this thread's warp)
        /// has arrived (`__syncwarp`).
        ///
        /// Ordering: memory accesses made by the participating lanes before it are
        /// performed, at CTA scope, before any participant continues past it (so a later
        /// fence or release of one lane publishes the others' stores, as after
        /// [`barrier_sync`]). The host twin takes `FULL_MASK` only, with a full warp; in a
        /// weak-memory launch it hands the lanes' buffered stores to the whole CTA, as a
        /// CTA barrier does (it orders more than PTX promises for the other warps).
        fn warp_sync(mask: u32);

        // Fences.

        /// `fence.acq_rel.sys`: this thread's earlier accesses are ordered before its
        /// later ones for every observer in the system (other GPUs, the host). Use before
        /// publishing data that a peer GPU or the CPU will read after seeing a flag.
        fn fence_acq_rel_sys();
        /// `fence.acq_rel.gpu`: as [`fence_acq_rel_sys`] for observers on this GPU only.
        fn fence_acq_rel_gpu();
        /// `fence.acq_rel.cta`: as [`fence_acq_rel_sys`] for observers in this CTA only.
        fn fence_acq_rel_cta();
        /// `fence.sc.sys`: a sequentially consistent fence at system scope (the
        /// strongest, and slowest, fence; `__threadfence_system()`).
        fn fence_sc_sys();

        // Sized loads and stores (1, 2, 4, 8 and 16 bytes) at global-window addresses,
        // aligned to the size: what BytePack moves. Loads are `ld.volatile` (never cached
        // in L1 or elided, so data a peer wrote is seen once its flag was) and order
        // nothing by themselves; stores are weak `st.global` (order them with a fence or
        // a release before publishing).

        /// `ld.volatile.global.u8` of one byte.
        ///
        /// # Safety
        /// `addr` must be a global address of a readable byte that, on the host twin,
        /// every thread accesses only through `arch`'s functions while the kernel runs.
        unsafe fn ld_volatile_global_b8(addr: u64) -> u8;
        /// `ld.volatile.global.b16` of one aligned value.
        ///
        /// # Safety
        /// `addr` must be a global address of a readable, aligned value (a misaligned one
        /// panics on the host twin), accessed as in [`ld_volatile_global_b8`].
        unsafe fn ld_volatile_global_b16(addr: u64) -> u16;
        /// `ld.volatile.global.b32` of one aligned value.
        ///
        /// # Safety
        /// As [`ld_volatile_global_b16`].
        unsafe fn ld_volatile_global_b32(addr: u64) -> u32;
        /// `ld.volatile.global.b64` of one aligned value.
        ///
        /// # Safety
        /// As [`ld_volatile_global_b16`].
        unsafe fn ld_volatile_global_b64(addr: u64) -> u64;
        /// `st.global.u8` of one byte.
        ///
        /// # Safety
        /// As [`ld_volatile_global_b8`], and the byte must be writable.
        unsafe fn st_global_b8(addr: u64, v: u8);
        /// `st.global.b16` of one aligned value.
        ///
        /// # Safety
        /// As [`ld_volatile_global_b16`], and the value must be writable.
        unsafe fn st_global_b16(addr: u64, v: u16);
        /// `st.global.b32` of one aligned value.
        ///
        /// # Safety
        /// As [`st_global_b16`].
        unsafe fn st_global_b32(addr: u64, v: u32);
        /// `st.global.b64` of one aligned value.
        ///
        /// # Safety
        /// As [`st_global_b16`].
        unsafe fn st_global_b64(addr: u64, v: u64);
        /// `ld.volatile.global.v2.b64`: 16 bytes in one access (two 8-byte accesses on the
        /// host twin, without the GPU's 16-byte single-copy atomicity).
        ///
        /// # Safety
        /// `addr` must be a 16-byte aligned global address of 16 readable bytes, accessed
        /// as in [`ld_volatile_global_b8`].
        unsafe fn ld_volatile_global_v2b64(addr: u64) -> [u64; 2];
        /// `ld.acquire.sys.global.v2.b64`: 16 bytes, two 8-byte acquire loads in one access
        /// (each word single-copy atomic; no order between the two): later memory
        /// operations of this thread see everything released before either value was
        /// written. No fence.
        ///
        /// # Safety
        /// As [`ld_volatile_global_v2b64`].
        unsafe fn ld_acquire_sys_global_v2b64(addr: u64) -> [u64; 2];
        /// `ld.global.cv.v2.b64`: 16 bytes, a weak load that treats cached lines as stale
        /// and fetches again (for host memory the host rewrites). Weak: order it after an
        /// acquire (or a barrier after one); unlike `ld.volatile`, consecutive ones are
        /// pipelined.
        ///
        /// # Safety
        /// As [`ld_volatile_global_v2b64`].
        unsafe fn ld_cv_global_v2b64(addr: u64) -> [u64; 2];
        /// `st.global.v2.b64`: 16 bytes in one access (two 8-byte stores on the host twin).
        ///
        /// # Safety
        /// As [`ld_volatile_global_v2b64`], and the bytes must be writable.
        unsafe fn st_global_v2b64(addr: u64, v: [u64; 2]);
        /// `st.volatile.global.v2.b64`: 16 bytes in one access, each 8-byte half
        /// single-copy atomic (two relaxed 8-byte stores on the host twin), as NCCL's LL
        /// packets store data and flag together. Orders nothing by itself.
        ///
        /// # Safety
        /// As [`st_global_v2b64`].
        unsafe fn st_volatile_global_v2b64(addr: u64, v: [u64; 2]);
        /// `red.relaxed.gpu.global.add.f32`: adds `v` to the `f32` at `addr` in one atomic
        /// step, rounded as `add.rn.f32` (CUDA's `atomicAdd` on a float, its result unused).
        ///
        /// Ordering: relaxed at GPU scope; atomic against every other atomic on the word,
        /// orders nothing else.
        ///
        /// # Safety
        /// `addr` must be the generic address of an aligned, writable `f32` in global
        /// memory that, on the host twin, every thread accesses only through `arch`'s
        /// functions while the kernel runs.
        unsafe fn red_add_relaxed_gpu_f32(addr: u64, v: f32);

        // Half-precision arithmetic (f16 and bf16 as raw bits), scalar and packed pairs
        // (element 0 in the low half), rounding to nearest even. `min`/`max` return the
        // non-NaN operand when one is NaN. No memory access, no ordering.

        /// `add.rn.f16`.
        fn add_f16(a: u16, b: u16) -> u16;
        /// `mul.rn.f16`.
        fn mul_f16(a: u16, b: u16) -> u16;
        /// `min.f16`.
        fn min_f16(a: u16, b: u16) -> u16;
        /// `max.f16`.
        fn max_f16(a: u16, b: u16) -> u16;
        /// `add.rn.bf16`.
        fn add_bf16(a: u16, b: u16) -> u16;
        /// `mul.rn.bf16`.
        fn mul_bf16(a: u16, b: u16) -> u16;
        /// `min.bf16`.
        fn min_bf16(a: u16, b: u16) -> u16;
        /// `max.bf16`.
        fn max_bf16(a: u16, b: u16) -> u16;
        /// `add.rn.f16x2`: two lanes at once.
        fn add_f16x2(a: u32, b: u32) -> u32;
        /// `mul.rn.f16x2`.
        fn mul_f16x2(a: u32, b: u32) -> u32;
        /// `min.f16x2`.
        fn min_f16x2(a: u32, b: u32) -> u32;
        /// `max.f16x2`.
        fn max_f16x2(a: u32, b: u32) -> u32;
        /// `add.rn.bf16x2`.
        fn add_bf16x2(a: u32, b: u32) -> u32;
        /// `mul.rn.bf16x2`.
        fn mul_bf16x2(a: u32, b: u32) -> u32;
        /// `min.bf16x2`.
        fn min_bf16x2(a: u32, b: u32) -> u32;
        /// `max.bf16x2`.
        fn max_bf16x2(a: u32, b: u32) -> u32;
        /// `cvt.f32.f16`: exact widening.
        fn f16_to_f32(h: u16) -> f32;
        /// `cvt.rn.f16.f32`: round to nearest even.
        fn f32_to_f16(f: f32) -> u16;
        /// `cvt.f32.bf16`: exact widening.
        fn bf16_to_f32(h: u16) -> f32;
        /// `cvt.rn.bf16.f32`: round to nearest even.
        fn f32_to_bf16(f: f32) -> u16;

        // Shared memory.

        /// The generic address of this CTA's dynamic shared memory ([`dynamic_smem_size`]
        /// bytes, 16-byte aligned, private to the CTA; zeroed at launch on the host twin).
        /// Plain loads and stores through it are ordered across the CTA by
        /// [`barrier_sync`].
        fn dyn_smem() -> *mut u8;
        /// A volatile load of a 64-bit word of this CTA's shared memory at its generic
        /// address (`ld.volatile.b64`; `ld.volatile.shared.b64` where the compiler sees the
        /// address is shared): one non-tearing access, never cached or elided, for a word
        /// that other threads of the CTA may store to meanwhile (a group's `stopped`). Ordering: none (a relaxed load; order data with a barrier).
        /// Here (host twin): a relaxed atomic load of the word itself, outside the
        /// weak-memory model (which does not model shared memory).
        ///
        /// # Safety
        /// `p` must be an 8-byte aligned word in this CTA's dynamic shared memory
        /// ([`dyn_smem`]; the host twin panics on a misaligned word or one outside the
        /// window) that threads access only through [`ld_volatile_shared_b64`] and
        /// [`st_volatile_shared_b64`] wherever their accesses are not ordered by a barrier.
        unsafe fn ld_volatile_shared_b64(p: *const u64) -> u64;
        /// A volatile store of a 64-bit word of this CTA's shared memory at its generic
        /// address (`st.volatile.b64`, or `st.volatile.shared.b64`), the store
        /// side of [`ld_volatile_shared_b64`]. Ordering: none (a relaxed store). Here (host
        /// twin): a relaxed atomic store of the word itself.
        ///
        /// # Safety
        /// As [`ld_volatile_shared_b64`], and the word must be writable.
        unsafe fn st_volatile_shared_b64(p: *mut u64, v: u64);
        /// `cvta.to.shared`: the 32-bit shared-window address of a generic pointer into
        /// shared memory (what `ld.shared`/`st.shared` take; on the host twin its offset
        /// from [`dyn_smem`], and a pointer outside the CTA's window panics).
        fn cvta_to_shared<T>(p: *const T) -> u32;
        /// `cvta.to.global`: the global-window address of a generic pointer (the address
        /// itself on the host twin, which has one address space).
        fn cvta_to_global<T>(p: *const T) -> u64;

        // Warp vote and shuffle (the host twin takes `FULL_MASK` only, with a full warp
        // of 32 threads). Ordering: none beyond the exchange of the values.

        /// `vote.sync.ballot.b32`: bit `i` of the result is set when lane `i` of `mask`
        /// passed a true `pred`. Every lane in `mask` must execute it.
        fn vote_ballot(mask: u32, pred: bool) -> u32;
        /// `vote.sync.all`: true when `pred` holds on every lane of `mask`.
        fn vote_all(mask: u32, pred: bool) -> bool;
        /// `vote.sync.any`: true when `pred` holds on some lane of `mask`.
        fn vote_any(mask: u32, pred: bool) -> bool;
        /// `shfl.sync.idx.b32`: the value of `v` held by lane `src_lane` (its low 5 bits).
        fn shfl_idx(mask: u32, v: u32, src_lane: u32) -> u32;
        /// `shfl.sync.bfly.b32`: the value of `v` held by lane `lane_id() ^ lane_mask`
        /// (its low 5 bits).
        fn shfl_xor(mask: u32, v: u32, lane_mask: u32) -> u32;

        // Time, sleep, trap.

        /// `%clock64`: this SM's cycle counter (on the host twin, nanoseconds standing in
        /// for cycles, strictly increasing between two reads of one thread). Two reads are
        /// never merged.
        fn clock64() -> u64;
        /// `%globaltimer`: nanoseconds, shared by the whole GPU (updates every ~µs). Two
        /// reads are never merged.
        fn globaltimer_ns() -> u64;
        /// `nanosleep.u32`: suspends this thread for about `ns` nanoseconds (0..=2·ns, at
        /// most 1 ms). On the host twin, unwinds the thread when another thread of its
        /// launch panicked.
        fn nanosleep(ns: u32);
        /// One iteration of a busy-wait: nothing on the GPU (the poll itself is the
        /// back-off); the host twin yields the CPU here so that thousands of emulated
        /// threads can progress (and unwinds when another thread of the launch panicked).
        fn spin_pause();
        /// `griddepcontrol.launch_dependents`: lets the next kernel of this grid's stream,
        /// when launched with programmatic stream serialization, start before this grid
        /// ends (once every CTA of this grid has called this or exited). On the host twin,
        /// the same for a launch through `launch_after`. Ordering: none; the dependent
        /// grid sees this grid's writes only after its [`Arch::grid_dependency_wait`].
        fn launch_dependents();
        /// `griddepcontrol.wait`: waits until every grid this one depends on (the kernel
        /// before it on its stream, when this grid was launched with programmatic stream
        /// serialization) has completed and its memory operations are visible to this
        /// thread; returns at once otherwise (on the host twin, for a launch through
        /// `launch_after`, it waits until the launch before has ended). Ordering: as a
        /// kernel boundary of its stream.
        fn grid_dependency_wait();
        /// `trap`: aborts the kernel; the host sees `CUDA_ERROR_LAUNCH_FAILED` (on the host
        /// twin, a panic that `launch` resumes once every thread has ended). For broken
        /// invariants only: recoverable faults are reported through error codes.
        fn trap() -> !;

        // Protocol sites.

        /// Names the next ordering operation of this thread (a fence, an acquire load, a
        /// release store or an acq_rel read-modify-write: [`Site::kind`] says which) as
        /// the protocol step `site`. No instruction on the GPU. The host twin checks that
        /// the next ordering operation is of that kind (a panic otherwise) and, in a
        /// weak-memory launch that weakens `site`, performs it without its ordering: the
        /// negative controls that show the weak-memory mode catches a missing fence (see
        /// `weak/`). Ordering: none.
        fn site(site: Site);
    }
}

#[cfg(target_arch = "nvptx64")]
contract! {
    /// NVLink SHARP: multimem loads-with-reduce and stores on a multicast address, on the
    /// GPU only (there is no multicast address on the host). Only valid on an address
    /// bound to a multicast object; ferroccl issues these only through `HwMulticast`,
    /// which is enabled where the device supports multicast and the user opts in.
    ///
    /// Ordering: `.relaxed.sys` (data; publish with a fence and a flag), except
    /// [`multimem_ld_reduce_acquire_min_u64`] (NCCL's NvlsMinPolling), an acquire at
    /// system scope.
    pub trait Multimem {
        /// `multimem.ld_reduce.relaxed.sys.global.add.v4.f32` of 16 bytes: every device's
        /// copy, reduced.
        ///
        /// # Safety
        /// `addr` must be a 16-byte aligned multicast address.
        unsafe fn multimem_ld_reduce_add_v4_f32(addr: u64) -> [u32; 4];
        /// As [`multimem_ld_reduce_add_v4_f32`], `add.v4.f16x2`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_v4_f32`].
        unsafe fn multimem_ld_reduce_add_v4_f16x2(addr: u64) -> [u32; 4];
        /// As [`multimem_ld_reduce_add_v4_f32`], `add.v4.bf16x2`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_v4_f32`].
        unsafe fn multimem_ld_reduce_add_v4_bf16x2(addr: u64) -> [u32; 4];
        /// As [`multimem_ld_reduce_add_v4_f32`], `min.v4.f16x2`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_v4_f32`].
        unsafe fn multimem_ld_reduce_min_v4_f16x2(addr: u64) -> [u32; 4];
        /// As [`multimem_ld_reduce_add_v4_f32`], `max.v4.f16x2`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_v4_f32`].
        unsafe fn multimem_ld_reduce_max_v4_f16x2(addr: u64) -> [u32; 4];
        /// As [`multimem_ld_reduce_add_v4_f32`], `min.v4.bf16x2`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_v4_f32`].
        unsafe fn multimem_ld_reduce_min_v4_bf16x2(addr: u64) -> [u32; 4];
        /// As [`multimem_ld_reduce_add_v4_f32`], `max.v4.bf16x2`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_v4_f32`].
        unsafe fn multimem_ld_reduce_max_v4_bf16x2(addr: u64) -> [u32; 4];
        /// `multimem.ld_reduce.relaxed.sys.global.add.f64` of one value: every device's
        /// copy, reduced.
        ///
        /// # Safety
        /// `addr` must be a naturally aligned multicast address.
        unsafe fn multimem_ld_reduce_add_f64(addr: u64) -> u64;
        /// As [`multimem_ld_reduce_add_f64`], `add.f32`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_add_f32(addr: u64) -> u32;
        /// As [`multimem_ld_reduce_add_f64`], `add.u32`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_add_u32(addr: u64) -> u32;
        /// As [`multimem_ld_reduce_add_f64`], `min.u32`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_min_u32(addr: u64) -> u32;
        /// As [`multimem_ld_reduce_add_f64`], `max.u32`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_max_u32(addr: u64) -> u32;
        /// As [`multimem_ld_reduce_add_f64`], `min.s32`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_min_s32(addr: u64) -> u32;
        /// As [`multimem_ld_reduce_add_f64`], `max.s32`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_max_s32(addr: u64) -> u32;
        /// As [`multimem_ld_reduce_add_f64`], `add.u64`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_add_u64(addr: u64) -> u64;
        /// As [`multimem_ld_reduce_add_f64`], `min.u64`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_min_u64(addr: u64) -> u64;
        /// As [`multimem_ld_reduce_add_f64`], `max.u64`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_max_u64(addr: u64) -> u64;
        /// As [`multimem_ld_reduce_add_f64`], `min.s64`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_min_s64(addr: u64) -> u64;
        /// As [`multimem_ld_reduce_add_f64`], `max.s64`.
        ///
        /// # Safety
        /// As [`multimem_ld_reduce_add_f64`].
        unsafe fn multimem_ld_reduce_max_s64(addr: u64) -> u64;
        /// `multimem.ld_reduce.acquire.sys.global.min.u64`: the smallest of every device's
        /// copy of a step counter, as an acquire at system scope (NCCL's NvlsMinPolling).
        ///
        /// # Safety
        /// `addr` must be an 8-byte aligned multicast address.
        unsafe fn multimem_ld_reduce_acquire_min_u64(addr: u64) -> u64;
        /// `multimem.st.relaxed.sys.global.v4.f32`: stores 16 bytes to every device's copy
        /// (the float type only names the width; bits are stored unchanged).
        ///
        /// # Safety
        /// `addr` must be a 16-byte aligned multicast address.
        unsafe fn multimem_st_v4(addr: u64, v: [u32; 4]);
        /// `multimem.st.relaxed.sys.global.b64`: stores 8 bytes to every device's copy.
        ///
        /// # Safety
        /// `addr` must be an 8-byte aligned multicast address. (PTX has no 16-bit
        /// `multimem.st`: ptxas refuses `.f16`, so 2-byte stores go in pairs or not at all.)
        unsafe fn multimem_st_b64(addr: u64, v: u64);
        /// `multimem.st.relaxed.sys.global.b32`: stores 4 bytes to every device's copy.
        ///
        /// # Safety
        /// `addr` must be a 4-byte aligned multicast address.
        unsafe fn multimem_st_b32(addr: u64, v: u32);
    }
}

/// What an ordering operation marked with [`site`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteKind {
    /// A `fence` (any scope).
    Fence,
    /// An acquire load (`ld.acquire`).
    AcquireLoad,
    /// A release store (`st.release`).
    ReleaseStore,
    /// An `atom.acq_rel` read-modify-write.
    AcqRelRmw,
}

/// An ordering operation a protocol relies on, named so that the host twin's weak-memory
/// mode can perform it without its ordering (a negative control: the protocol's test
/// must then fail). Naming a site ([`site`]) costs nothing on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Site {
    /// prims: the sender's `fence.acq_rel.sys` before its tail store, which publishes the
    /// slice's data (and its sizes-FIFO entry) stored by the group's workers.
    PrimsSendFence,
    /// prims: the same fence after a slice that stored no data, which publishes its
    /// sizes-FIFO entry (or a direct group's pointer-exchange clear): the fence whose
    /// absence (a race on the sizes FIFO) was once seen only on GPUs.
    PrimsEmptySliceFence,
    /// prims: the receiver's acquire poll of the tail, which orders its reads of the
    /// slice after the sender's post.
    PrimsRecvPoll,
    /// work: warp 0's acquire loads of the next ring slot, which order the item's
    /// buffers (written by the host before the slot) before the channel's reads.
    RingPoll,
    /// work: warp 0's fence after volatile reads of a backlog of ring slots (the same
    /// job as [`Site::RingPoll`] for a backlog).
    RingBacklogFence,
    /// work: a channel's fence before it stores its ring completion (and `stream_done`),
    /// which publishes the items' writes to the host and to the stream.
    RingComplete,
    /// work: the submitter's acq_rel add that marks the mailbox PENDING, which publishes
    /// the item's words.
    MailboxPublish,
    /// work: a channel's acquire load of the mailbox state, which orders its reads of
    /// the item after the submitter's publication.
    MailboxTake,
    /// work: a channel's fence after a mailbox item that wrote memory.
    MailboxDoneFence,
    /// work: a channel's acq_rel count of the channels done with a mailbox item, which
    /// hands its writes on to the last channel.
    MailboxArrive,
    /// work: the last channel's acq_rel add that completes the mailbox item (the next
    /// generation, PENDING cleared), which publishes every channel's writes to the
    /// submitter.
    MailboxDone,
    /// work: a leaving channel's acq_rel CAS that marks the mailbox CLOSED.
    MailboxClose,
    /// algo (one-shot/two-shot collectives): a rank's `fence.acq_rel.sys` before it raises
    /// its flag on a peer, which publishes what the CTA wrote into its staging.
    ShotSignalFence,
    /// algo (one-shot/two-shot collectives): the acquire poll of a peer's flag, which
    /// orders the CTA's reads of that peer's staging after the peer's publication.
    ShotFlagPoll,
    /// shmem: `put_signal`'s `fence.acq_rel.sys` between the data and the signal, which
    /// delivers the data before the signal.
    ShmemSignalFence,
    /// shmem: the fence of `fence()` (ordering per target PE).
    ShmemFence,
    /// shmem: the fence of `quiet()` (completion of every earlier put, to every PE).
    ShmemQuiet,
    /// shmem: the acquire poll of `wait_until` and `test`, which orders the caller's
    /// later reads after what the signalling PE published.
    ShmemWaitPoll,
    /// shmem: `barrier_all`'s fence before a PE announces its arrival (its quiet).
    ShmemBarrierFence,
    /// shmem: the barrier's acquire poll of a peer's arrival.
    ShmemBarrierPoll,
    /// matmul: a CTA's fence after its slice of a grid's put, before it counts itself
    /// arrived, which hands its slice on to the CTA that signals.
    MatmulGridArrive,
}

impl Site {
    /// Every site.
    pub const ALL: [Site; 21] = [
        Site::PrimsSendFence,
        Site::PrimsEmptySliceFence,
        Site::PrimsRecvPoll,
        Site::RingPoll,
        Site::RingBacklogFence,
        Site::RingComplete,
        Site::MailboxPublish,
        Site::MailboxTake,
        Site::MailboxDoneFence,
        Site::MailboxArrive,
        Site::MailboxDone,
        Site::MailboxClose,
        Site::ShotSignalFence,
        Site::ShotFlagPoll,
        Site::ShmemSignalFence,
        Site::ShmemFence,
        Site::ShmemQuiet,
        Site::ShmemWaitPoll,
        Site::ShmemBarrierFence,
        Site::ShmemBarrierPoll,
        Site::MatmulGridArrive,
    ];

    /// The kind of operation this site names.
    pub const fn kind(self) -> SiteKind {
        match self {
            Site::PrimsSendFence
            | Site::PrimsEmptySliceFence
            | Site::RingBacklogFence
            | Site::RingComplete
            | Site::MailboxDoneFence
            | Site::ShotSignalFence
            | Site::ShmemSignalFence
            | Site::ShmemFence
            | Site::ShmemQuiet
            | Site::ShmemBarrierFence
            | Site::MatmulGridArrive => SiteKind::Fence,
            Site::PrimsRecvPoll | Site::RingPoll | Site::MailboxTake | Site::ShotFlagPoll | Site::ShmemWaitPoll | Site::ShmemBarrierPoll => {
                SiteKind::AcquireLoad
            }
            Site::MailboxPublish | Site::MailboxArrive | Site::MailboxDone | Site::MailboxClose => SiteKind::AcqRelRmw,
        }
    }
}

/// This thread's warp within its CTA (`thread_idx() / 32`, not the physical `%warpid`).
#[inline(always)]
pub fn warp_idx() -> u32 {
    thread_idx() / WARP_SIZE
}

// ---------------------------------------------------------------------------------------
// Ordered loads and stores of 32- and 64-bit words in global memory.
// ---------------------------------------------------------------------------------------

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// A word that global-memory loads and stores with an explicit ordering can move:
/// implemented, by each implementation of `arch`, for `u32` and `u64` (checked below).
/// Use the free functions ([`ld_acquire_sys_global`], …), which carry NCCL's names and
/// state each operation's ordering; every method is the function of the same meaning.
pub trait GlobalWord: Copy + sealed::Sealed {
    /// See [`ld_volatile_global`].
    ///
    /// # Safety
    /// As [`ld_volatile_global`].
    unsafe fn ld_volatile(p: *const Self) -> Self;
    /// See [`ld_relaxed_gpu_global`].
    ///
    /// # Safety
    /// As [`ld_volatile_global`].
    unsafe fn ld_relaxed_gpu(p: *const Self) -> Self;
    /// See [`ld_relaxed_sys_global`].
    ///
    /// # Safety
    /// As [`ld_volatile_global`].
    unsafe fn ld_relaxed_sys(p: *const Self) -> Self;
    /// See [`ld_acquire_sys_global`].
    ///
    /// # Safety
    /// As [`ld_volatile_global`].
    unsafe fn ld_acquire_sys(p: *const Self) -> Self;
    /// See [`ld_acquire_gpu_global`].
    ///
    /// # Safety
    /// As [`ld_volatile_global`].
    unsafe fn ld_acquire_gpu(p: *const Self) -> Self;
    /// See [`st_volatile_global`].
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn st_volatile(p: *mut Self, v: Self);
    /// See [`st_relaxed_sys_global`].
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn st_relaxed_sys(p: *mut Self, v: Self);
    /// See [`st_release_sys_global`].
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn st_release_sys(p: *mut Self, v: Self);
    /// See [`st_release_gpu_global`].
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn st_release_gpu(p: *mut Self, v: Self);
}

/// `ld.volatile.global`: a load the compiler may not cache or elide; no ordering with
/// respect to other addresses. Use for polling, followed by a fence where data is read
/// after the flag. (Host twin: a relaxed atomic load.)
///
/// # Safety
/// `p` must be a valid, aligned address in global memory (device, peer or host-mapped);
/// on the host twin, of a word that every thread accesses only through `arch`'s functions
/// while the kernel runs (a misaligned address panics there).
#[inline(always)]
pub unsafe fn ld_volatile_global<T: GlobalWord>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::ld_volatile(p) }
}

/// `ld.relaxed.gpu.global`: a strong load at GPU scope without ordering of other accesses.
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline(always)]
pub unsafe fn ld_relaxed_gpu_global<T: GlobalWord>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::ld_relaxed_gpu(p) }
}

/// `ld.relaxed.sys.global`: a strong load at system scope without ordering of other
/// accesses.
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline(always)]
pub unsafe fn ld_relaxed_sys_global<T: GlobalWord>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::ld_relaxed_sys(p) }
}

/// `ld.acquire.sys.global`: this load happens before every later access of this thread,
/// for all observers in the system; pairs with [`st_release_sys_global`].
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline(always)]
pub unsafe fn ld_acquire_sys_global<T: GlobalWord>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::ld_acquire_sys(p) }
}

/// `ld.acquire.gpu.global`: this load happens before every later access of this thread,
/// for all observers on this GPU; pairs with [`st_release_gpu_global`]. For words that
/// only threads of one GPU access (a loop's device-memory state): cheaper than the
/// system-scope acquire.
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline(always)]
pub unsafe fn ld_acquire_gpu_global<T: GlobalWord>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::ld_acquire_gpu(p) }
}

/// `st.volatile.global`: a store the compiler may not elide or merge; no ordering. (Host
/// twin: a relaxed atomic store.)
///
/// # Safety
/// As [`ld_volatile_global`], and `p` must be writable.
#[inline(always)]
pub unsafe fn st_volatile_global<T: GlobalWord>(p: *mut T, v: T) {
    // SAFETY: forwarded from the caller.
    unsafe { T::st_volatile(p, v) }
}

/// `st.relaxed.sys.global`: a strong store at system scope without ordering of other
/// accesses; publish data with a preceding [`fence_acq_rel_sys`] (NCCL's `postPeer`).
///
/// # Safety
/// As [`st_volatile_global`].
#[inline(always)]
pub unsafe fn st_relaxed_sys_global<T: GlobalWord>(p: *mut T, v: T) {
    // SAFETY: forwarded from the caller.
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
    // SAFETY: forwarded from the caller.
    unsafe { T::st_release_sys(p, v) }
}

/// `st.release.gpu.global`: every earlier access of this thread (and, through barriers,
/// those it has synchronised with) is visible on this GPU before this store is; pairs
/// with [`ld_acquire_gpu_global`].
///
/// # Safety
/// As [`st_volatile_global`].
#[inline(always)]
pub unsafe fn st_release_gpu_global<T: GlobalWord>(p: *mut T, v: T) {
    // SAFETY: forwarded from the caller.
    unsafe { T::st_release_gpu(p, v) }
}

// ---------------------------------------------------------------------------------------
// Atomics.
// ---------------------------------------------------------------------------------------

/// Read-modify-write operations on 32- and 64-bit words in global memory, at GPU or
/// system scope: implemented, by each implementation of `arch`, for `u32` and `u64`
/// (checked below). Every method returns the value before the operation; `max`/`min` are
/// unsigned, `add` wraps.
///
/// Ordering: `*_relaxed_*` methods are atomic but order nothing else; `*_acq_rel_*`
/// methods are both an acquire and a release at their scope.
pub trait AtomicWord: GlobalWord {
    /// `atom.relaxed.gpu.global.add`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_add_relaxed_gpu(p: *mut Self, v: Self) -> Self;
    /// `atom.relaxed.sys.global.add`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_add_relaxed_sys(p: *mut Self, v: Self) -> Self;
    /// `atom.acq_rel.sys.global.add`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_add_acq_rel_sys(p: *mut Self, v: Self) -> Self;
    /// `atom.acq_rel.gpu.global.add`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_add_acq_rel_gpu(p: *mut Self, v: Self) -> Self;
    /// `atom.relaxed.gpu.global.max`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_max_relaxed_gpu(p: *mut Self, v: Self) -> Self;
    /// `atom.relaxed.gpu.global.min`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_min_relaxed_gpu(p: *mut Self, v: Self) -> Self;
    /// `atom.acq_rel.sys.global.exch`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_exch_acq_rel_sys(p: *mut Self, v: Self) -> Self;
    /// `atom.relaxed.sys.global.exch`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_exch_relaxed_sys(p: *mut Self, v: Self) -> Self;
    /// `atom.relaxed.sys.global.cas`: stores `new` if the word equals `expected`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_cas_relaxed_sys(p: *mut Self, expected: Self, new: Self) -> Self;
    /// `atom.acq_rel.sys.global.cas`: stores `new` if the word equals `expected`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_cas_acq_rel_sys(p: *mut Self, expected: Self, new: Self) -> Self;
    /// `atom.acq_rel.gpu.global.cas`: stores `new` if the word equals `expected`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_cas_acq_rel_gpu(p: *mut Self, expected: Self, new: Self) -> Self;
}

// Both implementations must provide the word traits for both word sizes.
static_assertions::assert_impl_all!(u32: AtomicWord);
static_assertions::assert_impl_all!(u64: AtomicWord);
