//! The host twin's weak-memory mode: device code run by `arch::launch_in` a world sees memory
//! ordered only as PTX promises, not as the CPU happens to order it.
//!
//! Without it the twin runs on x86 (TSO), where every store is seen in program order and
//! every fence is redundant: a missing `fence.acq_rel.sys` before a post, a relaxed store
//! that should be a release, or a poll that should be an acquire passes every test and
//! shows up only on a GPU, sometimes. In this mode:
//!
//! - **Stores are late and out of order.** A weak, volatile or relaxed store goes into
//!   its thread's store buffer (coalesced per 8-byte word) and reaches memory later, in
//!   random order with the thread's other buffered stores, when the thread drains it: at
//!   random after each store and each spin, when the buffer is full, and whenever an
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
//! - **Vector accesses are sets of 8-byte accesses** (PTX's memory model says so): the
//!   two halves of a 16-byte load may come from different times.
//!
//! What it does not model, so a GPU (issue 15's litmus test) remains the proof there:
//! - **Scopes beyond the CTA.** GPU and system scope are one: a launch is not a GPU (a
//!   post kernel and its loop are separate launches on one GPU), so a `.gpu` operation
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

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU8, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use super::{Site, SiteKind};

/// Values kept per word.
const HISTORY: usize = 4;

/// Locks over the words' states.
const SHARDS: usize = 256;

/// Words a thread's store buffer holds before it drains one.
const BUFFER_WORDS: usize = 32;

/// One in this many stores drains a random buffered word.
const DRAIN_ONE_EVERY_STORE: u64 = 16;

/// One in this many spins drains the thread's whole buffer.
const DRAIN_OWN_EVERY_SPIN: u64 = 4;

/// One in this many spins drains the thread's CTA's buffer.
const DRAIN_CTA_EVERY_SPIN: u64 = 16;

/// One in this many loads that may return an older value does.
const STALE_EVERY: u64 = 2;

