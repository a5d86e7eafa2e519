//! The host twin's weak-memory mode: device code launched in a world (`arch::launch_in`)
//! sees memory ordered only as PTX promises, not as the CPU happens to order it.
//!
//! Without it the twin runs on x86 (TSO), where every store is seen in program order and
//! every fence is redundant: a missing `fence.acq_rel.sys` before a post, a relaxed store
//! that should be a release, or a poll that should be an acquire passes every test and
//! shows up only on a GPU, sometimes. In this mode:
//!
//! - **Stores are late and out of order.** A weak, volatile or relaxed store goes into
//!   its thread's store buffer (coalesced per 8-byte word) and reaches memory later, in
//!   random order with the thread's other buffered stores, when the thread drains it: at
//!   random after each store and each spin, when the buffer is full, after 50 ms of
//!   waiting at a barrier or warp operation, when the thread ends, and whenever an
//!   ordering operation needs it. A thread reads its own buffered stores.
//! - **Barriers order at CTA scope only.** `barrier.sync` moves each arriving thread's
//!   buffered stores to its CTA's buffer, where every thread of the CTA reads them but no
//!   other CTA does, and joins the participants' views (below). A later release by any
//!   thread of the CTA publishes them (PTX's cumulativity through a barrier): so a
//!   missing fence in the thread that posts for the group's workers is caught.
//!   `fence.acq_rel.cta` does the same for its own thread.
//! - **Releases drain.** A release store, an acq_rel read-modify-write, and
//!   `fence.acq_rel` / `fence.sc` at GPU or system scope first write the thread's buffer
//!   and its CTA's buffer to memory; then the release store itself is written at once.
//!   Read-modify-writes work on memory (after the thread's and its CTA's earlier stores
//!   to the same word: coherence).
//! - **Loads may be stale.** Memory keeps the last few values of every word the model
//!   wrote, each with the time (a world-wide counter) it was written. A volatile,
//!   relaxed or weak load (`ld.volatile`, `ld.relaxed`, `ld.global.cv`) may return, at
//!   random, an older value that was overwritten after the thread's *view*: the time up
//!   to which the thread is ordered after every write. An acquire load reads the newest
//!   value and raises the view to that value's time; a fence raises it to the newest time
//!   of the values the thread read before it (the acquire half of the fence + relaxed
//!   poll pattern); a barrier raises every participant's view to the largest of theirs.
//!   Coherence: no thread of a CTA reads a word older than a value its CTA has read or
//!   written there (one floor per word and CTA).
//! - **A kernel boundary orders.** A launch's threads start ordered after every write
//!   made before it (their view is the world's time then), and a launch that overlapped
//!   the one before it on its stream is ordered after that one's writes once its
//!   `griddepcontrol.wait` returns (PTX: the prior grid's writes are then visible).
//! - **Vector accesses are sets of 8-byte accesses** (PTX's memory model says so): the
//!   two halves of a 16-byte load may come from different times.
//!
//! What it does not model, so a GPU (the `message_passing` self-tests, docs/testing.md)
//! remains the proof there:
//! - **Scopes beyond the CTA.** GPU and system scope are one: a launch is not a GPU (a
//!   call kernel and its loop are separate launches on one GPU), so a `.gpu` operation
//!   where `.sys` is needed is not caught. CTA-scope fences do their job for the whole
//!   system on the acquire side.
//! - **Late loads.** A load returns when it is issued, never after a later store of its
//!   thread has become visible (load buffering): a credit returned before the slot's data
//!   was read is not caught. Speculation and out-of-thin-air values are not produced.
//! - **The CTA shares what it knows of a word**: a value one thread of a CTA has read
//!   bounds its CTA's later reads of that word at once, which PTX grants only through a
//!   barrier; and a load that finds a store in its CTA's buffer is treated as ordered
//!   after everything.
//! - **The host's side.** Host threads (host-shim's queue, the tests) use the CPU's
//!   memory directly and see every value once it reached memory. The test harness tells
//!   the model what the host does: [`WeakMemory::host_write`] for buffers it writes,
//!   [`WeakMemory::host_region`] for memory it writes with its own atomics while kernels
//!   run (an acquire of a value found there orders the thread after everything the host
//!   wrote or saw), [`WeakMemory::host_acquired`] when it has seen a kernel's completion.
//!   Other memory that no model write changed counts as written before the world began.
//! - **Proxies, multimem, shared memory.** The twin has no async proxy and no multicast
//!   object; shared memory is accessed with plain loads and stores, ordered by barriers.
//! - **Sub-word accesses** are accesses to their aligned 8-byte word (whose other bytes
//!   are read, never written): every buffer device code touches on the host is an
//!   allocation of whole 16-byte granules.
//!
//! Each launch's choices come from a seed ([`WeakMemory::new`]), one random stream per
//! thread: a seed reproduces the model's choices, not the operating system's schedule, so
//! a failure is reproduced by running its seed again, often, not always, at once.
//! `FERROCCL_WEAK_SEED` runs one seed ([`WeakMemory::seeds`]).
//!
//! Negative controls: a world built with [`WeakMemory::weakening`] performs the
//! operations of the named [`Site`]s without their ordering (a fence does nothing, an
//! acquire load is a relaxed one, a release store a relaxed one, an acq_rel
//! read-modify-write a relaxed one), which the protocol's test must then notice.

