//! The symmetric heap's device API (`device_rt::shmem`) on the host twin: several PEs, each
//! a launch on its own threads, their heaps in host memory (`testkit::shmem::TwinHeap`).
//! Ordering (put then signal, wait then read; fence to one PE, quiet before telling a
//! third), barriers with skewed PEs, many in a row, atomics under contention, the sum
//! reduction, a PE that never arrives, an abort, and collective malloc's mismatch; the
//! ordering tests also in weak memory, with a negative control per ordering operation.

use std::sync::Mutex;
use std::time::Duration;

use device_rt::arch::{self, Site, WeakMemory};
use device_rt::shmem::{Block, Cmp, Group, Shmem, Signal, SignalOp, Thread, Warp};
use device_rt::spin::Interrupted;
use ferroccl_testkit::shmem::TwinHeap;
use host_shim::Error;

const HEAP_BYTES: u64 = 1 << 16;
/// A budget no passing test comes near (the twin runs hundreds of threads on two cores).
const BUDGET: Duration = Duration::from_secs(60);

/// What the kernels of one run found wrong, in words.
#[derive(Default)]
struct Failures(Mutex<Vec<String>>);

impl Failures {
    fn add(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }

    fn check(self, run: Result<(), String>) -> Result<(), String> {
        run?;
        let failures = self.0.into_inner().unwrap();
        match failures.first() {
            None => Ok(()),
            Some(first) => Err(format!("{} failure(s), first: {first}", failures.len())),
        }
    }
}

fn heap(n_pes: usize, memory: Option<&WeakMemory>) -> TwinHeap {
    TwinHeap::new(n_pes, HEAP_BYTES, BUDGET, memory.cloned()).unwrap()
}

/// Threads per launch for group `G`.
fn threads<G: Group + 'static>() -> u32 {
    match std::any::type_name::<G>() {
        n if n.ends_with("Thread") => 1,
        n if n.ends_with("Warp") => 32,
        _ => 64,
    }
}

/// This PE's symmetric address of an allocation (`addrs[pe]`: what malloc gave each PE;
/// the PEs of one process have their heaps at different addresses).
fn local(addrs: &[u64], sh: Shmem) -> u64 {
    addrs[sh.my_pe() as usize]
}

fn value(pe: u32, i: usize, round: u32) -> u32 {
    pe << 24 | round << 16 | i as u32
}

// ---------------------------------------------------------------------------------------
// put_signal, then wait_until and read.
// ---------------------------------------------------------------------------------------

/// Every PE puts `n` words to the next PE with `put_signal` (signal: add 1) and waits for
/// its own signal, `rounds` times, reading what arrived after each wait; each round goes
/// to the other half of the buffer, and a barrier every other round frees the half.
fn put_signal_ring<G: Group + 'static>(n_pes: usize, n: usize, rounds: u32, memory: Option<&WeakMemory>) -> Result<(), String> {
    let mut heap = heap(n_pes, memory);
    let data = heap.malloc(&vec![(2 * n * 4) as u64; n_pes]).unwrap();
    let source = heap.malloc(&vec![(n * 4) as u64; n_pes]).unwrap();
    let sig = heap.malloc(&vec![8; n_pes]).unwrap();
    let failures = Failures::default();
    let run = heap.run(threads::<G>(), |sh: Shmem| {
        let (me, np) = (sh.my_pe(), sh.n_pes());
        let (data, source, sig) = (local(&data, sh) as *mut u32, local(&source, sh) as *mut u32, local(&sig, sh) as *mut u64);
        for round in 0..rounds {
            let half = (round % 2) as usize * n;
            for i in (G::rank() as usize..n).step_by(G::size() as usize) {
                // SAFETY: `source` holds `n` words of this PE's heap, written by this thread only.
                unsafe { sh.p(source.add(i), value(me, i, round), me) };
            }
            G::sync();
            let signal = Signal { sig, value: 1, op: SignalOp::Add };
            // SAFETY: symmetric buffers of the sizes allocated; every thread of the group calls it.
            unsafe { sh.put_signal::<G, u32>(data.add(half), source, n, signal, (me + 1) % np) };
            if G::rank() == 0 {
                // SAFETY: `sig` is a symmetric `u64` updated only by signals.
                if let Err(why) = unsafe { sh.wait_until(sig, Cmp::Ge, u64::from(round + 1)) } {
                    failures.add(format!("PE {me} round {round}: wait ended: {why:?}"));
                }
            }
            G::sync();
            let from = (me + np - 1) % np;
            for i in (G::rank() as usize..n).step_by(G::size() as usize) {
                // SAFETY: `data` holds `2n` words; this half was delivered before the signal.
                let got: u32 = unsafe { sh.g(data.add(half + i), me) };
                if got != value(from, i, round) {
                    failures.add(format!("PE {me} round {round} word {i}: {got:#x}, want {:#x}", value(from, i, round)));
                }
            }
            if round % 2 == 1 {
                // SAFETY: every PE's group calls it as its next barrier.
                if let Err(why) = unsafe { sh.sync_all::<G>() } {
                    failures.add(format!("PE {me}: barrier ended: {why:?}"));
                }
            }
        }
    });
    failures.check(run)
}

