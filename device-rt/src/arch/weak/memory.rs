//! The memory of a weak-memory world: every word's recent values and when they were
//! written, and per CTA its floor and the stores its buffer holds (see `mod.rs`).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU8, AtomicU64};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};

use crate::arch::Site;
use crate::arch::imp::{RELAXED_LOAD, RELAXED_STORE};

/// Values kept per word.
const HISTORY: usize = 4;

/// Locks over the words' states.
const SHARDS: usize = 256;

/// The state a world shares among its launches.
pub(super) struct World {
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

pub(super) type Shard = HashMap<usize, WordState, BuildHasherDefault<WordHasher>>;

/// The bit of `site` in a set of sites (a `u32`: every site has one).
fn site_bit(site: Site) -> u32 {
    1 << site as u32
}

const _: () = assert!(Site::ALL.len() <= 32);

impl World {
    /// A world whose random choices come from `seed`, with the operations of `sites`
    /// weakened.
    pub(super) fn new(seed: u64, sites: &[Site]) -> Self {
        World {
            seed,
            weakened: sites.iter().fold(0, |bits, &site| bits | site_bit(site)),
            clock: AtomicU64::new(0),
            host_view: AtomicU64::new(0),
            regions: RwLock::new(Vec::new()),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::default())).collect(),
            ctas: AtomicU64::new(0),
            launches: AtomicU64::new(0),
            buffered_stores: AtomicU64::new(0),
            stale_loads: AtomicU64::new(0),
            weakened_ops: AtomicU64::new(0),
        }
    }

    pub(super) fn seed(&self) -> u64 {
        self.seed
    }

    pub(super) fn weakens(&self, site: Site) -> bool {
        self.weakened & site_bit(site) != 0
    }

    /// The counts of what the model did: buffered stores, stale loads, weakened
    /// operations.
    pub(super) fn counts(&self) -> (u64, u64, u64) {
        (self.buffered_stores.load(Relaxed), self.stale_loads.load(Relaxed), self.weakened_ops.load(Relaxed))
    }

    pub(super) fn count_buffered_store(&self) {
        self.buffered_stores.fetch_add(1, Relaxed);
    }

    pub(super) fn count_stale_load(&self) {
        self.stale_loads.fetch_add(1, Relaxed);
    }

    pub(super) fn count_weakened_op(&self) {
        self.weakened_ops.fetch_add(1, Relaxed);
    }

    /// The last write's time.
    pub(super) fn now(&self) -> u64 {
        self.clock.load(Relaxed)
    }

    /// The next write's time.
    pub(super) fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Relaxed) + 1
    }

    pub(super) fn shard(&self, word: usize) -> MutexGuard<'_, Shard> {
        lock(&self.shards[(word >> 3) % SHARDS])
    }

    /// The time of a value at `word` that no model write made: the host's view inside a
    /// host region, else 0 (there before the world began).
    pub(super) fn unknown_time(&self, word: usize) -> u64 {
        let in_region = read_lock(&self.regions).iter().any(|&(start, end)| (start..end).contains(&word));
        if in_region { self.host_view.load(Relaxed) } else { 0 }
    }

    /// A new launch: its first CTA's world-wide number and its number.
    pub(super) fn start_launch(&self, grid: u32) -> (u64, u64) {
        (self.ctas.fetch_add(u64::from(grid), Relaxed), self.launches.fetch_add(1, Relaxed))
    }

    /// See `WeakMemory::host_write`.
    ///
    /// # Safety
    /// As `WeakMemory::host_write`.
    pub(super) unsafe fn host_write(&self, dst: *mut u8, src: &[u8]) {
        let mut at = 0;
        while at < src.len() {
            let addr = dst as usize + at;
            let word = addr & !7;
            let n = (8 - (addr - word)).min(src.len() - at);
            let mut shard = self.shard(word);
            // SAFETY: `word` is the aligned word holding `addr`, valid memory of this
            // buffer's allocation (`mod.rs`: sub-word accesses).
            let before = unsafe { read_word(word) };
            for (i, &byte) in src[at..at + n].iter().enumerate() {
                // SAFETY: `dst + at + i` is inside `dst`'s `src.len()` writable bytes.
                unsafe { AtomicU8::from_ptr((addr + i) as *mut u8) }.store(byte, Relaxed);
            }
            // SAFETY: as above.
            let after = unsafe { read_word(word) };
            let t = self.tick();
            shard.entry(word).or_default().record(before, after, t, || self.unknown_time(word));
            self.host_view.fetch_max(t, Relaxed);
            at += n;
        }
    }

    /// See `WeakMemory::forget`.
    pub(super) fn forget(&self, start: usize, len: usize) -> usize {
        let mut held = 0;
        for word in (start & !7..start + len).step_by(8) {
            let mut shard = self.shard(word);
            match shard.get(&word) {
                Some(state) if state.in_thread_buffers > 0 || state.ctas.iter().any(|c| c.pending_mask != 0) => held += 1,
                Some(_) => drop(shard.remove(&word)),
                None => {}
            }
        }
        held
    }

    /// See `WeakMemory::host_region`.
    pub(super) fn add_host_region(&self, start: usize, len: usize) {
        write_lock(&self.regions).push((start & !7, start + len));
    }

    /// See `WeakMemory::host_acquired`.
    pub(super) fn host_acquired(&self) {
        self.host_view.fetch_max(self.now(), Relaxed);
    }

    /// Writes everything `cta` holds to memory (its launch has ended).
    pub(super) fn drain_cta(&self, cta: &CtaWeak) {
        let mut rng = splitmix(self.seed ^ cta.id);
        cta.drain(self, &mut rng);
    }
}