/// A world of weak memory shared by the launches that communicate (the ranks of a test);
/// cheap to clone. See the module doc.
///
/// Memory a launch writes must outlive the launch, not only the item that wrote it: a
/// store whose ordering was removed (a negative control) may land as late as the
/// launch's end.
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
        Self::build(seed, &[])
    }

    /// As [`WeakMemory::new`], with the operations of `sites` performed without their
    /// ordering (negative controls).
    pub fn weakening(seed: u64, sites: &[Site]) -> Self {
        Self::build(seed, sites)
    }

    fn build(seed: u64, sites: &[Site]) -> Self {
        let weakened = sites.iter().fold(0u32, |bits, &site| bits | site_bit(site));
        WeakMemory {
            world: Arc::new(World {
                seed,
                weakened,
                clock: AtomicU64::new(0),
                host_view: AtomicU64::new(0),
                regions: RwLock::new(Vec::new()),
                shards: (0..SHARDS).map(|_| Mutex::new(HashMap::default())).collect(),
                ctas: AtomicU64::new(0),
                launches: AtomicU64::new(0),
                buffered_stores: AtomicU64::new(0),
                stale_loads: AtomicU64::new(0),
                weakened_ops: AtomicU64::new(0),
            }),
        }
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

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.world.seed
    }

    /// What the model has done so far.
    pub fn stats(&self) -> WeakStats {
        WeakStats {
            buffered_stores: self.world.buffered_stores.load(Relaxed),
            stale_loads: self.world.stale_loads.load(Relaxed),
            weakened_ops: self.world.weakened_ops.load(Relaxed),
        }
    }

    /// Copies `src` to `dst` as the host does before it hands the buffer to a kernel, and
    /// records the new values as written now (so a kernel thread not ordered after this
    /// write may read what was there before).
    ///
    /// # Safety
    /// `dst` is valid for `src.len()` writes, and no kernel thread writes those bytes
    /// while this runs.
    pub unsafe fn host_write(&self, dst: *mut u8, src: &[u8]) {
        let world = &self.world;
        let mut at = 0;
        while at < src.len() {
            let addr = dst as usize + at;
            let word = addr & !7;
            let first = addr - word;
            let n = (8 - first).min(src.len() - at);
            let mut shard = world.shard(word);
            // SAFETY: `word` is the aligned word holding `addr`, valid memory of this
            // buffer's allocation (module doc: sub-word accesses).
            let before = unsafe { read_word(word) };
            for (i, &byte) in src[at..at + n].iter().enumerate() {
                // SAFETY: `dst + at + i` is inside `dst`'s `src.len()` writable bytes.
                unsafe { AtomicU8::from_ptr((addr + i) as *mut u8) }.store(byte, Relaxed);
            }
            // SAFETY: as above.
            let after = unsafe { read_word(word) };
            let t = world.tick();
            shard.entry(word).or_default().record(before, after, t, || world.unknown_time(word));
            world.host_view.fetch_max(t, Relaxed);
            at += n;
        }
    }

    /// Drops what the model knows of the `len` bytes from `start` (a buffer the host
    /// released), except stores a CTA still holds for them, which land later: the
    /// allocation must stay alive until the launches end. Keeps a long run's records to
    /// the buffers in use.
    pub fn forget(&self, start: *const u8, len: usize) {
        let end = start as usize + len;
        for word in (start as usize & !7..end).step_by(8) {
            let mut shard = self.world.shard(word);
            if shard.get(&word).is_some_and(|state| state.ctas.iter().all(|c| c.pending_mask == 0)) {
                shard.remove(&word);
            }
        }
    }

    /// Declares `len` bytes from `start` as memory the host writes with its own atomics
    /// while kernels run (a ring, a queue header): a kernel thread that acquires a value
    /// found there is ordered after everything the host wrote or saw before.
    pub fn host_region(&self, start: *const u8, len: usize) {
        let start = start as usize;
        write_lock(&self.world.regions).push((start & !7, start + len));
    }

    /// Tells the model the host has seen a kernel's completion (an acquire): what it
    /// writes from now on into a [`WeakMemory::host_region`] orders the threads that
    /// acquire it after everything the kernels wrote before.
    pub fn host_acquired(&self) {
        let now = self.world.clock.load(Relaxed);
        self.world.host_view.fetch_max(now, Relaxed);
    }

    /// A new launch on this world: its first CTA's world-wide number and its number.
    pub(super) fn start_launch(&self, grid: u32) -> (u64, u64) {
        (self.world.ctas.fetch_add(u64::from(grid), Relaxed), self.world.launches.fetch_add(1, Relaxed))
    }

    /// The state a thread of a launch works with, its random stream set by the seed, the
    /// launch, its CTA and its index.
    pub(super) fn thread(&self, cta: Arc<CtaWeak>, launch: u64, thread: u32) -> ThreadWeak {
        let world = Arc::clone(&self.world);
        let rng = splitmix(world.seed ^ splitmix(launch ^ splitmix(cta.id << 20 ^ u64::from(thread))));
        let view = world.clock.load(Relaxed);
        ThreadWeak { world, cta, rng, view, acquired: 0, buffer: Vec::new() }
    }

    /// Writes everything `cta` holds to memory (its launch has ended).
    pub(super) fn drain_cta(&self, cta: &CtaWeak) {
        let mut rng = splitmix(self.world.seed ^ cta.id);
        cta.drain(&self.world, &mut rng);
    }
}

impl fmt::Display for WeakMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "weak memory, seed {}", self.world.seed)?;
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

fn site_bit(site: Site) -> u32 {
    1 << site as u32
}

/// The state a world shares among its launches.
struct World {
    seed: u64,
    /// Bits of the weakened sites ([`site_bit`]).
    weakened: u32,
    /// Times of the writes: the last one handed out.
    clock: AtomicU64,
    /// The time up to which the host is ordered after every write (its writes and the
    /// completions it has seen).
    host_view: AtomicU64,
    /// Memory the host writes with its own atomics while kernels run: `[start, end)`.
    regions: RwLock<Vec<(usize, usize)>>,
    shards: Box<[Mutex<Shard>]>,
    /// CTA numbers handed out.
    ctas: AtomicU64,
    /// Launches started.
    launches: AtomicU64,
    buffered_stores: AtomicU64,
    stale_loads: AtomicU64,
    weakened_ops: AtomicU64,
}

type Shard = HashMap<usize, WordState, BuildHasherDefault<WordHasher>>;

