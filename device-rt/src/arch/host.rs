//! `arch` on the CPU (feature `host-emu`): the host twin of `nvptx.rs`.
//!
//! Every public item of `nvptx.rs` exists here with the same name, signature and, as far
//! as a CPU can give it, the same meaning, so device code written against `arch` runs
//! unchanged on OS threads started by [`launch`], which stands in for a kernel launch.
//! Errors are panics with a message: this is test infrastructure.
//!
//! What the twin cannot show, so GPU runs remain the proof:
//! - **The GPU's weaker memory ordering.** Every access here is a Rust atomic (relaxed
//!   where PTX is relaxed, volatile or weak) and the CPU (x86 is TSO) orders them more
//!   strongly than PTX orders `ld.relaxed`/`ld.volatile`/`st.global`: a missing fence may
//!   pass here and fail on a GPU. Volatile and weak accesses are relaxed atomics rather
//!   than `read_volatile`/`write_volatile` because PTX gives `ld.volatile` the ordering of
//!   `ld.relaxed.sys`, and only atomics let Rust's fences synchronise (NCCL's
//!   fence + relaxed flag store / volatile poll + fence pattern) without a data race.
//!   Memory that kernel threads share must therefore be accessed only through these
//!   functions (or ordered by barriers), never by plain Rust loads and stores racing them.
//! - **16-byte single-copy atomicity**: `v2b64` accesses are two 8-byte accesses.
//! - **Limits on concurrency**: every CTA of a launch is co-resident (one OS thread per
//!   GPU thread), whatever the GPU could hold.
//! - **Multicast**: there are no multicast addresses on the host, so the `multimem_*`
//!   functions do not exist here; the `HwMulticast` path is compiled for nvptx only.
//!
//! Warp operations take `FULL_MASK` only and need a full warp of 32 threads; a thread
//! that polls must call [`spin_pause`] or [`nanosleep`] in its loop, where a thread is
//! released when another thread of its launch panicked.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, fence};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use half::{bf16, f16};

/// Threads per warp on every NVIDIA GPU we target.
pub const WARP_SIZE: u32 = 32;

/// Named barriers per CTA (`barrier.sync` ids 0..16).
const NAMED_BARRIERS: usize = 16;

/// Stack of each emulated thread: device code keeps little on its stack.
const THREAD_STACK_BYTES: usize = 1024 * 1024;

/// How long a thread may wait at a barrier or warp operation before the twin calls it a
/// deadlock and panics (a GPU would hang instead).
const DEADLOCK_AFTER: Duration = Duration::from_secs(60);

/// Longest `nanosleep` the GPU performs (1 ms).
const MAX_NANOSLEEP_NS: u32 = 1_000_000;

// ---------------------------------------------------------------------------------------
// The launch: grid, CTAs and the per-thread context.
// ---------------------------------------------------------------------------------------

/// Runs `kernel` on `grid` CTAs of `block` threads each, one OS thread per GPU thread, all
/// at once (device kernels wait on each other across CTAs, so every CTA must be
/// co-resident), and returns when every thread has returned. Each CTA gets
/// `dyn_smem_bytes` of zeroed dynamic shared memory ([`dyn_smem`]).
///
/// The host twin's replacement for a kernel launch; it exists only on the host.
///
/// # Panics
/// When `grid` or `block` is 0, when a thread cannot be started, or when any emulated
/// thread panics (a [`trap`], a failed assertion, a deadlock found at a barrier): the
/// first panic is resumed here once every other thread has been released from its
/// barriers, warp operations and polling loops and has ended.
pub fn launch(grid: u32, block: u32, dyn_smem_bytes: u32, kernel: impl Fn() + Sync) {
    assert!(grid > 0 && block > 0, "arch::launch: grid ({grid}) and block ({block}) must be non-zero");
    let state = Arc::new(GridState {
        aborted: AtomicBool::new(false),
        first_panic: Mutex::new(None),
        ctas: (0..grid).map(|_| CtaState::new(block, dyn_smem_bytes)).collect(),
    });
    let mut spawn_error = None;
    std::thread::scope(|scope| {
        'spawn: for block_idx in 0..grid {
            for thread_idx in 0..block {
                let context = ThreadContext { thread_idx, block_idx, block_dim: block, grid_dim: grid, grid: Arc::clone(&state) };
                let kernel = &kernel;
                let spawned = std::thread::Builder::new()
                    .name(format!("cta{block_idx}.t{thread_idx}"))
                    .stack_size(THREAD_STACK_BYTES)
                    .spawn_scoped(scope, move || run_thread(context, kernel));
                if let Err(e) = spawned {
                    spawn_error = Some(format!("arch::launch: could not start thread {thread_idx} of CTA {block_idx}: {e}"));
                    state.release_all();
                    break 'spawn;
                }
            }
        }
    });
    if let Some(message) = spawn_error {
        panic!("{message}");
    }
    if let Some(payload) = lock(&state.first_panic).take() {
        panic::resume_unwind(payload);
    }
}

