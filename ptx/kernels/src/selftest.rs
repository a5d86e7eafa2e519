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
        unsafe { smem.add(tid as usize).write(abi::barrier_word(tid, round)) };
        arch::barrier_sync(1 + half, HALF);
        sum = sum.wrapping_add(unsafe { smem.add(neighbour as usize).read() });
        arch::barrier_sync(1 + half, HALF);
    }
    if tid < 64 {
        unsafe { smem.add(tid as usize).write(sum) };
        arch::barrier_sync(3, 64);
        sum = sum.wrapping_add(unsafe { smem.add((63 - tid) as usize).read() });
    }
    arch::barrier_sync_all();
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
        unsafe { smem.add(i as usize).write(pattern(i)) };
        i += arch::block_dim();
    }
    arch::barrier_sync_all();
    let mut mismatches = 0u32;
    let mut i = arch::thread_idx();
    while i < words {
        let j = words - 1 - i;
        if unsafe { smem.add(j as usize).read() } != pattern(j) {
            mismatches += 1;
        }
        i += arch::block_dim();
    }
    unsafe { u32::atomic_add_relaxed_gpu(out.add(1), mismatches) };
    if arch::thread_idx() == 0 {
        unsafe { out.write(arch::dynamic_smem_size()) };
        unsafe { out.add(2).write((smem as usize % 16) as u32) };
    }
}

/// Waits until `*flag == want`, observing it as `mode` says; false when the budget ran
/// out first.
unsafe fn wait_flag(flag: *const u64, want: u64, mode: PublishMode) -> bool {
    let start = arch::globaltimer_ns();
    loop {
        let seen = match mode {
            PublishMode::ReleaseAcquire => unsafe { arch::ld_acquire_sys_global(flag) },
            PublishMode::FenceSys | PublishMode::FenceGpu => unsafe { arch::ld_volatile_global(flag) },
        };
        if seen == want {
            match mode {
                PublishMode::ReleaseAcquire => {}
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
unsafe fn publish_flag(flag: *mut u64, value: u64, mode: PublishMode) {
    match mode {
        PublishMode::ReleaseAcquire => unsafe { arch::st_release_sys_global(flag, value) },
        PublishMode::FenceSys => {
            arch::fence_acq_rel_sys();
            unsafe { arch::st_relaxed_sys_global(flag, value) }
        }
        PublishMode::FenceGpu => {
            arch::fence_acq_rel_gpu();
            unsafe { arch::st_volatile_global(flag, value) }
        }
    }
}

/// Thread 0 waits for `*flag == want` and tells the whole CTA whether it came; every
/// thread returns the same answer. Uses dynamic shared word 0.
unsafe fn cta_wait_flag(flag: *const u64, want: u64, mode: PublishMode) -> bool {
    let verdict = arch::dyn_smem() as *mut u32;
    if arch::thread_idx() == 0 {
        let ok = unsafe { wait_flag(flag, want, mode) };
        unsafe { verdict.write(ok as u32) };
    }
    arch::barrier_sync_all();
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
            unsafe { report.add(report::BAD_MODE).write(1) };
        }
        return;
    };
    let (ready, ack) = (flags, unsafe { flags.add(1) });
    let producer = arch::block_idx() == 0;
    for round in 1..=rounds {
        if producer {
            if round > 1 && !unsafe { cta_wait_flag(ack, (round - 1) as u64, mode) } {
                break;
            }
            let mut i = arch::thread_idx();
            while i < words {
                unsafe { data.add(i as usize).write(abi::message_word(i, round)) };
                i += arch::block_dim();
            }
            arch::barrier_sync_all();
            if arch::thread_idx() == 0 {
                unsafe { publish_flag(ready, round as u64, mode) };
            }
        } else {
            if !unsafe { cta_wait_flag(ready, round as u64, mode) } {
                unsafe { report.add(report::TIMED_OUT).write(1) };
                break;
            }
            let mut mismatches = 0u32;
            let mut i = arch::thread_idx();
            while i < words {
                if unsafe { data.add(i as usize).read_volatile() } != abi::message_word(i, round) {
                    mismatches += 1;
                }
                i += arch::block_dim();
            }
            if mismatches != 0 {
                unsafe { u32::atomic_add_relaxed_gpu(report.add(report::MISMATCHES), mismatches) };
            }
            arch::barrier_sync_all();
            if arch::thread_idx() == 0 {
                unsafe { report.add(report::ROUNDS_SEEN).write(round) };
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
    unsafe {
        exch64.add(gtid as usize).write(apply_atomics(c64, gtid as u64));
        exch32.add(gtid as usize).write(apply_atomics(c32, gtid));
    }
}

/// Applies the test's atomics to `slots` for thread `gtid`; returns the exchange's old
/// value.
unsafe fn apply_atomics<T>(slots: *mut T, gtid: T) -> T
where
    T: AtomicWord + From<u8> + core::ops::Add<Output = T> + PartialEq,
{
    let slot = |k: usize| unsafe { slots.add(k) };
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
        unsafe { out.add(k).write(w) };
    }
}
