//! Device halves of the GPU self-tests run by `ferroccl test`.
//!
//! Each kernel exercises one part of `device_rt::arch` and writes what it saw to global
//! memory; host-shim's `selftest` module launches it and checks the words against the
//! layouts in `device_rt::selftest`. Every wait here has a time budget, so a broken
//! primitive shows up as a reported timeout, never a hung GPU.

use device_rt::arch::{self, AtomicWord};
use device_rt::selftest::{self as abi, PublishMode, atomics, report};

/// How long any wait in a self-test may spin before it reports a timeout.
const WAIT_BUDGET_NS: u64 = 2_000_000_000;

fn global_thread_idx() -> u32 {
    arch::block_idx() * arch::block_dim() + arch::thread_idx()
}

/// Writes `[block_idx, thread_idx, block_dim, grid_dim, lane_id, warp_idx]` per thread.
///
/// # Safety
/// `out` holds `THREAD_ID_WORDS` words per launched thread.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn selftest_thread_ids(out: *mut u32) {
    let words = [
        arch::block_idx(),
        arch::thread_idx(),
        arch::block_dim(),
        arch::grid_dim(),
        arch::lane_id(),
        arch::warp_idx(),
    ];
    let base = global_thread_idx() as usize * abi::THREAD_ID_WORDS;
    for (k, w) in words.into_iter().enumerate() {
        // SAFETY: `out` holds `THREAD_ID_WORDS` words per launched thread (this kernel's
        // contract) and `base + k` is within this thread's own words, which no other thread
        // writes.
        unsafe { out.add(base + k).write(w) };
    }
}

/// Two halves of a 256-thread CTA exchange words through shared memory, each half behind
/// its own named barrier (ids 1 and 2, 128 threads) for a different number of rounds; then
/// warps 0–1 meet at barrier 3 with 64 threads. `out[tid]` is the sum of the neighbours'
/// words the thread read.
///
/// # Safety
/// Launch with 256 threads, one CTA, and `256 * 4` bytes of dynamic shared memory; `out`
/// holds 256 words.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn selftest_named_barriers(out: *mut u32) {
    const HALF: u32 = 128;
    let smem = arch::dyn_smem() as *mut u32;
    let tid = arch::thread_idx();
    let half = tid / HALF;
    let base = half * HALF;
    let neighbour = base + (tid - base + 1) % HALF;
    let mut sum = 0u32;
    for round in 0..abi::NAMED_BARRIER_ROUNDS[half as usize] {
        // SAFETY: `tid < 256`, and the launch gives `256 * 4` bytes of 16-byte aligned dynamic
        // shared memory (this kernel's contract): word `tid` is this thread's, and its
        // neighbour reads it only after the named barrier below.
        unsafe { smem.add(tid as usize).write(abi::barrier_word(tid, round)) };
        arch::barrier_sync(1 + half, HALF);
        // SAFETY: `neighbour < 256` is in the window; its owner wrote it before the named
        // barrier above, and rewrites it only after the next barrier of this half.
        sum = sum.wrapping_add(unsafe { smem.add(neighbour as usize).read() });
        arch::barrier_sync(1 + half, HALF);
    }
    if tid < 64 {
        // SAFETY: `tid < 64`: this thread's word (every thread of the CTA left the loop's last
        // barrier, so no one reads it any more); warps 0–1 read it only after barrier 3 below.
        unsafe { smem.add(tid as usize).write(sum) };
        arch::barrier_sync(3, 64);
        // SAFETY: `63 - tid < 64`, written by its owner before barrier 3 above, and not written
        // again.
        sum = sum.wrapping_add(unsafe { smem.add((63 - tid) as usize).read() });
    }
    arch::barrier_sync_all();
    // SAFETY: `out` holds 256 words (this kernel's contract), and `tid < 256` writes its own.
    unsafe { out.add(tid as usize).write(sum) };
}