/// Runs the kernel on this thread; a panic releases every thread of the launch and is
/// kept for [`launch`] to resume.
fn run_thread(context: ThreadContext, kernel: &(impl Fn() + Sync)) {
    let grid = Arc::clone(&context.grid);
    CONTEXT.set(Some(context));
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(kernel))
        && !payload.is::<Released>()
    {
        grid.abort(payload);
    }
    CONTEXT.set(None);
}

/// What one launch shares among its threads.
struct GridState {
    /// Set once a thread panicked: every waiting or polling thread then unwinds.
    aborted: AtomicBool,
    /// The payload of the first panic, resumed by [`launch`].
    first_panic: Mutex<Option<Box<dyn Any + Send>>>,
    ctas: Box<[CtaState]>,
}

/// The payload with which released threads unwind; never kept as a launch's panic.
struct Released;

impl GridState {
    fn abort(&self, payload: Box<dyn Any + Send>) {
        lock(&self.first_panic).get_or_insert(payload);
        self.release_all();
    }

    /// Sets `aborted` and wakes every waiter. Each waiter checks the flag under its mutex,
    /// and the mutex is taken here after the flag is set, so no wake-up is lost.
    fn release_all(&self) {
        self.aborted.store(true, Relaxed);
        for cta in &self.ctas {
            for barrier in &cta.barriers {
                drop(lock(&barrier.state));
                barrier.changed.notify_all();
            }
            for warp in &cta.warps {
                drop(lock(&warp.state));
                warp.changed.notify_all();
            }
        }
    }

    /// Unwinds this thread if the launch was aborted.
    fn unwind_if_aborted(&self) {
        if self.aborted.load(Relaxed) {
            panic::resume_unwind(Box::new(Released));
        }
    }
}

/// One CTA: its dynamic shared memory, named barriers and warps.
struct CtaState {
    smem: SharedWindow,
    barriers: [NamedBarrier; NAMED_BARRIERS],
    warps: Box<[Warp]>,
}

impl CtaState {
    fn new(block_dim: u32, dyn_smem_bytes: u32) -> Self {
        CtaState {
            smem: SharedWindow::zeroed(dyn_smem_bytes as usize),
            barriers: std::array::from_fn(|_| NamedBarrier::default()),
            warps: (0..block_dim.div_ceil(WARP_SIZE)).map(|_| Warp::default()).collect(),
        }
    }
}

/// A CTA's dynamic shared memory: zeroed, 16-byte aligned.
struct SharedWindow {
    base: std::ptr::NonNull<u8>,
    len: usize,
    layout: std::alloc::Layout,
}

// SAFETY: the window is only reached through the raw pointer that `dyn_smem` hands to the
// CTA's threads; ordering their accesses is the kernel's job, as on the GPU.
unsafe impl Send for SharedWindow {}
// SAFETY: as for `Send`.
unsafe impl Sync for SharedWindow {}

impl SharedWindow {
    fn zeroed(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(16), 16).expect("arch::launch: dynamic shared memory too large");
        // SAFETY: `layout` has a non-zero size.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        let base = std::ptr::NonNull::new(base).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        SharedWindow { base, len, layout }
    }
}

impl Drop for SharedWindow {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout; every thread has ended.
        unsafe { std::alloc::dealloc(self.base.as_ptr(), self.layout) };
    }
}

/// What a thread knows about itself: its special registers and its launch.
struct ThreadContext {
    thread_idx: u32,
    block_idx: u32,
    block_dim: u32,
    grid_dim: u32,
    grid: Arc<GridState>,
}

impl ThreadContext {
    fn cta(&self) -> &CtaState {
        &self.grid.ctas[self.block_idx as usize]
    }
}

thread_local! {
    static CONTEXT: RefCell<Option<ThreadContext>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's context; panics outside [`launch`].
fn with_context<R>(f: impl FnOnce(&ThreadContext) -> R) -> R {
    CONTEXT.with_borrow(|context| f(context.as_ref().expect("arch: a device function was called outside arch::launch")))
}

/// Locks `mutex`, ignoring poison: a panicking thread aborts the whole launch anyway.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `changed` until `done` holds. Unwinds when the launch is aborted; panics
/// with `describe`'s words after [`DEADLOCK_AFTER`].
fn wait_until<'a, T>(
    grid: &GridState,
    changed: &Condvar,
    mut guard: MutexGuard<'a, T>,
    done: impl Fn(&T) -> bool,
    describe: impl Fn(&T) -> String,
) -> MutexGuard<'a, T> {
    let start = Instant::now();
    while !done(&guard) {
        if grid.aborted.load(Relaxed) {
            drop(guard);
            panic::resume_unwind(Box::new(Released));
        }
        let waited = start.elapsed();
        if waited >= DEADLOCK_AFTER {
            let what = describe(&guard);
            drop(guard);
            panic!("arch: deadlock: {what} for {} s", waited.as_secs());
        }
        guard = changed.wait_timeout(guard, DEADLOCK_AFTER - waited).unwrap_or_else(PoisonError::into_inner).0;
    }
    guard
}

