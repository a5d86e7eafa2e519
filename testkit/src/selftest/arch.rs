//! Self-tests of the arch layer: ids, barriers, shared memory, ordered loads and stores
//! across CTAs, atomics, warp operations, clocks.

use std::collections::BTreeMap;

use cudarc::driver::PushKernelArg;
use device_rt::selftest::{self as abi, PublishMode, atomics, report};

use super::*;
use host_shim::memory::HostMapped;
use host_shim::module;

pub(super) fn thread_ids(fx: &Fixture) -> Outcome {
    let (blocks, threads) = (3u32, 96u32);
    let words = (blocks * threads) as usize * abi::THREAD_ID_WORDS;
    let mut out = fx.zeros::<u32>(words)?;
    let k = fx.kernel("selftest_thread_ids")?;
    // SAFETY: the kernel takes exactly these arguments, in this order, and touches no memory
    // beyond the buffers passed (each sized for this launch shape); they outlive the
    // launch, which `fx.finish` waits for.
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).launch(cfg(blocks, threads, 0)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_thread_ids")?;
    let want: Vec<u32> = (0..blocks)
        .flat_map(|b| (0..threads).flat_map(move |t| [b, t, threads, blocks, t % 32, t / 32]))
        .collect();
    ensure_eq_slices("ids", &fx.download(&out)?, &want)
}

pub(super) fn named_barriers(fx: &Fixture) -> Outcome {
    const THREADS: u32 = 256;
    const HALF: u32 = 128;
    let mut out = fx.zeros::<u32>(THREADS as usize)?;
    let k = fx.kernel("selftest_named_barriers")?;
    // SAFETY: the kernel takes exactly these arguments, in this order, and touches no memory
    // beyond the buffers passed (each sized for this launch shape); they outlive the
    // launch, which `fx.finish` waits for.
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).launch(cfg(1, THREADS, THREADS * 4)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_named_barriers")?;
    let ring_sum = |tid: u32| {
        let base = tid / HALF * HALF;
        let neighbour = base + (tid - base + 1) % HALF;
        (0..abi::NAMED_BARRIER_ROUNDS[(tid / HALF) as usize])
            .fold(0u32, |s, r| s.wrapping_add(abi::barrier_word(neighbour, r)))
    };
    let want: Vec<u32> = (0..THREADS)
        .map(|tid| if tid < 64 { ring_sum(tid).wrapping_add(ring_sum(63 - tid)) } else { ring_sum(tid) })
        .collect();
    ensure_eq_slices("sums", &fx.download(&out)?, &want)
}

pub(super) fn dynamic_smem(fx: &Fixture) -> Outcome {
    const SMEM: u32 = 100 * 1024;
    let mut out = fx.zeros::<u32>(3)?;
    let k = fx.kernel("selftest_dynamic_smem")?;
    module::allow_dynamic_smem(&k, SMEM)?;
    // SAFETY: the kernel takes exactly these arguments, in this order, and touches no memory
    // beyond the buffers passed (each sized for this launch shape); they outlive the
    // launch, which `fx.finish` waits for.
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).launch(cfg(1, 256, SMEM)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_dynamic_smem")?;
    let got = fx.download(&out)?;
    ensure_eq_slices("[size, mismatches, base % 16]", &got, &[SMEM, 0, 0])
}

/// Words and rounds of the message-passing tests.
const MESSAGE_WORDS: u32 = 64 * 1024;
const DEVICE_ROUNDS: u32 = 200;
const HOST_MAPPED_ROUNDS: u32 = 20;
/// Launches of the negative control (each of the test's rounds): reordering is rare, so
/// it gets many tries.
const UNFENCED_LAUNCHES: u32 = 50;