#[test]
fn put_signal_then_wait_until_then_read_every_group() {
    put_signal_ring::<Thread>(3, 40, 4, None).unwrap();
    put_signal_ring::<Warp>(4, 100, 4, None).unwrap();
    put_signal_ring::<Block>(3, 301, 4, None).unwrap();
}

#[test]
fn put_signal_in_weak_memory() {
    WeakMemory::every_seed_passes(0..6, |memory| put_signal_ring::<Warp>(2, 64, 4, Some(memory)));
}

#[test]
fn put_signal_without_its_fence_fails_in_weak_memory() {
    let (runs, why) = WeakMemory::first_failure(0..20, &[Site::ShmemSignalFence], |memory| put_signal_ring::<Warp>(2, 64, 4, Some(memory)));
    eprintln!("failed after {runs} run(s): {why}");
}

#[test]
fn wait_until_without_its_acquire_fails_in_weak_memory() {
    let (runs, why) = WeakMemory::first_failure(0..20, &[Site::ShmemWaitPoll], |memory| put_signal_ring::<Warp>(2, 64, 4, Some(memory)));
    eprintln!("failed after {runs} run(s): {why}");
}

// ---------------------------------------------------------------------------------------
// fence (one target PE) and quiet (a third PE observes).
// ---------------------------------------------------------------------------------------

/// PE 0 puts `n` words to PE 1 with `p`, fences, sets a flag on PE 1 and waits for PE 1's
/// acknowledgement (so its kernel is still running, its stores maybe still buffered,
/// while PE 1 reads); PE 1 waits for the flag, reads the words and acknowledges.
fn fence_orders_puts_to_one_pe(memory: Option<&WeakMemory>) -> Result<(), String> {
    const N: usize = 48;
    let mut heap = heap(2, memory);
    let data = heap.malloc(&[N as u64 * 8; 2]).unwrap();
    let flag = heap.malloc(&[8; 2]).unwrap();
    let ack = heap.malloc(&[8; 2]).unwrap();
    let failures = Failures::default();
    let run = heap.run(1, |sh: Shmem| {
        let (data, flag) = (local(&data, sh) as *mut u64, local(&flag, sh) as *mut u64);
        // Safety of every call below: symmetric words of the sizes allocated; `flag` is
        // accessed only atomically.
        if sh.my_pe() == 0 {
            for i in 0..N {
                // SAFETY: as stated where the kernel begins.
                unsafe { sh.p(data.add(i), 7 + i as u64, 1) };
            }
            sh.fence();
            // SAFETY: as stated where the kernel begins.
            unsafe { sh.atomic_set(flag, 1u64, 1) };
            // SAFETY: as stated where the kernel begins.
            if let Err(why) = unsafe { sh.wait_until(local(&ack, sh) as *const u64, Cmp::Eq, 1u64) } {
                failures.add(format!("wait for the acknowledgement ended: {why:?}"));
            }
        } else {
            // SAFETY: as stated where the kernel begins.
            if let Err(why) = unsafe { sh.wait_until(flag, Cmp::Eq, 1u64) } {
                return failures.add(format!("wait ended: {why:?}"));
            }
            for i in 0..N {
                // SAFETY: as stated where the kernel begins.
                let got: u64 = unsafe { sh.g(data.add(i), 1) };
                if got != 7 + i as u64 {
                    failures.add(format!("word {i}: {got}"));
                }
            }
            // SAFETY: as stated where the kernel begins.
            unsafe { sh.atomic_set(local(&ack, sh) as *mut u64, 1u64, 0) };
        }
    });
    failures.check(run)
}

