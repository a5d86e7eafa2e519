//! One thread's part of a weak-memory world: its store buffer, its view, and the loads,
//! stores, read-modify-writes and fences it performs (see `mod.rs`).

use std::sync::Arc;

use super::memory::{CtaWeak, World, lock, read_word, splitmix, write_cta_pending, write_masked};

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

/// How a load orders.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::arch) enum Load {
    /// `ld.volatile`, `ld.relaxed`, `ld.global.cv`, weak: may return an older value.
    Relaxed,
    /// `ld.acquire`: the newest value; later accesses see what was released before it.
    Acquire,
}

/// A fence's scope.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(in crate::arch) enum Scope {
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
pub(in crate::arch) struct ThreadWeak {
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
    /// Thread `thread` of CTA `cta` of launch `launch` of `world`: its random stream set by
    /// the world's seed and those numbers, its view the world's time now.
    pub(super) fn new(world: Arc<World>, cta: Arc<CtaWeak>, launch: u64, thread: u32) -> Self {
        let rng = splitmix(world.seed() ^ splitmix(launch ^ splitmix(cta.id << 20 ^ u64::from(thread))));
        let view = world.now();
        ThreadWeak { world, cta, rng, view, acquired: 0, buffer: Vec::new() }
    }

    /// The world the thread's launch runs in.
    pub(super) fn world(&self) -> &World {
        &self.world
    }

    /// The thread's view (see `mod.rs`).
    pub(super) fn view(&self) -> u64 {
        self.view
    }

    /// Joins `view` into the thread's (a barrier).
    pub(super) fn join_view(&mut self, view: u64) {
        self.view = self.view.max(view);
    }