impl World {
    fn weakens(&self, site: Site) -> bool {
        self.weakened & site_bit(site) != 0
    }

    /// The next write's time.
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Relaxed) + 1
    }

    fn shard(&self, word: usize) -> MutexGuard<'_, Shard> {
        lock(&self.shards[(word >> 3) % SHARDS])
    }

    /// The time of a value at `word` that no model write made: the host's view inside a
    /// host region, else 0 (there before the world began).
    fn unknown_time(&self, word: usize) -> u64 {
        let in_region = read_lock(&self.regions).iter().any(|&(start, end)| (start..end).contains(&word));
        if in_region { self.host_view.load(Relaxed) } else { 0 }
    }
}

/// What the model knows of one 8-byte word.
#[derive(Default)]
struct WordState {
    /// The last values written, oldest first, and when (`len` of them; none: memory holds
    /// a value no model write made).
    values: [u64; HISTORY],
    times: [u64; HISTORY],
    len: usize,
    /// Per CTA that touched the word: its floor and the store its buffer holds.
    ctas: Vec<CtaWord>,
}

/// One CTA's part of a word.
#[derive(Clone, Copy)]
struct CtaWord {
    cta: u64,
    /// The CTA's threads read no value of the word overwritten at or before this time.
    floor: u64,
    /// The bytes the CTA's buffer holds for the word (0: none), and their values.
    pending_mask: u8,
    pending: u64,
}

impl WordState {
    /// Records that the word changed from `before` to `after` at `t`; when the newest
    /// value known is not `before` (something outside the model wrote it), the history
    /// restarts from `before`, written at `unknown()`.
    fn record(&mut self, before: u64, after: u64, t: u64, unknown: impl FnOnce() -> u64) {
        if self.len == 0 || self.values[self.len - 1] != before {
            self.values[0] = before;
            self.times[0] = unknown();
            self.len = 1;
        }
        if self.len == HISTORY {
            self.values.copy_within(1.., 0);
            self.times.copy_within(1.., 0);
            self.len -= 1;
        }
        self.values[self.len] = after;
        self.times[self.len] = t;
        self.len += 1;
    }

    /// The newest value and its time, if memory (`current`) still holds it.
    fn newest(&self, current: u64) -> Option<usize> {
        (self.len > 0 && self.values[self.len - 1] == current).then(|| self.len - 1)
    }

    fn cta(&mut self, cta: u64) -> &mut CtaWord {
        let at = match self.ctas.iter().position(|c| c.cta == cta) {
            Some(at) => at,
            None => {
                self.ctas.push(CtaWord { cta, floor: 0, pending_mask: 0, pending: 0 });
                self.ctas.len() - 1
            }
        };
        &mut self.ctas[at]
    }

    fn floor(&self, cta: u64) -> u64 {
        self.ctas.iter().find(|c| c.cta == cta).map_or(0, |c| c.floor)
    }
}

/// One CTA's buffer: the words whose stores it holds (in their `WordState`s).
pub(super) struct CtaWeak {
    id: u64,
    words: Mutex<Vec<usize>>,
}

impl CtaWeak {
    /// CTA `id` of its world.
    pub(super) fn new(id: u64) -> Self {
        CtaWeak { id, words: Mutex::new(Vec::new()) }
    }

    /// Writes every store the CTA holds to memory, in random order. Holds the CTA's
    /// lock throughout, so a thread that returns from here (or waited for it) knows every
    /// store held when it called is in memory.
    fn drain(&self, world: &World, rng: &mut u64) {
        let mut words = lock(&self.words);
        shuffle(&mut words, rng);
        for word in words.drain(..) {
            let mut shard = world.shard(word);
            if let Some(state) = shard.get_mut(&word) {
                write_cta_pending(world, word, state, self.id);
            }
        }
    }
}

/// Writes CTA `cta`'s buffered bytes of `word` (if any) to memory.
fn write_cta_pending(world: &World, word: usize, state: &mut WordState, cta: u64) {
    let part = state.cta(cta);
    let (mask, value) = (part.pending_mask, part.pending);
    if mask == 0 {
        return;
    }
    part.pending_mask = 0;
    let t = write_masked(world, word, state, value, mask);
    let part = state.cta(cta);
    part.floor = part.floor.max(t);
}

