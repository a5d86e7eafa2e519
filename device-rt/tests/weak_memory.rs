//! The host twin's weak-memory mode (`arch/weak/`): litmus tests of the model itself,
//! each ordering it must honour and each reordering it must be able to show. The
//! protocols' negative controls are with their tests (`prims_host.rs`, and the work loop's
//! and collectives' in `tests/tests/`).
#![cfg(feature = "host-emu")]

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use device_rt::arch::{self, Site, WeakMemory};

/// How the writer of a message publishes it and how the reader takes it.
#[derive(Clone, Copy, Debug)]
struct Pattern {
    /// The writer fences between the data and the flag.
    writer_fence: bool,
    /// The flag is a release store (else relaxed).
    release: bool,
    /// The reader polls with acquire loads (else relaxed).
    acquire: bool,
    /// The reader fences between the flag and the data.
    reader_fence: bool,
}

const ROUNDS: u64 = 300;

/// Message passing between CTA 0 and CTA 1, `ROUNDS` times: the writer stores round `i`
/// into a data word and publishes `i` in a flag as `pattern` says; the reader waits for the
/// flag, reads the data and acknowledges (release/acquire, so the next round starts after
/// it). Returns how many rounds the reader read older data.
fn stale_rounds(memory: &WeakMemory, pattern: Pattern) -> u64 {
    let words: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
    let stale = AtomicU64::new(0);
    let (data, flag, ack) = (words[0].as_ptr() as usize, words[1].as_ptr() as usize, words[2].as_ptr() as usize);
    arch::launch_in(Some(memory), 2, 32, 0, || {
        if arch::thread_idx() != 0 {
            return;
        }
        let (data, flag, ack) = (data as *mut u64, flag as *mut u64, ack as *mut u64);
        // SAFETY: the three words live until `launch_in` returns and are accessed only
        // through `arch`.
        unsafe {
            for i in 1..=ROUNDS {
                if arch::block_idx() == 0 {
                    arch::st_volatile_global(data, i);
                    if pattern.writer_fence {
                        arch::fence_acq_rel_sys();
                    }
                    if pattern.release {
                        arch::st_release_sys_global(flag, i);
                    } else {
                        arch::st_relaxed_sys_global(flag, i);
                    }
                    while arch::ld_acquire_sys_global(ack) < i {
                        arch::spin_pause();
                    }
                } else {
                    let poll = || if pattern.acquire { arch::ld_acquire_sys_global(flag) } else { arch::ld_volatile_global(flag) };
                    while poll() < i {
                        arch::spin_pause();
                    }
                    if pattern.reader_fence {
                        arch::fence_acq_rel_sys();
                    }
                    if arch::ld_volatile_global(data) < i {
                        stale.fetch_add(1, Relaxed);
                    }
                    arch::st_release_sys_global(ack, i);
                }
            }
        }
    });
    stale.load(Relaxed)
}

fn no_stale_rounds(pattern: Pattern) {
    WeakMemory::every_seed_passes(0..4, |memory| match stale_rounds(memory, pattern) {
        0 => Ok(()),
        n => Err(format!("{pattern:?}: {n} of {ROUNDS} rounds read older data")),
    });
}

fn some_stale_rounds(pattern: Pattern) {
    let seen: u64 = WeakMemory::seeds(0..4).into_iter().map(|seed| stale_rounds(&WeakMemory::new(seed), pattern)).sum();
    assert!(seen > 0, "{pattern:?}: no round read older data: the model hides this reordering");
}

const FULL: Pattern = Pattern { writer_fence: false, release: true, acquire: true, reader_fence: false };

#[test]
fn release_and_acquire_order_a_message() {
    no_stale_rounds(FULL);
}

#[test]
fn fences_around_relaxed_flags_order_a_message() {
    no_stale_rounds(Pattern { writer_fence: true, release: false, acquire: false, reader_fence: true });
}

#[test]
fn a_relaxed_flag_without_a_fence_may_pass_its_data() {
    some_stale_rounds(Pattern { release: false, ..FULL });
}

#[test]
fn a_relaxed_poll_without_a_fence_may_read_older_data() {
    some_stale_rounds(Pattern { acquire: false, ..FULL });
}

/// The primitives' pattern: the workers (warp 1) store, the CTA meets at a barrier, and
/// thread 0 alone fences and posts. Returns the rounds whose data the reader (CTA 1)
/// found older.
fn stale_after_barrier(memory: &WeakMemory, fence: bool) -> u64 {
    let words: Vec<AtomicU64> = (0..3 + 32).map(|_| AtomicU64::new(0)).collect();
    let stale = AtomicU64::new(0);
    let base = words.as_ptr() as usize;
    arch::launch_in(Some(memory), 2, 64, 0, || {
        let (flag, ack, data) = (base as *mut u64, (base + 8) as *mut u64, (base + 24) as *mut u64);
        let t = arch::thread_idx();
        // SAFETY: the words live until `launch_in` returns and are accessed only through
        // `arch`; `t - 32 < 32` indexes the data words.
        unsafe {
            for i in 1..=ROUNDS / 4 {
                if arch::block_idx() == 0 {
                    if t >= 32 {
                        arch::st_volatile_global(data.add(t as usize - 32), i);
                    }
                    arch::barrier_sync_all();
                    if t == 0 {
                        if fence {
                            arch::fence_acq_rel_sys();
                        }
                        arch::st_relaxed_sys_global(flag, i);
                        while arch::ld_acquire_sys_global(ack) < i {
                            arch::spin_pause();
                        }
                    }
                    arch::barrier_sync_all();
                } else if t == 0 {
                    while arch::ld_acquire_sys_global(flag) < i {
                        arch::spin_pause();
                    }
                    let old = (0..32).filter(|&w| arch::ld_volatile_global(data.add(w)) < i).count();
                    stale.fetch_add(old as u64, Relaxed);
                    arch::st_release_sys_global(ack, i);
                }
            }
        }
    });
    stale.load(Relaxed)
}