/// Runs `selftest_message_passing` over `data`/`flags` (device addresses, which `reset`
/// zeroes before each launch) and checks the report: in every ordered mode once, which
/// must show no stale word; or, with the fence removed ([`Fixture::fence_removed`]),
/// unfenced `UNFENCED_LAUNCHES` times, failing with the count of stale words where the
/// GPU reordered (the negative control showing that the test can see a missing fence).
fn message_passing(
    fx: &Fixture,
    data: u64,
    flags: u64,
    rounds: u32,
    mut reset: impl FnMut() -> Result<(), Error>,
) -> Outcome {
    let k = fx.kernel("selftest_message_passing")?;
    let runs: Vec<PublishMode> = if fx.fence_removed {
        vec![PublishMode::Unfenced; UNFENCED_LAUNCHES as usize]
    } else {
        PublishMode::ORDERED.to_vec()
    };
    let (mut stale_words, mut stale_launches) = (0u64, 0u32);
    for mode in runs {
        reset()?;
        let mut rep = fx.zeros::<u32>(report::WORDS)?;
        let mode_arg = mode as u32;
        // SAFETY: the kernel takes exactly these arguments, in this order, and touches no memory
        // beyond the buffers passed (each sized for this launch shape); they outlive the
        // launch, which `fx.finish` waits for.
        unsafe {
            fx.stream
                .launch_builder(&k)
                .arg(&data)
                .arg(&flags)
                .arg(&mut rep)
                .arg(&MESSAGE_WORDS)
                .arg(&rounds)
                .arg(&mode_arg)
                .launch(cfg(2, 256, 16))
        }
        .map_err(Error::cuda("cuLaunchKernel"))?;
        fx.finish("selftest_message_passing")?;
        let got = fx.download(&rep)?;
        if mode == PublishMode::Unfenced {
            stale_words += u64::from(got[report::MISMATCHES]);
            stale_launches += u32::from(got[report::MISMATCHES] != 0);
            let mut want = [0u32; report::WORDS];
            want[report::MISMATCHES] = got[report::MISMATCHES];
            want[report::ROUNDS_SEEN] = rounds;
            ensure_eq_slices("Unfenced [mismatches (any), timed out, rounds, bad mode]", &got, &want)?;
            continue;
        }
        let mut want = [0u32; report::WORDS];
        want[report::ROUNDS_SEEN] = rounds;
        ensure_eq_slices(&format!("{mode:?} [mismatches, timed out, rounds, bad mode]"), &got, &want)?;
    }
    let tries = format!("{UNFENCED_LAUNCHES} launches x {rounds} rounds x {MESSAGE_WORDS} words");
    ensure(stale_words == 0, || format!("fence removed: the consumer read {stale_words} stale words, in {stale_launches} of {tries}"))
}

pub(super) fn message_passing_device(fx: &Fixture) -> Outcome {
    let mut data = fx.zeros::<u32>(MESSAGE_WORDS as usize)?;
    let mut flags = fx.zeros::<u64>(2)?;
    let (data_ptr, flags_ptr) = (device_ptr(fx, &data), device_ptr(fx, &flags));
    let stream = fx.stream.clone();
    message_passing(fx, data_ptr, flags_ptr, DEVICE_ROUNDS, || {
        stream.memset_zeros(&mut data).map_err(Error::cuda("cuMemsetD8"))?;
        stream.memset_zeros(&mut flags).map_err(Error::cuda("cuMemsetD8"))
    })
}

pub(super) fn message_passing_host_mapped(fx: &Fixture) -> Outcome {
    let data = HostMapped::<u32>::zeroed(&fx.ctx, MESSAGE_WORDS as usize)?;
    let mut flags = HostMapped::<u64>::zeroed(&fx.ctx, 2)?;
    let (data_ptr, flags_ptr) = (data.device_ptr(), flags.device_ptr());
    message_passing(fx, data_ptr, flags_ptr, HOST_MAPPED_ROUNDS, || {
        flags.write(0, 0);
        flags.write(1, 0);
        Ok(())
    })
}