/// Writes the bytes `mask` of `value` to `word` and records the change; returns its time.
fn write_masked(world: &World, word: usize, state: &mut WordState, value: u64, mask: u8) -> u64 {
    // SAFETY: `word` is an aligned word the device code accesses (module doc: sub-word
    // accesses), written only under its shard's lock.
    let before = unsafe { read_word(word) };
    // SAFETY: as above; only the bytes of `mask` are written.
    unsafe { write_bytes(word, value, mask) };
    // SAFETY: as above.
    let after = unsafe { read_word(word) };
    let t = world.tick();
    state.record(before, after, t, || world.unknown_time(word));
    t
}

/// How a load orders.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Load {
    /// `ld.volatile`, `ld.relaxed`, `ld.global.cv`, weak: may return an older value.
    Relaxed,
    /// `ld.acquire`: the newest value; later accesses see what was released before it.
    Acquire,
}

/// A fence's scope.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Scope {
    Cta,
    /// GPU or system scope (not told apart).
    System,
    /// `fence.sc.sys`.
    SeqCst,
}

/// A store the thread holds: bytes `mask` of `value` for `word`.
struct Pending {
    word: usize,
    value: u64,
    mask: u8,
}

/// One thread's state in a weak-memory launch.
pub(super) struct ThreadWeak {
    world: Arc<World>,
    cta: Arc<CtaWeak>,
    rng: u64,
    /// The thread reads no value overwritten at or before this time.
    view: u64,
    /// The newest time of the values read since the last fence (what a fence acquires).
    acquired: u64,
    buffer: Vec<Pending>,
}

impl ThreadWeak {
    /// Loads `size` bytes at `addr` (within one aligned 8-byte word), as `how` says.
    fn load(&mut self, addr: usize, size: usize, how: Load) -> u64 {
        let (word, shift, mask) = split(addr, size);
        let own = self.buffer.iter().find(|p| p.word == word).map_or((0, 0), |p| (p.mask, p.value));
        if own.0 & mask == mask {
            return (own.1 >> shift) & value_mask(size);
        }
        let (world, cta) = (&*self.world, self.cta.id);
        let mut shard = world.shard(word);
        // SAFETY: `word` is the aligned word holding `addr` (module doc: sub-word accesses).
        let current = unsafe { read_word(word) };
        let (mut value, mut time) = (current, world.unknown_time(word));
        if let Some(state) = shard.get_mut(&word) {
            if let Some(newest) = state.newest(current) {
                let mut pick = newest;
                if how == Load::Relaxed {
                    let bound = self.view.max(state.floor(cta));
                    // Value `i` was overwritten at `times[i + 1]`: those after `bound` may
                    // still be seen (a suffix of the history).
                    let older = (0..newest).filter(|&i| state.times[i + 1] > bound).count();
                    if older > 0 && chance(&mut self.rng, STALE_EVERY) {
                        pick = newest - 1 - below(&mut self.rng, older);
                        world.stale_loads.fetch_add(1, Relaxed);
                    }
                }
                (value, time) = (state.values[pick], state.times[pick]);
            }
            let part = state.cta(cta);
            part.floor = part.floor.max(time);
            if part.pending_mask & mask != 0 {
                // A store its CTA holds: ordered after everything (module doc).
                value = merge(value, part.pending, part.pending_mask);
                time = world.clock.load(Relaxed);
            }
        } else if time > 0 {
            let part = shard.entry(word).or_default().cta(cta);
            part.floor = part.floor.max(time);
        }
        drop(shard);
        value = merge(value, own.1, own.0);
        self.acquired = self.acquired.max(time);
        if how == Load::Acquire {
            self.view = self.view.max(time);
        }
        (value >> shift) & value_mask(size)
    }

