//! The device runtime's C surface (`device_rt::cabi`, what kernels of other runtimes link)
//! on the host twin: several PEs, each a launch on its own threads, calling the
//! `extern "C"` functions with the handle's address as a CUDA C++ kernel would. Every
//! function across PEs and group scopes; put with signal then wait, in weak memory too;
//! the collectives against a host reference, bit for bit; bad arguments refused with
//! nothing changed; every wait ended by a missing PE (timeout) and by the abort word.
//! That the module exports these functions, as the C header declares them, is
//! `linker/tests/header.rs`'s.

use std::ffi::c_void;
use std::sync::Mutex;
use std::time::Duration;

use device_rt::abi::ShmemHandle;
use device_rt::arch::{self, Site, WeakMemory};
use device_rt::cabi::*;
use device_rt::shmem::{Block, Group, Shmem, Thread, Warp};
use ferroccl_testkit::shmem::TwinHeap;

const HEAP_BYTES: u64 = 1 << 16;
/// A budget no passing test comes near (the twin runs hundreds of threads on two cores).
const BUDGET: Duration = Duration::from_secs(60);

/// What the kernels of one run returned or found wrong, in words.
#[derive(Default)]
struct Failures(Mutex<Vec<String>>);

impl Failures {
    fn expect(&self, pe: u32, what: &str, got: Status, want: Status) {
        if got != want {
            self.0.lock().unwrap().push(format!("PE {pe}: {what} returned {got:?}, not {want:?}"));
        }
    }

    fn add(&self, what: String) {
        self.0.lock().unwrap().push(what);
    }

    fn result(self, run: Result<(), String>) -> Result<(), String> {
        run?;
        let failures = self.0.into_inner().unwrap();
        match failures.first() {
            None => Ok(()),
            Some(first) => Err(format!("{} failure(s), first: {first}", failures.len())),
        }
    }

    fn check(self, run: Result<(), String>) {
        self.result(run).unwrap();
    }
}

/// The handle of the PE whose kernel got `sh`, as a C kernel holds it.
fn handle_of(heap: &TwinHeap, sh: Shmem) -> *const ShmemHandle {
    heap.handle(sh.my_pe() as usize) as *const ShmemHandle
}

/// This PE's symmetric address of an allocation.
fn local(addrs: &[u64], sh: Shmem) -> u64 {
    addrs[sh.my_pe() as usize]
}

fn word(pe: u32, i: usize, round: u32) -> u32 {
    pe << 24 | round << 16 | i as u32
}

type Rma = unsafe extern "C" fn(*const ShmemHandle, *mut c_void, *const c_void, usize, u32) -> Status;
type RmaSignal = unsafe extern "C" fn(*const ShmemHandle, *mut c_void, *const c_void, usize, *mut u64, u64, u32, u32) -> Status;
type Barrier = unsafe extern "C" fn(*const ShmemHandle) -> Status;

/// The C functions of one group scope, its threads per launch, and its barrier (what
/// a C kernel writes as `__syncwarp()` or `__syncthreads()`).
struct Scope {
    threads: u32,
    sync: fn(),
    put: Rma,
    get: Rma,
    put_signal: RmaSignal,
    barrier: Barrier,
}

const SCOPES: [Scope; 3] = [
    Scope { threads: 1, sync: Thread::sync, put: ferroccl_putmem, get: ferroccl_getmem, put_signal: ferroccl_putmem_signal, barrier: ferroccl_barrier_all },
    Scope { threads: 32, sync: Warp::sync, put: ferroccl_putmem_warp, get: ferroccl_getmem_warp, put_signal: ferroccl_putmem_signal_warp, barrier: ferroccl_barrier_all_warp },
    Scope { threads: 64, sync: Block::sync, put: ferroccl_putmem_block, get: ferroccl_getmem_block, put_signal: ferroccl_putmem_signal_block, barrier: ferroccl_barrier_all_block },
];