// ---------------------------------------------------------------------------------------
// Thread, block and grid indices (x dimension only: ferroccl launches 1-D grids).
// ---------------------------------------------------------------------------------------

/// `%tid.x`: this thread's index in its CTA.
#[inline]
pub fn thread_idx() -> u32 {
    with_context(|c| c.thread_idx)
}

/// `%ntid.x`: threads per CTA.
#[inline]
pub fn block_dim() -> u32 {
    with_context(|c| c.block_dim)
}

/// `%ctaid.x`: this CTA's index in the grid.
#[inline]
pub fn block_idx() -> u32 {
    with_context(|c| c.block_idx)
}

/// `%nctaid.x`: CTAs in the grid.
#[inline]
pub fn grid_dim() -> u32 {
    with_context(|c| c.grid_dim)
}

/// `%laneid`: this thread's lane in its warp.
#[inline]
pub fn lane_id() -> u32 {
    thread_idx() % WARP_SIZE
}

/// `%smid`: always 0 on the host, which has no SMs (diagnostics only on the GPU too).
#[inline]
pub fn sm_id() -> u32 {
    0
}

/// `%dynamic_smem_size`: bytes of dynamic shared memory this launch was given.
#[inline]
pub fn dynamic_smem_size() -> u32 {
    with_context(|c| c.cta().smem.len as u32)
}

/// This thread's warp within its CTA (`thread_idx() / 32`, not the physical `%warpid`).
#[inline]
pub fn warp_idx() -> u32 {
    thread_idx() / WARP_SIZE
}

// ---------------------------------------------------------------------------------------
// Barriers.
// ---------------------------------------------------------------------------------------

/// One named barrier of a CTA.
#[derive(Default)]
struct NamedBarrier {
    state: Mutex<BarrierState>,
    changed: Condvar,
}

#[derive(Default)]
struct BarrierState {
    /// Threads that arrived in the current generation.
    arrived: u32,
    /// The thread count the current generation's first thread passed.
    expected: u32,
    /// Completed generations: a waiter leaves when it changes.
    generation: u64,
}

/// `barrier.sync id, nthreads`: waits until `nthreads` threads (a multiple of 32, at most
/// the CTA's threads) have arrived at named barrier `id` (0..16). Generation-counted, so it
/// can be reused at once.
///
/// Ordering: memory accesses made by the participating threads before the barrier happen
/// before every access any participant makes after it (the barrier's mutex).
///
/// # Panics
/// On a bad `id` or `nthreads`, or when the threads of one generation pass different
/// counts (undefined on the GPU).
pub fn barrier_sync(id: u32, nthreads: u32) {
    let block_dim = block_dim();
    assert!(
        nthreads > 0 && nthreads.is_multiple_of(WARP_SIZE) && nthreads <= block_dim,
        "arch::barrier_sync({id}, {nthreads}): the count must be a non-zero multiple of 32, at most the CTA's {block_dim} threads"
    );
    arrive_and_wait(id, nthreads);
}

/// `barrier.sync 0`: every thread of the CTA (any block size). Same ordering as
/// [`barrier_sync`].
pub fn barrier_sync_all() {
    arrive_and_wait(0, block_dim());
}

fn arrive_and_wait(id: u32, nthreads: u32) {
    assert!((id as usize) < NAMED_BARRIERS, "arch::barrier_sync: barrier id {id} is not in 0..16");
    with_context(|context| {
        let barrier = &context.cta().barriers[id as usize];
        let mut state = lock(&barrier.state);
        if state.arrived == 0 {
            state.expected = nthreads;
        } else if state.expected != nthreads {
            let expected = state.expected;
            drop(state);
            panic!("arch::barrier_sync: barrier {id} reached with {nthreads} threads while others passed {expected}");
        }
        state.arrived += 1;
        if state.arrived == nthreads {
            state.arrived = 0;
            state.generation += 1;
            barrier.changed.notify_all();
            return;
        }
        let generation = state.generation;
        drop(wait_until(
            &context.grid,
            &barrier.changed,
            state,
            |s| s.generation != generation,
            |s| format!("thread {} of CTA {} waited at barrier {id} ({} of {nthreads} threads arrived)", context.thread_idx, context.block_idx, s.arrived),
        ));
    });
}

// ---------------------------------------------------------------------------------------
// Fences.
// ---------------------------------------------------------------------------------------

/// `fence.acq_rel.sys`: this thread's earlier accesses are ordered before its later ones
/// for every observer in the system (other GPUs, the host). Use before publishing data
/// that a peer GPU or the CPU will read after seeing a flag. Here: `fence(AcqRel)`.
#[inline]
pub fn fence_acq_rel_sys() {
    fence(AcqRel);
}

/// `fence.acq_rel.gpu`: as [`fence_acq_rel_sys`] for observers on this GPU only. Here:
/// `fence(AcqRel)`.
#[inline]
pub fn fence_acq_rel_gpu() {
    fence(AcqRel);
}

