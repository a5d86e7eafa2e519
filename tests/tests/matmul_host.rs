//! The collective matmuls on the host twin (`testkit::matmul`): 1 to 8 ranks, f16 and bf16,
//! every lane of every rank on its own thread running device-rt's lane code, the GEMMs
//! by the host reference. Every result equal, bit for bit, to the reference (the
//! reduce-scatter's summation order is the ring's, fixed), call after call on the same
//! buffers with new data each call; a rank that dies mid-ring ends every other rank's
//! waits by the spin budget, and an abort ends them early; bad shapes are refused before
//! anything runs. And the put of a copy lane when SMs copy (every CTA of a grid a slice,
//! the last to arrive signals), also in weak memory, with a negative control for the
//! fence before each CTA's arrival.

use std::time::{Duration, Instant};

use device_rt::arch::{self, Site, WeakMemory};
use device_rt::matmul::Collective;
use device_rt::matmul::lane::put_by_grid;
use device_rt::shmem::{Cmp, Shmem, Signal, SignalOp};
use device_rt::spin::Interrupted;
use ferroccl_testkit::matmul::{Fault, Half, TwinMatmul, reference};
use ferroccl_testkit::shmem::TwinHeap;
use half::{bf16, f16};
use host_shim::Error;

const BUDGET: Duration = Duration::from_secs(60);
const ALL: [Collective; 4] = [
    Collective::AllGatherMatmul { bidirectional: false },
    Collective::AllGatherMatmul { bidirectional: true },
    Collective::MatmulReduceScatter { pieces: 1 },
    Collective::MatmulReduceScatter { pieces: 2 },
];

/// The reduce-scatter in pieces of one row each (the most a 3-row block takes).
const SINGLE_ROWS: Collective = Collective::MatmulReduceScatter { pieces: 3 };

/// Values in eighths from -2 to 2, from a seed (an LCG).
fn data<T: Half>(len: u64, seed: u64) -> Vec<T> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            T::from_f32(((x >> 33) % 33) as f32 / 8.0 - 2.0)
        })
        .collect()
}

fn inputs<T: Half>(ring: &TwinMatmul<T>, call: u64) -> (Vec<Vec<T>>, Vec<Vec<T>>) {
    let [la, lb, _] = ring.shape().lens();
    let d = u64::from(ring.shape().nranks);
    ((0..d).map(|r| data(la, call * 100 + r)).collect(), (0..d).map(|r| data(lb, call * 100 + 50 + r)).collect())
}

fn calls<T: Half>(collective: Collective, nranks: u32, m: u64, k: u64, n: u64) {
    let mut ring = TwinMatmul::<T>::new(collective, nranks, m, k, n, BUDGET).unwrap();
    let mut first = None;
    for call in 0..3 {
        // Calls 0 and 2 take the same data: the same bits come out.
        let (a, b) = inputs(&ring, call % 2);
        let c = ring.call(&a, &b, None).unwrap().unwrap_or_else(|ends| panic!("{collective:?} on {nranks} ranks: {ends:?}"));
        assert!(c == reference(&ring.shape(), &a, &b), "{:?} on {nranks} ranks ({}), call {call}: not the reference", collective, std::any::type_name::<T>());
        match &first {
            None => first = Some(c),
            Some(f) if call == 2 => assert!(*f == c, "the same data gave other bits"),
            Some(_) => {}
        }
    }
}

#[test]
fn every_collective_matmul_equals_the_reference_on_1_to_8_ranks() {
    for collective in ALL {
        for nranks in 1..=8 {
            calls::<f16>(collective, nranks, 3, 8, 16);
        }
        calls::<bf16>(collective, 3, 4, 16, 8);
    }
    for nranks in [1, 2, 5] {
        calls::<f16>(SINGLE_ROWS, nranks, 3, 8, 16);
    }
}

#[test]
fn the_reduce_scatter_is_near_the_exact_sum() {
    // The reference's order is the ring's; it is still a sum of the products (to f16's
    // rounding at each of the ring's steps).
    let (d, m, k, n) = (4u32, 2u64, 8u64, 8u64);
    let mut ring = TwinMatmul::<f16>::new(Collective::MatmulReduceScatter { pieces: 2 }, d, m, k, n, BUDGET).unwrap();
    let (a, b) = inputs(&ring, 7);
    let c = ring.call(&a, &b, None).unwrap().unwrap();
    let (m, k, n) = (m as usize, k as usize, n as usize);
    for r in 0..d as usize {
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..d as usize).map(|q| (0..k).map(|l| f64::from(a[q][(r * m + i) * k + l].to_f32()) * f64::from(b[q][l * n + j].to_f32())).sum::<f64>()).sum();
                let got = f64::from(c[r][i * n + j].to_f32());
                assert!((got - exact).abs() <= 1e-2 * exact.abs().max(1.0), "rank {r} ({i}, {j}): {got} against {exact}");
            }
        }
    }
}

#[test]
fn a_rank_that_dies_mid_ring_times_the_others_out() {
    for collective in ALL {
        // A budget that the healthy first call's waits keep on a busy two-core machine.
        let mut ring = TwinMatmul::<f16>::new(collective, 4, 2, 8, 8, Duration::from_secs(1)).unwrap();
        let (a, b) = inputs(&ring, 1);
        ring.call(&a, &b, None).unwrap().unwrap();
        let ends = ring.call(&a, &b, Some(Fault::Stop { rank: 2, ops: 2 })).unwrap().unwrap_err();
        assert!(!ends.is_empty(), "{collective:?}: nobody waited for the dead rank");
        assert!(ends.iter().all(|e| e.interrupted == Some(Interrupted::TimedOut)), "{collective:?}: {ends:?}");
        assert!(ends.iter().any(|e| e.rank == 3), "{collective:?}: the dead rank's successor did not time out: {ends:?}");
    }
}