/// Each PE puts `N` words to the next PE, barrier, then gets the previous PE's words
/// back from it; every PE checks both, with the functions of `scope`.
fn put_barrier_get(scope: &Scope, n_pes: usize) {
    const N: usize = 300;
    let mut heap = TwinHeap::new(n_pes, HEAP_BYTES, BUDGET, None).unwrap();
    let inbox = heap.malloc(&vec![(N * 4) as u64; n_pes]).unwrap();
    let source = heap.malloc(&vec![(N * 4) as u64; n_pes]).unwrap();
    let back = heap.malloc(&vec![(N * 4) as u64; n_pes]).unwrap();
    for (pe, &at) in source.iter().enumerate() {
        let words: Vec<u32> = (0..N).map(|i| word(pe as u32, i, 1)).collect();
        heap.write(pe, at, &words);
    }
    let failures = Failures::default();
    let run = heap.run(scope.threads, |sh: Shmem| {
        let (h, me, np) = (handle_of(&heap, sh), sh.my_pe(), sh.n_pes());
        let (inbox, source, back) = (local(&inbox, sh) as *mut c_void, local(&source, sh) as *const c_void, local(&back, sh) as *mut c_void);
        // SAFETY: symmetric buffers of `N` words, each PE's inbox written by one PE only,
        // every thread of the group calling with the same arguments.
        unsafe {
            failures.expect(me, "put", (scope.put)(h, inbox, source, N * 4, (me + 1) % np), Status::Success);
            failures.expect(me, "barrier", (scope.barrier)(h), Status::Success);
            failures.expect(me, "get", (scope.get)(h, back, inbox, N * 4, (me + np - 1) % np), Status::Success);
        }
        let prev = (me + np - 1) % np;
        for i in 0..N {
            // SAFETY: this PE's own buffers, complete since the barrier and the get.
            let (got, fetched) = unsafe { (arch::ld_volatile_global((inbox as *const u32).add(i)), arch::ld_volatile_global((back as *const u32).add(i))) };
            if got != word(prev, i, 1) || fetched != word((prev + np - 1) % np, i, 1) {
                failures.add(format!("PE {me} word {i}: inbox {got:#x}, fetched {fetched:#x}"));
                break;
            }
        }
    });
    failures.check(run);
}

#[test]
fn put_barrier_get_at_every_scope() {
    for scope in &SCOPES {
        put_barrier_get(scope, 3);
    }
}

/// Each PE puts `N` words to the next PE with put-with-signal (add 1), `rounds` times,
/// waiting for its own signal to reach the round before it reads; halves alternate and a
/// barrier every other round frees the half.
fn put_signal_ring(scope: &Scope, rounds: u32, memory: Option<&WeakMemory>) -> Result<(), String> {
    const N: usize = 64;
    let n_pes = 3;
    let mut heap = TwinHeap::new(n_pes, HEAP_BYTES, BUDGET, memory.cloned()).unwrap();
    let data = heap.malloc(&vec![(2 * N * 4) as u64; n_pes]).unwrap();
    let source = heap.malloc(&vec![(N * 4) as u64; n_pes]).unwrap();
    let sig = heap.malloc(&vec![8; n_pes]).unwrap();
    let failures = Failures::default();
    let run = heap.run(scope.threads, |sh: Shmem| {
        let (h, me, np) = (handle_of(&heap, sh), sh.my_pe(), sh.n_pes());
        let (data, source, sig) = (local(&data, sh) as *mut u32, local(&source, sh) as *mut u32, local(&sig, sh) as *mut u64);
        for round in 0..rounds {
            let half = (round % 2) as usize * N;
            for i in (arch::thread_idx() as usize..N).step_by(scope.threads as usize) {
                // SAFETY: this PE's source, each word by one thread.
                unsafe { arch::st_volatile_global(source.add(i), word(me, i, round)) };
            }
            (scope.sync)();
            // SAFETY: symmetric buffers; `sig` only accessed atomically; the group's
            // threads call with the same arguments after the barrier that orders their
            // source stores before the put's loads.
            let put = unsafe { (scope.put_signal)(h, data.add(half).cast(), source.cast(), N * 4, sig, 1, 1, (me + 1) % np) };
            failures.expect(me, "put_signal", put, Status::Success);
            let mut seen = 0u64;
            // SAFETY: this PE's own signal word.
            let waited = unsafe { ferroccl_signal_wait_until(h, sig, 3, u64::from(round) + 1, &raw mut seen) };
            failures.expect(me, "signal_wait_until", waited, Status::Success);
            if seen < u64::from(round) + 1 {
                failures.add(format!("PE {me} round {round}: the wait returned with the signal at {seen}"));
            }
            let prev = (me + np - 1) % np;
            for i in 0..N {
                // SAFETY: this PE's own data, delivered before the signal it waited for.
                let got = unsafe { arch::ld_volatile_global(data.add(half + i)) };
                if got != word(prev, i, round) {
                    failures.add(format!("PE {me} round {round} word {i}: {got:#x}"));
                    break;
                }
            }
            if round % 2 == 1 {
                // SAFETY: every PE's group calls it as its next barrier.
                failures.expect(me, "barrier", unsafe { (scope.barrier)(h) }, Status::Success);
            }
        }
    });
    failures.result(run)
}

