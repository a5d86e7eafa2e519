//! The host twin of `arch`: launches, indices, shared memory, barriers, warp operations,
//! memory operations, atomics, panics and half-precision arithmetic, each checked against
//! what the GPU gives.
#![cfg(feature = "host-emu")]

use std::collections::HashSet;
use std::panic;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64};

use device_rt::arch::{self, AtomicWord, FULL_MASK};
use half::{bf16, f16};

fn zeroed32(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

fn zeroed64(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

/// The message of a panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

#[test]
fn indices_smem_and_cvta_over_a_grid_of_3x96() {
    const GRID: u32 = 3;
    const BLOCK: u32 = 96;
    const WORDS: usize = 10;
    let out = zeroed32((GRID * BLOCK) as usize * WORDS);
    arch::launch(GRID, BLOCK, 40, || {
        let smem = arch::dyn_smem();
        if arch::thread_idx() == 0 {
            // SAFETY: the window holds 40 bytes; the barrier below orders this store before
            // every read.
            unsafe { smem.cast::<u32>().write(100 + arch::block_idx()) };
        }
        arch::barrier_sync_all();
        // SAFETY: as above.
        let seen = unsafe { smem.cast::<u32>().read() };
        let words = [
            arch::thread_idx(),
            arch::block_idx(),
            arch::block_dim(),
            arch::grid_dim(),
            arch::lane_id(),
            arch::warp_idx(),
            arch::dynamic_smem_size(),
            seen,
            (smem as usize % 16) as u32 + arch::cvta_to_shared(smem) + arch::sm_id(),
            arch::cvta_to_shared(smem.wrapping_add(24)) + u32::from(arch::cvta_to_global(smem) == smem as u64),
        ];
        let slot = (arch::block_idx() * arch::block_dim() + arch::thread_idx()) as usize * WORDS;
        for (i, w) in words.into_iter().enumerate() {
            out[slot + i].store(w, Relaxed);
        }
    });
    for b in 0..GRID {
        for t in 0..BLOCK {
            let slot = (b * BLOCK + t) as usize * WORDS;
            let got: Vec<u32> = out[slot..slot + WORDS].iter().map(|w| w.load(Relaxed)).collect();
            assert_eq!(got, [t, b, BLOCK, GRID, t % 32, t / 32, 40, 100 + b, 0, 25], "CTA {b} thread {t}");
        }
    }
}

#[test]
fn blocks_smaller_than_a_warp_run_barriers() {
    let arrivals = AtomicU32::new(0);
    let late = AtomicU32::new(0);
    arch::launch(4, 3, 0, || {
        arrivals.fetch_add(1, Relaxed);
        arch::barrier_sync_all();
        // Every thread of this CTA has arrived, so at least 3 arrivals are counted.
        if arrivals.load(Relaxed) < 3 {
            late.fetch_add(1, Relaxed);
        }
        arch::barrier_sync_all();
    });
    assert_eq!(arrivals.load(Relaxed), 12);
    assert_eq!(late.load(Relaxed), 0);
}

#[test]
fn named_barriers_keep_two_halves_of_a_cta_apart() {
    const HALF: u32 = 128;
    const ROUNDS: [u32; 2] = [40, 70];
    let mismatches = AtomicU32::new(0);
    let rounds_done = zeroed32(2 * HALF as usize);
    arch::launch(1, 2 * HALF, 2 * HALF * 4, || {
        let half = arch::thread_idx() / HALF;
        let local = arch::thread_idx() % HALF;
        let barrier_id = 1 + half;
        // SAFETY: each half owns HALF words of the window.
        let words = unsafe { arch::dyn_smem().cast::<u32>().add((half * HALF) as usize) };
        for round in 0..ROUNDS[half as usize] {
            // SAFETY: this thread's own word; the barriers order it against the reads.
            unsafe { words.add(local as usize).write(round * 1000 + local) };
            arch::barrier_sync(barrier_id, HALF);
            // SAFETY: every word of this half was written before the barrier.
            let sum: u32 = (0..HALF as usize).map(|i| unsafe { words.add(i).read() }).sum();
            if sum != HALF * round * 1000 + HALF * (HALF - 1) / 2 {
                mismatches.fetch_add(1, Relaxed);
            }
            arch::barrier_sync(barrier_id, HALF);
            rounds_done[arch::thread_idx() as usize].fetch_add(1, Relaxed);
        }
        arch::barrier_sync_all();
    });
    assert_eq!(mismatches.load(Relaxed), 0);
    for (t, done) in rounds_done.iter().enumerate() {
        assert_eq!(done.load(Relaxed), ROUNDS[t / HALF as usize], "thread {t}");
    }
}

#[test]
fn barrier_sync_all_is_reusable_at_once() {
    const BLOCK: u32 = 128;
    const ROUNDS: u32 = 100;
    let mismatches = AtomicU32::new(0);
    arch::launch(1, BLOCK, BLOCK * 4, || {
        let t = arch::thread_idx();
        let words = arch::dyn_smem().cast::<u32>();
        let next = (t + 1) % BLOCK;
        for round in 0..ROUNDS {
            // SAFETY: this thread's own word; the barriers order it against the reads.
            unsafe { words.add(t as usize).write(round * BLOCK + t) };
            arch::barrier_sync_all();
            // SAFETY: written before the barrier by thread `next`.
            if unsafe { words.add(next as usize).read() } != round * BLOCK + next {
                mismatches.fetch_add(1, Relaxed);
            }
            arch::barrier_sync_all();
        }
    });
    assert_eq!(mismatches.load(Relaxed), 0);
}

#[test]
fn votes_and_shuffles_over_two_warps() {
    const BLOCK: u32 = 64;
    const ROUNDS: u32 = 5;
    const WORDS: usize = 7;
    let out = zeroed32((BLOCK * ROUNDS) as usize * WORDS);
    arch::launch(1, BLOCK, 0, || {
        let t = arch::thread_idx();
        let lane = arch::lane_id();
        for round in 0..ROUNDS {
            let pred = (lane + round + arch::warp_idx()).is_multiple_of(3);
            let words = [
                arch::vote_ballot(FULL_MASK, pred),
                u32::from(arch::vote_all(FULL_MASK, lane < 32)),
                u32::from(arch::vote_all(FULL_MASK, pred)),
                u32::from(arch::vote_any(FULL_MASK, pred)),
                u32::from(arch::vote_any(FULL_MASK, t == 40)),
                arch::shfl_idx(FULL_MASK, t * 100 + round, (lane * 7 + round) % 32),
                arch::shfl_xor(FULL_MASK, t * 100 + round, 1 << round),
            ];
            let slot = (round * BLOCK + t) as usize * WORDS;
            for (i, w) in words.into_iter().enumerate() {
                out[slot + i].store(w, Relaxed);
            }
        }
    });
    for round in 0..ROUNDS {
        for t in 0..BLOCK {
            let (warp, lane) = (t / 32, t % 32);
            let ballot = (0..32).filter(|l| (l + round + warp).is_multiple_of(3)).fold(0u32, |b, l| b | 1 << l);
            let expected = [
                ballot,
                1,
                0,
                1,
                u32::from(warp == 1),
                (warp * 32 + (lane * 7 + round) % 32) * 100 + round,
                (warp * 32 + (lane ^ (1 << round))) * 100 + round,
            ];
            let slot = (round * BLOCK + t) as usize * WORDS;
            let got: Vec<u32> = out[slot..slot + WORDS].iter().map(|w| w.load(Relaxed)).collect();
            assert_eq!(got, expected, "round {round} thread {t}");
        }
    }
}

#[test]
fn partial_masks_and_partial_warps_are_refused() {
    let partial_mask = panic::catch_unwind(|| arch::launch(1, 32, 0, || {
        arch::vote_ballot(0xffff, true);
    }));
    let message = panic_message(&*partial_mask.expect_err("a partial mask must panic"));
    assert!(message.contains("FULL_MASK"), "{message}");
    let partial_warp = panic::catch_unwind(|| arch::launch(1, 16, 0, || {
        arch::shfl_idx(FULL_MASK, 1, 0);
    }));
    let message = panic_message(&*partial_warp.expect_err("a partial warp must panic"));
    assert!(message.contains("need 32"), "{message}");
}

#[test]
fn atomics_from_8x64_threads() {
    const GRID: u32 = 8;
    const BLOCK: u32 = 64;
    const THREADS: u32 = GRID * BLOCK;
    const SENTINEL: u32 = 1_000_000;
    let words32 = zeroed32(4);
    let words64 = zeroed64(3);
    words32[1].store(u32::MAX, Relaxed);
    words32[3].store(SENTINEL, Relaxed);
    let tickets = zeroed32(THREADS as usize);
    let exchanged = zeroed32(THREADS as usize);
    arch::launch(GRID, BLOCK, 0, || {
        let id = arch::block_idx() * arch::block_dim() + arch::thread_idx();
        let [add32, min32, max32, exch32] = [0, 1, 2, 3].map(|i| words32[i].as_ptr());
        let [add64, max64, cas64] = [0, 1, 2].map(|i| words64[i].as_ptr());
        // SAFETY: every pointer is an aligned word that this launch accesses only atomically.
        unsafe {
            tickets[id as usize].store(u32::atomic_add_relaxed_gpu(add32, 1), Relaxed);
            u64::atomic_add_relaxed_sys(add64, 2);
            u64::atomic_add_acq_rel_sys(add64, u64::from(id) << 32);
            u32::atomic_min_relaxed_gpu(min32, id + 5);
            // Unsigned: 0x8000_0000 is the largest value, not a negative one.
            u32::atomic_max_relaxed_gpu(max32, if id == 7 { 0x8000_0000 } else { id });
            u64::atomic_max_relaxed_gpu(max64, u64::from(id) * 3);
            loop {
                let old = arch::ld_relaxed_sys_global(cas64);
                if u64::atomic_cas_acq_rel_sys(cas64, old, old + u64::from(id) + 1) == old {
                    break;
                }
                arch::spin_pause();
            }
            exchanged[id as usize].store(u32::atomic_exch_acq_rel_sys(exch32, id), Relaxed);
        }
    });
    let n = u64::from(THREADS);
    assert_eq!(words32[0].load(Relaxed), THREADS);
    assert_eq!(words64[0].load(Relaxed), 2 * n + ((n * (n - 1) / 2) << 32));
    assert_eq!(words32[1].load(Relaxed), 5);
    assert_eq!(words32[2].load(Relaxed), 0x8000_0000);
    assert_eq!(words64[1].load(Relaxed), (n - 1) * 3);
    assert_eq!(words64[2].load(Relaxed), n * (n + 1) / 2);
    // Each add returned a different previous value.
    let tickets: HashSet<u32> = tickets.iter().map(|t| t.load(Relaxed)).collect();
    assert_eq!(tickets, (0..THREADS).collect());
    // The exchanges form a chain: the values handed back plus the last one stored are
    // the sentinel and every id, each once.
    let mut seen: Vec<u32> = exchanged.iter().map(|w| w.load(Relaxed)).collect();
    seen.push(words32[3].load(Relaxed));
    seen.sort_unstable();
    let expected: Vec<u32> = (0..THREADS).chain([SENTINEL]).collect();
    assert_eq!(seen, expected);
}

/// 16 words of message, 16-byte aligned for the v2b64 accesses.
#[repr(align(16))]
struct Message([AtomicU64; 16]);

fn message_word(i: usize, round: u64) -> u64 {
    (round << 32) ^ (i as u64 * 0x9e37_79b9) ^ 0x0123_4567_89ab_cdef
}

/// Publishes `ROUNDS` messages from CTA 0 to CTA 1 and back-pressures on an ack, with the
/// given publish and observe steps; returns the data words the consumer saw wrong.
fn pass_messages(publish: fn(*mut u64, u64), observe: fn(*const u64) -> u64) -> u32 {
    const ROUNDS: u64 = 20_000;
    let message = Message(std::array::from_fn(|_| AtomicU64::new(0)));
    let flag = AtomicU64::new(0);
    let ack = AtomicU64::new(0);
    let mismatches = AtomicU32::new(0);
    arch::launch(2, 1, 0, || {
        let base = arch::cvta_to_global(message.0[0].as_ptr());
        let word_addr = |i: usize| base + 8 * i as u64;
        for round in 1..=ROUNDS {
            // SAFETY: every address is an aligned word of `message`, `flag` or `ack`, which
            // this launch accesses only through `arch`.
            unsafe {
                if arch::block_idx() == 0 {
                    while observe(ack.as_ptr()) != round - 1 {
                        arch::spin_pause();
                    }
                    for i in (0..8).step_by(2) {
                        arch::st_global_v2b64(word_addr(i), [message_word(i, round), message_word(i + 1, round)]);
                    }
                    for i in 8..12 {
                        arch::st_global_b64(word_addr(i), message_word(i, round));
                    }
                    let bytes = message_word(12, round).to_le_bytes();
                    for (j, b) in bytes.into_iter().enumerate() {
                        arch::st_global_b8(word_addr(12) + j as u64, b);
                    }
                    let word = message_word(13, round);
                    for j in 0..4 {
                        arch::st_global_b16(word_addr(13) + 2 * j, (word >> (16 * j)) as u16);
                    }
                    for i in 14..16 {
                        let word = message_word(i, round);
                        arch::st_global_b32(word_addr(i), word as u32);
                        arch::st_global_b32(word_addr(i) + 4, (word >> 32) as u32);
                    }
                    publish(flag.as_ptr(), round);
                } else {
                    while observe(flag.as_ptr()) != round {
                        arch::spin_pause();
                    }
                    let mut seen = [0u64; 16];
                    for i in (0..16).step_by(2) {
                        [seen[i], seen[i + 1]] = arch::ld_volatile_global_v2b64(word_addr(i));
                    }
                    seen[15] = arch::ld_volatile_global_b64(word_addr(15));
                    seen[14] = u64::from(arch::ld_volatile_global_b32(word_addr(14)))
                        | u64::from(arch::ld_volatile_global_b16(word_addr(14) + 4)) << 32
                        | u64::from(arch::ld_volatile_global_b8(word_addr(14) + 6)) << 48
                        | u64::from(arch::ld_volatile_global_b8(word_addr(14) + 7)) << 56;
                    let wrong = (0..16).filter(|&i| seen[i] != message_word(i, round)).count();
                    mismatches.fetch_add(wrong as u32, Relaxed);
                    publish(ack.as_ptr(), round);
                }
            }
        }
    });
    mismatches.load(Relaxed)
}

#[test]
fn message_passing_with_release_and_acquire() {
    // SAFETY: (both closures) `pass_messages` calls them with aligned words of its own, which
    // every thread accesses only through `arch`.
    let mismatches = pass_messages(|p, v| unsafe { arch::st_release_sys_global(p, v) }, |p| unsafe { arch::ld_acquire_sys_global(p) });
    assert_eq!(mismatches, 0);
}

#[test]
fn message_passing_with_fences() {
    let publish = |p: *mut u64, v: u64| {
        arch::fence_acq_rel_sys();
        // SAFETY: `pass_messages` calls this with an aligned word of its own, which every
        // thread accesses only through `arch`.
        unsafe { arch::st_relaxed_sys_global(p, v) }
    };
    let observe = |p: *const u64| {
        // SAFETY: as for `publish`.
        let v = unsafe { arch::ld_volatile_global(p) };
        arch::fence_acq_rel_gpu();
        v
    };
    assert_eq!(pass_messages(publish, observe), 0);
}

#[test]
fn a_trap_ends_the_launch_while_others_wait() {
    let never_set = AtomicU32::new(0);
    let outcome = panic::catch_unwind(|| {
        arch::launch(2, 64, 0, || {
            if arch::block_idx() == 0 {
                if arch::thread_idx() == 5 {
                    arch::nanosleep(1_000_000);
                    arch::trap();
                }
                arch::barrier_sync_all();
            } else if arch::warp_idx() == 0 || arch::lane_id() == 31 {
                // SAFETY: an aligned word accessed only through `arch`.
                while unsafe { arch::ld_volatile_global(never_set.as_ptr()) } == 0 {
                    arch::spin_pause();
                }
            } else {
                arch::vote_any(FULL_MASK, true);
            }
        });
    });
    // The launch returned at all: the trap ended the other block's waits (on a word never
    // set) and the barrier its own block's threads were in.
    let message = panic_message(&*outcome.expect_err("a trap must make launch panic"));
    assert_eq!(message, "device trap");
}

/// A shared word that one thread of each warp stores while the others poll it: every
/// poller sees the store, and each CTA sees only its own word (under ThreadSanitizer,
/// `tests/tsan.sh`, the stores and polls are atomics, not a race).
#[test]
fn shared_words_are_stored_while_others_poll() {
    let seen = zeroed64(2 * 64);
    arch::launch(2, 64, 16, || {
        let word = arch::dyn_smem().cast::<u64>();
        let value = u64::from(arch::block_idx()) + 7;
        if arch::lane_id() == 0 {
            arch::nanosleep(1_000);
            // SAFETY: an aligned word of this CTA's window (zeroed at launch), accessed only
            // through `arch`'s shared-word functions; lane 0 of each warp stores while the
            // others poll.
            unsafe { arch::st_volatile_shared_b64(word, value) };
        }
        loop {
            // SAFETY: as above.
            let v = unsafe { arch::ld_volatile_shared_b64(word) };
            if v != 0 {
                seen[(arch::block_idx() * 64 + arch::thread_idx()) as usize].store(v, Relaxed);
                break;
            }
            arch::spin_pause();
        }
    });
    for (i, v) in seen.iter().enumerate() {
        assert_eq!(v.load(Relaxed), (i / 64) as u64 + 7, "thread {} of CTA {}", i % 64, i / 64);
    }
}

/// A shared word outside the CTA's dynamic shared memory, or misaligned, is refused.
#[test]
fn shared_words_outside_the_window_are_refused() {
    let past_end = panic::catch_unwind(|| {
        arch::launch(1, 32, 16, || {
            // SAFETY: deliberately past the 16-byte window: the twin must panic before
            // any access.
            unsafe { arch::st_volatile_shared_b64(arch::dyn_smem().wrapping_add(16).cast(), 1) };
        })
    });
    let message = panic_message(&*past_end.expect_err("a word past the window must panic"));
    assert!(message.contains("not in this CTA's dynamic shared memory"), "{message}");
    let misaligned = panic::catch_unwind(|| {
        arch::launch(1, 32, 16, || {
            // SAFETY: deliberately misaligned: the twin must panic before any access.
            unsafe { arch::ld_volatile_shared_b64(arch::dyn_smem().wrapping_add(4).cast()) };
        })
    });
    let message = panic_message(&*misaligned.expect_err("a misaligned word must panic"));
    assert!(message.contains("not aligned"), "{message}");
}

#[test]
fn bad_barrier_arguments_are_refused() {
    let bad_id = panic::catch_unwind(|| arch::launch(1, 64, 0, || arch::barrier_sync(16, 64)));
    let message = panic_message(&*bad_id.expect_err("barrier id 16 must panic"));
    assert!(message.contains("not in 0..16"), "{message}");
    let bad_count = panic::catch_unwind(|| arch::launch(1, 64, 0, || arch::barrier_sync(1, 48)));
    let message = panic_message(&*bad_count.expect_err("a count of 48 must panic"));
    assert!(message.contains("multiple of 32"), "{message}");
}

// ---------------------------------------------------------------------------------------
// Half precision: the twin's f32-then-round results against one rounding to nearest even
// of the f64 result (exact for every f16 operation and for bf16 products; a bf16 sum
// rounded to f64 first still rounds correctly, f64 having more than 2p + 2 bits). The
// rounding is done here by searching a table of every finite value, not by
// `half::from_f64`, which misrounds some ties broken only by low bits (0x432f1003 as f32
// is just above the tie 175.0625 and must round up to 175.125).
// ---------------------------------------------------------------------------------------

/// Every non-negative finite value of a 16-bit format in bit order, then the value at
/// which rounding overflows to infinity (the infinity pattern's place).
fn value_table(to_f64: fn(u16) -> f64, infinity: u16, overflow: f64) -> Vec<f64> {
    (0..infinity).map(to_f64).chain([overflow]).collect()
}

fn f16_table() -> &'static [f64] {
    static TABLE: OnceLock<Vec<f64>> = OnceLock::new();
    TABLE.get_or_init(|| value_table(|h| f16::from_bits(h).to_f64(), 0x7c00, 65536.0))
}

fn bf16_table() -> &'static [f64] {
    static TABLE: OnceLock<Vec<f64>> = OnceLock::new();
    TABLE.get_or_init(|| value_table(|h| bf16::from_bits(h).to_f64(), 0x7f80, 2f64.powi(128)))
}