    /// Stores `size` bytes of `v` at `addr` (within one aligned word): a release writes
    /// memory after draining; anything else goes into the store buffer.
    fn store(&mut self, addr: usize, size: usize, v: u64, release: bool) {
        let (word, shift, mask) = split(addr, size);
        let value = (v & value_mask(size)) << shift;
        if release {
            self.release();
            self.write(word, value, mask);
            return;
        }
        self.world.buffered_stores.fetch_add(1, Relaxed);
        match self.buffer.iter_mut().find(|p| p.word == word) {
            Some(p) => {
                p.value = merge(p.value, value, mask);
                p.mask |= mask;
            }
            None => self.buffer.push(Pending { word, value, mask }),
        }
        if self.buffer.len() > BUFFER_WORDS || chance(&mut self.rng, DRAIN_ONE_EVERY_STORE) {
            let at = below(&mut self.rng, self.buffer.len());
            self.drain_one(at);
        }
    }

    /// Writes bytes `mask` of `value` to `word` in memory, after its CTA's older store to
    /// it; the CTA's floor follows.
    fn write(&self, word: usize, value: u64, mask: u8) {
        let (world, cta) = (&*self.world, self.cta.id);
        let mut shard = world.shard(word);
        let state = shard.entry(word).or_default();
        write_cta_pending(world, word, state, cta);
        let t = write_masked(world, word, state, value, mask);
        let part = state.cta(cta);
        part.floor = part.floor.max(t);
    }

    /// A read-modify-write of the `size`-byte word at `addr`: `op` performs it on memory
    /// (its result is returned). acq_rel: a release before, an acquire of the old value
    /// after.
    fn rmw<R>(&mut self, addr: usize, size: usize, acq_rel: bool, op: impl FnOnce() -> R) -> R {
        let (word, _, _) = split(addr, size);
        if acq_rel {
            self.release();
        }
        if let Some(at) = self.buffer.iter().position(|p| p.word == word) {
            self.drain_one(at);
        }
        let (world, cta) = (&*self.world, self.cta.id);
        let mut shard = world.shard(word);
        let state = shard.entry(word).or_default();
        write_cta_pending(world, word, state, cta);
        // SAFETY: `word` is the aligned word holding `addr` (module doc: sub-word accesses).
        let before = unsafe { read_word(word) };
        let time = match state.newest(before) {
            Some(newest) => state.times[newest],
            None => world.unknown_time(word),
        };
        let old = op();
        // SAFETY: as above.
        let after = unsafe { read_word(word) };
        let mut floor = time;
        if after != before {
            floor = world.tick();
            state.record(before, after, floor, || world.unknown_time(word));
        }
        let part = state.cta(cta);
        part.floor = part.floor.max(floor);
        drop(shard);
        self.acquired = self.acquired.max(time);
        if acq_rel {
            self.view = self.view.max(time);
        }
        old
    }

    fn fence(&mut self, scope: Scope) {
        match scope {
            Scope::Cta => self.hand_to_cta(),
            Scope::System | Scope::SeqCst => self.release(),
        }
        self.view = self.view.max(self.acquired);
        if scope == Scope::SeqCst {
            self.view = self.view.max(self.world.clock.load(Relaxed));
        }
    }

    /// Writes the thread's buffer and its CTA's to memory.
    fn release(&mut self) {
        self.drain_own();
        self.cta.drain(&self.world, &mut self.rng);
    }

    fn drain_own(&mut self) {
        while !self.buffer.is_empty() {
            let at = below(&mut self.rng, self.buffer.len());
            self.drain_one(at);
        }
    }

    /// Writes buffered word `at` to memory.
    fn drain_one(&mut self, at: usize) {
        let p = self.buffer.swap_remove(at);
        self.write(p.word, p.value, p.mask);
    }

    /// Moves the thread's buffer to its CTA's (a barrier, `fence.cta`).
    fn hand_to_cta(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let mut words = lock(&self.cta.words);
        for p in self.buffer.drain(..) {
            let mut shard = self.world.shard(p.word);
            let part = shard.entry(p.word).or_default().cta(self.cta.id);
            if part.pending_mask == 0 {
                words.push(p.word);
            }
            part.pending = merge(part.pending, p.value, p.mask);
            part.pending_mask |= p.mask;
        }
    }

    /// A spin of a polling loop: drains at random, so that every store becomes visible
    /// eventually.
    fn spin(&mut self) {
        if chance(&mut self.rng, DRAIN_OWN_EVERY_SPIN) {
            self.drain_own();
        }
        if chance(&mut self.rng, DRAIN_CTA_EVERY_SPIN) {
            self.cta.drain(&self.world, &mut self.rng);
        }
    }
}