/// PE 0's warp puts `n` words to PE 1 (non-blocking), its lane 0 quiets, then sets a flag on
/// PE 2 and waits for PE 2's acknowledgement (the other lanes at the warp's barrier: a
/// polling lane may drain the CTA's stores); PE 2 waits for the flag, reads the
/// words from PE 1's heap and acknowledges.
fn quiet_orders_puts_for_a_third_pe(memory: Option<&WeakMemory>) -> Result<(), String> {
    const N: usize = 64;
    let mut heap = heap(3, memory);
    let data = heap.malloc(&[N as u64 * 4; 3]).unwrap();
    let source = heap.malloc(&[N as u64 * 4; 3]).unwrap();
    let flag = heap.malloc(&[8; 3]).unwrap();
    let ack = heap.malloc(&[8; 3]).unwrap();
    let failures = Failures::default();
    let run = heap.run(32, |sh: Shmem| {
        let (data, source, flag) = (local(&data, sh) as *mut u32, local(&source, sh) as *mut u32, local(&flag, sh) as *mut u64);
        // Safety of every call below: symmetric words of the sizes allocated, each written
        // by one thread; `flag` is accessed only atomically.
        match sh.my_pe() {
            0 => {
                let lane = arch::lane_id() as usize;
                for i in (lane..N).step_by(32) {
                    // SAFETY: as stated where the kernel begins.
                    unsafe { sh.p(source.add(i), 1000 + i as u32, 0) };
                }
                Warp::sync();
                // SAFETY: as stated where the kernel begins.
                unsafe { sh.put_nbi::<Warp, u32>(data, source, N, 1) };
                if lane == 0 {
                    sh.quiet();
                    // SAFETY: as stated where the kernel begins.
                    unsafe { sh.signal_op(flag, 1, SignalOp::Set, 2) };
                    // SAFETY: as stated where the kernel begins.
                    if let Err(why) = unsafe { sh.wait_until(local(&ack, sh) as *const u64, Cmp::Eq, 1u64) } {
                        failures.add(format!("wait for the acknowledgement ended: {why:?}"));
                    }
                }
                Warp::sync();
            }
            2 if arch::lane_id() == 0 => {
                // SAFETY: as stated where the kernel begins.
                if let Err(why) = unsafe { sh.wait_until(flag, Cmp::Ne, 0u64) } {
                    return failures.add(format!("wait ended: {why:?}"));
                }
                for i in 0..N {
                    // SAFETY: as stated where the kernel begins.
                    let got: u32 = unsafe { sh.g(data.add(i), 1) };
                    if got != 1000 + i as u32 {
                        failures.add(format!("word {i}: {got}"));
                    }
                }
                // SAFETY: as stated where the kernel begins.
                unsafe { sh.atomic_set(local(&ack, sh) as *mut u64, 1u64, 0) };
            }
            _ => {}
        }
    });
    failures.check(run)
}

#[test]
fn fence_and_quiet_order_puts() {
    fence_orders_puts_to_one_pe(None).unwrap();
    quiet_orders_puts_for_a_third_pe(None).unwrap();
}