/// `fence.acq_rel.cta`: as [`fence_acq_rel_sys`] for observers in this CTA only. Here:
/// `fence(AcqRel)`.
#[inline]
pub fn fence_acq_rel_cta() {
    fence(AcqRel);
}

/// `fence.sc.sys`: a sequentially consistent fence at system scope (the strongest, and
/// slowest, fence; `__threadfence_system()`). Here: `fence(SeqCst)`.
#[inline]
pub fn fence_sc_sys() {
    fence(SeqCst);
}

// ---------------------------------------------------------------------------------------
// Ordered loads and stores of 32- and 64-bit words in global memory.
// ---------------------------------------------------------------------------------------

/// `p` as a pointer to a `T`-sized word, after checking its alignment (a misaligned
/// access faults on the GPU and is undefined for Rust's atomics).
#[inline]
fn aligned<T>(p: *const T, align: usize) -> *mut T {
    assert!(p.addr().is_multiple_of(align), "arch: address {p:p} is not aligned to {align} bytes");
    p.cast_mut()
}

/// A word that global-memory loads and stores with an explicit ordering can move.
///
/// Implemented for `u32` and `u64`; use the free functions ([`ld_acquire_sys_global`],
/// …), which carry NCCL's names.
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
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

macro_rules! global_word {
    ($t:ty, $atomic:ty) => {
        impl GlobalWord for $t {
            #[inline]
            unsafe fn ld_volatile(p: *const Self) -> Self {
                // SAFETY: the caller passes a valid word that is accessed only atomically.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.load(Relaxed)
            }
            #[inline]
            unsafe fn ld_relaxed_gpu(p: *const Self) -> Self {
                // SAFETY: as in `ld_volatile`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.load(Relaxed)
            }
            #[inline]
            unsafe fn ld_relaxed_sys(p: *const Self) -> Self {
                // SAFETY: as in `ld_volatile`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.load(Relaxed)
            }
            #[inline]
            unsafe fn ld_acquire_sys(p: *const Self) -> Self {
                // SAFETY: as in `ld_volatile`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.load(Acquire)
            }
            #[inline]
            unsafe fn st_volatile(p: *mut Self, v: Self) {
                // SAFETY: the caller passes a valid, writable word that is accessed only
                // atomically.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.store(v, Relaxed)
            }
            #[inline]
            unsafe fn st_relaxed_sys(p: *mut Self, v: Self) {
                // SAFETY: as in `st_volatile`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.store(v, Relaxed)
            }
            #[inline]
            unsafe fn st_release_sys(p: *mut Self, v: Self) {
                // SAFETY: as in `st_volatile`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.store(v, Release)
            }
        }
    };
}

global_word!(u32, AtomicU32);
global_word!(u64, AtomicU64);

/// `ld.volatile.global`: a load the compiler may not cache or elide; no ordering with
/// respect to other addresses. Use for polling, followed by a fence where data is read
/// after the flag. Here: a relaxed atomic load.
///
/// # Safety
/// `p` must be a valid, aligned address (checked: a misaligned one panics) of a word that
/// every thread accesses only through `arch`'s functions while the kernel runs.
#[inline]
pub unsafe fn ld_volatile_global<T: GlobalWord>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::ld_volatile(p) }
}

/// `ld.relaxed.gpu.global`: a strong load at GPU scope without ordering of other accesses.
/// Here: a relaxed atomic load.
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline]
pub unsafe fn ld_relaxed_gpu_global<T: GlobalWord>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::ld_relaxed_gpu(p) }
}

/// `ld.relaxed.sys.global`: a strong load at system scope without ordering of other
/// accesses. Here: a relaxed atomic load.
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline]
pub unsafe fn ld_relaxed_sys_global<T: GlobalWord>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::ld_relaxed_sys(p) }
}

/// `ld.acquire.sys.global`: this load happens before every later access of this thread,
/// for all observers in the system; pairs with [`st_release_sys_global`]. Here: an
/// acquire atomic load.
///
/// # Safety
/// As [`ld_volatile_global`].
#[inline]
pub unsafe fn ld_acquire_sys_global<T: GlobalWord>(p: *const T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { T::ld_acquire_sys(p) }
}

/// `st.volatile.global`: a store the compiler may not elide or merge; no ordering. Here: a
/// relaxed atomic store.
///
/// # Safety
/// As [`ld_volatile_global`], and `p` must be writable.
#[inline]
pub unsafe fn st_volatile_global<T: GlobalWord>(p: *mut T, v: T) {
    // SAFETY: forwarded from the caller.
    unsafe { T::st_volatile(p, v) }
}