/// `x` (not NaN) rounded to nearest even in the format whose `table` is given.
fn round_nearest_even(x: f64, table: &[f64]) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    let magnitude = x.abs();
    let above = table.partition_point(|&v| v <= magnitude);
    let bits = if above == table.len() {
        above - 1
    } else {
        let below = above - 1;
        let (to_below, to_above) = (magnitude - table[below], table[above] - magnitude);
        if to_below < to_above || (to_below == to_above && below % 2 == 0) { below } else { above }
    };
    sign | bits as u16
}

/// A sweep of 16-bit patterns: specials (±0, ±inf, NaNs, extremes, subnormals) and every
/// 251st pattern.
fn half_patterns() -> Vec<u16> {
    let specials = [0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7f80, 0xff80, 0x7fc0, 0x7bff, 0xfbff, 0x7f7f, 0x0001, 0x8001, 0x03ff, 0x0080, 0x3c00, 0xbc00, 0x3f80, 0x3c01];
    specials.into_iter().chain((0..=u16::MAX).step_by(251)).collect()
}

fn same_value(a: u16, b: u16, to_f64: fn(u16) -> f64) -> bool {
    a == b || (to_f64(a).is_nan() && to_f64(b).is_nan())
}

/// PTX's `min`/`max`: the non-NaN operand when one is NaN, and -0.0 below +0.0.
fn reference_select(a: u16, b: u16, to_f64: fn(u16) -> f64, smaller: bool) -> Option<u16> {
    let (x, y) = (to_f64(a), to_f64(b));
    match (x.is_nan(), y.is_nan()) {
        (true, true) => None,
        (true, false) => Some(b),
        (false, true) => Some(a),
        (false, false) => {
            let key = |v: f64, bits: u16| (v, bits & 0x8000 == 0);
            let a_first = key(x, a).partial_cmp(&key(y, b)) == Some(std::cmp::Ordering::Less);
            Some(if a_first == smaller { a } else { b })
        }
    }
}