#[test]
fn fence_and_quiet_in_weak_memory() {
    WeakMemory::every_seed_passes(0..6, |memory| fence_orders_puts_to_one_pe(Some(memory)));
    WeakMemory::every_seed_passes(0..6, |memory| quiet_orders_puts_for_a_third_pe(Some(memory)));
}

#[test]
fn puts_without_the_fence_fail_in_weak_memory() {
    let (runs, why) = WeakMemory::first_failure(0..20, &[Site::ShmemFence], |memory| fence_orders_puts_to_one_pe(Some(memory)));
    eprintln!("failed after {runs} run(s): {why}");
}

#[test]
fn puts_without_the_quiet_fail_in_weak_memory() {
    let (runs, why) = WeakMemory::first_failure(0..20, &[Site::ShmemQuiet], |memory| quiet_orders_puts_for_a_third_pe(Some(memory)));
    eprintln!("failed after {runs} run(s): {why}");
}

// ---------------------------------------------------------------------------------------
// Barriers.
// ---------------------------------------------------------------------------------------

/// `rounds` barriers in a row: in round `r` every PE puts `r + 1` into its slot of half
/// `r % 2` on every PE (plain puts, no fence: `barrier_all` is the quiet), PE `p` dawdles
/// for `(p + r) % 3` short sleeps first, then `barrier_all`, then every PE reads every
/// slot of that half.
fn barriers_in_a_row<G: Group + 'static>(n_pes: usize, rounds: u32, memory: Option<&WeakMemory>) -> Result<(), String> {
    let mut heap = heap(n_pes, memory);
    let slots = heap.malloc(&vec![(2 * n_pes * 4) as u64; n_pes]).unwrap();
    let failures = Failures::default();
    let run = heap.run(threads::<G>(), |sh: Shmem| {
        let (me, np) = (sh.my_pe(), sh.n_pes());
        let slots = local(&slots, sh) as *mut u32;
        for round in 0..rounds {
            let half = (round % 2) as usize * np as usize;
            for _ in 0..(me + round) % 3 {
                arch::nanosleep(20_000);
            }
            if G::rank() == 0 {
                for pe in 0..np {
                    // SAFETY: `slots` holds `2 n_pes` words; this PE's slot is written by it only.
                    unsafe { sh.p(slots.add(half + me as usize), round + 1, pe) };
                }
            }
            // SAFETY: every PE's group calls it as its next barrier.
            if let Err(why) = unsafe { sh.barrier_all::<G>() } {
                return failures.add(format!("PE {me} round {round}: barrier ended: {why:?}"));
            }
            for pe in (G::rank()..np).step_by(G::size() as usize) {
                // SAFETY: as above; read after the barrier that published it.
                let got: u32 = unsafe { sh.g(slots.add(half + pe as usize), me) };
                if got != round + 1 {
                    failures.add(format!("PE {me} round {round}: PE {pe}'s slot holds {got}"));
                }
            }
        }
    });
    failures.check(run)
}

#[test]
fn barriers_with_skewed_pes_many_in_a_row() {
    barriers_in_a_row::<Thread>(4, 60, None).unwrap();
    barriers_in_a_row::<Warp>(3, 30, None).unwrap();
    barriers_in_a_row::<Block>(3, 30, None).unwrap();
}

#[test]
fn barriers_in_weak_memory() {
    WeakMemory::every_seed_passes(0..6, |memory| barriers_in_a_row::<Warp>(3, 6, Some(memory)));
}

#[test]
fn barrier_all_without_its_quiet_fails_in_weak_memory() {
    let (runs, why) = WeakMemory::first_failure(0..20, &[Site::ShmemBarrierFence], |memory| barriers_in_a_row::<Thread>(3, 6, Some(memory)));
    eprintln!("failed after {runs} run(s): {why}");
}

// ---------------------------------------------------------------------------------------
// Atomics.
// ---------------------------------------------------------------------------------------