#[test]
fn put_signal_then_wait_at_every_scope() {
    for scope in &SCOPES {
        put_signal_ring(scope, 6, None).unwrap();
    }
}

#[test]
fn put_signal_then_wait_in_weak_memory() {
    WeakMemory::every_seed_passes(0..6, |memory| put_signal_ring(&SCOPES[1], 4, Some(memory)));
}

#[test]
fn put_signal_without_its_fence_fails_in_weak_memory() {
    let (runs, why) = WeakMemory::first_failure(0..20, &[Site::ShmemSignalFence], |memory| put_signal_ring(&SCOPES[1], 4, Some(memory)));
    eprintln!("failed after {runs} run(s): {why}");
}

/// Words PE 0 puts before each signal of [`signal_op_after_fence`], and its rounds.
const SIGNALLED_WORDS: usize = 32;
const SIGNAL_ROUNDS: u64 = 4;

/// Round `r`: PE 0 puts [`SIGNALLED_WORDS`] words to PE 1, fences, and sets PE 1's signal
/// to `r + 1` with `ferroccl_signal_op`; PE 1 waits for it, reads every word, and adds 1
/// to PE 0's signal, which PE 0 waits for before the next round.
fn signal_op_after_fence(memory: &WeakMemory) -> Result<(), String> {
    let mut heap = TwinHeap::new(2, HEAP_BYTES, BUDGET, Some(memory.clone())).unwrap();
    let bytes = (SIGNALLED_WORDS * 8) as u64;
    let (value, source) = (heap.malloc(&[bytes, bytes]).unwrap(), heap.malloc(&[bytes, bytes]).unwrap());
    let sig = heap.malloc(&[8, 8]).unwrap();
    let failures = Failures::default();
    let run = heap.run(1, |sh: Shmem| {
        let (h, me) = (handle_of(&heap, sh), sh.my_pe());
        let (value, source, sig) = (local(&value, sh) as *mut u64, local(&source, sh) as *mut u64, local(&sig, sh) as *mut u64);
        for round in 0..SIGNAL_ROUNDS {
            let word = |i: usize| round << 32 | i as u64 | 1 << 63;
            // SAFETY: symmetric buffers of `SIGNALLED_WORDS` words; each round's put comes
            // after PE 1 acknowledged reading the last; signals accessed only atomically.
            unsafe {
                if me == 0 {
                    for i in 0..SIGNALLED_WORDS {
                        arch::st_volatile_global(source.add(i), word(i));
                    }
                    failures.expect(me, "put", ferroccl_putmem(h, value.cast(), source.cast(), SIGNALLED_WORDS * 8, 1), Status::Success);
                    ferroccl_fence(h);
                    failures.expect(me, "signal_op set", ferroccl_signal_op(h, sig, round + 1, 0, 1), Status::Success);
                    failures.expect(me, "wait", ferroccl_signal_wait_until(h, sig, 3, round + 1, std::ptr::null_mut()), Status::Success);
                } else {
                    failures.expect(me, "wait", ferroccl_signal_wait_until(h, sig, 3, round + 1, std::ptr::null_mut()), Status::Success);
                    for i in 0..SIGNALLED_WORDS {
                        let read = arch::ld_volatile_global(value.add(i));
                        if read != word(i) {
                            failures.add(format!("round {round}: PE 1 read {read:#x} at word {i} after the signal, not {:#x}", word(i)));
                        }
                    }
                    failures.expect(me, "signal_op add", ferroccl_signal_op(h, sig, 1, 1, 0), Status::Success);
                }
            }
        }
    });
    failures.result(run)
}