pub(super) fn atomics_test(fx: &Fixture) -> Outcome {
    let (blocks, threads) = (8u32, 256u32);
    let n = (blocks * threads) as u64;
    let init = atomics::initial();
    let mut c64 = fx.upload(&init)?;
    let mut c32 = fx.upload(&init.map(|v| v as u32))?;
    let mut exch64 = fx.zeros::<u64>(n as usize)?;
    let mut exch32 = fx.zeros::<u32>(n as usize)?;
    let k = fx.kernel("selftest_atomics")?;
    // SAFETY: the kernel takes exactly these arguments, in this order, and touches no memory
    // beyond the buffers passed (each sized for this launch shape); they outlive the
    // launch, which `fx.finish` waits for.
    unsafe {
        fx.stream
            .launch_builder(&k)
            .arg(&mut c64)
            .arg(&mut c32)
            .arg(&mut exch64)
            .arg(&mut exch32)
            .launch(cfg(blocks, threads, 0))
    }
    .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_atomics")?;
    let mut want = [0u64; atomics::SLOTS];
    want[atomics::ADD_GPU] = n;
    want[atomics::ADD_SYS] = n * (n - 1) / 2;
    want[atomics::MAX] = n - 1;
    want[atomics::MIN] = atomics::MIN_OFFSET;
    want[atomics::CAS] = n;
    want[atomics::ADD_ACQ_REL] = 2 * n;
    let check = |width: &str, got: Vec<u64>, log: Vec<u64>| -> Outcome {
        let mut want = want;
        want[atomics::EXCH] = got[atomics::EXCH];
        ensure_eq_slices(&format!("u{width} counters"), &got, &want)?;
        // Every exchange returned what the previous one stored: the old values plus the
        // final value are the initial value and every thread index, each exactly once.
        let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
        for v in log.into_iter().chain([got[atomics::EXCH]]) {
            *seen.entry(v).or_default() += 1;
        }
        let expected: BTreeMap<u64, u32> = (0..n).chain([atomics::EXCH_INITIAL]).map(|v| (v, 1)).collect();
        ensure(seen == expected, || format!("u{width} exchange chain is not a permutation of the thread indices"))
    };
    check("64", fx.download(&c64)?, fx.download(&exch64)?)?;
    let widen = |v: Vec<u32>| v.into_iter().map(u64::from).collect::<Vec<_>>();
    check("32", widen(fx.download(&c32)?), widen(fx.download(&exch32)?))
}

pub(super) fn warp_ops(fx: &Fixture) -> Outcome {
    const THREADS: u32 = 64;
    let mut out = fx.zeros::<u32>(THREADS as usize * abi::WARP_OP_WORDS)?;
    let k = fx.kernel("selftest_warp_ops")?;
    // SAFETY: the kernel takes exactly these arguments, in this order, and touches no memory
    // beyond the buffers passed (each sized for this launch shape); they outlive the
    // launch, which `fx.finish` waits for.
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).launch(cfg(1, THREADS, 0)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_warp_ops")?;
    let want: Vec<u32> = (0..THREADS)
        .flat_map(|t| {
            let lane = t % 32;
            [0xAAAA_AAAA, (31 - lane) * 3, lane ^ 1, 1, 1]
        })
        .collect();
    ensure_eq_slices("[ballot, shfl_idx, shfl_xor, all, any]", &fx.download(&out)?, &want)
}

pub(super) fn clocks(fx: &Fixture) -> Outcome {
    const SLEEP_NS: u64 = 1_000_000;
    let mut out = fx.zeros::<u64>(4)?;
    let k = fx.kernel("selftest_clocks")?;
    // SAFETY: the kernel takes exactly these arguments, in this order, and touches no memory
    // beyond the buffers passed (each sized for this launch shape); they outlive the
    // launch, which `fx.finish` waits for.
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).arg(&SLEEP_NS).launch(cfg(1, 1, 0)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_clocks")?;
    let v = fx.download(&out)?;
    let (c0, c1, t0, t1) = (v[0], v[1], v[2], v[3]);
    ensure(c1 > c0, || format!("clock64 did not advance: {c0} then {c1}"))?;
    let slept = t1.wrapping_sub(t0);
    ensure((SLEEP_NS..1_000_000_000).contains(&slept), || {
        format!("globaltimer advanced {slept} ns over a sleep of at least {SLEEP_NS} ns")
    })
}