struct HalfFormat {
    name: &'static str,
    to_f64: fn(u16) -> f64,
    round_f64: fn(f64) -> u16,
    add: fn(u16, u16) -> u16,
    mul: fn(u16, u16) -> u16,
    min: fn(u16, u16) -> u16,
    max: fn(u16, u16) -> u16,
    add_x2: fn(u32, u32) -> u32,
    mul_x2: fn(u32, u32) -> u32,
    min_x2: fn(u32, u32) -> u32,
    max_x2: fn(u32, u32) -> u32,
}

const F16: HalfFormat = HalfFormat {
    name: "f16",
    to_f64: |h| f16::from_bits(h).to_f64(),
    round_f64: |v| if v.is_nan() { 0x7e00 } else { round_nearest_even(v, f16_table()) },
    add: arch::add_f16,
    mul: arch::mul_f16,
    min: arch::min_f16,
    max: arch::max_f16,
    add_x2: arch::add_f16x2,
    mul_x2: arch::mul_f16x2,
    min_x2: arch::min_f16x2,
    max_x2: arch::max_f16x2,
};

const BF16: HalfFormat = HalfFormat {
    name: "bf16",
    to_f64: |h| bf16::from_bits(h).to_f64(),
    round_f64: |v| if v.is_nan() { 0x7fc0 } else { round_nearest_even(v, bf16_table()) },
    add: arch::add_bf16,
    mul: arch::mul_bf16,
    min: arch::min_bf16,
    max: arch::max_bf16,
    add_x2: arch::add_bf16x2,
    mul_x2: arch::mul_bf16x2,
    min_x2: arch::min_bf16x2,
    max_x2: arch::max_bf16x2,
};

