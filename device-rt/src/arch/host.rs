//! `arch` on the CPU (feature `host-emu`): [`HostTwin`], the host twin of `nvptx.rs`.
//!
//! It implements the same contract ([`Arch`] and the word traits, documented once in
//! `arch/mod.rs`) with, as far as a CPU can give it, the same meaning, so device code
//! written against `arch` runs unchanged on OS threads started by [`launch`], which stands
//! in for a kernel launch. Where the twin's way of keeping a promise matters, its method
//! says "Here: …". Errors are panics with a message: this is test infrastructure.
//!
//! What the twin cannot show, so GPU runs remain the proof:
//! - **The GPU's weaker memory ordering**, unless the launch runs in a weak-memory world
//!   ([`launch_in`], `weak/`, which says what it models). Otherwise every access here is
//!   a Rust atomic (relaxed where PTX is relaxed, volatile or weak) and the CPU (x86 is
//!   TSO) orders them more strongly than PTX orders `ld.relaxed`/`ld.volatile`/
//!   `st.global`: a missing fence may pass here and fail on a GPU. Volatile and weak
//!   accesses are relaxed atomics rather than `read_volatile`/`write_volatile` because PTX
//!   gives `ld.volatile` the ordering of `ld.relaxed.sys`, and only atomics let Rust's
//!   fences synchronise (NCCL's fence + relaxed flag store / volatile poll + fence pattern)
//!   without a data race. Memory that kernel threads share must therefore be accessed only
//!   through these functions (or ordered by barriers), never by plain Rust loads and
//!   stores racing them.
//! - **16-byte single-copy atomicity**: `v2b64` accesses are two 8-byte accesses.
//! - **Limits on concurrency**: every CTA of a launch is co-resident (one OS thread per
//!   GPU thread), whatever the GPU could hold.
//! - **Multicast**: there are no multicast addresses on the host, so the twin does not
//!   implement `Multimem`; the `HwMulticast` path is compiled for nvptx only.
//!
//! Warp operations take `FULL_MASK` only and need a full warp of 32 threads; a thread
//! that polls must call `spin_pause` or `nanosleep` in its loop, where a thread is
//! released when another thread of its launch panicked.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use half::{bf16, f16};

use super::pool;
use super::weak::{self, CtaWeak, Load, Scope, WeakMemory};
use super::{Arch, AtomicWord, FULL_MASK, GlobalWord, Site, SiteKind, WARP_SIZE};

/// The host twin: device code on one OS thread per GPU thread.
pub struct HostTwin;

/// Named barriers per CTA (`barrier.sync` ids 0..16).
const NAMED_BARRIERS: usize = 16;

/// Stack of each emulated thread: device code keeps little on its stack.
const THREAD_STACK_BYTES: usize = 1024 * 1024;

/// How long a thread may wait at a barrier or warp operation, with every thread of its CTA
/// waiting or ended all that time, before the twin calls it a deadlock and panics (a GPU
/// would hang instead).
const DEADLOCK_AFTER: Duration = Duration::from_secs(60);

/// Longest `nanosleep` the GPU performs (1 ms).
const MAX_NANOSLEEP_NS: u32 = 1_000_000;

/// In a weak-memory launch, how long a thread waits at a barrier or in a warp operation
/// before it writes its and its CTA's buffered stores to memory (the threads it waits for
/// may be polling for them).
const WEAK_IDLE_DRAIN: Duration = Duration::from_millis(50);

// ---------------------------------------------------------------------------------------
// The launch: grid, CTAs and the per-thread context.
// ---------------------------------------------------------------------------------------

/// Runs `kernel` on `grid` CTAs of `block` threads each, one OS thread per GPU thread, all
/// at once (device kernels wait on each other across CTAs, so every CTA must be
/// co-resident), and returns when every thread has returned. Each CTA gets
/// `dyn_smem_bytes` of zeroed dynamic shared memory (`arch::dyn_smem`).
///
/// The host twin's replacement for a kernel launch; it exists only on the host.
///
/// # Panics
/// When `grid` or `block` is 0, when a thread cannot be started, or when any emulated
/// thread panics (a `trap`, a failed assertion, a deadlock found at a barrier): the
/// first panic is resumed here once every other thread has been released from its
/// barriers, warp operations and polling loops and has ended.
pub fn launch(grid: u32, block: u32, dyn_smem_bytes: u32, kernel: impl Fn() + Sync) {
    launch_in(None, grid, block, dyn_smem_bytes, kernel);
}

/// As [`launch`], in `memory`'s weak-memory world when given (see `weak/`): the kernel
/// sees memory ordered only as PTX promises. Launches that communicate share one world.
///
/// # Panics
/// As [`launch`].
pub fn launch_in(memory: Option<&WeakMemory>, grid: u32, block: u32, dyn_smem_bytes: u32, kernel: impl Fn() + Sync) {
    launch_with(memory, None, None, grid, block, dyn_smem_bytes, kernel);
}

/// The twin of a launch with programmatic stream serialization: as [`launch_in`], and the
/// grid's `griddepcontrol.wait` (`grid_dependency_wait`) waits until `prior` (the launch
/// before it on its stream, which may still run) has ended, its stores drained; `own`
/// records, for the launch after this one, when every thread of this grid has called
/// `launch_dependents` or ended ([`GridDependency::wait_released`]) and when it has
/// ended. A stream twin starts the next launch, on another OS thread, once this one is
/// released: as on the GPU, a grid may then run beside the one before it.
///
/// # Panics
/// As [`launch`].
pub fn launch_after(memory: Option<&WeakMemory>, prior: Option<Arc<GridDependency>>, own: Arc<GridDependency>, grid: u32, block: u32, dyn_smem_bytes: u32, kernel: impl Fn() + Sync) {
    launch_with(memory, prior, Some(own), grid, block, dyn_smem_bytes, kernel);
}

/// What a launch after it needs to know of a launch ([`launch_after`]).
#[derive(Default)]
pub struct GridDependency {
    state: Mutex<DependencyState>,
    changed: Condvar,
}