    /// Loads `size` bytes at `addr` (within one aligned 8-byte word), as `how` says.
    pub(super) fn load(&mut self, addr: usize, size: usize, how: Load) -> u64 {
        let (word, shift, mask) = split(addr, size);
        let own = self.buffer.iter().find(|p| p.word == word).map_or((0, 0), |p| (p.mask, p.value));
        if own.0 & mask == mask {
            return (own.1 >> shift) & value_mask(size);
        }
        let (world, cta) = (&*self.world, self.cta.id);
        let mut shard = world.shard(word);
        // SAFETY: `word` is the aligned word holding `addr` (`mod.rs`: sub-word accesses).
        let current = unsafe { read_word(word) };
        let (mut value, mut time);
        if let Some(state) = shard.get_mut(&word) {
            (value, time) = match state.newest(current) {
                Some(newest) => {
                    let mut pick = newest;
                    if how == Load::Relaxed {
                        let bound = self.view.max(state.floor(cta));
                        // Value `i` was overwritten at `times[i + 1]`: those after `bound`
                        // may still be seen (a suffix of the history).
                        let older = (0..newest).filter(|&i| state.times[i + 1] > bound).count();
                        if older > 0 && chance(&mut self.rng, STALE_EVERY) {
                            pick = newest - 1 - below(&mut self.rng, older);
                            world.count_stale_load();
                        }
                    }
                    (state.values[pick], state.times[pick])
                }
                None => (current, world.unknown_time(word)),
            };
            let part = state.cta(cta);
            part.floor = part.floor.max(time);
            if part.pending_mask & mask != 0 {
                // A store its CTA holds: ordered after everything (`mod.rs`).
                value = merge(value, part.pending, part.pending_mask);
                time = world.now();
            }
        } else {
            (value, time) = (current, world.unknown_time(word));
            if time > 0 {
                let part = shard.entry(word).or_default().cta(cta);
                part.floor = part.floor.max(time);
            }
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
    pub(super) fn store(&mut self, addr: usize, size: usize, v: u64, release: bool) {
        let (word, shift, mask) = split(addr, size);
        let value = (v & value_mask(size)) << shift;
        if release {
            self.release();
            self.write(word, value, mask, false);
            return;
        }
        self.world.count_buffered_store();
        match self.buffer.iter_mut().find(|p| p.word == word) {
            Some(p) => {
                p.value = merge(p.value, value, mask);
                p.mask |= mask;
            }
            None => {
                self.world.shard(word).entry(word).or_default().in_thread_buffers += 1;
                self.buffer.push(Pending { word, value, mask });
            }
        }
        if self.buffer.len() > BUFFER_WORDS || chance(&mut self.rng, DRAIN_ONE_EVERY_STORE) {
            let at = below(&mut self.rng, self.buffer.len());
            self.drain_one(at);
        }
    }

    /// Writes bytes `mask` of `value` to `word` in memory, after its CTA's older store to
    /// it; the CTA's floor follows. `from_buffer`: the store leaves the thread's buffer.
    fn write(&self, word: usize, value: u64, mask: u8, from_buffer: bool) {
        let (world, cta) = (&*self.world, self.cta.id);
        let mut shard = world.shard(word);
        let state = shard.entry(word).or_default();
        state.in_thread_buffers -= u32::from(from_buffer);
        write_cta_pending(world, word, state, cta);
        let t = write_masked(world, word, state, value, mask);
        let part = state.cta(cta);
        part.floor = part.floor.max(t);
    }

    /// A read-modify-write of the `size`-byte word at `addr`: `op` performs it on memory
    /// (its result is returned). acq_rel: a release before, an acquire of the old value
    /// after.
    pub(super) fn rmw<R>(&mut self, addr: usize, size: usize, acq_rel: bool, op: impl FnOnce() -> R) -> R {
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
        // SAFETY: `word` is the aligned word holding `addr` (`mod.rs`: sub-word accesses).
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

    /// A fence of `scope`: the release half drains (to the CTA for `Scope::Cta`, else to
    /// memory), the acquire half raises the view to the values read before it; `SeqCst`
    /// raises it to now.
    pub(super) fn fence(&mut self, scope: Scope) {
        match scope {
            Scope::Cta => self.hand_to_cta(),
            Scope::System | Scope::SeqCst => self.release(),
        }
        self.view = self.view.max(self.acquired);
        if scope == Scope::SeqCst {
            self.view = self.view.max(self.world.now());
        }
    }

    /// Writes the thread's buffer and its CTA's to memory.
    pub(super) fn release(&mut self) {
        self.drain_own();
        self.cta.drain(&self.world, &mut self.rng);
    }

    /// Writes the thread's buffer to memory, in random order.
    pub(super) fn drain_own(&mut self) {
        while !self.buffer.is_empty() {
            let at = below(&mut self.rng, self.buffer.len());
            self.drain_one(at);
        }
    }

    /// Writes buffered word `at` to memory.
    fn drain_one(&mut self, at: usize) {
        let p = self.buffer.swap_remove(at);
        self.write(p.word, p.value, p.mask, true);
    }

    /// Moves the thread's buffer to its CTA's (a barrier, `fence.cta`).
    pub(super) fn hand_to_cta(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let mut words = lock(&self.cta.words);
        for p in self.buffer.drain(..) {
            let mut shard = self.world.shard(p.word);
            let state = shard.entry(p.word).or_default();
            state.in_thread_buffers -= 1;
            let part = state.cta(self.cta.id);
            if part.pending_mask == 0 {
                words.push(p.word);
            }
            part.pending = merge(part.pending, p.value, p.mask);
            part.pending_mask |= p.mask;
        }
    }

    /// A spin of a polling loop: drains at random, so that every store becomes visible
    /// eventually.
    pub(super) fn spin(&mut self) {
        if chance(&mut self.rng, DRAIN_OWN_EVERY_SPIN) {
            self.drain_own();
        }
        if chance(&mut self.rng, DRAIN_CTA_EVERY_SPIN) {
            self.cta.drain(&self.world, &mut self.rng);
        }
    }
}

impl Drop for ThreadWeak {
    /// A thread that trapped leaves its buffered stores unwritten, as a GPU may: they no
    /// longer count as held (`World::forget`).
    fn drop(&mut self) {
        for p in self.buffer.drain(..) {
            if let Some(state) = self.world.shard(p.word).get_mut(&p.word) {
                state.in_thread_buffers -= 1;
            }
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

/// The aligned word holding `addr`, the bit shift of `addr` in it, and the byte mask of
/// `size` bytes there.
fn split(addr: usize, size: usize) -> (usize, u32, u8) {
    let word = addr & !7;
    let offset = addr - word;
    debug_assert!(offset + size <= 8);
    (word, 8 * offset as u32, (((1u16 << size) - 1) << offset) as u8)
}

/// The low `size` bytes.
fn value_mask(size: usize) -> u64 {
    if size == 8 { u64::MAX } else { (1 << (8 * size)) - 1 }
}

/// `base` with the bytes `mask` taken from `over`.
fn merge(base: u64, over: u64, mask: u8) -> u64 {
    let bits = (0..8).filter(|b| mask & (1 << b) != 0).fold(0u64, |m, b| m | 0xFF << (8 * b));
    (base & !bits) | (over & bits)
}