#[test]
fn atomics_under_contention_are_exact() {
    const N_PES: usize = 3;
    const ADDS: u32 = 20;
    const SLOTS: usize = 16;
    let mut heap = heap(N_PES, None);
    let counter = heap.malloc(&[8; N_PES]).unwrap();
    let incs = heap.malloc(&[4; N_PES]).unwrap();
    let claims = heap.malloc(&[(SLOTS * 8) as u64; N_PES]).unwrap();
    let swapped = heap.malloc(&[8; N_PES]).unwrap();

    let fetched = Mutex::new(Vec::new());
    let winners = Mutex::new(vec![Vec::new(); SLOTS]);
    let swaps = Mutex::new(Vec::new());
    let run = heap.run(64, |sh: Shmem| {
        let id = u64::from(sh.my_pe() * 64 + arch::thread_idx() + 1);
        let (counter, incs) = (local(&counter, sh) as *mut u64, local(&incs, sh) as *mut u32);
        let (claims, swapped) = (local(&claims, sh) as *mut u64, local(&swapped, sh) as *mut u64);
        let mut mine = Vec::new();
        // Safety of every call below: symmetric words on PE 0 and 1 accessed only atomically.
        for _ in 0..ADDS {
            // SAFETY: as stated where the kernel begins.
            mine.push(unsafe { sh.atomic_fetch_add(counter, 1u64, 0) });
            // SAFETY: as stated where the kernel begins.
            unsafe { sh.atomic_inc(incs, 1) };
        }
        fetched.lock().unwrap().extend(mine);
        for slot in 0..SLOTS {
            // SAFETY: as stated where the kernel begins.
            if unsafe { sh.atomic_compare_swap(claims.add(slot), 0u64, id, 1) } == 0 {
                winners.lock().unwrap()[slot].push(id);
            }
        }
        // SAFETY: as stated where the kernel begins.
        let before = unsafe { sh.atomic_swap(swapped, id, 2) };
        swaps.lock().unwrap().push(before);
    });
    run.unwrap();
    let threads = N_PES as u64 * 64;
    let total = threads * u64::from(ADDS);
    assert_eq!(heap.read::<u64>(0, counter[0], 1)[0], total);
    let mut fetched = fetched.into_inner().unwrap();
    fetched.sort_unstable();
    assert!(fetched.iter().copied().eq(0..total), "every fetch_add saw a distinct value before it");
    assert_eq!(heap.read::<u32>(1, incs[1], 1)[0], total as u32);
    let on_pe1: Vec<u64> = heap.read(1, claims[1], SLOTS);
    for (slot, (won, held)) in winners.into_inner().unwrap().iter().zip(on_pe1).enumerate() {
        assert_eq!(won.as_slice(), [held], "slot {slot}: one compare_swap wins, and its value stays");
    }
    let mut seen = swaps.into_inner().unwrap();
    seen.push(heap.read::<u64>(2, swapped[2], 1)[0]);
    seen.sort_unstable();
    assert!(seen.iter().copied().eq(0..=threads), "the swaps form one chain: every id once, and the initial 0");
}

// ---------------------------------------------------------------------------------------
// The sum reduction.
// ---------------------------------------------------------------------------------------