/// True one time in `one_in`, drawn from `rng`.
fn chance(rng: &mut u64, one_in: u64) -> bool {
    *rng = splitmix(*rng);
    rng.is_multiple_of(one_in)
}

/// A number below `n`, drawn from `rng`.
fn below(rng: &mut u64, n: usize) -> usize {
    *rng = splitmix(*rng);
    (*rng % n as u64) as usize
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
            let weakened = t.world.weakens(site);
            if weakened {
                t.world.weakened_ops.fetch_add(1, Relaxed);
            }
            weakened
        })
}

/// A load of `size` bytes at `addr`, inside one aligned 8-byte word.
pub(super) fn load(addr: usize, size: usize, how: Load) -> u64 {
    with(|t| t.load(addr, size, how))
}

/// A store of `size` bytes at `addr`, inside one aligned 8-byte word.
pub(super) fn store(addr: usize, size: usize, v: u64, release: bool) {
    with(|t| t.store(addr, size, v, release))
}

/// A read-modify-write of the word of `size` bytes at `addr`; `op` performs it on memory
/// (its result is returned).
pub(super) fn rmw<R>(addr: usize, size: usize, acq_rel: bool, op: impl FnOnce() -> R) -> R {
    with(|t| t.rmw(addr, size, acq_rel, op))
}

pub(super) fn fence(scope: Scope) {
    with(|t| t.fence(scope))
}

/// Arrival at a barrier: the thread's buffer goes to its CTA; returns its view.
pub(super) fn barrier_arrive() -> u64 {
    with(|t| {
        t.hand_to_cta();
        t.view
    })
}

/// Leaving a barrier whose participants' largest view was `view`.
pub(super) fn barrier_leave(view: u64) {
    with(|t| t.view = t.view.max(view))
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

// ---------------------------------------------------------------------------------------
// Helpers.
// ---------------------------------------------------------------------------------------

/// The aligned word holding `addr`, the bit shift of `addr` in it, and the byte mask of
/// `size` bytes there.
fn split(addr: usize, size: usize) -> (usize, u32, u8) {
    let word = addr & !7;
    let offset = addr - word;
    debug_assert!(offset + size <= 8);
    (word, 8 * offset as u32, (((1u16 << size) - 1) << offset) as u8)
}

fn value_mask(size: usize) -> u64 {
    if size == 8 { u64::MAX } else { (1 << (8 * size)) - 1 }
}

/// `base` with the bytes `mask` taken from `over`.
fn merge(base: u64, over: u64, mask: u8) -> u64 {
    let bits = (0..8).filter(|b| mask & (1 << b) != 0).fold(0u64, |m, b| m | 0xFF << (8 * b));
    (base & !bits) | (over & bits)
}

/// # Safety
/// `word` is an aligned, readable 8-byte word, accessed concurrently only atomically.
unsafe fn read_word(word: usize) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { AtomicU64::from_ptr(word as *mut u64) }.load(Relaxed)
}

/// # Safety
/// As [`read_word`], and the bytes `mask` of `word` are writable.
unsafe fn write_bytes(word: usize, value: u64, mask: u8) {
    if mask == 0xFF {
        // SAFETY: the caller's contract: the whole word is writable.
        unsafe { AtomicU64::from_ptr(word as *mut u64) }.store(value, Relaxed);
        return;
    }
    for b in (0..8).filter(|b| mask & (1 << b) != 0) {
        // SAFETY: the caller's contract: byte `b` of the word is writable.
        unsafe { AtomicU8::from_ptr((word + b) as *mut u8) }.store((value >> (8 * b)) as u8, Relaxed);
    }
}

fn shuffle<T>(items: &mut [T], rng: &mut u64) {
    for i in (1..items.len()).rev() {
        *rng = splitmix(*rng);
        items.swap(i, (*rng % (i as u64 + 1)) as usize);
    }
}

/// SplitMix64's step: a well-mixed 64-bit value of `x`.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes word addresses (multiplicative; the map's keys are aligned addresses).
#[derive(Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}