#[test]
fn a_barrier_then_a_fence_publishes_every_participants_stores() {
    WeakMemory::every_seed_passes(0..4, |memory| match stale_after_barrier(memory, true) {
        0 => Ok(()),
        n => Err(format!("{n} words read older")),
    });
}

#[test]
fn a_barrier_alone_publishes_nothing_beyond_the_cta() {
    let seen: u64 = WeakMemory::seeds(0..4).into_iter().map(|seed| stale_after_barrier(&WeakMemory::new(seed), false)).sum();
    assert!(seen > 0, "without the fence no reader found older data: barriers publish too much");
}

/// One writer stores increasing values into a word while 31 readers of another CTA
/// read it: no reader ever sees it go back (coherence), and the writer always reads its
/// own latest store.
#[test]
fn a_word_never_goes_back_for_any_thread() {
    WeakMemory::every_seed_passes(0..4, |memory| {
        let word = AtomicU64::new(0);
        let p = word.as_ptr() as usize;
        let backwards = AtomicU64::new(0);
        arch::launch_in(Some(memory), 2, 32, 0, || {
            let p = p as *mut u64;
            // SAFETY: `word` lives until `launch_in` returns and is accessed only through
            // `arch`.
            unsafe {
                if arch::block_idx() == 0 {
                    if arch::thread_idx() == 0 {
                        for i in 1..=2000 {
                            arch::st_volatile_global(p, i);
                            if arch::ld_volatile_global(p) != i {
                                backwards.fetch_add(1, Relaxed);
                            }
                        }
                    }
                    return;
                }
                let mut last = 0;
                while last < 2000 {
                    let now = arch::ld_volatile_global(p);
                    if now < last {
                        backwards.fetch_add(1, Relaxed);
                    }
                    last = last.max(now);
                    arch::spin_pause();
                }
            }
        });
        match backwards.load(Relaxed) {
            0 => Ok(()),
            n => Err(format!("{n} reads went back")),
        }
    });
}

#[test]
fn a_site_names_an_operation_of_its_kind() {
    let wrong_kind = std::panic::catch_unwind(|| {
        arch::launch(1, 32, 0, || {
            if arch::thread_idx() != 0 {
                return;
            }
            let word = 0u64;
            arch::site(Site::PrimsSendFence);
            // SAFETY: a live, aligned word, read only.
            unsafe { arch::ld_acquire_sys_global(&raw const word) };
        })
    });
    let message = wrong_kind.expect_err("a fence's site before an acquire load must panic");
    let message = message.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("PrimsSendFence") && message.contains("AcquireLoad"), "{message}");
    let unused = std::panic::catch_unwind(|| {
        arch::launch(1, 32, 0, || {
            if arch::thread_idx() != 0 {
                return;
            }
            arch::site(Site::RingComplete);
            arch::site(Site::RingComplete);
        })
    });
    assert!(unused.is_err(), "a site whose operation never ran must be noticed");
}

/// A store through a null pointer plus an offset (what a negative control's stale load of
/// a pointer not yet published leads to) is a device trap at the store, which the launch
/// resumes: the model must not buffer it and crash the process when it drains it.
#[test]
fn a_store_through_a_null_pointer_traps_at_the_store() {
    let trapped = std::panic::catch_unwind(|| {
        arch::launch_in(Some(&WeakMemory::new(0)), 1, 32, 0, || {
            if arch::thread_idx() != 0 {
                return;
            }
            // SAFETY: the weak twin traps this store before it touches memory (what the
            // test checks); memory at 0xac0 is never accessed.
            unsafe { arch::st_volatile_global(0xac0 as *mut u64, 1) };
        })
    });
    let message = trapped.expect_err("a store through a null pointer must trap");
    let message = message.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("0xac0") && message.contains("illegal address"), "{message}");
}

/// Stores still in a thread's own buffer count as held (`WeakMemory::forget`): a buffer
/// the host released under them would be written after it was freed. Once the launch
/// ended, nothing is held and memory has every value.
#[test]
fn stores_in_a_threads_buffer_count_as_held() {
    let memory = WeakMemory::new(0);
    let words: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
    let (start, len) = (words.as_ptr() as usize, words.len() * 8);
    let held_while_running = AtomicU64::new(0);
    arch::launch_in(Some(&memory), 1, 32, 0, || {
        if arch::thread_idx() != 0 {
            return;
        }
        for (i, word) in words.iter().enumerate() {
            // SAFETY: a live, aligned word, accessed only through `arch` while the launch runs.
            unsafe { arch::st_volatile_global(word.as_ptr(), i as u64 + 1) };
        }
        held_while_running.store(memory.forget(start as *const u8, len) as u64, Relaxed);
    });
    assert!(held_while_running.load(Relaxed) > 0, "the thread's buffered stores were not counted as held");
    assert_eq!(memory.forget(start as *const u8, len), 0, "stores held after the launch ended");
    let values: Vec<u64> = words.iter().map(|w| w.load(Relaxed)).collect();
    assert_eq!(values, (1..=8).collect::<Vec<u64>>());
}