/// `st.relaxed.sys.global`: a strong store at system scope without ordering of other
/// accesses; publish data with a preceding [`fence_acq_rel_sys`] (NCCL's `postPeer`).
/// Here: a relaxed atomic store.
///
/// # Safety
/// As [`st_volatile_global`].
#[inline]
pub unsafe fn st_relaxed_sys_global<T: GlobalWord>(p: *mut T, v: T) {
    // SAFETY: forwarded from the caller.
    unsafe { T::st_relaxed_sys(p, v) }
}

/// `st.release.sys.global`: every earlier access of this thread (and, through barriers,
/// those it has synchronised with) is visible system-wide before this store is; pairs
/// with [`ld_acquire_sys_global`]. Here: a release atomic store.
///
/// # Safety
/// As [`st_volatile_global`].
#[inline]
pub unsafe fn st_release_sys_global<T: GlobalWord>(p: *mut T, v: T) {
    // SAFETY: forwarded from the caller.
    unsafe { T::st_release_sys(p, v) }
}

// ---------------------------------------------------------------------------------------
// Sized loads and stores (1, 2, 4, 8 and 16 bytes) at global addresses: what BytePack
// moves. Addresses are global-window addresses (`cvta_to_global`), aligned to the size.
// ---------------------------------------------------------------------------------------

macro_rules! sized_access {
    ($ld:ident, $st:ident, $t:ty, $atomic:ty) => {
        /// `ld.volatile.global` of one naturally aligned value: never cached or elided, so
        /// data a peer wrote is seen once its flag was; no ordering by itself. Here: a
        /// relaxed atomic load.
        ///
        /// # Safety
        /// `addr` must be the address of a readable, aligned value (checked: a misaligned
        /// one panics) that every thread accesses only through `arch`'s functions while
        /// the kernel runs.
        #[inline]
        pub unsafe fn $ld(addr: u64) -> $t {
            let p = aligned(addr as usize as *const $t, size_of::<$t>());
            // SAFETY: forwarded from the caller.
            unsafe { <$atomic>::from_ptr(p) }.load(Relaxed)
        }

        /// `st.global` of one naturally aligned value (weak; order it with a fence or a
        /// release before publishing). Here: a relaxed atomic store.
        ///
        /// # Safety
        /// As the matching load, and the value must be writable.
        #[inline]
        pub unsafe fn $st(addr: u64, v: $t) {
            let p = aligned(addr as usize as *const $t, size_of::<$t>());
            // SAFETY: forwarded from the caller.
            unsafe { <$atomic>::from_ptr(p) }.store(v, Relaxed)
        }
    };
}

sized_access!(ld_volatile_global_b8, st_global_b8, u8, AtomicU8);
sized_access!(ld_volatile_global_b16, st_global_b16, u16, AtomicU16);
sized_access!(ld_volatile_global_b32, st_global_b32, u32, AtomicU32);
sized_access!(ld_volatile_global_b64, st_global_b64, u64, AtomicU64);

/// `ld.volatile.global.v2.b64`: 16 bytes; see [`ld_volatile_global_b16`]. Here: two relaxed
/// 8-byte loads, without the GPU's 16-byte single-copy atomicity.
///
/// # Safety
/// `addr` must be a 16-byte aligned address (checked) of 16 readable bytes, accessed as in
/// [`ld_volatile_global_b64`].
#[inline]
pub unsafe fn ld_volatile_global_v2b64(addr: u64) -> [u64; 2] {
    let p = aligned(addr as usize as *const u64, 16);
    // SAFETY: forwarded from the caller; both halves are 8-byte aligned.
    unsafe { [AtomicU64::from_ptr(p).load(Relaxed), AtomicU64::from_ptr(p.add(1)).load(Relaxed)] }
}

/// `ld.acquire.sys.global.v2.b64`: 16 bytes as two 8-byte acquire loads.
///
/// # Safety
/// As [`ld_volatile_global_v2b64`].
#[inline]
pub unsafe fn ld_acquire_sys_global_v2b64(addr: u64) -> [u64; 2] {
    let p = aligned(addr as usize as *const u64, 16);
    // SAFETY: forwarded from the caller; both halves are 8-byte aligned.
    unsafe { [AtomicU64::from_ptr(p).load(Acquire), AtomicU64::from_ptr(p.add(1)).load(Acquire)] }
}

/// `ld.global.cv.v2.b64`: 16 bytes, a weak load that fetches again. Here: as
/// [`ld_volatile_global_v2b64`] (two relaxed 8-byte loads).
///
/// # Safety
/// As [`ld_volatile_global_v2b64`].
#[inline]
pub unsafe fn ld_cv_global_v2b64(addr: u64) -> [u64; 2] {
    unsafe { ld_volatile_global_v2b64(addr) }
}

/// `st.global.v2.b64`: 16 bytes; see [`st_global_b16`]. Here: two relaxed 8-byte stores,
/// without the GPU's 16-byte single-copy atomicity.
///
/// # Safety
/// `addr` must be a 16-byte aligned address (checked) of 16 writable bytes, accessed as in
/// [`ld_volatile_global_b64`].
#[inline]
pub unsafe fn st_global_v2b64(addr: u64, v: [u64; 2]) {
    let p = aligned(addr as usize as *const u64, 16);
    // SAFETY: forwarded from the caller; both halves are 8-byte aligned.
    unsafe {
        AtomicU64::from_ptr(p).store(v[0], Relaxed);
        AtomicU64::from_ptr(p.add(1)).store(v[1], Relaxed);
    }
}