#[test]
fn signal_op_after_a_fence_publishes_the_put() {
    WeakMemory::every_seed_passes(0..8, signal_op_after_fence);
}

#[test]
fn signal_op_without_its_fence_fails_in_weak_memory() {
    let (runs, why) = WeakMemory::first_failure(0..40, &[Site::ShmemFence], signal_op_after_fence);
    eprintln!("failed after {runs} run(s): {why}");
}

#[test]
fn who_and_where() {
    let mut heap = TwinHeap::new(3, HEAP_BYTES, BUDGET, None).unwrap();
    let buf = heap.malloc(&[64; 3]).unwrap();
    let failures = Failures::default();
    let run = heap.run(1, |sh: Shmem| {
        let h = handle_of(&heap, sh);
        let me = sh.my_pe();
        // SAFETY: the PE's own handle.
        let (my_pe, n_pes) = unsafe { (ferroccl_my_pe(h), ferroccl_n_pes(h)) };
        if (my_pe, n_pes) != (me, 3) {
            failures.add(format!("PE {me}: my_pe {my_pe}, n_pes {n_pes}"));
        }
        for pe in 0..3 {
            // SAFETY: as above.
            let at = unsafe { ferroccl_ptr(h, local(&buf, sh) as *const c_void, pe) } as u64;
            if at != buf[pe as usize] {
                failures.add(format!("PE {me}: PE {pe}'s copy at {at:#x}, not {:#x}", buf[pe as usize]));
            }
        }
        // SAFETY: as above.
        let outside = unsafe { ferroccl_ptr(h, (local(&buf, sh) + HEAP_BYTES) as *const c_void, 0) };
        // SAFETY: as above.
        let no_pe = unsafe { ferroccl_ptr(h, local(&buf, sh) as *const c_void, 3) };
        if !outside.is_null() || !no_pe.is_null() {
            failures.add(format!("PE {me}: an address past the heap or a PE past the last has a copy"));
        }
    });
    failures.check(run);
}

// ---------------------------------------------------------------------------------------
// Collectives.
// ---------------------------------------------------------------------------------------

#[test]
fn collectives_match_the_host_reference_bit_for_bit() {
    const N_PES: usize = 4;
    const N: usize = 256;
    let mut heap = TwinHeap::new(N_PES, HEAP_BYTES, BUDGET, None).unwrap();
    let src = heap.malloc(&[(N * 4) as u64; N_PES]).unwrap();
    let one_shot = heap.malloc(&[(N * 4) as u64; N_PES]).unwrap();
    let two_shot = heap.malloc(&[(N * 4) as u64; N_PES]).unwrap();
    let scattered = heap.malloc(&[(N / N_PES * 4) as u64; N_PES]).unwrap();
    let gathered = heap.malloc(&[(N_PES * 16) as u64; N_PES]).unwrap();
    let inputs: Vec<Vec<f32>> = (0..N_PES).map(|pe| (0..N).map(|i| ((pe * 7919 + i * 104_729) % 1000) as f32 / 7.0 - 60.0).collect()).collect();
    for (pe, input) in inputs.iter().enumerate() {
        heap.write(pe, src[pe], input);
    }
    let failures = Failures::default();
    let run = heap.run(64, |sh: Shmem| {
        let (h, me) = (handle_of(&heap, sh), sh.my_pe());
        let src = local(&src, sh) as *const f32;
        // SAFETY: symmetric buffers apart from each other; every PE's block calls each as
        // its next barrier; the all-gather's source is the PE's own input (not symmetric).
        unsafe {
            failures.expect(me, "one-shot", ferroccl_all_reduce_sum_f32_block(h, local(&one_shot, sh) as *mut f32, src, N), Status::Success);
            failures.expect(me, "two-shot", ferroccl_all_reduce_two_shot_sum_f32_block(h, local(&two_shot, sh) as *mut f32, src, N), Status::Success);
            failures.expect(me, "reduce-scatter", ferroccl_reduce_scatter_sum_f32_block(h, local(&scattered, sh) as *mut f32, src, N / N_PES), Status::Success);
            failures.expect(me, "all-gather", ferroccl_all_gather_block(h, local(&gathered, sh) as *mut c_void, src.cast(), 16), Status::Success);
        }
    });
    failures.check(run);
    let sum: Vec<u32> = (0..N).map(|i| inputs.iter().skip(1).fold(inputs[0][i], |s, x| s + x[i]).to_bits()).collect();
    let gathered_want: Vec<u32> = inputs.iter().flat_map(|input| input[..4].iter().map(|x| x.to_bits())).collect();
    for pe in 0..N_PES {
        assert_eq!(heap.read::<u32>(pe, one_shot[pe], N), sum, "one-shot on PE {pe}");
        assert_eq!(heap.read::<u32>(pe, two_shot[pe], N), sum, "two-shot on PE {pe}");
        let block = N / N_PES;
        assert_eq!(heap.read::<u32>(pe, scattered[pe], block), sum[pe * block..(pe + 1) * block], "reduce-scatter on PE {pe}");
        assert_eq!(heap.read::<u32>(pe, gathered[pe], N_PES * 4), gathered_want, "all-gather on PE {pe}");
    }
}