/// Fills all of dynamic shared memory with a pattern, then each thread checks words
/// written by other threads. `out = [dynamic_smem_size, mismatches, base % 16]`.
///
/// # Safety
/// `out` holds 3 words, zeroed.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn selftest_dynamic_smem(out: *mut u32) {
    let smem = arch::dyn_smem() as *mut u32;
    let words = arch::dynamic_smem_size() / 4;
    let pattern = |i: u32| i.wrapping_mul(0x0101_0101) ^ 0x5A5A_5A5A;
    let mut i = arch::thread_idx();
    while i < words {
        // SAFETY: `i < words = dynamic_smem_size / 4`, so the word is inside this CTA's 16-byte
        // aligned dynamic shared memory; each `i` belongs to one thread, and the others read it
        // only after the barrier below.
        unsafe { smem.add(i as usize).write(pattern(i)) };
        i += arch::block_dim();
    }
    arch::barrier_sync_all();
    let mut mismatches = 0u32;
    let mut i = arch::thread_idx();
    while i < words {
        let j = words - 1 - i;
        // SAFETY: `j < words`, inside the window; every word was written before the barrier
        // above and is not written again.
        if unsafe { smem.add(j as usize).read() } != pattern(j) {
            mismatches += 1;
        }
        i += arch::block_dim();
    }
    // SAFETY: `out` holds 3 words (this kernel's contract): word 1 is an aligned `u32` in
    // global memory that threads change only with this atomic.
    unsafe { u32::atomic_add_relaxed_gpu(out.add(1), mismatches) };
    if arch::thread_idx() == 0 {
        // SAFETY: word 0 of `out`, written only by thread 0.
        unsafe { out.write(arch::dynamic_smem_size()) };
        // SAFETY: word 2 of `out`, written only by thread 0.
        unsafe { out.add(2).write((smem as usize % 16) as u32) };
    }
}

/// Waits until `*flag == want`, observing it as `mode` says; false when the budget ran
/// out first.
///
/// # Safety
/// `flag` is an aligned `u64` in global memory that the kernel accesses only through
/// `arch`'s functions.
unsafe fn wait_flag(flag: *const u64, want: u64, mode: PublishMode) -> bool {
    let start = arch::globaltimer_ns();
    loop {
        let seen = match mode {
            // SAFETY: `flag` is an aligned `u64` in global memory that the kernels access only
            // through `arch` (this function's contract).
            PublishMode::ReleaseAcquire => unsafe { arch::ld_acquire_sys_global(flag) },
            // SAFETY: as above.
            PublishMode::FenceSys | PublishMode::FenceGpu | PublishMode::Unfenced => unsafe { arch::ld_volatile_global(flag) },
        };
        if seen == want {
            match mode {
                PublishMode::ReleaseAcquire | PublishMode::Unfenced => {}
                PublishMode::FenceSys => arch::fence_acq_rel_sys(),
                PublishMode::FenceGpu => arch::fence_acq_rel_gpu(),
            }
            return true;
        }
        if arch::globaltimer_ns().wrapping_sub(start) > WAIT_BUDGET_NS {
            return false;
        }
    }
}

/// Stores `value` to `flag`, publishing this CTA's earlier writes as `mode` says.
///
/// # Safety
/// `flag` is an aligned, writable `u64` in global memory that the kernel accesses only
/// through `arch`'s functions.
unsafe fn publish_flag(flag: *mut u64, value: u64, mode: PublishMode) {
    match mode {
        // SAFETY: `flag` is an aligned, writable `u64` in global memory accessed only through
        // `arch` (this function's contract).
        PublishMode::ReleaseAcquire => unsafe { arch::st_release_sys_global(flag, value) },
        PublishMode::FenceSys => {
            arch::fence_acq_rel_sys();
            // SAFETY: as above.
            unsafe { arch::st_relaxed_sys_global(flag, value) }
        }
        PublishMode::FenceGpu => {
            arch::fence_acq_rel_gpu();
            // SAFETY: as above.
            unsafe { arch::st_volatile_global(flag, value) }
        }
        // SAFETY: as above.
        PublishMode::Unfenced => unsafe { arch::st_volatile_global(flag, value) },
    }
}

/// Thread 0 waits for `*flag == want` and tells the whole CTA whether it came; every
/// thread returns the same answer. Uses dynamic shared word 0.
///
/// # Safety
/// As [`wait_flag`]; every thread of the CTA calls this with the same arguments, and the
/// launch has at least 4 bytes of dynamic shared memory that nothing else uses meanwhile.
unsafe fn cta_wait_flag(flag: *const u64, want: u64, mode: PublishMode) -> bool {
    let verdict = arch::dyn_smem() as *mut u32;
    if arch::thread_idx() == 0 {
        // SAFETY: thread 0 passes the caller's `flag`, valid as `wait_flag` requires (this
        // function's contract).
        let ok = unsafe { wait_flag(flag, want, mode) };
        // SAFETY: dynamic shared word 0 (at least 4 bytes of it: this function's contract) is
        // written by thread 0 alone, before the barrier below.
        unsafe { verdict.write(ok as u32) };
    }
    arch::barrier_sync_all();
    // SAFETY: the barrier above orders thread 0's write before this read, and the barrier below
    // keeps the word from being rewritten before every thread has read it.
    let ok = unsafe { verdict.read() } != 0;
    arch::barrier_sync_all();
    ok
}