#[test]
fn sum_reduce_adds_in_pe_order_on_every_pe() {
    const N_PES: usize = 4;
    const N: usize = 257;
    let mut heap = heap(N_PES, None);
    let source = heap.malloc(&[(N * 4) as u64; N_PES]).unwrap();
    let dest = heap.malloc(&[(N * 4) as u64; N_PES]).unwrap();
    let inputs: Vec<Vec<f32>> = (0..N_PES).map(|pe| (0..N).map(|i| ((pe * 7919 + i * 104_729) % 1000) as f32 / 7.0 - 60.0).collect()).collect();
    for (pe, input) in inputs.iter().enumerate() {
        heap.write(pe, source[pe], input);
    }
    let failures = Failures::default();
    let run = heap.run(64, |sh: Shmem| {
        // SAFETY: symmetric, disjoint buffers of `N` floats; every PE's block calls it.
        if let Err(why) = unsafe { sh.sum_reduce::<Block, f32>(local(&dest, sh) as *mut f32, local(&source, sh) as *const f32, N) } {
            failures.add(format!("PE {}: {why:?}", sh.my_pe()));
        }
    });
    failures.check(run).unwrap();
    let want: Vec<u32> = (0..N).map(|i| inputs.iter().skip(1).fold(inputs[0][i], |s, x| s + x[i]).to_bits()).collect();
    for (pe, addr) in dest.iter().enumerate() {
        let got: Vec<u32> = heap.read(pe, *addr, N);
        assert_eq!(got, want, "PE {pe}");
    }
}

// ---------------------------------------------------------------------------------------
// Faults.
// ---------------------------------------------------------------------------------------

#[test]
fn a_pe_that_never_arrives_times_the_others_out() {
    let heap = TwinHeap::new(3, HEAP_BYTES, Duration::from_millis(200), None).unwrap();
    let outcomes = Mutex::new(Vec::new());
    heap.run(64, |sh: Shmem| {
        if sh.my_pe() == 2 {
            return;
        }
        // SAFETY: PEs 0 and 1 call it as their next barrier (PE 2 never does).
        let outcome = unsafe { sh.barrier_all::<Block>() };
        outcomes.lock().unwrap().push(outcome);
    })
    .unwrap();
    let outcomes = outcomes.into_inner().unwrap();
    assert_eq!(outcomes.len(), 2 * 64);
    assert!(outcomes.iter().all(|o| *o == Err(Interrupted::TimedOut)), "every thread of both PEs times out: {outcomes:?}");
}

#[test]
fn an_abort_ends_every_wait() {
    let mut heap = TwinHeap::new(2, HEAP_BYTES, BUDGET, None).unwrap();
    let flag = heap.malloc(&[8, 8]).unwrap();
    heap.abort();
    let outcomes = Mutex::new(Vec::new());
    heap.run(1, |sh: Shmem| {
        // SAFETY: a symmetric `u64` nobody updates.
        let waited = unsafe { sh.wait_until(local(&flag, sh) as *const u64, Cmp::Eq, 1u64) }.map(|_| ());
        outcomes.lock().unwrap().push(waited);
        if sh.my_pe() == 0 {
            // SAFETY: PE 0 calls it as its next barrier; PE 1 never arrives.
            let barrier = unsafe { sh.barrier_all::<Thread>() };
            outcomes.lock().unwrap().push(barrier);
        }
    })
    .unwrap();
    assert_eq!(outcomes.into_inner().unwrap(), [Err(Interrupted::Aborted); 3], "the budget is a minute: only the abort ends these waits");
}

#[test]
fn a_malloc_mismatch_is_every_pes_error_and_changes_nothing() {
    let mut heap = heap(3, None);
    let err = heap.malloc(&[64, 64, 32]).unwrap_err();
    assert!(matches!(&err, Error::SymmetricMismatch { call: "malloc", args } if args == &[64, 64, 32]), "{err}");
    let a = heap.malloc(&[64; 3]).unwrap();
    let b = heap.malloc(&[64; 3]).unwrap();
    assert!(matches!(heap.free(&[a[0], a[1], b[2]]), Err(Error::SymmetricMismatch { call: "free", .. })));
    heap.free(&a).unwrap();
    assert_eq!(heap.malloc(&[64; 3]).unwrap(), a, "the failed calls changed nothing: the first range is free again");
    heap.run(1, |sh: Shmem| {
        // SAFETY: `b` is a live symmetric `u64` on every PE, accessed only atomically.
        unsafe { sh.atomic_inc(local(&b, sh) as *mut u64, 0) };
    })
    .unwrap();
    assert_eq!(heap.read::<u64>(0, b[0], 1)[0], 3);
}