// ---------------------------------------------------------------------------------------
// Half-precision arithmetic (f16 and bf16 as raw bits), scalar and packed pairs (element 0
// in the low half). `add`/`mul` compute in f32 and round once to nearest even, which gives
// the hardware's single rounding: f32 carries more than 2p + 2 bits for both formats, so
// the double rounding is innocuous. A NaN result is a NaN; its payload may differ from the
// GPU's. `min`/`max` return the non-NaN operand when one is NaN, the canonical NaN when
// both are, and order -0.0 below +0.0 (as PTX's `min`/`max`).
// ---------------------------------------------------------------------------------------

/// PTX's canonical NaN, for f16 and bf16 alike.
const CANONICAL_NAN: u16 = 0x7fff;

/// `a` or `b`, whichever is smaller (`want_smaller`) or larger, with PTX's NaN and signed
/// zero rules.
fn half_select(a: u16, b: u16, widen: fn(u16) -> f32, want_smaller: bool) -> u16 {
    let (x, y) = (widen(a), widen(b));
    match (x.is_nan(), y.is_nan()) {
        (true, true) => CANONICAL_NAN,
        (true, false) => b,
        (false, true) => a,
        (false, false) => {
            let a_is_smaller = x < y || (x == y && a & 0x8000 != 0);
            if a_is_smaller == want_smaller { a } else { b }
        }
    }
}

/// `op` applied to each 16-bit lane of `a` and `b`.
fn lanewise(a: u32, b: u32, op: fn(u16, u16) -> u16) -> u32 {
    let low = op(a as u16, b as u16);
    let high = op((a >> 16) as u16, (b >> 16) as u16);
    u32::from(low) | u32::from(high) << 16
}

/// `add.rn.f16`.
pub fn add_f16(a: u16, b: u16) -> u16 {
    f32_to_f16(f16_to_f32(a) + f16_to_f32(b))
}

/// `mul.rn.f16`.
pub fn mul_f16(a: u16, b: u16) -> u16 {
    f32_to_f16(f16_to_f32(a) * f16_to_f32(b))
}

/// `min.f16`.
pub fn min_f16(a: u16, b: u16) -> u16 {
    half_select(a, b, f16_to_f32, true)
}

/// `max.f16`.
pub fn max_f16(a: u16, b: u16) -> u16 {
    half_select(a, b, f16_to_f32, false)
}

/// `add.rn.bf16`.
pub fn add_bf16(a: u16, b: u16) -> u16 {
    f32_to_bf16(bf16_to_f32(a) + bf16_to_f32(b))
}

/// `mul.rn.bf16`.
pub fn mul_bf16(a: u16, b: u16) -> u16 {
    f32_to_bf16(bf16_to_f32(a) * bf16_to_f32(b))
}

/// `min.bf16`.
pub fn min_bf16(a: u16, b: u16) -> u16 {
    half_select(a, b, bf16_to_f32, true)
}

/// `max.bf16`.
pub fn max_bf16(a: u16, b: u16) -> u16 {
    half_select(a, b, bf16_to_f32, false)
}

/// `add.rn.f16x2`: two lanes at once.
pub fn add_f16x2(a: u32, b: u32) -> u32 {
    lanewise(a, b, add_f16)
}

/// `mul.rn.f16x2`.
pub fn mul_f16x2(a: u32, b: u32) -> u32 {
    lanewise(a, b, mul_f16)
}

/// `min.f16x2`.
pub fn min_f16x2(a: u32, b: u32) -> u32 {
    lanewise(a, b, min_f16)
}

/// `max.f16x2`.
pub fn max_f16x2(a: u32, b: u32) -> u32 {
    lanewise(a, b, max_f16)
}

/// `add.rn.bf16x2`.
pub fn add_bf16x2(a: u32, b: u32) -> u32 {
    lanewise(a, b, add_bf16)
}

/// `mul.rn.bf16x2`.
pub fn mul_bf16x2(a: u32, b: u32) -> u32 {
    lanewise(a, b, mul_bf16)
}

/// `min.bf16x2`.
pub fn min_bf16x2(a: u32, b: u32) -> u32 {
    lanewise(a, b, min_bf16)
}

/// `max.bf16x2`.
pub fn max_bf16x2(a: u32, b: u32) -> u32 {
    lanewise(a, b, max_bf16)
}

/// `cvt.f32.f16`: exact widening.
pub fn f16_to_f32(h: u16) -> f32 {
    f16::from_bits(h).to_f32()
}

/// `cvt.rn.f16.f32`: round to nearest even.
pub fn f32_to_f16(f: f32) -> u16 {
    f16::from_f32(f).to_bits()
}