// ---------------------------------------------------------------------------------------
// Bad arguments: refused, nothing changed.
// ---------------------------------------------------------------------------------------

#[test]
fn bad_arguments_are_refused_and_change_nothing() {
    const N_PES: usize = 2;
    let mut heap = TwinHeap::new(N_PES, HEAP_BYTES, BUDGET, None).unwrap();
    let buf = heap.malloc(&[256; N_PES]).unwrap();
    let sig = heap.malloc(&[16; N_PES]).unwrap();
    let src = heap.malloc(&[256; N_PES]).unwrap();
    for (pe, &at) in src.iter().enumerate() {
        heap.write(pe, at, &[7u8; 256]);
    }
    let failures = Failures::default();
    let run = heap.run(1, |sh: Shmem| {
        let (h, me) = (handle_of(&heap, sh), sh.my_pe());
        let (buf, sig, src) = (local(&buf, sh), local(&sig, sh), local(&src, sh) as *const c_void);
        let past_end = buf + HEAP_BYTES;
        let cases: Vec<(&str, Status)> = unsafe {
            // SAFETY: every call below is refused before it touches memory (what the test
            // checks); the valid arguments among them are symmetric buffers.
            vec![
                ("put to a PE past the last", ferroccl_putmem(h, buf as *mut c_void, src, 8, 2)),
                ("put running past the heap", ferroccl_putmem(h, (past_end - 4) as *mut c_void, src, 8, 0)),
                ("put outside the heap", ferroccl_putmem(h, 64 as *mut c_void, src, 8, 0)),
                ("get from a PE past the last", ferroccl_getmem(h, buf as *mut c_void, src, 8, 5)),
                ("put_signal with an unknown op", ferroccl_putmem_signal(h, buf as *mut c_void, src, 8, sig as *mut u64, 1, 2, 0)),
                ("put_signal to a misaligned signal", ferroccl_putmem_signal(h, buf as *mut c_void, src, 8, (sig + 4) as *mut u64, 1, 0, 0)),
                ("signal_op to a PE past the last", ferroccl_signal_op(h, sig as *mut u64, 1, 0, 2)),
                ("signal_op outside the heap", ferroccl_signal_op(h, 4096 as *mut u64, 1, 0, 0)),
                ("wait with an unknown comparison", ferroccl_signal_wait_until(h, sig as *const u64, 6, 0, std::ptr::null_mut())),
                ("wait on a word outside the heap", ferroccl_signal_wait_until(h, 4096 as *const u64, 0, 0, std::ptr::null_mut())),
                ("all-reduce overlapping its input", ferroccl_all_reduce_sum_u32_block(h, (buf + 4) as *mut u32, buf as *const u32, 16)),
                ("all-reduce misaligned", ferroccl_all_reduce_sum_u64_block(h, (buf + 4) as *mut u64, src.cast(), 4)),
                ("two-shot of a count the PEs do not divide", ferroccl_all_reduce_two_shot_sum_i32_block(h, buf as *mut i32, src.cast(), 3)),
                ("reduce-scatter past the heap", ferroccl_reduce_scatter_sum_f64_block(h, buf as *mut f64, (past_end - 8) as *const f64, 1)),
                ("all-gather overlapping its input", ferroccl_all_gather_block(h, buf as *mut c_void, (buf + 8) as *const c_void, 8)),
                ("all-reduce of a count that overflows", ferroccl_all_reduce_sum_f32_block(h, buf as *mut f32, src.cast(), usize::MAX / 2)),
            ]
        };
        for (what, got) in cases {
            failures.expect(me, what, got, Status::InvalidArgument);
        }
    });
    failures.check(run);
    for pe in 0..N_PES {
        assert_eq!(heap.read::<u8>(pe, buf[pe], 256), [0u8; 256], "PE {pe}'s buffer");
        assert_eq!(heap.read::<u64>(pe, sig[pe], 2), [0, 0], "PE {pe}'s signal");
    }
}