mod memory;
mod thread;

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::Arc;

pub(super) use memory::CtaWeak;
use memory::World;
use thread::ThreadWeak;
pub(super) use thread::{Load, Scope};

use super::{Site, SiteKind};

/// A world of weak memory shared by the launches that communicate (the ranks of a test);
/// cheap to clone. See the module doc.
///
/// In a world that weakens a site, memory a launch writes must outlive the launch, not
/// only the item that wrote it: a store whose ordering was removed may land as late as the
/// launch's end. With every ordering kept, a completion's release publishes every store
/// of the items it completes.
#[derive(Clone)]
pub struct WeakMemory {
    world: Arc<World>,
}

/// What the model did, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WeakStats {
    /// Stores that went into a store buffer.
    pub buffered_stores: u64,
    /// Loads that returned an older value than memory held.
    pub stale_loads: u64,
    /// Operations performed without their ordering (weakened sites).
    pub weakened_ops: u64,
}

impl WeakMemory {
    /// A world whose random choices come from `seed`, with every ordering operation kept.
    pub fn new(seed: u64) -> Self {
        Self::weakening(seed, &[])
    }

    /// As [`WeakMemory::new`], with the operations of `sites` performed without their
    /// ordering (negative controls).
    pub fn weakening(seed: u64, sites: &[Site]) -> Self {
        WeakMemory { world: Arc::new(World::new(seed, sites)) }
    }

    /// The seeds a test should run: the one `FERROCCL_WEAK_SEED` names, else `default`.
    ///
    /// # Panics
    /// When `FERROCCL_WEAK_SEED` is set but not a number.
    pub fn seeds(default: std::ops::Range<u64>) -> Vec<u64> {
        match std::env::var("FERROCCL_WEAK_SEED") {
            Ok(seed) => vec![seed.trim().parse().unwrap_or_else(|_| panic!("FERROCCL_WEAK_SEED={seed:?} is not a number"))],
            Err(_) => default.collect(),
        }
    }

    /// Runs `run` in a world of each seed of [`WeakMemory::seeds`]`(seeds)`, with every
    /// ordering kept: each run must pass, having stored through the model.
    ///
    /// # Panics
    /// At the first run that fails (an `Err`, or a panic inside `run`: a device trap),
    /// naming its seed; or that buffered no store (its kernels did not run in the world).
    pub fn every_seed_passes(seeds: std::ops::Range<u64>, run: impl Fn(&WeakMemory) -> Result<(), String>) {
        for seed in Self::seeds(seeds) {
            let memory = WeakMemory::new(seed);
            if let Err(why) = outcome(&memory, &run) {
                panic!("{memory}: {why} (FERROCCL_WEAK_SEED={seed} runs this seed again)");
            }
            assert!(memory.stats().buffered_stores > 0, "{memory}: the run buffered no store: its kernels did not run in this world");
        }
    }

    /// A negative control: runs `run` with `sites` weakened, one seed of
    /// [`WeakMemory::seeds`]`(seeds)` after another, until a run fails (an `Err`, or a
    /// panic inside `run`); returns how many runs that took and why the last one failed.
    ///
    /// # Panics
    /// When every run passed: the weak-memory mode did not notice the missing ordering;
    /// or when the failing run performed no weakened operation (it failed for another
    /// reason).
    pub fn first_failure(seeds: std::ops::Range<u64>, sites: &[Site], run: impl Fn(&WeakMemory) -> Result<(), String>) -> (u64, String) {
        let seeds = Self::seeds(seeds);
        for (runs, &seed) in (1..).zip(&seeds) {
            let memory = WeakMemory::weakening(seed, sites);
            if let Err(why) = outcome(&memory, &run) {
                let stats = memory.stats();
                assert!(stats.weakened_ops > 0, "{memory}: failed without a weakened operation: {why}");
                return (runs, format!("{memory}: {why} ({} operations weakened, {} stale loads)", stats.weakened_ops, stats.stale_loads));
            }
        }
        panic!("weakening {sites:?}: all {} runs passed (seeds {seeds:?}): the weak-memory mode did not notice", seeds.len());
    }