/// `cvt.f32.bf16`: exact widening.
pub fn bf16_to_f32(h: u16) -> f32 {
    bf16::from_bits(h).to_f32()
}

/// `cvt.rn.bf16.f32`: round to nearest even.
pub fn f32_to_bf16(f: f32) -> u16 {
    bf16::from_f32(f).to_bits()
}

// ---------------------------------------------------------------------------------------
// Atomics.
// ---------------------------------------------------------------------------------------

/// Read-modify-write operations on 32- and 64-bit words in global memory, at GPU or
/// system scope. Every method returns the value before the operation.
///
/// Ordering: `*_relaxed_*` methods are atomic but order nothing else; `*_acq_rel_*`
/// methods are both an acquire and a release at their scope. Here: Rust's atomics with
/// `Relaxed` or `AcqRel`; `max`/`min` are unsigned, `add` wraps.
///
/// # Safety
/// Every method takes a pointer as [`st_volatile_global`] does.
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
    /// `atom.acq_rel.sys.global.cas`: stores `new` if the word equals `expected`.
    ///
    /// # Safety
    /// As [`st_volatile_global`].
    unsafe fn atomic_cas_acq_rel_sys(p: *mut Self, expected: Self, new: Self) -> Self;
}

macro_rules! atomic_word {
    ($t:ty, $atomic:ty) => {
        impl AtomicWord for $t {
            #[inline]
            unsafe fn atomic_add_relaxed_gpu(p: *mut Self, v: Self) -> Self {
                // SAFETY: the caller passes a valid, writable word accessed only atomically.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.fetch_add(v, Relaxed)
            }
            #[inline]
            unsafe fn atomic_add_relaxed_sys(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.fetch_add(v, Relaxed)
            }
            #[inline]
            unsafe fn atomic_add_acq_rel_sys(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.fetch_add(v, AcqRel)
            }
            #[inline]
            unsafe fn atomic_max_relaxed_gpu(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.fetch_max(v, Relaxed)
            }
            #[inline]
            unsafe fn atomic_min_relaxed_gpu(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.fetch_min(v, Relaxed)
            }
            #[inline]
            unsafe fn atomic_exch_acq_rel_sys(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) }.swap(v, AcqRel)
            }
            #[inline]
            unsafe fn atomic_cas_acq_rel_sys(p: *mut Self, expected: Self, new: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                word.compare_exchange(expected, new, AcqRel, Acquire).unwrap_or_else(|current| current)
            }
        }
    };
}

atomic_word!(u32, AtomicU32);
atomic_word!(u64, AtomicU64);

// ---------------------------------------------------------------------------------------
// Shared memory.
// ---------------------------------------------------------------------------------------

/// The address of this CTA's dynamic shared memory ([`dynamic_smem_size`] bytes, 16-byte
/// aligned, zeroed at launch, private to the CTA). Plain loads and stores through it are
/// ordered across the CTA by [`barrier_sync`].
#[inline]
pub fn dyn_smem() -> *mut u8 {
    with_context(|c| c.cta().smem.base.as_ptr())
}

/// `cvta.to.shared`: the shared-window address of a pointer into shared memory, here its
/// offset from [`dyn_smem`].
///
/// # Panics
/// When `p` is not in this CTA's dynamic shared memory.
#[inline]
pub fn cvta_to_shared<T>(p: *const T) -> u32 {
    with_context(|c| {
        let window = &c.cta().smem;
        let offset = (p as usize).wrapping_sub(window.base.as_ptr() as usize);
        assert!(offset <= window.len, "arch::cvta_to_shared: {p:p} is not in this CTA's dynamic shared memory");
        offset as u32
    })
}

/// `cvta.to.global`: the global-window address of a generic pointer; the host has one
/// address space, so this is the address itself.
#[inline]
pub fn cvta_to_global<T>(p: *const T) -> u64 {
    p as usize as u64
}

// ---------------------------------------------------------------------------------------
// Warp vote and shuffle: a rendezvous of the warp's 32 threads that exchanges one word
// per lane.
// ---------------------------------------------------------------------------------------

/// Lanes taking part in a warp-wide operation: all 32.
pub const FULL_MASK: u32 = u32::MAX;

/// One warp's rendezvous.
#[derive(Default)]
struct Warp {
    state: Mutex<WarpState>,
    changed: Condvar,
}

#[derive(Default)]
struct WarpState {
    /// Lanes that arrived in the current generation.
    arrived: u32,
    /// Completed generations: a waiting lane leaves when it changes.
    generation: u64,
    /// The operation the current generation's first lane called.
    operation: &'static str,
    /// The current generation's words, by lane.
    offered: [u32; WARP_SIZE as usize],
    /// The last completed generation's words: no lane can complete the next generation
    /// before every lane has read these.
    exchanged: [u32; WARP_SIZE as usize],
}