fn check_half_format(format: &HalfFormat) {
    let patterns = half_patterns();
    let to_f64 = format.to_f64;
    for &a in &patterns {
        for &b in &patterns {
            let add = (format.round_f64)(to_f64(a) + to_f64(b));
            let mul = (format.round_f64)(to_f64(a) * to_f64(b));
            assert!(same_value((format.add)(a, b), add, to_f64), "{} add {a:#06x} {b:#06x}", format.name);
            assert!(same_value((format.mul)(a, b), mul, to_f64), "{} mul {a:#06x} {b:#06x}", format.name);
            for (op, smaller, name) in [(format.min, true, "min"), (format.max, false, "max")] {
                let got = op(a, b);
                match reference_select(a, b, to_f64, smaller) {
                    Some(expected) => assert_eq!(got, expected, "{} {name} {a:#06x} {b:#06x}", format.name),
                    None => assert!(to_f64(got).is_nan(), "{} {name} {a:#06x} {b:#06x}", format.name),
                }
            }
        }
    }
    // Packed pairs: element 0 in the low half, each lane as the scalar operation.
    let pairs = [(format.add, format.add_x2), (format.mul, format.mul_x2), (format.min, format.min_x2), (format.max, format.max_x2)];
    for w in patterns.windows(4) {
        let (x, y) = (u32::from(w[0]) | u32::from(w[1]) << 16, u32::from(w[2]) | u32::from(w[3]) << 16);
        for (scalar, packed) in pairs {
            let expected = u32::from(scalar(w[0], w[2])) | u32::from(scalar(w[1], w[3])) << 16;
            assert_eq!(packed(x, y), expected, "{} packed {x:#010x} {y:#010x}", format.name);
        }
    }
}