    /// True when the world weakens some site (a negative control): stores may then land
    /// after the completions that should have published them, as late as the launch's end.
    pub fn weakens_any(&self) -> bool {
        Site::ALL.into_iter().any(|site| self.world.weakens(site))
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.world.seed()
    }

    /// What the model has done so far.
    pub fn stats(&self) -> WeakStats {
        let (buffered_stores, stale_loads, weakened_ops) = self.world.counts();
        WeakStats { buffered_stores, stale_loads, weakened_ops }
    }

    /// Copies `src` to `dst` as the host does before it hands the buffer to a kernel, and
    /// records the new values as written now (so a kernel thread not ordered after this
    /// write may read what was there before).
    ///
    /// # Safety
    /// `dst` is valid for `src.len()` writes, and no kernel thread writes those bytes
    /// while this runs.
    pub unsafe fn host_write(&self, dst: *mut u8, src: &[u8]) {
        // SAFETY: forwarded from the caller.
        unsafe { self.world.host_write(dst, src) }
    }

    /// Drops what the model knows of the `len` bytes from `start` (a buffer the host
    /// released), except stores a thread's or a CTA's buffer still holds for them, which
    /// land later: the allocation must then stay alive until the launches end. Returns how
    /// many of its 8-byte words such stores are held for: none where every ordering is kept
    /// and the host released the buffer after the completions of the items that wrote it.
    /// Keeps a long run's records to the buffers in use.
    pub fn forget(&self, start: *const u8, len: usize) -> usize {
        self.world.forget(start as usize, len)
    }

    /// Declares `len` bytes from `start` as memory the host writes with its own atomics
    /// while kernels run (a ring, a queue header): a kernel thread that acquires a value
    /// found there is ordered after everything the host wrote or saw before.
    pub fn host_region(&self, start: *const u8, len: usize) {
        self.world.add_host_region(start as usize, len);
    }

    /// Tells the model the host has seen a kernel's completion (an acquire): what it
    /// writes from now on into a [`WeakMemory::host_region`] orders the threads that
    /// acquire it after everything the kernels wrote before.
    pub fn host_acquired(&self) {
        self.world.host_acquired();
    }

    /// A new launch on this world: its first CTA's world-wide number and its number.
    pub(super) fn start_launch(&self, grid: u32) -> (u64, u64) {
        self.world.start_launch(grid)
    }

    /// The state a thread of a launch works with: thread `thread` of `cta` in launch
    /// `launch`.
    pub(super) fn thread(&self, cta: Arc<CtaWeak>, launch: u64, thread: u32) -> ThreadWeak {
        ThreadWeak::new(Arc::clone(&self.world), cta, launch, thread)
    }

    /// Writes everything `cta` holds to memory (its launch has ended).
    pub(super) fn drain_cta(&self, cta: &CtaWeak) {
        self.world.drain_cta(cta);
    }
}

impl fmt::Display for WeakMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "weak memory, seed {}", self.world.seed())?;
        let weakened: Vec<Site> = Site::ALL.into_iter().filter(|&s| self.world.weakens(s)).collect();
        if !weakened.is_empty() {
            write!(f, ", weakened {weakened:?}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for WeakMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `run`'s outcome in `memory`, a panic inside it being a failure.
fn outcome(memory: &WeakMemory, run: &impl Fn(&WeakMemory) -> Result<(), String>) -> Result<(), String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(memory))) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned());
            Err(format!("panicked: {}", message.unwrap_or_default()))
        }
    }
}

// ---------------------------------------------------------------------------------------
// The calls `host.rs` makes: this thread's state, and the site marks.
// ---------------------------------------------------------------------------------------

thread_local! {
    /// This thread's state, in a weak-memory launch.
    static THREAD: RefCell<Option<ThreadWeak>> = const { RefCell::new(None) };
    /// True while `THREAD` is set (the fast check every access makes).
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// The site named for this thread's next ordering operation.
    static MARKED: Cell<Option<Site>> = const { Cell::new(None) };
}

/// True on a thread of a weak-memory launch.
#[inline]
pub(super) fn active() -> bool {
    ACTIVE.get()
}

fn with<R>(f: impl FnOnce(&mut ThreadWeak) -> R) -> R {
    THREAD.with_borrow_mut(|t| f(t.as_mut().expect("arch: weak-memory state missing")))
}