/// Every lane's `word`, once all 32 lanes of this thread's warp have called `operation`.
/// Ordering: as a barrier of the warp.
fn warp_exchange(operation: &'static str, mask: u32, word: u32) -> [u32; WARP_SIZE as usize] {
    assert!(mask == FULL_MASK, "arch::{operation}: the host twin takes only FULL_MASK, not {mask:#010x}");
    with_context(|context| {
        let warp_idx = context.thread_idx / WARP_SIZE;
        let lanes = (context.block_dim - warp_idx * WARP_SIZE).min(WARP_SIZE);
        assert!(lanes == WARP_SIZE, "arch::{operation}: warp {warp_idx} has {lanes} threads (block_dim {}); warp operations need 32", context.block_dim);
        let warp = &context.cta().warps[warp_idx as usize];
        let mut state = lock(&warp.state);
        if state.arrived == 0 {
            state.operation = operation;
        } else if state.operation != operation {
            let other = state.operation;
            drop(state);
            panic!("arch::{operation}: lane {} of warp {warp_idx} diverged: other lanes called {other}", context.thread_idx % WARP_SIZE);
        }
        state.offered[(context.thread_idx % WARP_SIZE) as usize] = word;
        state.arrived += 1;
        if state.arrived == WARP_SIZE {
            state.arrived = 0;
            state.generation += 1;
            state.exchanged = state.offered;
            warp.changed.notify_all();
            return state.exchanged;
        }
        let generation = state.generation;
        wait_until(
            &context.grid,
            &warp.changed,
            state,
            |s| s.generation != generation,
            |s| format!("thread {} of CTA {} waited in {operation} ({} of 32 lanes arrived)", context.thread_idx, context.block_idx, s.arrived),
        )
        .exchanged
    })
}

/// `vote.sync.ballot.b32`: bit `i` of the result is set when lane `i` of `mask` passed a
/// true `pred`. Every lane in `mask` must execute it.
pub fn vote_ballot(mask: u32, pred: bool) -> u32 {
    let preds = warp_exchange("vote_ballot", mask, u32::from(pred));
    preds.iter().enumerate().fold(0, |ballot, (lane, &p)| ballot | p << lane)
}

/// `vote.sync.all`: true when `pred` holds on every lane of `mask`.
pub fn vote_all(mask: u32, pred: bool) -> bool {
    warp_exchange("vote_all", mask, u32::from(pred)).iter().all(|&p| p != 0)
}

/// `vote.sync.any`: true when `pred` holds on some lane of `mask`.
pub fn vote_any(mask: u32, pred: bool) -> bool {
    warp_exchange("vote_any", mask, u32::from(pred)).iter().any(|&p| p != 0)
}

/// `shfl.sync.idx.b32`: the value of `v` held by lane `src_lane` (its low 5 bits).
pub fn shfl_idx(mask: u32, v: u32, src_lane: u32) -> u32 {
    warp_exchange("shfl_idx", mask, v)[(src_lane % WARP_SIZE) as usize]
}

/// `shfl.sync.bfly.b32`: the value of `v` held by lane `lane_id() ^ lane_mask` (its low 5
/// bits).
pub fn shfl_xor(mask: u32, v: u32, lane_mask: u32) -> u32 {
    let words = warp_exchange("shfl_xor", mask, v);
    words[((lane_id() ^ lane_mask) % WARP_SIZE) as usize]
}

// ---------------------------------------------------------------------------------------
// Time, sleep, trap.
// ---------------------------------------------------------------------------------------

/// The process-wide origin of [`clock64`] and [`globaltimer_ns`].
fn process_start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

thread_local! {
    static LAST_CLOCK: Cell<u64> = const { Cell::new(0) };
}

/// `%clock64`: here nanoseconds since the process's first timer read, standing in for
/// cycles; strictly increasing between two reads of one thread.
pub fn clock64() -> u64 {
    let now = globaltimer_ns().max(LAST_CLOCK.get() + 1);
    LAST_CLOCK.set(now);
    now
}

/// `%globaltimer`: nanoseconds since the process's first timer read, shared by every
/// thread.
pub fn globaltimer_ns() -> u64 {
    process_start().elapsed().as_nanos() as u64
}

/// `nanosleep.u32`: suspends this thread for about `ns` nanoseconds (at most 1 ms, as on
/// the GPU; 0 yields). Unwinds this thread when another thread of its launch panicked.
pub fn nanosleep(ns: u32) {
    with_context(|c| c.grid.unwind_if_aborted());
    if ns == 0 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_nanos(u64::from(ns.min(MAX_NANOSLEEP_NS))));
    }
}

/// One iteration of a busy-wait: yields the CPU so that thousands of emulated threads can
/// progress, and unwinds this thread when another thread of its launch panicked.
pub fn spin_pause() {
    with_context(|c| c.grid.unwind_if_aborted());
    std::thread::yield_now();
}

/// `trap`: aborts the kernel; here a panic ("device trap") that [`launch`] resumes once
/// every thread has ended. For broken invariants only.
pub fn trap() -> ! {
    panic!("device trap")
}