#[test]
fn f16_arithmetic_rounds_once_to_nearest_even() {
    check_half_format(&F16);
    // Ties round to even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
    assert_eq!(arch::add_f16(0x3c00, 0x1000), 0x3c00);
    assert_eq!(arch::add_f16(0x3c01, 0x1000), 0x3c02);
    assert_eq!(arch::min_f16(0x8000, 0x0000), 0x8000);
    assert_eq!(arch::max_f16(0x8000, 0x0000), 0x0000);
    assert_eq!(arch::min_f16(0x7e00, 0x3c00), 0x3c00);
    assert_eq!(arch::max_f16(0x3c00, 0xfe00), 0x3c00);
}

#[test]
fn bf16_arithmetic_rounds_once_to_nearest_even() {
    check_half_format(&BF16);
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
    assert_eq!(arch::add_bf16(0x3f80, 0x3b80), 0x3f80);
    assert_eq!(arch::add_bf16(0x3f81, 0x3b80), 0x3f82);
    assert_eq!(arch::min_bf16(0x7fc0, 0xbf80), 0xbf80);
}

#[test]
fn half_conversions() {
    for h in 0..=u16::MAX {
        let f16_value = f16::from_bits(h).to_f64();
        let bf16_value = bf16::from_bits(h).to_f64();
        let (from_f16, from_bf16) = (arch::f16_to_f32(h), arch::bf16_to_f32(h));
        assert!(f64::from(from_f16) == f16_value || (from_f16.is_nan() && f16_value.is_nan()), "{h:#06x}");
        assert!(f64::from(from_bf16) == bf16_value || (from_bf16.is_nan() && bf16_value.is_nan()), "{h:#06x}");
    }
    for bits in (0..=u32::MAX).step_by(65_521).chain([0x3f80_1000, 0x3f80_3000, 0x3f80_8000, 0x3f81_8000, 0x432f_1003, 0x7f80_0001, 0x477f_f000, 0x477f_efff]) {
        let f = f32::from_bits(bits);
        let to_f16 = arch::f32_to_f16(f);
        let to_bf16 = arch::f32_to_bf16(f);
        assert!(same_value(to_f16, (F16.round_f64)(f64::from(f)), F16.to_f64), "{bits:#010x} to f16");
        assert!(same_value(to_bf16, (BF16.round_f64)(f64::from(f)), BF16.to_f64), "{bits:#010x} to bf16");
    }
    // Ties to even: 1 + 2^-11 → 1.0 in f16; 1 + 2^-8 → 1.0 and 1 + 3·2^-8 → 1 + 2^-6 in bf16.
    assert_eq!(arch::f32_to_f16(1.0 + f32::powi(2.0, -11)), 0x3c00);
    assert_eq!(arch::f32_to_bf16(1.0 + f32::powi(2.0, -8)), 0x3f80);
    assert_eq!(arch::f32_to_bf16(1.0 + 3.0 * f32::powi(2.0, -8)), 0x3f82);
}