#[derive(Default)]
struct DependencyState {
    /// Threads of the grid, once it has started.
    threads: Option<u32>,
    /// Threads that called `launch_dependents` or ended.
    released: u32,
    /// The grid has ended and its stores are drained.
    ended: bool,
}

impl GridDependency {
    /// A dependency of a launch not started yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Waits until every thread of the grid has called `launch_dependents` or ended (or the
    /// grid has ended): the next launch of its stream may start.
    pub fn wait_released(&self) {
        let mut state = lock(&self.state);
        while !(state.ended || state.threads.is_some_and(|t| state.released >= t)) {
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn update(&self, f: impl FnOnce(&mut DependencyState)) {
        f(&mut lock(&self.state));
        self.changed.notify_all();
    }

    /// Waits until the grid has ended; unwinds when `waiter`'s launch is aborted.
    fn wait_ended(&self, waiter: &GridState) {
        let mut state = lock(&self.state);
        while !state.ended {
            waiter.unwind_if_aborted();
            state = self.changed.wait_timeout(state, Duration::from_millis(10)).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

fn launch_with(memory: Option<&WeakMemory>, prior: Option<Arc<GridDependency>>, own: Option<Arc<GridDependency>>, grid: u32, block: u32, dyn_smem_bytes: u32, kernel: impl Fn() + Sync) {
    assert!(grid > 0 && block > 0, "arch::launch: grid ({grid}) and block ({block}) must be non-zero");
    let (first_cta, launch) = memory.map_or((0, 0), |m| m.start_launch(grid));
    if let Some(own) = &own {
        own.update(|d| d.threads = Some(grid * block));
    }
    let state = Arc::new(GridState {
        aborted: AtomicBool::new(false),
        first_panic: Mutex::new(None),
        ctas: (0..grid).map(|b| CtaState::new(block, dyn_smem_bytes, first_cta + u64::from(b))).collect(),
        weak: memory.map(|m| (m.clone(), launch)),
        prior,
        own,
    });
    let mut spawn_error = None;
    // Every GPU thread runs on a pool thread (`pool.rs`: starting OS threads would cost
    // more than most launches run), and the scope returns once every one has ended.
    pool::scope(|scope| {
        'spawn: for block_idx in 0..grid {
            for thread_idx in 0..block {
                let context = ThreadContext { thread_idx, block_idx, block_dim: block, grid_dim: grid, grid: Arc::clone(&state), released: Cell::new(false) };
                let kernel = &kernel;
                if let Err(e) = scope.spawn(THREAD_STACK_BYTES, move || run_thread(context, kernel)) {
                    spawn_error = Some(format!("arch::launch: could not start thread {thread_idx} of CTA {block_idx}: {e}"));
                    state.release_all();
                    break 'spawn;
                }
            }
        }
    });
    if let Some(memory) = memory {
        state.ctas.iter().for_each(|cta| memory.drain_cta(&cta.weak));
    }
    if let Some(own) = &state.own {
        own.update(|d| d.ended = true);
    }
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
    if let Some((memory, launch)) = &grid.weak {
        weak::enter(memory.thread(Arc::clone(&context.cta().weak), *launch, context.thread_idx));
    }
    CONTEXT.set(Some(context));
    match panic::catch_unwind(AssertUnwindSafe(kernel)) {
        Ok(()) => weak::leave(),
        Err(payload) if !payload.is::<Released>() => grid.abort(payload),
        Err(_) => {}
    }
    // The OS thread runs threads of later launches (`pool.rs`): nothing of this one stays.
    weak::forget_thread();
    with_context(|context| {
        context.cta().stalled.fetch_add(1, AcqRel);
        context.release_dependents();
    });
    CONTEXT.set(None);
}

/// What one launch shares among its threads.
struct GridState {
    /// Set once a thread panicked: every waiting or polling thread then unwinds.
    aborted: AtomicBool,
    /// The payload of the first panic, resumed by [`launch`].
    first_panic: Mutex<Option<Box<dyn Any + Send>>>,
    ctas: Box<[CtaState]>,
    /// A weak-memory launch's world and its number in it.
    weak: Option<(WeakMemory, u64)>,
    /// The launch before this one on its stream, when this one may overlap it
    /// ([`launch_after`]).
    prior: Option<Arc<GridDependency>>,
    /// This launch, for the one after it ([`launch_after`]).
    own: Option<Arc<GridDependency>>,
}

/// The payload with which released threads unwind; never kept as a launch's panic.
struct Released;

impl GridState {
    fn abort(&self, payload: Box<dyn Any + Send>) {
        lock(&self.first_panic).get_or_insert(payload);
        self.release_all();
    }

    /// Sets `aborted` and wakes every waiter. A waiter registers under its rendezvous's
    /// mutex and then checks the flag before it parks; the mutex is taken here after the
    /// flag is set, so a waiter either is in the list woken here or sees the flag.
    fn release_all(&self) {
        self.aborted.store(true, Relaxed);
        for cta in &self.ctas {
            for barrier in &cta.barriers {
                Parked::wake(std::mem::take(&mut lock(&barrier.state).parked));
            }
            for warp in &cta.warps {
                Parked::wake(std::mem::take(&mut lock(&warp.state).parked));
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

/// One CTA: its dynamic shared memory, named barriers and warps, and (in a weak-memory
/// launch) its store buffer.
struct CtaState {
    smem: SharedWindow,
    barriers: [NamedBarrier; NAMED_BARRIERS],
    warps: Box<[Warp]>,
    weak: Arc<CtaWeak>,
    /// Threads of the CTA waiting at a barrier or in a warp operation, or ended: while
    /// fewer than all, one still runs and may yet arrive (see [`wait_until`]).
    stalled: AtomicU32,
}

impl CtaState {
    /// CTA number `id` of its weak-memory world (any number in a launch without one).
    fn new(block_dim: u32, dyn_smem_bytes: u32, id: u64) -> Self {
        CtaState {
            smem: SharedWindow::zeroed(dyn_smem_bytes as usize),
            barriers: std::array::from_fn(|_| NamedBarrier::default()),
            warps: (0..block_dim.div_ceil(WARP_SIZE)).map(|_| Warp::default()).collect(),
            weak: Arc::new(CtaWeak::new(id)),
            stalled: AtomicU32::new(0),
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
    /// This thread called `launch_dependents` (or ended).
    released: Cell<bool>,
}

impl ThreadContext {
    fn cta(&self) -> &CtaState {
        &self.grid.ctas[self.block_idx as usize]
    }

    /// Counts this thread, once, as one that lets the next launch start.
    fn release_dependents(&self) {
        if !self.released.replace(true)
            && let Some(own) = &self.grid.own
        {
            own.update(|d| d.released += 1);
        }
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
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Parks this thread until `generation` moves past `seen` (it registered in the
/// rendezvous's `parked` list under the rendezvous's mutex before calling this, so the
/// thread that moves the generation, or an abort, unparks it). Unwinds when the launch is
/// aborted; panics with `describe`'s words once every thread of the caller's CTA has been
/// waiting (here or in another barrier or warp operation) or ended for
/// [`DEADLOCK_AFTER`]: while one of them runs it may still arrive, however long it takes
/// (an idle work loop's warp 0 polls for as long as the loop lives, its other warps at a
/// barrier), and a wait of the device code that never ends is its spin budget's to stop.
/// With `idle`, calls it every [`WEAK_IDLE_DRAIN`] of waiting.
///
/// Ordering: the acquire load that sees the new generation pairs with the release store
/// that moved it, after the last arriving thread wrote what the waiters read next.
/// Waiters take no lock on the way out, so the threads of one rendezvous leave it side by
/// side rather than one after another through its mutex.
fn wait_for_generation(context: &ThreadContext, generation: &AtomicU64, seen: u64, describe: impl Fn() -> String, idle: Option<fn()>) {
    let (grid, cta) = (&context.grid, context.cta());
    let _stalled = Stalled::enter(cta);
    let mut start = Instant::now();
    while generation.load(Acquire) == seen {
        grid.unwind_if_aborted();
        if cta.stalled.load(Acquire) < context.block_dim {
            start = Instant::now();
        }
        let waited = start.elapsed();
        if waited >= DEADLOCK_AFTER {
            panic!("arch: deadlock: {} for {} s, every thread of the CTA waiting or ended", describe(), waited.as_secs());
        }
        let slice = if idle.is_some() { WEAK_IDLE_DRAIN } else { STALL_CHECK };
        let parked = Instant::now();
        std::thread::park_timeout(slice.min(DEADLOCK_AFTER - waited));
        if let Some(idle) = idle
            && parked.elapsed() >= slice
            && generation.load(Acquire) == seen
        {
            idle();
        }
    }
}

/// The threads parked in one rendezvous (a barrier's or a warp's), kept under its mutex.
#[derive(Default)]
struct Parked(Vec<std::thread::Thread>);

impl Parked {
    /// Registers this thread; call under the rendezvous's mutex, before its wait.
    fn push_current(&mut self) {
        self.0.push(std::thread::current());
    }

    /// Unparks every thread of `parked` (taken out of the rendezvous under its mutex).
    fn wake(parked: Parked) {
        parked.0.iter().for_each(std::thread::Thread::unpark);
    }
}

/// How often a waiting thread looks whether every thread of its CTA is stalled.
const STALL_CHECK: Duration = Duration::from_secs(1);

/// A thread's count in its CTA's `stalled` while it waits (taken back when the wait ends,
/// also by unwinding).
struct Stalled<'a> {
    cta: &'a CtaState,
}

impl<'a> Stalled<'a> {
    fn enter(cta: &'a CtaState) -> Self {
        cta.stalled.fetch_add(1, AcqRel);
        Stalled { cta }
    }
}

impl Drop for Stalled<'_> {
    fn drop(&mut self) {
        self.cta.stalled.fetch_sub(1, AcqRel);
    }
}

// ---------------------------------------------------------------------------------------
// What the contract's functions share: barriers, word alignment, half-precision helpers,
// warp rendezvous and the clocks.
// ---------------------------------------------------------------------------------------

/// One named barrier of a CTA.
#[derive(Default)]
struct NamedBarrier {
    state: Mutex<BarrierState>,
    /// Completed generations, moved under `state`'s mutex: a waiter leaves when it changes.
    generation: AtomicU64,
    /// In a weak-memory launch, the largest view of the threads that arrived so far (in
    /// any generation: a larger view only orders more), raised under `state`'s mutex.
    view: AtomicU64,
}

#[derive(Default)]
struct BarrierState {
    /// Threads that arrived in the current generation.
    arrived: u32,
    /// The thread count the current generation's first thread passed.
    expected: u32,
    /// The threads waiting for the current generation to complete.
    parked: Parked,
}

/// Arrives at named barrier `id` of this CTA, expecting `nthreads` threads, and waits
/// until they have all arrived (generation-counted, so it can be reused at once).
/// Ordering: each participant arrives under the barrier's mutex, and the last one moves
/// the generation with a release store under it, which every waiter's acquire load sees
/// before it leaves; so the participants' accesses before the barrier come before their
/// accesses after it. In a weak-memory launch, each participant's buffered stores go to
/// its CTA and every participant leaves with the largest view among them.
fn arrive_and_wait(id: u32, nthreads: u32) {
    assert!((id as usize) < NAMED_BARRIERS, "arch::barrier_sync: barrier id {id} is not in 0..16");
    let view = weak::active().then(weak::barrier_arrive);
    let joined = with_context(|context| {
        let barrier = &context.cta().barriers[id as usize];
        let mut state = lock(&barrier.state);
        if let Some(view) = view {
            barrier.view.fetch_max(view, Relaxed);
        }
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
            barrier.generation.fetch_add(1, Release);
            let parked = std::mem::take(&mut state.parked);
            drop(state);
            Parked::wake(parked);
            return barrier.view.load(Relaxed);
        }
        state.parked.push_current();
        let generation = barrier.generation.load(Relaxed);
        drop(state);
        wait_for_generation(
            context,
            &barrier.generation,
            generation,
            || format!("thread {} of CTA {} waited at barrier {id} ({} of {nthreads} threads arrived)", context.thread_idx, context.block_idx, lock(&barrier.state).arrived),
            view.is_some().then_some(weak::idle as fn()),
        );
        barrier.view.load(Relaxed)
    });
    if view.is_some() {
        weak::barrier_leave(joined);
    }
}

/// `p` as a pointer to a `T`-sized word, after checking its alignment (a misaligned
/// access faults on the GPU and is undefined for Rust's atomics).
#[inline]
fn aligned<T>(p: *const T, align: usize) -> *mut T {
    assert!(p.addr().is_multiple_of(align), "arch: address {p:p} is not aligned to {align} bytes");
    p.cast_mut()
}

/// `p` as a pointer to an aligned `u64` after checking that the whole word lies in this
/// CTA's dynamic shared memory (a word outside it is not the CTA's to share).
#[inline]
fn shared_word(p: *const u64) -> *mut u64 {
    let p = aligned(p, size_of::<u64>());
    with_context(|c| {
        let window = &c.cta().smem;
        let offset = p.addr().wrapping_sub(window.base.as_ptr().addr());
        assert!(
            offset.checked_add(size_of::<u64>()).is_some_and(|end| end <= window.len),
            "arch: shared word {p:p} is not in this CTA's dynamic shared memory"
        );
    });
    p
}

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

/// One warp's rendezvous.
#[derive(Default)]
struct Warp {
    state: Mutex<WarpState>,
    /// Completed generations, moved under `state`'s mutex: a waiting lane leaves when it
    /// changes.
    generation: AtomicU64,
    /// The last completed generation's words, written before `generation` moves: no lane
    /// can complete the next generation before every lane has read these.
    exchanged: [AtomicU32; WARP_SIZE as usize],
}

#[derive(Default)]
struct WarpState {
    /// Lanes that arrived in the current generation.
    arrived: u32,
    /// The operation the current generation's first lane called.
    operation: &'static str,
    /// The current generation's words, by lane.
    offered: [u32; WARP_SIZE as usize],
    /// The lanes waiting for the current generation to complete.
    parked: Parked,
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
            for (exchanged, &offered) in warp.exchanged.iter().zip(&state.offered) {
                exchanged.store(offered, Relaxed);
            }
            warp.generation.fetch_add(1, Release);
            let parked = std::mem::take(&mut state.parked);
            let words = state.offered;
            drop(state);
            Parked::wake(parked);
            return words;
        }
        state.parked.push_current();
        let generation = warp.generation.load(Relaxed);
        drop(state);
        wait_for_generation(
            context,
            &warp.generation,
            generation,
            || format!("thread {} of CTA {} waited in {operation} ({} of 32 lanes arrived)", context.thread_idx, context.block_idx, lock(&warp.state).arrived),
            weak::active().then_some(weak::idle as fn()),
        );
        std::array::from_fn(|lane| warp.exchanged[lane].load(Relaxed))
    })
}

/// The process-wide origin of `clock64` and `globaltimer_ns`.
fn process_start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

thread_local! {
    static LAST_CLOCK: Cell<u64> = const { Cell::new(0) };
}

// ---------------------------------------------------------------------------------------
// The orderings of PTX's relaxed accesses, and ThreadSanitizer.
// ---------------------------------------------------------------------------------------

// PTX's relaxed, volatile and weak accesses of global memory are Rust's `Relaxed` atomics
// here, ordered by Rust's fences as PTX orders them with `fence` (NCCL's fence + relaxed
// flag store, volatile poll + fence). ThreadSanitizer does not model fences (a fence is
// nothing to it), so under it (`tests/tsan.sh`) every data race published that way would
// be reported: a host thread reading an output after a completion that a channel stored
// behind `fence.acq_rel.sys`. Under ThreadSanitizer these accesses are therefore acquire
// loads, release stores and acq_rel read-modify-writes: the same instructions on x86
// (TSO: every load acquires, every store releases), and an order that ThreadSanitizer
// follows. It then reports a plain access that nothing orders, not one that only a missing
// fence leaves unordered: finding those is the weak-memory mode's job (`weak/`).

/// The ordering of a relaxed, volatile or weak load of global memory: `Relaxed`
/// (`Acquire` under ThreadSanitizer).
pub(super) const RELAXED_LOAD: Ordering = if cfg!(sanitize = "thread") { Acquire } else { Relaxed };

/// The ordering of a relaxed or weak store to global memory: `Relaxed` (`Release` under
/// ThreadSanitizer).
pub(super) const RELAXED_STORE: Ordering = if cfg!(sanitize = "thread") { Release } else { Relaxed };

/// The ordering of a relaxed read-modify-write of global memory: `Relaxed` (`AcqRel` under
/// ThreadSanitizer).
const RELAXED_RMW: Ordering = if cfg!(sanitize = "thread") { AcqRel } else { Relaxed };

// ---------------------------------------------------------------------------------------
// The contract.
// ---------------------------------------------------------------------------------------

/// A naturally aligned load (`ld.volatile`, here a relaxed atomic load) and store
/// (`st.global`, here a relaxed atomic store) of one `$t` at a global address; in a
/// weak-memory launch, a load that may be stale and a buffered store.
macro_rules! sized_access {
    ($ld:ident, $st:ident, $t:ty, $atomic:ty) => {
        #[inline]
        unsafe fn $ld(addr: u64) -> $t {
            let p = aligned(addr as usize as *const $t, size_of::<$t>());
            if weak::active() {
                return weak::load(p.addr(), size_of::<$t>(), Load::Relaxed) as $t;
            }
            // SAFETY: forwarded from the caller.
            unsafe { <$atomic>::from_ptr(p) }.load(RELAXED_LOAD)
        }

        #[inline]
        unsafe fn $st(addr: u64, v: $t) {
            let p = aligned(addr as usize as *const $t, size_of::<$t>());
            if weak::active() {
                return weak::store(p.addr(), size_of::<$t>(), u64::from(v), false);
            }
            // SAFETY: forwarded from the caller.
            unsafe { <$atomic>::from_ptr(p) }.store(v, RELAXED_STORE)
        }
    };
}

/// A fence of `scope` (the weak-memory model's) or, outside a weak-memory launch, Rust's
/// fence of `ordering`; nothing when its site is weakened.
#[inline]
fn fence_of(scope: Scope, ordering: std::sync::atomic::Ordering) {
    let weakened = weak::take_mark(SiteKind::Fence);
    if !weak::active() {
        fence(ordering);
    } else if !weakened {
        weak::fence(scope);
    }
}

/// Two 8-byte loads at the 16-byte aligned `addr`, ordered as `how` (`acquire`: Rust's
/// `Acquire`, else `Relaxed`, outside a weak-memory launch).
///
/// # Safety
/// As `ld_volatile_global_v2b64`.
#[inline]
unsafe fn load_v2(addr: u64, how: Load) -> [u64; 2] {
    let p = aligned(addr as usize as *const u64, 16);
    if weak::active() {
        return [weak::load(p.addr(), 8, how), weak::load(p.addr() + 8, 8, how)];
    }
    let ordering = if how == Load::Acquire { Acquire } else { RELAXED_LOAD };
    // SAFETY: forwarded from the caller; both halves are 8-byte aligned.
    unsafe { [AtomicU64::from_ptr(p).load(ordering), AtomicU64::from_ptr(p.add(1)).load(ordering)] }
}

/// How an acquire load whose site may be weakened loads.
#[inline]
fn acquire_unless_weakened() -> Load {
    if weak::take_mark(SiteKind::AcquireLoad) { Load::Relaxed } else { Load::Acquire }
}

/// A load of the word at `p`, ordered as `how`: Rust's `Acquire` or `Relaxed`, or the
/// weak-memory model's.
///
/// # Safety
/// `p` is a valid, aligned word accessed only atomically.
#[inline]
unsafe fn load_word<A: HostAtomic>(p: *const A::Word, how: Load) -> A::Word {
    let p = aligned(p, size_of::<A::Word>());
    if weak::active() {
        return A::from_u64(weak::load(p.addr(), size_of::<A::Word>(), how));
    }
    // SAFETY: the caller's contract.
    unsafe { A::load(p, if how == Load::Acquire { Acquire } else { RELAXED_LOAD }) }
}

/// A store of `v` to the word at `p`, a release or relaxed: Rust's, or the weak-memory
/// model's (a relaxed store is buffered there).
///
/// # Safety
/// As [`load_word`], and the word is writable.
#[inline]
unsafe fn store_word<A: HostAtomic>(p: *mut A::Word, v: A::Word, release: bool) {
    let p = aligned(p, size_of::<A::Word>());
    if weak::active() {
        return weak::store(p.addr(), size_of::<A::Word>(), A::to_u64(v), release);
    }
    // SAFETY: the caller's contract.
    unsafe { A::store(p, v, if release { Release } else { RELAXED_STORE }) }
}

/// A read-modify-write `op` of the word at `p`, acq_rel or relaxed (an acq_rel whose site
/// is weakened is relaxed). `op` gets whether to order (Rust's `AcqRel`) or not: in a
/// weak-memory launch the model orders, and `op` runs under its lock of the word.
#[inline]
fn rmw<T>(p: *const T, acq_rel: bool, op: impl FnOnce(bool) -> T) -> T {
    let p = aligned(p, size_of::<T>());
    let ordered = acq_rel && !weak::take_mark(SiteKind::AcqRelRmw);
    if weak::active() {
        return weak::rmw(p.addr(), size_of::<T>(), ordered, || op(false));
    }
    op(ordered)
}

/// The atomics of a 32- or 64-bit word, as the helpers above use them.
trait HostAtomic {
    type Word: Copy;
    /// # Safety
    /// `p` is a valid, aligned word accessed only atomically.
    unsafe fn load(p: *const Self::Word, ordering: std::sync::atomic::Ordering) -> Self::Word;
    /// # Safety
    /// As [`HostAtomic::load`], and the word is writable.
    unsafe fn store(p: *mut Self::Word, v: Self::Word, ordering: std::sync::atomic::Ordering);
    fn to_u64(v: Self::Word) -> u64;
    fn from_u64(v: u64) -> Self::Word;
    /// Compare-and-swap, `AcqRel` (`Acquire` on failure) when `ordered`, else relaxed;
    /// returns the value found.
    fn compare_swap(&self, expected: Self::Word, new: Self::Word, ordered: bool) -> Self::Word;
}

macro_rules! host_atomic {
    ($atomic:ty, $t:ty) => {
        impl HostAtomic for $atomic {
            type Word = $t;
            #[inline]
            unsafe fn load(p: *const $t, ordering: std::sync::atomic::Ordering) -> $t {
                // SAFETY: the caller's contract.
                unsafe { <$atomic>::from_ptr(p.cast_mut()) }.load(ordering)
            }
            #[inline]
            unsafe fn store(p: *mut $t, v: $t, ordering: std::sync::atomic::Ordering) {
                // SAFETY: the caller's contract.
                unsafe { <$atomic>::from_ptr(p) }.store(v, ordering)
            }
            #[inline]
            fn to_u64(v: $t) -> u64 {
                u64::from(v)
            }
            #[inline]
            fn from_u64(v: u64) -> $t {
                v as $t
            }
            #[inline]
            fn compare_swap(&self, expected: $t, new: $t, ordered: bool) -> $t {
                let (success, failure) = if ordered { (AcqRel, Acquire) } else { (RELAXED_RMW, RELAXED_LOAD) };
                self.compare_exchange(expected, new, success, failure).unwrap_or_else(|current| current)
            }
        }
    };
}

host_atomic!(AtomicU32, u32);
host_atomic!(AtomicU64, u64);

impl Arch for HostTwin {
    #[inline]
    fn thread_idx() -> u32 {
        with_context(|c| c.thread_idx)
    }

    #[inline]
    fn block_dim() -> u32 {
        with_context(|c| c.block_dim)
    }

    #[inline]
    fn block_idx() -> u32 {
        with_context(|c| c.block_idx)
    }

    #[inline]
    fn grid_dim() -> u32 {
        with_context(|c| c.grid_dim)
    }

    #[inline]
    fn lane_id() -> u32 {
        Self::thread_idx() % WARP_SIZE
    }

    /// Here: always 0 (the host has no SMs).
    #[inline]
    fn sm_id() -> u32 {
        0
    }

    #[inline]
    fn dynamic_smem_size() -> u32 {
        with_context(|c| c.cta().smem.len as u32)
    }

    /// Here: a generation-counted rendezvous under the barrier's mutex; panics on a bad
    /// `id` or `nthreads`, or when the threads of one generation pass different counts.
    fn barrier_sync(id: u32, nthreads: u32) {
        let block_dim = Self::block_dim();
        assert!(
            nthreads > 0 && nthreads.is_multiple_of(WARP_SIZE) && nthreads <= block_dim,
            "arch::barrier_sync({id}, {nthreads}): the count must be a non-zero multiple of 32, at most the CTA's {block_dim} threads"
        );
        arrive_and_wait(id, nthreads);
    }

    /// Here: any block size.
    fn barrier_sync_all() {
        arrive_and_wait(0, Self::block_dim());
    }

    /// Here: a rendezvous of the warp's 32 lanes (its mutex orders the lanes' accesses);
    /// in a weak-memory launch, each lane's buffered stores go to its CTA and every lane
    /// leaves with the largest view of the warp, as at a CTA barrier.
    fn warp_sync(mask: u32) {
        if !weak::active() {
            warp_exchange("warp_sync", mask, 0);
            return;
        }
        let view = weak::barrier_arrive();
        let low = warp_exchange("warp_sync", mask, view as u32);
        let high = warp_exchange("warp_sync", mask, (view >> 32) as u32);
        let joined = low.iter().zip(&high).map(|(&l, &h)| u64::from(h) << 32 | u64::from(l)).max().unwrap_or(view);
        weak::barrier_leave(joined);
    }

    /// Here: `fence(AcqRel)`.
    #[inline]
    fn fence_acq_rel_sys() {
        fence_of(Scope::System, AcqRel);
    }

    /// Here: `fence(AcqRel)` (as `.sys` in a weak-memory launch).
    #[inline]
    fn fence_acq_rel_gpu() {
        fence_of(Scope::System, AcqRel);
    }

    /// Here: `fence(AcqRel)`.
    #[inline]
    fn fence_acq_rel_cta() {
        fence_of(Scope::Cta, AcqRel);
    }

    /// Here: `fence(SeqCst)`.
    #[inline]
    fn fence_sc_sys() {
        fence_of(Scope::SeqCst, SeqCst);
    }

    sized_access!(ld_volatile_global_b8, st_global_b8, u8, AtomicU8);
    sized_access!(ld_volatile_global_b16, st_global_b16, u16, AtomicU16);
    sized_access!(ld_volatile_global_b32, st_global_b32, u32, AtomicU32);
    sized_access!(ld_volatile_global_b64, st_global_b64, u64, AtomicU64);

    /// Here: two relaxed 8-byte loads.
    #[inline]
    unsafe fn ld_volatile_global_v2b64(addr: u64) -> [u64; 2] {
        // SAFETY: forwarded from the caller.
        unsafe { load_v2(addr, Load::Relaxed) }
    }

    /// Here: two 8-byte acquire loads.
    #[inline]
    unsafe fn ld_acquire_sys_global_v2b64(addr: u64) -> [u64; 2] {
        // SAFETY: forwarded from the caller.
        unsafe { load_v2(addr, acquire_unless_weakened()) }
    }

    /// Here: as `ld_volatile_global_v2b64` (two relaxed 8-byte loads).
    #[inline]
    unsafe fn ld_cv_global_v2b64(addr: u64) -> [u64; 2] {
        // SAFETY: forwarded from the caller.
        unsafe { Self::ld_volatile_global_v2b64(addr) }
    }

    /// Here: two relaxed 8-byte stores.
    #[inline]
    unsafe fn st_global_v2b64(addr: u64, v: [u64; 2]) {
        let p = aligned(addr as usize as *const u64, 16);
        // SAFETY: forwarded from the caller; both halves are 8-byte aligned.
        unsafe {
            store_word::<AtomicU64>(p, v[0], false);
            store_word::<AtomicU64>(p.add(1), v[1], false);
        }
    }

    /// Here: two relaxed 8-byte stores, as `st_global_v2b64`.
    #[inline]
    unsafe fn st_volatile_global_v2b64(addr: u64, v: [u64; 2]) {
        // SAFETY: forwarded from the caller.
        unsafe { Self::st_global_v2b64(addr, v) }
    }

    /// Here: a relaxed compare-and-swap loop on the word's bits (one atomic step, as on
    /// the GPU; its own ordering in a weak-memory launch as any relaxed RMW).
    #[inline]
    unsafe fn red_add_relaxed_gpu_f32(addr: u64, v: f32) {
        let p = addr as usize as *mut u32;
        // SAFETY: the caller gives an aligned, writable f32 accessed only atomically.
        let word = unsafe { AtomicU32::from_ptr(aligned(p, 4)) };
        rmw(p, false, |_| {
            word.fetch_update(RELAXED_RMW, RELAXED_LOAD, |bits| Some((f32::from_bits(bits) + v).to_bits())).unwrap_or_else(|bits| bits)
        });
    }

    // Half precision: `add`/`mul` compute in f32 and round once to nearest even, which
    // gives the hardware's single rounding: f32 carries more than 2p + 2 bits for both
    // formats, so the double rounding is innocuous. A NaN result is a NaN; its payload may
    // differ from the GPU's. `min`/`max` return the canonical NaN when both operands are
    // NaN, and order -0.0 below +0.0 (as PTX's `min`/`max`).

    fn add_f16(a: u16, b: u16) -> u16 {
        Self::f32_to_f16(Self::f16_to_f32(a) + Self::f16_to_f32(b))
    }

    fn mul_f16(a: u16, b: u16) -> u16 {
        Self::f32_to_f16(Self::f16_to_f32(a) * Self::f16_to_f32(b))
    }

    fn min_f16(a: u16, b: u16) -> u16 {
        half_select(a, b, Self::f16_to_f32, true)
    }

    fn max_f16(a: u16, b: u16) -> u16 {
        half_select(a, b, Self::f16_to_f32, false)
    }

    fn add_bf16(a: u16, b: u16) -> u16 {
        Self::f32_to_bf16(Self::bf16_to_f32(a) + Self::bf16_to_f32(b))
    }

    fn mul_bf16(a: u16, b: u16) -> u16 {
        Self::f32_to_bf16(Self::bf16_to_f32(a) * Self::bf16_to_f32(b))
    }

    fn min_bf16(a: u16, b: u16) -> u16 {
        half_select(a, b, Self::bf16_to_f32, true)
    }

    fn max_bf16(a: u16, b: u16) -> u16 {
        half_select(a, b, Self::bf16_to_f32, false)
    }

    fn add_f16x2(a: u32, b: u32) -> u32 {
        lanewise(a, b, Self::add_f16)
    }

    fn mul_f16x2(a: u32, b: u32) -> u32 {
        lanewise(a, b, Self::mul_f16)
    }

    fn min_f16x2(a: u32, b: u32) -> u32 {
        lanewise(a, b, Self::min_f16)
    }

    fn max_f16x2(a: u32, b: u32) -> u32 {
        lanewise(a, b, Self::max_f16)
    }

    fn add_bf16x2(a: u32, b: u32) -> u32 {
        lanewise(a, b, Self::add_bf16)
    }

    fn mul_bf16x2(a: u32, b: u32) -> u32 {
        lanewise(a, b, Self::mul_bf16)
    }

    fn min_bf16x2(a: u32, b: u32) -> u32 {
        lanewise(a, b, Self::min_bf16)
    }

    fn max_bf16x2(a: u32, b: u32) -> u32 {
        lanewise(a, b, Self::max_bf16)
    }

    fn f16_to_f32(h: u16) -> f32 {
        f16::from_bits(h).to_f32()
    }

    fn f32_to_f16(f: f32) -> u16 {
        f16::from_f32(f).to_bits()
    }

    fn bf16_to_f32(h: u16) -> f32 {
        bf16::from_bits(h).to_f32()
    }

    fn f32_to_bf16(f: f32) -> u16 {
        bf16::from_f32(f).to_bits()
    }

    #[inline]
    fn dyn_smem() -> *mut u8 {
        with_context(|c| c.cta().smem.base.as_ptr())
    }

    /// Here: a relaxed atomic load, after checking the word lies in the CTA's window.
    #[inline]
    unsafe fn ld_volatile_shared_b64(p: *const u64) -> u64 {
        // SAFETY: the caller gives an aligned word of the CTA's window (checked), accessed
        // atomically wherever threads race on it.
        unsafe { AtomicU64::from_ptr(shared_word(p)) }.load(Relaxed)
    }

    /// Here: a relaxed atomic store, after checking the word lies in the CTA's window.
    #[inline]
    unsafe fn st_volatile_shared_b64(p: *mut u64, v: u64) {
        // SAFETY: as in `ld_volatile_shared_b64`, and the word is writable.
        unsafe { AtomicU64::from_ptr(shared_word(p)) }.store(v, Relaxed)
    }

    #[inline]
    fn cvta_to_shared<T>(p: *const T) -> u32 {
        with_context(|c| {
            let window = &c.cta().smem;
            let offset = (p as usize).wrapping_sub(window.base.as_ptr() as usize);
            assert!(offset <= window.len, "arch::cvta_to_shared: {p:p} is not in this CTA's dynamic shared memory");
            offset as u32
        })
    }

    #[inline]
    fn cvta_to_global<T>(p: *const T) -> u64 {
        p as usize as u64
    }

    fn vote_ballot(mask: u32, pred: bool) -> u32 {
        let preds = warp_exchange("vote_ballot", mask, u32::from(pred));
        preds.iter().enumerate().fold(0, |ballot, (lane, &p)| ballot | p << lane)
    }

    fn vote_all(mask: u32, pred: bool) -> bool {
        warp_exchange("vote_all", mask, u32::from(pred)).iter().all(|&p| p != 0)
    }

    fn vote_any(mask: u32, pred: bool) -> bool {
        warp_exchange("vote_any", mask, u32::from(pred)).iter().any(|&p| p != 0)
    }

    fn shfl_idx(mask: u32, v: u32, src_lane: u32) -> u32 {
        warp_exchange("shfl_idx", mask, v)[(src_lane % WARP_SIZE) as usize]
    }

    fn shfl_xor(mask: u32, v: u32, lane_mask: u32) -> u32 {
        let words = warp_exchange("shfl_xor", mask, v);
        words[((Self::lane_id() ^ lane_mask) % WARP_SIZE) as usize]
    }

    /// Here: nanoseconds since the process's first timer read.
    fn clock64() -> u64 {
        let now = Self::globaltimer_ns().max(LAST_CLOCK.get() + 1);
        LAST_CLOCK.set(now);
        now
    }

    /// Here: nanoseconds since the process's first timer read, shared by every thread.
    fn globaltimer_ns() -> u64 {
        process_start().elapsed().as_nanos() as u64
    }

    /// Here: `ns == 0` yields the CPU.
    fn nanosleep(ns: u32) {
        with_context(|c| c.grid.unwind_if_aborted());
        if weak::active() {
            weak::spin();
        }
        if ns == 0 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_nanos(u64::from(ns.min(MAX_NANOSLEEP_NS))));
        }
    }

    /// Here: counts the thread for [`GridDependency::wait_released`] (a launch through
    /// [`launch_after`]); nothing otherwise.
    fn launch_dependents() {
        with_context(ThreadContext::release_dependents);
    }

    /// Here: waits until the launch before this one has ended (a launch through
    /// [`launch_after`]), then, in weak memory, orders the thread after everything that
    /// launch wrote (PTX: its writes are visible to this grid); returns at once otherwise.
    /// Unwinds when this launch is aborted.
    fn grid_dependency_wait() {
        let waited = with_context(|c| {
            c.grid.prior.as_ref().map(|prior| prior.wait_ended(&c.grid)).is_some()
        });
        if waited && weak::active() {
            weak::after_prior_launch();
        }
    }

    fn spin_pause() {
        with_context(|c| c.grid.unwind_if_aborted());
        if weak::active() {
            weak::spin();
        }
        std::thread::yield_now();
    }

    /// Here: a panic ("device trap").
    fn trap() -> ! {
        panic!("device trap")
    }

    /// Here: remembered for this thread's next ordering operation (see `weak/`); a
    /// panic when the site named before has not run.
    fn site(site: Site) {
        weak::mark(site);
    }
}

// ---------------------------------------------------------------------------------------
// Ordered loads and stores, and atomics, of 32- and 64-bit words: Rust's atomics, with
// `Relaxed` where PTX is volatile or relaxed, `Acquire`/`Release` where it acquires or
// releases, and `AcqRel` for acq_rel read-modify-writes (scope is not modelled); or the
// weak-memory model's operations of the same names.
// ---------------------------------------------------------------------------------------

macro_rules! global_word {
    ($t:ty, $atomic:ty) => {
        impl GlobalWord for $t {
            #[inline]
            unsafe fn ld_volatile(p: *const Self) -> Self {
                // SAFETY: the caller passes a valid word that is accessed only atomically.
                unsafe { load_word::<$atomic>(p, Load::Relaxed) }
            }
            #[inline]
            unsafe fn ld_relaxed_gpu(p: *const Self) -> Self {
                // SAFETY: as in `ld_volatile`.
                unsafe { load_word::<$atomic>(p, Load::Relaxed) }
            }
            #[inline]
            unsafe fn ld_relaxed_sys(p: *const Self) -> Self {
                // SAFETY: as in `ld_volatile`.
                unsafe { load_word::<$atomic>(p, Load::Relaxed) }
            }
            #[inline]
            unsafe fn ld_acquire_sys(p: *const Self) -> Self {
                // SAFETY: as in `ld_volatile`.
                unsafe { load_word::<$atomic>(p, acquire_unless_weakened()) }
            }
            #[inline]
            unsafe fn ld_acquire_gpu(p: *const Self) -> Self {
                // SAFETY: as in `ld_volatile`.
                unsafe { load_word::<$atomic>(p, acquire_unless_weakened()) }
            }
            #[inline]
            unsafe fn st_volatile(p: *mut Self, v: Self) {
                // SAFETY: the caller passes a valid, writable word that is accessed only
                // atomically.
                unsafe { store_word::<$atomic>(p, v, false) }
            }
            #[inline]
            unsafe fn st_relaxed_sys(p: *mut Self, v: Self) {
                // SAFETY: as in `st_volatile`.
                unsafe { store_word::<$atomic>(p, v, false) }
            }
            #[inline]
            unsafe fn st_release_sys(p: *mut Self, v: Self) {
                // SAFETY: as in `st_volatile`.
                unsafe { store_word::<$atomic>(p, v, !weak::take_mark(SiteKind::ReleaseStore)) }
            }
            #[inline]
            unsafe fn st_release_gpu(p: *mut Self, v: Self) {
                // SAFETY: as in `st_volatile`.
                unsafe { store_word::<$atomic>(p, v, !weak::take_mark(SiteKind::ReleaseStore)) }
            }
        }
    };
}

global_word!(u32, AtomicU32);
global_word!(u64, AtomicU64);

macro_rules! atomic_word {
    ($t:ty, $atomic:ty) => {
        impl AtomicWord for $t {
            #[inline]
            unsafe fn atomic_add_relaxed_gpu(p: *mut Self, v: Self) -> Self {
                // SAFETY: the caller passes a valid, writable word accessed only atomically.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, false, |_| word.fetch_add(v, RELAXED_RMW))
            }
            #[inline]
            unsafe fn atomic_add_relaxed_sys(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, false, |_| word.fetch_add(v, RELAXED_RMW))
            }
            #[inline]
            unsafe fn atomic_add_acq_rel_sys(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, true, |ordered| word.fetch_add(v, if ordered { AcqRel } else { RELAXED_RMW }))
            }
            #[inline]
            unsafe fn atomic_add_acq_rel_gpu(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, true, |ordered| word.fetch_add(v, if ordered { AcqRel } else { RELAXED_RMW }))
            }
            #[inline]
            unsafe fn atomic_max_relaxed_gpu(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, false, |_| word.fetch_max(v, RELAXED_RMW))
            }
            #[inline]
            unsafe fn atomic_min_relaxed_gpu(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, false, |_| word.fetch_min(v, RELAXED_RMW))
            }
            #[inline]
            unsafe fn atomic_exch_acq_rel_sys(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, true, |ordered| word.swap(v, if ordered { AcqRel } else { RELAXED_RMW }))
            }
            #[inline]
            unsafe fn atomic_exch_relaxed_sys(p: *mut Self, v: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, false, |_| word.swap(v, RELAXED_RMW))
            }
            #[inline]
            unsafe fn atomic_cas_relaxed_sys(p: *mut Self, expected: Self, new: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, false, |_| word.compare_swap(expected, new, false))
            }
            #[inline]
            unsafe fn atomic_cas_acq_rel_sys(p: *mut Self, expected: Self, new: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, true, |ordered| word.compare_swap(expected, new, ordered))
            }
            #[inline]
            unsafe fn atomic_cas_acq_rel_gpu(p: *mut Self, expected: Self, new: Self) -> Self {
                // SAFETY: as in `atomic_add_relaxed_gpu`.
                let word = unsafe { <$atomic>::from_ptr(aligned(p, size_of::<$t>())) };
                rmw(p, true, |ordered| word.compare_swap(expected, new, ordered))
            }
        }
    };
}

atomic_word!(u32, AtomicU32);
atomic_word!(u64, AtomicU64);