/// What the model knows of one 8-byte word.
#[derive(Default)]
pub(super) struct WordState {
    /// The last values written, oldest first, and when (`len` of them; none: memory holds
    /// a value no model write made).
    pub(super) values: [u64; HISTORY],
    pub(super) times: [u64; HISTORY],
    len: usize,
    /// Per CTA that touched the word: its floor and the store its buffer holds.
    ctas: Vec<CtaWord>,
    /// How many threads' own store buffers hold a store to the word.
    pub(super) in_thread_buffers: u32,
}

/// One CTA's part of a word.
#[derive(Clone, Copy)]
pub(super) struct CtaWord {
    cta: u64,
    /// The CTA's threads read no value of the word overwritten at or before this time.
    pub(super) floor: u64,
    /// The bytes the CTA's buffer holds for the word (0: none), and their values.
    pub(super) pending_mask: u8,
    pub(super) pending: u64,
}

impl WordState {
    /// Records that the word changed from `before` to `after` at `t`; when the newest
    /// value known is not `before` (something outside the model wrote it), the history
    /// restarts from `before`, written at `unknown()`.
    pub(super) fn record(&mut self, before: u64, after: u64, t: u64, unknown: impl FnOnce() -> u64) {
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
    pub(super) fn newest(&self, current: u64) -> Option<usize> {
        (self.len > 0 && self.values[self.len - 1] == current).then(|| self.len - 1)
    }

    pub(super) fn cta(&mut self, cta: u64) -> &mut CtaWord {
        let at = match self.ctas.iter().position(|c| c.cta == cta) {
            Some(at) => at,
            None => {
                self.ctas.push(CtaWord { cta, floor: 0, pending_mask: 0, pending: 0 });
                self.ctas.len() - 1
            }
        };
        &mut self.ctas[at]
    }

    pub(super) fn floor(&self, cta: u64) -> u64 {
        self.ctas.iter().find(|c| c.cta == cta).map_or(0, |c| c.floor)
    }
}

/// One CTA's buffer: the words whose stores it holds (in their `WordState`s).
pub(in crate::arch) struct CtaWeak {
    pub(super) id: u64,
    pub(super) words: Mutex<Vec<usize>>,
}

impl CtaWeak {
    /// CTA `id` of its world.
    pub(in crate::arch) fn new(id: u64) -> Self {
        CtaWeak { id, words: Mutex::new(Vec::new()) }
    }

    /// Writes every store the CTA holds to memory, in random order. Holds the CTA's
    /// lock throughout, so a thread that returns from here (or waited for it) knows every
    /// store held when it called is in memory.
    pub(super) fn drain(&self, world: &World, rng: &mut u64) {
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
pub(super) fn write_cta_pending(world: &World, word: usize, state: &mut WordState, cta: u64) {
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
pub(super) fn write_masked(world: &World, word: usize, state: &mut WordState, value: u64, mask: u8) -> u64 {
    // SAFETY: `word` is an aligned word the device code accesses (`mod.rs`: sub-word
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


/// Ordered as the twin's relaxed loads (`RELAXED_LOAD`: acquire under ThreadSanitizer).
///
/// # Safety
/// `word` is an aligned, readable 8-byte word, accessed concurrently only atomically.
pub(super) unsafe fn read_word(word: usize) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { AtomicU64::from_ptr(word as *mut u64) }.load(RELAXED_LOAD)
}

/// Ordered as the twin's relaxed stores (`RELAXED_STORE`: release under ThreadSanitizer).
///
/// # Safety
/// As [`read_word`], and the bytes `mask` of `word` are writable.
unsafe fn write_bytes(word: usize, value: u64, mask: u8) {
    if mask == 0xFF {
        // SAFETY: the caller's contract: the whole word is writable.
        unsafe { AtomicU64::from_ptr(word as *mut u64) }.store(value, RELAXED_STORE);
        return;
    }
    for b in (0..8).filter(|b| mask & (1 << b) != 0) {
        // SAFETY: the caller's contract: byte `b` of the word is writable.
        unsafe { AtomicU8::from_ptr((word + b) as *mut u8) }.store((value >> (8 * b)) as u8, RELAXED_STORE);
    }
}

fn shuffle<T>(items: &mut [T], rng: &mut u64) {
    for i in (1..items.len()).rev() {
        *rng = splitmix(*rng);
        items.swap(i, (*rng % (i as u64 + 1)) as usize);
    }
}

/// SplitMix64's step: a well-mixed 64-bit value of `x`.
pub(super) fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes word addresses (multiplicative; the map's keys are aligned addresses).
#[derive(Default)]
pub(super) struct WordHasher(u64);

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

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write_lock<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}