/// CTA 0 produces `words` data words per round and publishes `flags[0] = round`; CTA 1
/// waits for it, checks every word, and acknowledges with `flags[1] = round`; `rounds`
/// times, with the ordering `mode` names. See `device_rt::selftest::report` for `report`.
///
/// # Safety
/// Two CTAs; `data` holds `words` words; `flags` 2 zeroed words; `report` `report::WORDS`
/// zeroed words; at least 4 bytes of dynamic shared memory.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn selftest_message_passing(
    data: *mut u32,
    flags: *mut u64,
    report: *mut u32,
    words: u32,
    rounds: u32,
    mode: u32,
) {
    let Some(mode) = PublishMode::from_u32(mode) else {
        if arch::thread_idx() == 0 {
            // SAFETY: `report` holds `report::WORDS` words (this kernel's contract), `BAD_MODE`
            // is one of them, and only thread 0 writes it.
            unsafe { report.add(report::BAD_MODE).write(1) };
        }
        return;
    };
    // SAFETY: `flags` holds 2 words (this kernel's contract).
    let (ready, ack) = (flags, unsafe { flags.add(1) });
    let producer = arch::block_idx() == 0;
    for round in 1..=rounds {
        if producer {
            // SAFETY: every thread of CTA 0 calls this with the same arguments; `ack` is an
            // aligned `u64` of `flags` accessed only through `arch`, and the launch has at
            // least 4 bytes of dynamic shared memory (this kernel's contract).
            if round > 1 && !unsafe { cta_wait_flag(ack, (round - 1) as u64, mode) } {
                break;
            }
            let mut i = arch::thread_idx();
            while i < words {
                // SAFETY: `i < words`, the length of `data` (this kernel's contract); each `i`
                // belongs to one thread of CTA 0, which writes the words only between CTA 1's
                // acknowledgement of the last round and its own flag for this one, while CTA 1
                // reads them only between the flag and its acknowledgement. The publication
                // under test orders the two (a broken one shows up as mismatches in `report`).
                unsafe { data.add(i as usize).write(abi::message_word(i, round)) };
                i += arch::block_dim();
            }
            arch::barrier_sync_all();
            if arch::thread_idx() == 0 {
                // SAFETY: thread 0 of CTA 0 alone publishes `ready`, an aligned `u64` of
                // `flags` accessed only through `arch`.
                unsafe { publish_flag(ready, round as u64, mode) };
            }
        } else {
            // SAFETY: every thread of CTA 1 calls this with the same arguments; `ready` is an
            // aligned `u64` of `flags` accessed only through `arch`, and the launch has at
            // least 4 bytes of dynamic shared memory (this kernel's contract).
            if !unsafe { cta_wait_flag(ready, round as u64, mode) } {
                // SAFETY: `TIMED_OUT` is a word of `report` (`report::WORDS` words: this
                // kernel's contract); every thread of CTA 1 writes the same value.
                unsafe { report.add(report::TIMED_OUT).write(1) };
                break;
            }
            let mut mismatches = 0u32;
            let mut i = arch::thread_idx();
            while i < words {
                // Weak loads (`ld.global`, which may hit this SM's L1 copy of the last
                // round's words): only the wait's acquire or fence makes them see this
                // round's; without one (`Unfenced`) a stale line shows up as a mismatch.
                // SAFETY: `i < words`, the length of `data`; CTA 0 wrote this round's words
                // before publishing the flag this CTA has seen (see the producer's store).
                if unsafe { data.add(i as usize).read() } != abi::message_word(i, round) {
                    mismatches += 1;
                }
                i += arch::block_dim();
            }
            if mismatches != 0 {
                // SAFETY: `MISMATCHES` is an aligned `u32` of `report`, which threads change
                // only with this atomic.
                unsafe { u32::atomic_add_relaxed_gpu(report.add(report::MISMATCHES), mismatches) };
            }
            arch::barrier_sync_all();
            if arch::thread_idx() == 0 {
                // SAFETY: `ROUNDS_SEEN` is a word of `report`, written by thread 0 of CTA 1
                // alone.
                unsafe { report.add(report::ROUNDS_SEEN).write(round) };
                // SAFETY: thread 0 of CTA 1 alone publishes `ack`, an aligned `u64` of `flags`
                // accessed only through `arch`.
                unsafe { publish_flag(ack, round as u64, mode) };
            }
        }
    }
}