// ---------------------------------------------------------------------------------------
// Faults: every wait ends.
// ---------------------------------------------------------------------------------------

/// Every waiting function, called by PEs 0 and 1 while PE 2 never calls anything: what
/// each returned, in call order, on each thread.
fn waits_with_a_missing_pe(heap: &mut TwinHeap) -> Vec<Vec<Status>> {
    let buf = heap.malloc(&[64; 3]).unwrap();
    let sig = heap.malloc(&[8; 3]).unwrap();
    let outcomes = Mutex::new(Vec::new());
    heap.run(64, |sh: Shmem| {
        let (h, me) = (handle_of(heap, sh), sh.my_pe());
        if me == 2 {
            return;
        }
        let (buf, sig) = (local(&buf, sh), local(&sig, sh));
        // SAFETY: symmetric buffers; PEs 0 and 1 call each collective as their next
        // barrier; the signal is accessed only atomically.
        let mine = unsafe {
            vec![
                ferroccl_signal_wait_until(h, sig as *const u64, 0, 1, std::ptr::null_mut()),
                ferroccl_barrier_all_block(h),
                ferroccl_all_reduce_sum_f32_block(h, buf as *mut f32, (buf + 32) as *const f32, 6),
                ferroccl_all_reduce_two_shot_sum_f32_block(h, buf as *mut f32, (buf + 32) as *const f32, 6),
                ferroccl_reduce_scatter_sum_f32_block(h, buf as *mut f32, (buf + 16) as *const f32, 4),
                ferroccl_all_gather_block(h, buf as *mut c_void, (buf + 48) as *const c_void, 4),
            ]
        };
        outcomes.lock().unwrap().push(mine);
    })
    .unwrap();
    outcomes.into_inner().unwrap()
}

#[test]
fn a_pe_that_never_arrives_times_out_every_wait() {
    let mut heap = TwinHeap::new(3, HEAP_BYTES, Duration::from_millis(100), None).unwrap();
    let outcomes = waits_with_a_missing_pe(&mut heap);
    assert_eq!(outcomes.len(), 2 * 64);
    assert!(outcomes.iter().all(|o| o == &[Status::TimedOut; 6]), "every wait of every thread times out: {:?}", outcomes[0]);
}

#[test]
fn the_abort_word_ends_every_wait() {
    let mut heap = TwinHeap::new(3, HEAP_BYTES, BUDGET, None).unwrap();
    heap.abort();
    let outcomes = waits_with_a_missing_pe(&mut heap);
    assert_eq!(outcomes.len(), 2 * 64);
    assert!(outcomes.iter().all(|o| o == &[Status::Aborted; 6]), "the budget is a minute: only the abort ends these waits: {:?}", outcomes[0]);
}

/// Where the application links no function of its own, the module's weak default refuses
/// every function number (this test binary defines none; `app_host.rs`'s does).
#[test]
fn the_default_application_function_refuses_every_function() {
    for function in [0, 1, u32::MAX] {
        // SAFETY: the default reads nothing.
        assert_eq!(unsafe { ferroccl_app_work(function, 8) }, Status::InvalidArgument);
    }
}