#[test]
fn an_abort_ends_every_wait_mid_ring() {
    let mut ring = TwinMatmul::<bf16>::new(Collective::MatmulReduceScatter { pieces: 2 }, 3, 2, 8, 8, BUDGET).unwrap();
    let (a, b) = inputs(&ring, 1);
    let started = Instant::now();
    let ends = std::thread::scope(|s| {
        let ring = &mut ring;
        let abort = ring as *const TwinMatmul<bf16> as usize;
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            // SAFETY: the ring outlives the scope; `abort` only stores to the abort flag,
            // which the running call's lanes read atomically.
            unsafe { &*(abort as *const TwinMatmul<bf16>) }.abort();
        });
        ring.call(&a, &b, Some(Fault::Stop { rank: 0, ops: 1 })).unwrap().unwrap_err()
    });
    assert!(started.elapsed() < Duration::from_secs(30), "the abort did not end the waits before the budget");
    assert!(!ends.is_empty() && ends.iter().all(|e| e.interrupted == Some(Interrupted::Aborted)), "{ends:?}");
}

#[test]
fn bad_shapes_are_refused_before_anything_runs() {
    let refused = |r: Result<TwinMatmul<f16>, Error>| match r {
        Err(Error::InvalidArgument(why)) => why,
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("a bad shape was taken"),
    };
    assert!(refused(TwinMatmul::new(Collective::MatmulReduceScatter { pieces: 1 }, 2, 0, 8, 8, BUDGET)).contains("m is 0"));
    assert!(refused(TwinMatmul::new(Collective::MatmulReduceScatter { pieces: 1 }, 2, 2, 8, 6, BUDGET)).contains("16 bytes"));
    assert!(refused(TwinMatmul::new(Collective::MatmulReduceScatter { pieces: 3 }, 2, 2, 8, 8, BUDGET)).contains("3 pieces"));
    assert!(refused(TwinMatmul::new(Collective::AllGatherMatmul { bidirectional: true }, 2, 1, 8, 8, BUDGET)).contains("halves"));
}

/// Every PE puts `words` words to the next PE with a grid of `grid` CTAs
/// (`device_rt::matmul::lane::put_by_grid`, a copy lane's put when SMs copy), one launch
/// per round as on a stream, the arrival counter reused; in the same launch thread 0 of
/// CTA 0 waits for its own signal and checks every word the previous PE sent.
fn grid_puts(grid: u32, words: usize, rounds: u64, memory: Option<&WeakMemory>) -> Result<(), String> {
    let mut heap = TwinHeap::new(2, 1 << 16, BUDGET, memory.cloned()).map_err(|e| e.to_string())?;
    let bytes = (words * 8) as u64;
    let [src, dst, sig, arrived] = [bytes, bytes, 8, 8].map(|b| heap.malloc(&[b, b]).unwrap());
    let value = |pe: usize, round: u64, i: usize| (pe as u64) << 40 | round << 32 | i as u64;
    for round in 0..rounds {
        for (pe, &at) in src.iter().enumerate() {
            heap.write(pe, at, &(0..words).map(|i| value(pe, round, i)).collect::<Vec<u64>>());
        }
        let bad = std::sync::Mutex::new(None);
        heap.run_grid(grid, 32, 0, |sh: Shmem| {
            let (me, next) = (sh.my_pe() as usize, (sh.my_pe() + 1) % 2);
            let signal = Signal { sig: sig[me] as *mut u64, value: round + 1, op: SignalOp::Set };
            // SAFETY: every thread of every CTA calls it alike; the buffers are the heap's.
            unsafe { put_by_grid(sh, dst[me], src[me], bytes, signal, next, arrived[me] as *mut u64) };
            if arch::block_idx() != 0 || arch::thread_idx() != 0 {
                // Stay a while: a thread that ends drains its stores, which would hide a
                // missing fence.
                std::thread::sleep(std::time::Duration::from_millis(10));
                return;
            }
            {
                // SAFETY: this PE's signal word, accessed only atomically.
                if let Err(e) = unsafe { sh.wait_until(sig[me] as *const u64, Cmp::Ge, round + 1) } {
                    *bad.lock().unwrap() = Some(format!("PE {me} round {round}: {e:?}"));
                    return;
                }
                let from = 1 - me;
                for i in 0..words {
                    // SAFETY: word `i` of this PE's destination, complete once the signal is seen.
                    let got = unsafe { arch::ld_volatile_global((dst[me] as *const u64).add(i)) };
                    if got != value(from, round, i) {
                        *bad.lock().unwrap() = Some(format!("PE {me} round {round}: word {i} is {got:#x}, not {:#x}", value(from, round, i)));
                        return;
                    }
                }
            }
        })?;
        if let Some(why) = bad.into_inner().unwrap() {
            return Err(why);
        }
    }
    Ok(())
}

#[test]
fn a_grid_put_delivers_every_slice_before_its_signal() {
    for grid in [1, 3, 4] {
        grid_puts(grid, 2 * 37, 3, None).unwrap();
    }
}

#[test]
fn a_grid_put_in_weak_memory() {
    WeakMemory::every_seed_passes(0..6, |memory| grid_puts(4, 2 * 37, 2, Some(memory)));
}

#[test]
fn a_grid_put_without_its_arrival_fence_fails_in_weak_memory() {
    let (runs, why) = WeakMemory::first_failure(0..40, &[Site::MatmulGridArrive], |memory| grid_puts(4, 2 * 37, 2, Some(memory)));
    eprintln!("failed after {runs} run(s): {why}");
}