/// Every thread applies each atomic of `device_rt::selftest::atomics` once to `c64` and
/// `c32`, and logs the old values its exchanges returned in `exch64[gtid]`/`exch32[gtid]`.
///
/// # Safety
/// `c64`/`c32` hold `atomics::SLOTS` words set to `atomics::initial()` (truncated for
/// `c32`); `exch64`/`exch32` one word per launched thread.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn selftest_atomics(
    c64: *mut u64,
    c32: *mut u32,
    exch64: *mut u64,
    exch32: *mut u32,
) {
    let gtid = global_thread_idx();
    // SAFETY: `exch64`/`exch32` hold one word per launched thread and `gtid` is this thread's
    // (this kernel's contract); `c64`/`c32` hold the `atomics::SLOTS` words that
    // `apply_atomics` requires.
    unsafe {
        exch64.add(gtid as usize).write(apply_atomics(c64, gtid as u64));
        exch32.add(gtid as usize).write(apply_atomics(c32, gtid));
    }
}

/// Applies the test's atomics to `slots` for thread `gtid`; returns the exchange's old
/// value.
///
/// # Safety
/// `slots` holds `atomics::SLOTS` aligned words in global memory that the launch's threads
/// access only through `arch`'s functions.
unsafe fn apply_atomics<T>(slots: *mut T, gtid: T) -> T
where
    T: AtomicWord + From<u8> + core::ops::Add<Output = T> + PartialEq,
{
    // SAFETY: every index the closure gets is one of the `atomics` slot constants, below
    // `SLOTS`, so the pointer stays inside `slots` (this function's contract).
    let slot = |k: usize| unsafe { slots.add(k) };
    // SAFETY: each slot is an aligned word of global memory that the launch's threads access
    // only through `arch` (this function's contract).
    unsafe {
        T::atomic_add_relaxed_gpu(slot(atomics::ADD_GPU), T::from(1));
        T::atomic_add_relaxed_sys(slot(atomics::ADD_SYS), gtid);
        T::atomic_max_relaxed_gpu(slot(atomics::MAX), gtid);
        T::atomic_min_relaxed_gpu(slot(atomics::MIN), gtid + T::from(atomics::MIN_OFFSET as u8));
        let mut seen = arch::ld_relaxed_gpu_global(slot(atomics::CAS));
        loop {
            let old = T::atomic_cas_acq_rel_sys(slot(atomics::CAS), seen, seen + T::from(1));
            if old == seen {
                break;
            }
            seen = old;
        }
        T::atomic_add_acq_rel_sys(slot(atomics::ADD_ACQ_REL), T::from(2));
        T::atomic_exch_acq_rel_sys(slot(atomics::EXCH), gtid)
    }
}

/// Per thread: `[ballot(lane odd), shfl_idx(lane*3 from lane 31-lane), shfl_xor(lane, 1),
/// all(lane < 32), any(lane == 5)]`.
///
/// # Safety
/// `out` holds `WARP_OP_WORDS` words per launched thread; the block is whole warps.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn selftest_warp_ops(out: *mut u32) {
    let lane = arch::lane_id();
    let words = [
        arch::vote_ballot(arch::FULL_MASK, lane % 2 == 1),
        arch::shfl_idx(arch::FULL_MASK, lane * 3, 31 - lane),
        arch::shfl_xor(arch::FULL_MASK, lane, 1),
        arch::vote_all(arch::FULL_MASK, lane < 32) as u32,
        arch::vote_any(arch::FULL_MASK, lane == 5) as u32,
    ];
    let base = global_thread_idx() as usize * abi::WARP_OP_WORDS;
    for (k, w) in words.into_iter().enumerate() {
        // SAFETY: `out` holds `WARP_OP_WORDS` words per launched thread (this kernel's
        // contract) and `base + k` is within this thread's own words.
        unsafe { out.add(base + k).write(w) };
    }
}

/// One thread reads `%clock64` and `%globaltimer`, sleeps until at least `sleep_ns` of
/// global time has passed (or the budget ends), and reads both again:
/// `out = [clock0, clock1, timer0, timer1]`.
///
/// # Safety
/// One thread; `out` holds 4 words.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn selftest_clocks(out: *mut u64, sleep_ns: u64) {
    let (c0, t0) = (arch::clock64(), arch::globaltimer_ns());
    while arch::globaltimer_ns().wrapping_sub(t0) < sleep_ns.min(WAIT_BUDGET_NS) {
        arch::nanosleep(1_000);
    }
    let (c1, t1) = (arch::clock64(), arch::globaltimer_ns());
    for (k, w) in [c0, c1, t0, t1].into_iter().enumerate() {
        // SAFETY: `out` holds 4 words (this kernel's contract), and the one thread writes them.
        unsafe { out.add(k).write(w) };
    }
}