/// Makes `state` this thread's (a thread of a weak-memory launch starts).
pub(super) fn enter(state: ThreadWeak) {
    THREAD.set(Some(state));
    ACTIVE.set(true);
}

/// This thread leaves its launch: its buffer and its CTA's go to memory (stores become
/// visible eventually, even when no thread of the CTA runs on to drain them).
pub(super) fn leave() {
    if active() {
        with(ThreadWeak::release);
        ACTIVE.set(false);
        THREAD.set(None);
    }
}

/// Clears this thread's state at the end of its part in a launch, before its OS thread
/// runs a thread of another launch: a thread that left through `leave` has none left but
/// perhaps a site named last; one that unwound (it trapped, or its launch was released)
/// drops its buffered stores unwritten (`ThreadWeak`'s drop), as a GPU thread that traps
/// may.
pub(super) fn forget_thread() {
    ACTIVE.set(false);
    THREAD.set(None);
    MARKED.set(None);
}

/// Names this thread's next ordering operation (`arch::site`).
pub(super) fn mark(site: Site) {
    if let Some(before) = MARKED.replace(Some(site)) {
        panic!("arch::site({site:?}): the operation of site {before:?} has not run");
    }
}

/// Takes the site named for this ordering operation of `kind`, checking the kind; true
/// when this thread's world weakens it.
#[inline]
pub(super) fn take_mark(kind: SiteKind) -> bool {
    let Some(site) = MARKED.take() else { return false };
    assert!(site.kind() == kind, "arch::site({site:?}) names a {:?}, but the next ordering operation is a {kind:?}", site.kind());
    active()
        && with(|t| {
            let weakened = t.world().weakens(site);
            if weakened {
                t.world().count_weakened_op();
            }
            weakened
        })
}

/// Addresses below this one are no memory a process maps (Linux's `vm.mmap_min_addr`):
/// an access there is through a null pointer plus an offset.
const NULL_NEIGHBOURHOOD: usize = 1 << 16;

/// Traps (a panic: the twin's device trap) on an access through a null pointer, as a GPU
/// stops a kernel at an illegal address. A negative control's stale load may hand device
/// code a pointer not yet published (0): the model would buffer a store through it and
/// crash the whole test process when it drains it, far from the access.
fn check_address(addr: usize, access: &str) {
    assert!(addr >= NULL_NEIGHBOURHOOD, "arch: {access} of address {addr:#x}: an illegal address (a null pointer plus an offset)");
}

/// A load of `size` bytes at `addr`, inside one aligned 8-byte word.
pub(super) fn load(addr: usize, size: usize, how: Load) -> u64 {
    check_address(addr, "load");
    with(|t| t.load(addr, size, how))
}

/// A store of `size` bytes at `addr`, inside one aligned 8-byte word.
pub(super) fn store(addr: usize, size: usize, v: u64, release: bool) {
    check_address(addr, "store");
    with(|t| t.store(addr, size, v, release))
}

/// A read-modify-write of the word of `size` bytes at `addr`; `op` performs it on memory
/// (its result is returned).
pub(super) fn rmw<R>(addr: usize, size: usize, acq_rel: bool, op: impl FnOnce() -> R) -> R {
    check_address(addr, "read-modify-write");
    with(|t| t.rmw(addr, size, acq_rel, op))
}

/// A fence of `scope`.
pub(super) fn fence(scope: Scope) {
    with(|t| t.fence(scope))
}

/// Arrival at a barrier: the thread's buffer goes to its CTA; returns its view.
pub(super) fn barrier_arrive() -> u64 {
    with(|t| {
        t.hand_to_cta();
        t.view()
    })
}

/// The launch before this thread's on its stream has ended (`griddepcontrol.wait` of a
/// launch that overlapped it): the thread is ordered after every write of that launch,
/// which its end put in memory, and everything before it, as a thread of a launch started
/// after it would be (its view becomes the world's time now).
pub(super) fn after_prior_launch() {
    with(|t| {
        let now = t.world().now();
        t.join_view(now);
    })
}

/// Leaving a barrier whose participants' largest view was `view`.
pub(super) fn barrier_leave(view: u64) {
    with(|t| t.join_view(view))
}

/// A spin of a polling loop.
pub(super) fn spin() {
    with(ThreadWeak::spin)
}

/// While a thread waits at a barrier or in a warp operation: everything it and its CTA
/// hold goes to memory (the threads it waits for may be polling for those stores).
pub(super) fn idle() {
    with(ThreadWeak::release)
}
