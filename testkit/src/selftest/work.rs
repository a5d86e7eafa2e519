//! Self-tests of the persistent work loop on the GPU: ordering, backpressure, faults,
//! the stream-ordered path in CUDA graphs, eight loops on one GPU.

use super::*;
use host_shim::memory::HostMapped;

/// Long enough for anything the work-loop tests wait for.
const LOOP_WAIT: Duration = Duration::from_secs(20);

fn loop_config(channels: u32, capacity: u32, spin_budget: Duration) -> host_shim::work::LoopConfig {
    host_shim::work::LoopConfig { channels, call_channels: 0, threads: 256, resident_threads: 0, capacity, spin_budget, placement: host_shim::work::Placement::Hardware, sleep_after: None, burst_gap: host_shim::work::BURST_GAP }
}

/// Thousands of items through the direct path, with barriers between channels: each
/// round sums, then shifts data across channel boundaries; the result is checked against
/// the same rounds on the host.
pub(super) fn work_loop_ordering(fx: &Fixture) -> Outcome {
    use device_rt::dtype::DataType;
    use device_rt::work::{DeviceFunction, WorkItem};
    const N: usize = 100_000;
    const SHIFT: usize = 77;
    const ROUNDS: usize = 500;
    let initial: Vec<u32> = (0..N as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let a = fx.upload(&initial)?;
    let b = fx.zeros::<u32>(N)?;
    let ones = fx.upload(&vec![1u32; N])?;
    let counter = fx.zeros::<u64>(1)?;
    fx.finish("uploads")?;
    let (pa, pb, p1, pc) = (device_ptr(fx, &a), device_ptr(fx, &b), device_ptr(fx, &ones), device_ptr(fx, &counter));
    let mut lp = host_shim::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(4, 16, LOOP_WAIT))?;
    let mut last = None;
    for _ in 0..ROUNDS {
        // SAFETY: the items name `a`, `b`, `ones` (N words each, the copy's range inside
        // them) and `counter`, device memory of the loop's device that only the loop uses
        // until it is shut down below, before they are dropped; barriers name nothing.
        unsafe {
            lp.enqueue(WorkItem::sum(DataType::U32, pa, p1, pb, N as u64), LOOP_WAIT)?;
            lp.enqueue(WorkItem::barrier(), LOOP_WAIT)?;
            lp.enqueue(WorkItem::copy(DataType::U32, pb + 4 * SHIFT as u64, pa, (N - SHIFT) as u64), LOOP_WAIT)?;
            lp.enqueue(WorkItem::barrier(), LOOP_WAIT)?;
            last = Some(lp.enqueue(WorkItem::call(DeviceFunction::Increment, pc, 0), LOOP_WAIT)?);
        }
    }
    if let Some(t) = last {
        lp.wait(t, LOOP_WAIT)?;
    }
    lp.shutdown(LOOP_WAIT)?;
    let mut want = initial;
    for _ in 0..ROUNDS {
        let bb: Vec<u32> = want.iter().map(|x| x.wrapping_add(1)).collect();
        want[..N - SHIFT].copy_from_slice(&bb[SHIFT..]);
    }
    ensure_eq_slices("a after the rounds", &fx.download(&a)?, &want)?;
    ensure_eq_slices("increments", &fx.download(&counter)?, &[ROUNDS as u64])?;
    println!("  {} items in order over 4 channels", ROUNDS * 5 + 1);
    Ok(())
}

/// A full queue blocks the producer (and overwrites nothing) until the loop frees a slot.
pub(super) fn work_loop_backpressure(fx: &Fixture) -> Outcome {
    use device_rt::work::{DeviceFunction, WorkItem};
    let mut flag = HostMapped::<u64>::zeroed(&fx.ctx, 1)?;
    let counter = fx.zeros::<u64>(1)?;
    fx.finish("uploads")?;
    let pc = device_ptr(fx, &counter);
    let mut lp = host_shim::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(2, 4, LOOP_WAIT))?;
    // SAFETY: `flag` (host-mapped, set by this thread) and `counter` (device memory of the
    // loop's device) outlive the loop, which is shut down below.
    unsafe { lp.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, flag.device_ptr(), 1), LOOP_WAIT) }?;
    for _ in 0..3 {
        // SAFETY: as above.
        unsafe { lp.enqueue(WorkItem::call(DeviceFunction::Increment, pc, 0), LOOP_WAIT) }?;
    }
    // SAFETY: as above.
    let blocked = unsafe { lp.enqueue(WorkItem::call(DeviceFunction::Increment, pc, 0), Duration::from_millis(100)) };
    ensure(matches!(blocked, Err(Error::Timeout { .. })), || format!("a full queue accepted an item: {blocked:?}"))?;
    ensure_eq_slices("increments while blocked", &fx.download(&counter)?, &[0u64])?;
    flag.write(0, 1);
    // SAFETY: as above.
    let t = unsafe { lp.enqueue(WorkItem::call(DeviceFunction::Increment, pc, 0), LOOP_WAIT) }?;
    lp.wait(t, LOOP_WAIT)?;
    lp.shutdown(LOOP_WAIT)?;
    ensure_eq_slices("increments", &fx.download(&counter)?, &[4u64])
}

/// Bad items (refused by the host, or by the device from a corrupted slot), abort while a
/// channel spins, a spin budget running out, and shutdown with work outstanding: each an
/// `Err`, none a hang.
pub(super) fn work_loop_faults(fx: &Fixture) -> Outcome {
    use device_rt::abi::WaitSite;
use device_rt::work::{BadItem, DeviceFunction, WorkItem};
    let flag = HostMapped::<u64>::zeroed(&fx.ctx, 1)?;
    let wait_forever = WorkItem::call(DeviceFunction::WaitAtLeast, flag.device_ptr(), 1);
    let launch = |budget| host_shim::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(2, 8, budget));

    let mut lp = launch(LOOP_WAIT)?;
    // SAFETY: an item of an unknown kind is refused before it is enqueued.
    let refused = unsafe { lp.enqueue(WorkItem { kind: 99, ..WorkItem::noop() }, LOOP_WAIT) };
    ensure(matches!(refused, Err(Error::BadWorkItem { reason: BadItem::UnknownKind, seq: 0 })), || format!("host refusal: {refused:?}"))?;
    // SAFETY: the loop is fresh (its ring is empty) and the item's only address is null,
    // which the device refuses before any use.
    unsafe { lp.queue_mut().publish_unchecked(WorkItem { seq: 1, ..WorkItem::call(DeviceFunction::Increment, 0, 0) }) };
    let device = lp.wait(host_shim::queue::Ticket(1), LOOP_WAIT);
    ensure(matches!(device, Err(Error::BadWorkItem { reason: BadItem::NullPointer, seq: 1 })), || format!("device refusal: {device:?}"))?;
    lp.shutdown(LOOP_WAIT).or_else(|e| if matches!(e, Error::BadWorkItem { .. }) { Ok(()) } else { Err(e) })?;

    let mut lp = launch(Duration::from_secs(3600))?;
    // SAFETY: `flag`, host-mapped memory of the fixture's context, was made before the
    // loops and is dropped after them; nothing writes it.
    let t = unsafe { lp.enqueue(wait_forever, LOOP_WAIT) }?;
    let abort = lp.abort_handle();
    let aborter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        abort.abort();
    });
    let aborted = lp.wait(t, LOOP_WAIT);
    aborter.join().map_err(|payload| Failure(format!("the aborting thread panicked: {}", crate::panic_message(payload.as_ref()))))?;
    ensure(matches!(aborted, Err(Error::Aborted)), || format!("abort: {aborted:?}"))?;
    stream::wait(&lp_stream(&lp), LOOP_WAIT, "the aborted loop")?;

    let mut lp = launch(Duration::from_millis(200))?;
    // SAFETY: as above.
    let t = unsafe { lp.enqueue(wait_forever, LOOP_WAIT) }?;
    let timed_out = lp.wait(t, LOOP_WAIT);
    ensure(matches!(timed_out, Err(Error::DeviceTimeout { site: Some(WaitSite::Flag), seq: 1 })), || format!("budget: {timed_out:?}"))?;

    let mut lp = launch(LOOP_WAIT)?;
    // SAFETY: as above; a no-op carries no address.
    unsafe {
        lp.enqueue(wait_forever, LOOP_WAIT)?;
        lp.enqueue(WorkItem::noop(), LOOP_WAIT)?;
    }
    let incomplete = lp.shutdown(Duration::from_millis(200));
    ensure(matches!(incomplete, Err(Error::ShutdownIncomplete { outstanding: 3 })), || format!("shutdown: {incomplete:?}"))
}

fn lp_stream(lp: &host_shim::work::WorkLoop) -> Arc<CudaStream> {
    lp.stream().clone()
}

/// The stream-ordered path: captured in a CUDA graph from the first item on and replayed,
/// every replay runs every item; work before it on the user's stream runs first, work
/// after it waits. Calls on a second stream run after the first stream's: a copy on the
/// second stream of what a gated call on the first wrote sees it, and so does a copy on
/// the first stream again of what the second wrote.
pub(super) fn work_loop_stream_graph(fx: &Fixture) -> Outcome {
    use cudarc::driver::sys;
    use device_rt::dtype::DataType;
    use device_rt::work::{DeviceFunction, WorkItem};
    const N: usize = 1 << 20;
    const ITEMS: u64 = 10;
    const REPLAYS: u64 = 5;
    let user = fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
    let src = user.alloc_zeros::<u32>(N).map_err(Error::cuda("cuMemAlloc"))?;
    let dst = user.alloc_zeros::<u32>(N).map_err(Error::cuda("cuMemAlloc"))?;
    let counter = user.alloc_zeros::<u64>(1).map_err(Error::cuda("cuMemAlloc"))?;
    stream::wait(&user, LOOP_WAIT, "allocations")?;
    let mut lp = host_shim::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(4, 64, LOOP_WAIT))?;
    let (ps, pd, pc) = (src.device_ptr(&user).0, dst.device_ptr(&user).0, counter.device_ptr(&user).0);
    // Capture ITEMS increments (the loop's first stream-ordered items: a user's first call
    // may be inside a capture), replay the graph REPLAYS times.
    user.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(Error::cuda("cuStreamBeginCapture"))?;
    for _ in 0..ITEMS {
        // SAFETY: `counter`, device memory of the loop's device, outlives every replay
        // (the stream is waited for below) and only the loop writes it meanwhile.
        unsafe { lp.enqueue_on_stream(&user, WorkItem::call(DeviceFunction::Increment, pc, 0)) }?;
    }
    let graph = user
        .end_capture(sys::CUgraphInstantiate_flags(0))
        .map_err(Error::cuda("cuStreamEndCapture"))?
        .ok_or_else(|| Failure("the capture produced no graph".into()))?;
    for _ in 0..REPLAYS {
        graph.launch().map_err(Error::cuda("cuGraphLaunch"))?;
    }
    stream::wait(&user, LOOP_WAIT, "graph replays")?;
    // Ordering: a memset on the user stream, then the loop copies, then a copy back.
    // SAFETY: `ps` is the start of `src`, N u32 words, alive until the stream has run.
    unsafe { sys::cuMemsetD32Async(ps, 0xC0FFEE, N, user.cu_stream()) }.result().map_err(Error::cuda("cuMemsetD32Async"))?;
    // SAFETY: `src` and `dst` hold N words each, device memory of the loop's device used on
    // `user` alone, and outlive the stream's run of the call (the copy back waits for it).
    unsafe { lp.enqueue_on_stream(&user, WorkItem::copy(DataType::U32, ps, pd, N as u64)) }?;
    let got = user.clone_dtoh(&dst).map_err(Error::cuda("cuMemcpyDtoH"))?;
    ensure(got.iter().all(|&v| v == 0xC0FFEE), || "the loop's copy did not see the memset queued before it".into())?;
    let other = fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
    let back = other.alloc_zeros::<u32>(N).map_err(Error::cuda("cuMemAlloc"))?;
    stream::wait(&other, LOOP_WAIT, "allocations")?;
    let pb = back.device_ptr(&other).0;
    let gate = HostMapped::<u32>::zeroed(&fx.ctx, 1)?;
    let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
    for (round, value) in [(1u32, 0xBEEFu32), (2, 0xF00D)] {
        // `user` holds its memset and its call behind the gate, which opens only once the
        // call on `other` is enqueued too: unordered, `other`'s copy would run first.
        // SAFETY: `gate` is one host-mapped u32, alive until the streams have run (waited
        // for below); `ps` is the start of `src`, N u32 words, alive as long.
        unsafe {
            sys::cuStreamWaitValue32_v2(user.cu_stream(), gate.device_ptr(), round, geq).result().map_err(Error::cuda("cuStreamWaitValue32"))?;
            sys::cuMemsetD32Async(ps, value, N, user.cu_stream()).result().map_err(Error::cuda("cuMemsetD32Async"))?;
        }
        // SAFETY: `src`, `dst` and `back` hold N words each, device memory of the loop's
        // device used by these calls alone, and outlive the streams' run of them (waited
        // for below).
        unsafe {
            lp.enqueue_on_stream(&user, WorkItem::copy(DataType::U32, ps, pd, N as u64))?;
            lp.enqueue_on_stream(&other, WorkItem::copy(DataType::U32, pd, pb, N as u64))?;
            lp.enqueue_on_stream(&user, WorkItem::copy(DataType::U32, pb, ps, N as u64))?;
        }
        std::thread::sleep(Duration::from_millis(20));
        // Ordering: a volatile store to host-mapped memory, which the stream's wait polls;
        // nothing else is published with it.
        // SAFETY: `gate.host_ptr()` is the gate's one live, aligned u32.
        unsafe { gate.host_ptr().write_volatile(round) };
        let got = other.clone_dtoh(&back).map_err(Error::cuda("cuMemcpyDtoH"))?;
        ensure(got.iter().all(|&v| v == value), || format!("round {round}: the second stream's call ran before the first's ({:#x}, not {value:#x})", got[N - 1]))?;
        let again = user.clone_dtoh(&src).map_err(Error::cuda("cuMemcpyDtoH"))?;
        ensure(again.iter().all(|&v| v == value), || format!("round {round}: the first stream's call ran before the second's ({:#x}, not {value:#x})", again[N - 1]))?;
    }
    let count = user.clone_dtoh(&counter).map_err(Error::cuda("cuMemcpyDtoH"))?;
    ensure_eq_slices("increments after replays", &count, &[ITEMS * REPLAYS])?;
    if let Some(e) = lp.async_error() {
        return Err(Failure(format!("loop error: {e}")));
    }
    lp.shutdown(LOOP_WAIT)?;
    Ok(())
}

/// The ring route of stream-ordered calls (a one-channel loop, a non-blocking stream with
/// nothing queued): rounds of a memset on the user's stream, a synchronize (so the call
/// finds the stream idle), a 64 MiB copy through the loop and a copy back right after
/// it, which must see the loop's copy; every synchronized round must take the ring route.
/// Rounds that must take the call-kernel route interleave: their memset is followed by a
/// wait on a host-mapped gate that the host opens only after the call (so the call always
/// finds work queued, however late the host thread gets to it; a 64 MiB memset alone could
/// end first, and once did on an H200). Calls back to back mostly take the
/// call-kernel route. Then a ring-routed item that never finishes: an abort, and a spin
/// budget running out, each release the stream (work queued after the item runs) and leave
/// the loop's error.
pub(super) fn work_loop_stream_ring_route(fx: &Fixture) -> Outcome {
    use cudarc::driver::sys;
    use device_rt::abi::WaitSite;
    use device_rt::dtype::DataType;
    use device_rt::work::{DeviceFunction, WorkItem};
    const N: usize = 16 << 20;
    const ROUNDS: u32 = 40;
    let user = fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
    let src = user.alloc_zeros::<u32>(N).map_err(Error::cuda("cuMemAlloc"))?;
    let dst = user.alloc_zeros::<u32>(N).map_err(Error::cuda("cuMemAlloc"))?;
    let flag = HostMapped::<u64>::zeroed(&fx.ctx, 1)?;
    let gate = HostMapped::<u32>::zeroed(&fx.ctx, 1)?;
    let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
    stream::wait(&user, LOOP_WAIT, "allocations")?;
    let (ps, pd) = (src.device_ptr(&user).0, dst.device_ptr(&user).0);
    let mut lp = host_shim::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(1, 64, LOOP_WAIT))?;
    let mut synced = 0;
    for round in 0..ROUNDS {
        let value = 0xA000_0000 | round;
        // SAFETY: `ps` is the start of `src`, N u32 words, alive until the stream has run.
        unsafe { sys::cuMemsetD32Async(ps, value, N, user.cu_stream()) }.result().map_err(Error::cuda("cuMemsetD32Async"))?;
        if round % 4 != 3 {
            stream::wait(&user, LOOP_WAIT, "the memset")?;
            synced += 1;
        } else {
            // SAFETY: `gate` is one host-mapped u32, alive until the stream has run (the
            // copy back below waits for it).
            unsafe { sys::cuStreamWaitValue32_v2(user.cu_stream(), gate.device_ptr(), round, geq) }.result().map_err(Error::cuda("cuStreamWaitValue32"))?;
        }
        let before = lp.ring_routed();
        // SAFETY: `src` and `dst` hold N words each, device memory of the loop's device
        // used on `user` alone, and outlive the stream's run of the call (the copy back
        // waits for it).
        unsafe { lp.enqueue_on_stream(&user, WorkItem::copy(DataType::U32, ps, pd, N as u64)) }?;
        let routed = lp.ring_routed() - before;
        if round % 4 == 3 {
            // Ordering: a volatile store to host-mapped memory, which the stream's wait
            // polls; nothing else is published with it.
            // SAFETY: `gate.host_ptr()` is the gate's one live, aligned u32.
            unsafe { gate.host_ptr().write_volatile(round) };
        }
        ensure(round % 4 == 3 || routed == 1, || format!("round {round}: a call on an idle stream took the call-kernel route"))?;
        ensure(round % 4 != 3 || routed == 0, || format!("round {round}: a call behind queued work took the ring route"))?;
        let got = user.clone_dtoh(&dst).map_err(Error::cuda("cuMemcpyDtoH"))?;
        ensure(got.iter().all(|&v| v == value), || format!("round {round}: the copy back ran before the loop's copy ({:#x}, not {value:#x})", got[N - 1]))?;
    }
    ensure_eq_slices("ring-routed calls", &[lp.ring_routed()], &[u64::from(synced)])?;
    // A burst: calls right behind one another take the call-kernel route
    // (`LoopConfig::burst_gap`), though each one but the first may find the stream idle.
    const BURST: u64 = 100;
    let before = lp.ring_routed();
    for _ in 0..BURST {
        // SAFETY: a no-op carries no address.
        unsafe { lp.enqueue_on_stream(&user, WorkItem::noop()) }?;
    }
    stream::wait(&user, LOOP_WAIT, "a burst of no-ops")?;
    let burst_routed = lp.ring_routed() - before;
    ensure(burst_routed <= BURST / 2, || format!("{burst_routed} of {BURST} calls back to back took the ring route"))?;
    if let Some(e) = lp.async_error() {
        return Err(Failure(format!("loop error: {e}")));
    }
    lp.shutdown(LOOP_WAIT)?;

    let wait_forever = WorkItem::call(DeviceFunction::WaitAtLeast, flag.device_ptr(), 1);
    for budget in [Duration::from_secs(3600), Duration::from_millis(200)] {
        let lp = host_shim::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(1, 64, budget))?;
        // SAFETY: `flag`, host-mapped memory of the fixture's context, was made before the
        // loops and is dropped after them; nothing writes it.
        unsafe { lp.enqueue_on_stream(&user, wait_forever) }?;
        ensure(lp.ring_routed() == 1, || "the stuck item did not take the ring route".into())?;
        // SAFETY: `pd` is the start of `dst`, N u32 words, alive until the stream has run.
        unsafe { sys::cuMemsetD32Async(pd, 7, N, user.cu_stream()) }.result().map_err(Error::cuda("cuMemsetD32Async"))?;
        std::thread::sleep(Duration::from_millis(50));
        if budget > LOOP_WAIT {
            lp.abort();
        }
        stream::wait(&user, LOOP_WAIT, "a stream behind an item the loop gave up")?;
        let got = user.clone_dtoh(&dst).map_err(Error::cuda("cuMemcpyDtoH"))?;
        ensure(got.iter().all(|&v| v == 7), || "the memset queued after the item did not run".into())?;
        let error = lp.async_error();
        let expected = if budget > LOOP_WAIT {
            matches!(error, Some(Error::Aborted))
        } else {
            matches!(error, Some(Error::DeviceTimeout { site: Some(WaitSite::Flag), seq: 1 }))
        };
        ensure(expected, || format!("budget {budget:?}: the loop's error is {error:?}"))?;
    }
    println!("  {synced} of {ROUNDS} calls on the ring route, {} on the call-kernel route; {burst_routed} of {BURST} back to back on the ring route", ROUNDS - synced);
    Ok(())
}

/// Eight ranks' loops on one GPU, each on its own stream, all co-resident: items
/// enqueued to all of them in turn complete, with correct results.
pub(super) fn work_loop_eight_ranks(fx: &Fixture) -> Outcome {
    use device_rt::dtype::DataType;
    use device_rt::work::WorkItem;
    const RANKS: usize = 8;
    const N: usize = 1 << 16;
    const ROUNDS: u32 = 200;
    // Every allocation first: CUDA may make an allocation wait for running kernels.
    let mut loops = (0..RANKS)
        .map(|_| host_shim::work::WorkLoop::new(&fx.ctx, &fx.module, loop_config(2, 32, LOOP_WAIT)))
        .collect::<Result<Vec<_>, Error>>()?;
    let bufs = (0..RANKS).map(|r| fx.upload(&vec![r as u32; N])).collect::<Result<Vec<_>, Error>>()?;
    let ones = fx.upload(&vec![1u32; N])?;
    fx.finish("uploads")?;
    for lp in loops.iter_mut() {
        lp.start()?;
    }
    let mut tickets = Vec::new();
    for _ in 0..ROUNDS {
        tickets.clear();
        for (lp, buf) in loops.iter_mut().zip(&bufs) {
            let p = device_ptr(fx, buf);
            // SAFETY: `buf` and `ones` hold N words each, device memory of the loops' device
            // that outlives their shutdown below; each loop writes its own `buf` alone.
            tickets.push(unsafe { lp.enqueue(WorkItem::sum(DataType::U32, p, device_ptr(fx, &ones), p, N as u64), LOOP_WAIT) }?);
        }
    }
    for (lp, t) in loops.iter().zip(&tickets) {
        lp.wait(*t, LOOP_WAIT)?;
    }
    for lp in loops.iter_mut() {
        lp.shutdown(LOOP_WAIT)?;
    }
    for (r, buf) in bufs.iter().enumerate() {
        let got = fx.download(buf)?;
        ensure(got.iter().all(|&v| v == r as u32 + ROUNDS), || format!("rank {r}: {:?}…", &got[..4]))?;
    }
    println!("  {RANKS} loops × {ROUNDS} items");
    Ok(())
}

/// A two-rank communicator on the device, driven through its public calls: each rank's
/// stream captures a graph of a memset and 20 `Comm::all_reduce` calls, each into its
/// own slice of the output, and the graphs are replayed 100 times; the last replay's
/// 20 sums are checked on both ranks (the memset clears them first, so each was
/// computed by that replay). Twice: on the default layout, whose two call kernels per rank
/// do not fit one GPU (plain launches), and with 31 call channels, where they do (each call
/// kernel overlaps the one before it).
pub(super) fn comm_graph_replays(fx: &Fixture) -> Outcome {
    use host_shim::comm::Tuning;
    use host_shim::work::LoopConfig;
    let default = Tuning::default();
    graph_replays(fx, default, false)?;
    graph_replays(fx, Tuning { loop_cfg: LoopConfig { call_channels: 31, ..default.loop_cfg }, ..default }, true)
}

/// [`comm_graph_replays`] on a communicator of `cfg`, whose call kernels overlap or not as
/// `overlap` says.
fn graph_replays(fx: &Fixture, cfg: host_shim::comm::Tuning, overlap: bool) -> Outcome {
    use cudarc::driver::sys;
    use host_shim::comm::{Comm, ReduceOp};
    const CALLS: usize = 20;
    const REPLAYS: usize = 100;
    const N: usize = 1024;
    let streams = [fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?, fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?];
    let inputs: [Vec<f32>; 2] = [(0..N).map(|i| i as f32).collect(), (0..N).map(|i| (3 * i % 17) as f32 - 8.0).collect()];
    let sends = [streams[0].clone_htod(&inputs[0]).map_err(Error::cuda("cuMemcpyHtoD"))?, streams[1].clone_htod(&inputs[1]).map_err(Error::cuda("cuMemcpyHtoD"))?];
    let mut recvs = [streams[0].alloc_zeros::<f32>(N * CALLS).map_err(Error::cuda("cuMemAlloc"))?, streams[1].alloc_zeros::<f32>(N * CALLS).map_err(Error::cuda("cuMemAlloc"))?];
    for s in &streams {
        stream::wait(s, LOOP_WAIT, "uploads")?;
    }
    let comms = Comm::from_devices_tuned(streams.to_vec(), cfg, &mut |_, _| Ok(()))?;
    if comms.iter().any(|c| c.call_kernels_overlap() != overlap) {
        return Err(Failure(format!("call kernels overlap: {:?}, expected {overlap}", comms.iter().map(Comm::call_kernels_overlap).collect::<Vec<_>>())));
    }
    // cudarc's event tracking would make a captured call wait on an event recorded before
    // the capture, which CUDA refuses.
    // SAFETY: every stream was waited for; each buffer is used on its rank's stream alone.
    unsafe { fx.ctx.disable_event_tracking() };
    let replayed = (|| -> Outcome {
        let mut graphs = Vec::new();
        for ((comm, send), recv) in comms.iter().zip(&sends).zip(&mut recvs) {
            let s = comm.stream();
            s.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(Error::cuda("cuStreamBeginCapture"))?;
            s.memset_zeros(recv).map_err(Error::cuda("cuMemsetD8Async"))?;
            for call in 0..CALLS {
                let mut slice = recv.slice_mut(call * N..(call + 1) * N);
                comm.all_reduce(send, &mut slice, ReduceOp::Sum)?;
            }
            let graph = s
                .end_capture(sys::CUgraphInstantiate_flags(0))
                .map_err(Error::cuda("cuStreamEndCapture"))?
                .ok_or_else(|| Failure("the capture produced no graph".into()))?;
            graphs.push(graph);
        }
        for _ in 0..REPLAYS {
            for g in &graphs {
                g.launch().map_err(Error::cuda("cuGraphLaunch"))?;
            }
        }
        for s in &streams {
            stream::wait(s, LOOP_WAIT, "graph replays")?;
        }
        Ok(())
    })();
    // SAFETY: the streams were waited for (or the loops failed, and the buffers are only
    // read back below after the streams end).
    unsafe { fx.ctx.enable_event_tracking() };
    replayed?;
    let want: Vec<f32> = inputs[0].iter().zip(&inputs[1]).map(|(a, b)| a + b).collect();
    for (rank, (comm, recv)) in comms.iter().zip(&recvs).enumerate() {
        if let Some(e) = comm.async_error() {
            return Err(Failure(format!("rank {rank}: {e}")));
        }
        let got = streams[rank].clone_dtoh(recv).map_err(Error::cuda("cuMemcpyDtoH"))?;
        for call in 0..CALLS {
            ensure_eq_slices(&format!("rank {rank}, call {call} of the last replay (call kernels overlap: {overlap})"), &got[call * N..(call + 1) * N], &want)?;
        }
    }
    for mut comm in comms {
        comm.shutdown(LOOP_WAIT)?;
    }
    Ok(())
}

/// `DeviceAlloc::zeroed` has finished zeroing when it returns, whatever else the device
/// is doing: with a kernel asleep for 50 ms on the legacy stream (where a plain
/// `cuMemsetD8` would queue behind it), 2 GiB are zeroed, a pattern is uploaded at once on
/// the fixture's non-blocking stream into the allocation's first and last MiB, and read
/// back right away and again after the sleeping kernel has ended. A zeroing still
/// pending would wipe the pattern.
pub(super) fn device_alloc_zeroed(fx: &Fixture) -> Outcome {
    use cudarc::driver::{PushKernelArg, result};
    const BYTES: usize = 2 << 30;
    const PART: usize = 1 << 20;
    const SLEEP_NS: u64 = 50_000_000;
    let legacy = fx.ctx.default_stream();
    let mut clocks = fx.zeros::<u64>(4)?;
    fx.finish("the clocks buffer")?;
    let k = fx.kernel("selftest_clocks")?;
    // SAFETY: the kernel takes these arguments and writes four u64 to `clocks`, which
    // outlives it (the legacy stream is synchronized below).
    unsafe { legacy.launch_builder(&k).arg(&mut clocks).arg(&SLEEP_NS).launch(cfg(1, 1, 0)) }.map_err(Error::cuda("cuLaunchKernel"))?;
    let alloc = host_shim::work::DeviceAlloc::zeroed(&fx.ctx, BYTES)?;
    let pattern: Vec<u8> = (0..PART).map(|i| (i % 251) as u8 + 1).collect();
    let parts = [alloc.ptr(), alloc.ptr() + (BYTES - PART) as u64];
    for &at in &parts {
        // SAFETY: a MiB inside the allocation; `pattern` outlives the copy (waited below).
        unsafe { result::memcpy_htod_async(at, &pattern, fx.stream.cu_stream()) }.map_err(Error::cuda("cuMemcpyHtoDAsync"))?;
    }
    fx.finish("the uploads")?;
    let check = |pass: &str| -> Outcome {
        for &at in &parts {
            let mut got = vec![0u8; PART];
            // SAFETY: as above; nothing else writes the allocation.
            unsafe { result::memcpy_dtoh_async(&mut got, at, fx.stream.cu_stream()) }.map_err(Error::cuda("cuMemcpyDtoHAsync"))?;
            fx.finish("the download")?;
            ensure_eq_slices(&format!("the pattern at offset {} read back {pass}", at - alloc.ptr()), &got, &pattern)?;
        }
        Ok(())
    };
    let first = check("at once");
    stream::wait(&legacy, KERNEL_TIMEOUT, "the sleeping kernel")?;
    first?;
    check("after the legacy stream's kernel ended")
}

/// A communicator on a symmetric heap (two ranks, both PEs on this GPU, two-shot forced)
/// reads heap inputs in place: out-of-place `Comm::all_reduce` calls whose send buffers
/// are `Heap::slice` views, of 1 KiB, 1 MiB and 6 MiB, each
/// rank's input rewritten on its stream
/// (a device-to-device copy) right after each call, back to back with no host
/// synchronisation (so a call that completed before its peer had read the input would
/// hand the peer the next call's values); every sum checked against the host's. Then a
/// 1 MiB call whose input lies outside the heap on one rank and in it on the other: both
/// ranks stop with `RanksDisagree`, neither hangs. `Heap::slice` refuses views misaligned,
/// past or outside the heap, or of a PE that does not exist.
pub(super) fn comm_on_heap_zero_copy(fx: &Fixture) -> Outcome {
    use device_rt::algo::CollFunction;
    use device_rt::dtype::DataType;
    use device_rt::redop::RedOpKind;
    use device_rt::work::{BadItem, WorkItem};
    use device_rt::algo::AlgorithmChoice;
    use host_shim::comm::{Comm, Tuning, ReduceOp};
    use host_shim::shmem::Heap;
    const COUNTS: [usize; 3] = [256, 1 << 18, 6 << 18];
    const ROUNDS: usize = 3;
    let streams = vec![fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?, fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?];
    let mut heap = Heap::new(&streams, 64 << 20, LOOP_WAIT)?;
    let value = |rank: usize, round: usize, i: usize| ((i * 7 + 13 * round + 5 * rank) % 1001) as f32 * 0.125 - 40.0;
    let mut calls = Vec::new();
    // Each call's receive buffers, a round after another, per rank.
    let mut outs = Vec::new();
    // Every round's inputs, uploaded now: a copy from pageable host memory waits for its
    // stream, which would wait for the peer's call.
    let mut rounds = Vec::new();
    for &count in &COUNTS {
        let src = heap.malloc(&[4 * count as u64; 2])?;
        let dsts: Vec<_> = streams.iter().map(|s| s.alloc_zeros::<f32>(count * ROUNDS).map_err(Error::cuda("cuMemAlloc"))).collect::<std::result::Result<_, _>>()?;
        for (rank, s) in streams.iter().enumerate() {
            let data: Vec<f32> = (0..ROUNDS).flat_map(|round| (0..count).map(move |i| value(rank, round, i))).collect();
            rounds.push(s.clone_htod(&data).map_err(Error::cuda("cuMemcpyHtoD"))?);
        }
        calls.push((count, src));
        outs.push(dsts);
    }
    let big = COUNTS[1];
    let outside = streams[1].alloc_zeros::<f32>(big).map_err(Error::cuda("cuMemAlloc"))?;
    let strays: Vec<_> = streams.iter().map(|s| s.alloc_zeros::<f32>(big).map_err(Error::cuda("cuMemAlloc"))).collect::<std::result::Result<_, _>>()?;
    // Round `round`'s input of call `call` into the rank's heap buffer, on its stream.
    let upload = |call: usize, rank: usize, round: usize| -> Outcome {
        let (count, src) = &calls[call];
        let (from, _record) = rounds[2 * call + rank].device_ptr(&streams[rank]);
        // SAFETY: both hold `count` floats (round `round` of the uploaded rounds); the copy
        // is ordered on the rank's stream after the call that reads `src`.
        unsafe { cudarc::driver::result::memcpy_dtod_async(src[rank], from + (4 * count * round) as u64, 4 * count, streams[rank].cu_stream()) }.map_err(Error::cuda("cuMemcpyDtoDAsync"))?;
        Ok(())
    };
    for call in 0..calls.len() {
        for rank in 0..2 {
            upload(call, rank, 0)?;
        }
    }
    for s in &streams {
        stream::wait(s, LOOP_WAIT, "uploads")?;
    }
    let cfg = Tuning { algorithm: AlgorithmChoice::TwoShot, ..Tuning::default() };
    // SAFETY: the heap outlives the communicators: they are shut down below, before it drops.
    let comms = unsafe { Comm::from_heap_tuned(&heap, streams.clone(), cfg)? };
    for round in 0..ROUNDS {
        for (call, (count, src)) in calls.iter().enumerate() {
            for (rank, comm) in comms.iter().enumerate() {
                // The public call, its send buffer a typed view of the heap allocation.
                let send = heap.slice::<f32>(rank, src[rank], *count, comm.stream())?;
                let mut recv = outs[call][rank].slice_mut(count * round..count * (round + 1));
                comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
                if round + 1 < ROUNDS {
                    upload(call, rank, round + 1)?;
                }
            }
        }
    }
    for s in &streams {
        stream::wait(s, LOOP_WAIT, "all-reduces on heap inputs")?;
    }
    for (rank, comm) in comms.iter().enumerate() {
        if let Some(e) = comm.async_error() {
            return Err(Failure(format!("rank {rank}: {e}")));
        }
    }
    for ((count, _), dsts) in calls.iter().zip(&outs) {
        for (rank, dst) in dsts.iter().enumerate() {
            let got = streams[rank].clone_dtoh(dst).map_err(Error::cuda("cuMemcpyDtoH"))?;
            for round in 0..ROUNDS {
                let want: Vec<f32> = (0..*count).map(|i| value(0, round, i) + value(1, round, i)).collect();
                ensure_eq_slices(&format!("rank {rank}, {count} floats, round {round}"), &got[round * count..(round + 1) * count], &want)?;
            }
        }
    }
    let src = &calls[1].1;
    for (rank, comm) in comms.iter().enumerate() {
        let input = if rank == 0 { src[0] } else { outside.device_ptr(comm.stream()).0 };
        let item = WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, input, strays[rank].device_ptr(comm.stream()).0, big as u64, 0);
        // SAFETY: every buffer holds `big` floats (rank 0's input: the heap allocation of
        // that call) and outlives the communicators, which are shut down below.
        unsafe { comm.enqueue_on_stream(item) }?;
    }
    for s in &streams {
        stream::wait(s, LOOP_WAIT, "the disagreeing all-reduce")?;
    }
    for (rank, comm) in comms.iter().enumerate() {
        match comm.async_error() {
            Some(Error::BadWorkItem { reason: BadItem::RanksDisagree, .. }) => {}
            other => return Err(Failure(format!("rank {rank}: {other:?}, not RanksDisagree"))),
        }
    }
    for mut comm in comms {
        // The loops stopped with the error: shutting down reports it again.
        let _ = comm.shutdown(LOOP_WAIT);
    }
    let (base, stream0) = (calls[0].1[0], &streams[0]);
    for (what, view) in [
        ("misaligned", heap.slice::<f32>(0, base + 2, 4, stream0).map(|_| ())),
        ("past the heap", heap.slice::<f32>(0, base, usize::MAX / 8, stream0).map(|_| ())),
        ("outside the heap", heap.slice::<f32>(0, strays[0].device_ptr(stream0).0, 4, stream0).map(|_| ())),
        ("of a PE that does not exist", heap.slice::<f32>(7, base, 4, stream0).map(|_| ())),
    ] {
        if view.is_ok() {
            return Err(Failure(format!("Heap::slice took a view {what}")));
        }
    }
    for (_, src) in &calls {
        heap.free(src)?;
    }
    Ok(())
}

/// What a collective call learns of its buffers (`host_shim::memory::buffer_info`, which
/// decides whether peers may write into an output directly): `cuMemAlloc` memory of the
/// fixture's context is mapped for its peers; stream-ordered memory of the device's default
/// pool is for no other device until the pool grants it, and is once it does (the second
/// device, where there is one); host-mapped memory is not device memory.
pub(super) fn buffer_info_says_what_peers_may_write(fx: &Fixture) -> Outcome {
    use host_shim::memory::buffer_info;
    let ctx = fx.ctx.cu_ctx();
    let legacy = host_shim::work::DeviceAlloc::zeroed(&fx.ctx, 4096)?;
    let info = buffer_info(legacy.ptr(), ctx, &[])?;
    ensure(info.device == Some(fx.ctx.ordinal()) && info.peer_mapped, || format!("cuMemAlloc memory: {info:?}"))?;
    let pooled = fx.zeros::<u64>(512)?;
    fx.finish("the pool allocation")?;
    let pooled_at = device_ptr(fx, &pooled);
    let alone = buffer_info(pooled_at, ctx, &[])?;
    ensure(alone.device == Some(fx.ctx.ordinal()) && alone.peer_mapped, || format!("pool memory with no other device: {alone:?}"))?;
    let mapped = HostMapped::<u64>::zeroed(&fx.ctx, 16)?;
    let host = buffer_info(mapped.device_ptr(), ctx, &[])?;
    ensure(host.device.is_none() && !host.peer_mapped, || format!("host-mapped memory: {host:?}"))?;
    // The allocation each lies in (what the typed calls check buffers' extents against).
    let holds = |allocation: (u64, u64), start: u64, bytes: u64| allocation.0 <= start && start + bytes <= allocation.0 + allocation.1;
    ensure(holds(info.allocation, legacy.ptr(), 4096), || format!("cuMemAlloc memory of 4096 bytes at {:#x}: {info:?}", legacy.ptr()))?;
    ensure(holds(alone.allocation, pooled_at, 4096), || format!("pool memory of 4096 bytes at {pooled_at:#x}: {alone:?}"))?;
    ensure(holds(host.allocation, mapped.device_ptr(), 128), || format!("host-mapped memory of 128 bytes at {:#x}: {host:?}", mapped.device_ptr()))?;
    let devices = host_shim::device::list()?.len();
    if devices < 2 || !fx.ctx.has_async_alloc() {
        return Ok(());
    }
    let peer = (fx.ctx.ordinal() + 1) % devices;
    let before = buffer_info(pooled_at, ctx, &[peer])?;
    let mut pool: cudarc::driver::sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: the fixture's device; `pool` receives its default pool's handle.
    unsafe { cudarc::driver::sys::cuDeviceGetDefaultMemPool(&raw mut pool, fx.ctx.cu_device()) }.result().map_err(Error::cuda("cuDeviceGetDefaultMemPool"))?;
    let access = cudarc::driver::sys::CUmemAccessDesc {
        location: cudarc::driver::sys::CUmemLocation { type_: cudarc::driver::sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE, id: peer as i32 },
        flags: cudarc::driver::sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: the device's live default pool; one access descriptor.
    unsafe { cudarc::driver::sys::cuMemPoolSetAccess(pool, &raw const access, 1) }.result().map_err(Error::cuda("cuMemPoolSetAccess"))?;
    let after = buffer_info(pooled_at, ctx, &[peer])?;
    ensure(after.peer_mapped, || format!("pool memory once the pool grants device {peer}: {after:?} (before: {before:?})"))?;
    ensure(!before.peer_mapped || before == after, || format!("pool memory before the grant: {before:?}"))
}

/// A communicator dropped without a shutdown gives its memory back promptly, and never
/// before the streams it served have run its calls. Two ranks on the device (two loops,
/// their connections and staging: 2 × 48 MiB per rank by default): free device memory
/// (`cuMemGetInfo`) falls by at least the staging when they are made, and once they are
/// dropped and their streams have run their all-reduces it is back within 16 MiB of where
/// it was, within a few seconds (not at the next communicator's start, not at process
/// exit). Then again with rank 0's all-reduce queued behind a gate on its stream when the
/// communicator drops: the memory waits for the stream, the call kernel runs without a
/// fault once the gate opens, and the memory comes back after it. A first communicator,
/// made and dropped before, takes the context's lasting growth (modules, the kernels'
/// local memory) out of the measure.
pub(super) fn comm_drop_frees_memory_promptly(fx: &Fixture) -> Outcome {
    use cudarc::driver::sys;
    use host_shim::comm::{Comm, Tuning, ReduceOp};
    const N: usize = 1 << 16;
    const SLACK: u64 = 16 << 20;
    const PROMPTLY: Duration = Duration::from_secs(5);
    let free_now = || -> Result<u64, Failure> {
        fx.ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let (free, _) = cudarc::driver::result::mem_get_info().map_err(Error::cuda("cuMemGetInfo"))?;
        Ok(free as u64)
    };
    // Polls until free memory is back to `before` less the slack, or PROMPTLY has passed;
    // what was free last.
    let back_to = |before: u64| -> Result<(bool, u64), Failure> {
        let start = std::time::Instant::now();
        loop {
            let free = free_now()?;
            if free + SLACK >= before || start.elapsed() > PROMPTLY {
                return Ok((free + SLACK >= before, free));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let streams = [fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?, fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?];
    let sends = [streams[0].alloc_zeros::<f32>(N).map_err(Error::cuda("cuMemAlloc"))?, streams[1].alloc_zeros::<f32>(N).map_err(Error::cuda("cuMemAlloc"))?];
    let mut recvs = [streams[0].alloc_zeros::<f32>(N).map_err(Error::cuda("cuMemAlloc"))?, streams[1].alloc_zeros::<f32>(N).map_err(Error::cuda("cuMemAlloc"))?];
    let gate = HostMapped::<u32>::zeroed(&fx.ctx, 1)?;
    for s in &streams {
        stream::wait(s, LOOP_WAIT, "allocations")?;
    }
    let staging = 2 * 2 * Tuning::default().staging_bytes;
    let all_reduce = |comms: &[Comm], recvs: &mut [cudarc::driver::CudaSlice<f32>; 2]| -> Outcome {
        for ((comm, send), recv) in comms.iter().zip(&sends).zip(recvs.iter_mut()) {
            comm.all_reduce(send, recv, ReduceOp::Sum)?;
        }
        Ok(())
    };
    let warm_up = free_now()?;
    let comms = Comm::from_devices(streams.to_vec())?;
    all_reduce(&comms, &mut recvs)?;
    for s in &streams {
        stream::wait(s, LOOP_WAIT, "the first communicator's all-reduces")?;
    }
    drop(comms);
    back_to(warm_up)?;

    let before = free_now()?;
    let comms = Comm::from_devices(streams.to_vec())?;
    let made = free_now()?;
    ensure(before.saturating_sub(made) >= staging, || format!("two ranks took {} MiB; their staging alone is {} MiB", before.saturating_sub(made) >> 20, staging >> 20))?;
    all_reduce(&comms, &mut recvs)?;
    for s in &streams {
        stream::wait(s, LOOP_WAIT, "the all-reduces")?;
    }
    drop(comms);
    let (back, free) = back_to(before)?;
    ensure(back, || format!("{PROMPTLY:?} after the drop, {} MiB of the communicator's {} MiB were still not free", before.saturating_sub(free) >> 20, before.saturating_sub(made) >> 20))?;

    let before = free_now()?;
    let comms = Comm::from_devices(streams.to_vec())?;
    let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
    // SAFETY: `gate` is one host-mapped u32 that outlives the stream's wait (the stream is
    // waited for below, before the gate drops).
    unsafe { sys::cuStreamWaitValue32_v2(streams[0].cu_stream(), gate.device_ptr(), 1, geq) }.result().map_err(Error::cuda("cuStreamWaitValue32"))?;
    all_reduce(&comms, &mut recvs)?;
    drop(comms);
    // The loops are aborted and their kernels end; rank 0's call kernel has not run yet.
    // Were its loop's memory freed now, that call kernel would read freed memory.
    std::thread::sleep(Duration::from_millis(200));
    // Ordering: a volatile store to host-mapped memory, which the stream's wait polls.
    // SAFETY: `gate.host_ptr()` is the gate's one live, aligned u32.
    unsafe { gate.host_ptr().write_volatile(1) };
    for s in &streams {
        stream::wait(s, LOOP_WAIT, "the streams behind a dropped communicator")?;
    }
    let (back, free) = back_to(before)?;
    ensure(back, || format!("{PROMPTLY:?} after the gated stream ran, {} MiB were still not free", before.saturating_sub(free) >> 20))?;
    println!("  {} MiB back within {PROMPTLY:?} of each drop", staging >> 20);
    Ok(())
}

/// `len` floats at `ptr` in the device's memory, handed to the typed calls as a buffer
/// (cudarc's `DevicePtr`, whose implementations say what they hold): a claim of more than
/// the allocation holds is what the calls must refuse.
struct Claimed<'s> {
    ptr: u64,
    len: usize,
    stream: &'s Arc<CudaStream>,
}

impl cudarc::driver::DeviceSlice<f32> for Claimed<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn stream(&self) -> &Arc<CudaStream> {
        self.stream
    }
}

impl cudarc::driver::DevicePtr<f32> for Claimed<'_> {
    fn device_ptr<'a>(&'a self, _stream: &'a CudaStream) -> (u64, cudarc::driver::SyncOnDrop<'a>) {
        (self.ptr, cudarc::driver::SyncOnDrop::Sync(None))
    }
}

impl cudarc::driver::DevicePtrMut<f32> for Claimed<'_> {
    fn device_ptr_mut<'a>(&'a mut self, _stream: &'a CudaStream) -> (u64, cudarc::driver::SyncOnDrop<'a>) {
        (self.ptr, cudarc::driver::SyncOnDrop::Sync(None))
    }
}

/// The typed calls check every buffer's whole extent against its allocation: an
/// all-reduce whose input claims one float more than its `cuMemAlloc` allocation holds,
/// or whose output starts one float into its allocation and claims all of it, is refused
/// with an argument error, and nothing is enqueued (the stream stays idle, the loop
/// healthy); buffers that fit run, with the right sums. A stream-ordered (pool)
/// allocation, and host-mapped memory, are asked about the same way.
pub(super) fn comm_refuses_buffers_past_their_allocation(fx: &Fixture) -> Outcome {
    use host_shim::comm::{Comm, ReduceOp};
    use host_shim::work::DeviceAlloc;
    const N: usize = 1 << 19;
    let streams = [fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?, fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?];
    let sends = [DeviceAlloc::zeroed(&fx.ctx, 4 * N)?, DeviceAlloc::zeroed(&fx.ctx, 4 * N)?];
    let recvs = [DeviceAlloc::zeroed(&fx.ctx, 4 * N)?, DeviceAlloc::zeroed(&fx.ctx, 4 * N)?];
    for (rank, send) in sends.iter().enumerate() {
        let values: Vec<u8> = (0..N).flat_map(|i| ((rank + 1) as f32 * (i % 7) as f32).to_le_bytes()).collect();
        // SAFETY: no kernel uses the allocation yet; `values` fills it exactly.
        unsafe { send.upload(0, &values) }?;
    }
    let pooled = streams[0].alloc_zeros::<f32>(N).map_err(Error::cuda("cuMemAlloc"))?;
    let mapped = HostMapped::<f32>::zeroed(&fx.ctx, N)?;
    stream::wait(&streams[0], LOOP_WAIT, "allocations")?;
    let comms = Comm::from_devices(streams.to_vec())?;
    let claim = |alloc: &DeviceAlloc, offset: u64, len: usize, rank: usize| Claimed { ptr: alloc.ptr() + offset, len, stream: &streams[rank] };
    let refused = |what: &str, result: host_shim::Result<()>| -> Outcome {
        match result {
            Err(Error::InvalidArgument(why)) if why.starts_with(what) => {}
            other => return Err(Failure(format!("{what} past its allocation: {other:?}"))),
        }
        ensure(stream::idle(&streams[0])?, || format!("{what} past its allocation: work was enqueued"))?;
        ensure(comms[0].async_error().is_none(), || format!("{what} past its allocation: the loop stopped"))
    };
    refused("the input", comms[0].all_reduce(&claim(&sends[0], 0, N + 1, 0), &mut claim(&recvs[0], 0, N + 1, 0), ReduceOp::Sum))?;
    refused("the output", comms[0].all_reduce(&claim(&sends[0], 0, N, 0), &mut claim(&recvs[0], 4, N, 0), ReduceOp::Sum))?;
    let pooled_claim = Claimed { ptr: device_ptr(fx, &pooled), len: N + 1, stream: &streams[0] };
    // The output as long as the input (its length is checked first), and checked after it.
    refused("the input", comms[0].all_reduce(&pooled_claim, &mut claim(&recvs[0], 0, N + 1, 0), ReduceOp::Sum))
        .or_else(|f| if fx.ctx.has_async_alloc() { Err(f) } else { Ok(()) })?;
    let mapped_claim = Claimed { ptr: mapped.device_ptr(), len: N + 1, stream: &streams[0] };
    refused("the input", comms[0].all_reduce(&mapped_claim, &mut claim(&recvs[0], 0, N + 1, 0), ReduceOp::Sum))?;
    for (rank, comm) in comms.iter().enumerate() {
        comm.all_reduce(&claim(&sends[rank], 0, N, rank), &mut claim(&recvs[rank], 0, N, rank), ReduceOp::Sum)?;
    }
    for s in &streams {
        stream::wait(s, LOOP_WAIT, "the all-reduces")?;
    }
    for (rank, comm) in comms.iter().enumerate() {
        if let Some(e) = comm.async_error() {
            return Err(Failure(format!("rank {rank}: {e}")));
        }
    }
    let mut words = vec![0u64; N / 2];
    for recv in &recvs {
        // SAFETY: the all-reduces that wrote it have completed (their streams waited for).
        unsafe { recv.download(&mut words) }?;
        let got: Vec<f32> = words.iter().flat_map(|w| [f32::from_bits(*w as u32), f32::from_bits((*w >> 32) as u32)]).collect();
        let want: Vec<f32> = (0..N).map(|i| 3.0 * (i % 7) as f32).collect();
        ensure_eq_slices("the sums", &got, &want)?;
    }
    for mut comm in comms {
        comm.shutdown(LOOP_WAIT)?;
    }
    Ok(())
}

/// `Comm::init_rank` with two ranks of this process on the fixture's device, each on a
/// thread of its own (as a program that drives several GPUs from one process calls
/// `ncclCommInitRank`): the ranks meet at a fresh id, export and import each other's
/// connection blocks, and all_reduce and all_gather in place are checked (a rank whose
/// loop stopped is reported as such, with the time its calls took, before any data is
/// compared; wrong data names its first wrong element); one rank's abort then fails the
/// other's next call with the reason that names it. A failure reports every rank's
/// outcome, when each of its steps returned on the host, and its loop's header.
///
/// The threads allocate everything before either calls, meet, call, meet again once both
/// streams have passed the calls, and only then copy the results back: with two ranks in
/// one context, CUDA may make one thread's allocation or memset (or, loading lazily, the
/// memset's kernel) wait until the context's running kernels end, and the other rank's
/// call, waiting for this rank, then runs until its timeout (on an H100, a gather output
/// allocated between the calls stopped 1 run of 45 with `CUDA_MODULE_LOADING=EAGER` and
/// 11 of 45 without).
pub(super) fn comm_init_rank_on_threads(fx: &Fixture) -> Outcome {
    use host_shim::comm::{Comm, CommConfig, CommId, ReduceOp};
    use std::time::Instant;
    /// When each step of a rank's thread returned, from the threads' common start.
    struct Timeline {
        start: Instant,
        steps: Vec<(&'static str, Duration)>,
    }
    impl Timeline {
        fn step(&mut self, what: &'static str) {
            self.steps.push((what, self.start.elapsed()));
        }
        fn describe(&self) -> String {
            self.steps.iter().map(|(what, at)| format!("{what} {:.1} ms", at.as_secs_f64() * 1e3)).collect::<Vec<_>>().join(", ")
        }
    }
    type Rank = Result<(Comm, Vec<f32>, Vec<f32>), Failure>;
    const N: usize = 1 << 16;
    let id = CommId::new()?;
    let mut cfg = CommConfig::default();
    (cfg.max_channels, cfg.timeout) = (4, Duration::from_secs(20));
    let start = Instant::now();
    let (allocated, passed) = (std::sync::Barrier::new(2), std::sync::Barrier::new(2));
    let (allocated, passed) = (&allocated, &passed);
    let ranks: Vec<(Rank, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|rank| {
                s.spawn(move || {
                    let mut timeline = Timeline { start, steps: Vec::new() };
                    let mut comm = None;
                    // Each phase's error is kept until this thread has met the other at
                    // both meetings, which it always reaches (a thread that left early would
                    // hold the other at a meeting for good).
                    let prepared = (|| -> Result<_, Failure> {
                        let stream = fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
                        let input: Vec<f32> = (0..N).map(|i| (rank * N + i % 1000) as f32).collect();
                        comm = Some(Comm::init_rank(&id, 2, rank, stream.clone(), cfg)?);
                        timeline.step("init_rank");
                        let buf = stream.clone_htod(&input).map_err(Error::cuda("cuMemcpyHtoD"))?;
                        let gathered = stream.alloc_zeros::<f32>(2 * N).map_err(Error::cuda("cuMemAlloc"))?;
                        stream::wait(&stream, LOOP_WAIT, "the uploads")?;
                        timeline.step("buffers allocated");
                        Ok((stream, buf, gathered))
                    })();
                    allocated.wait();
                    let called = prepared.and_then(|(stream, mut buf, mut gathered)| {
                        let this = comm.as_ref().ok_or_else(|| Failure("no communicator after init_rank".into()))?;
                        this.all_reduce_in_place(&mut buf, ReduceOp::Sum)?;
                        timeline.step("all_reduce enqueued");
                        this.all_gather(&buf, &mut gathered)?;
                        timeline.step("all_gather enqueued");
                        stream::wait(&stream, LOOP_WAIT, "the ranks' collectives")?;
                        timeline.step("calls passed");
                        Ok((stream, buf, gathered))
                    });
                    passed.wait();
                    let outcome = called.and_then(|(stream, buf, gathered)| -> Rank {
                        // A loop that stopped (a timeout, an abort) ends its calls with their
                        // data unwritten: said as such, not as wrong data.
                        if let Some(e) = comm.as_ref().and_then(Comm::async_error) {
                            return Err(Failure(format!("rank {rank}'s loop stopped: {e}")));
                        }
                        let reduced = stream.clone_dtoh(&buf).map_err(Error::cuda("cuMemcpyDtoH"))?;
                        let gathered = stream.clone_dtoh(&gathered).map_err(Error::cuda("cuMemcpyDtoH"))?;
                        let comm = comm.take().ok_or_else(|| Failure("no communicator after init_rank".into()))?;
                        Ok((comm, reduced, gathered))
                    });
                    let report = match &comm {
                        Some(comm) => format!("rank {rank}: steps {}; loop {}", timeline.describe(), comm.loop_report()),
                        None => format!("rank {rank}: steps {}", timeline.describe()),
                    };
                    (outcome, report)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| (Err(Failure("a rank's thread panicked".into())), String::new()))).collect()
    });
    // Every rank's failure before any data is compared (a rank whose loop stopped leaves
    // its peer's data unwritten too), with every rank's steps and loop.
    let reports: Vec<String> = ranks.iter().map(|(_, report)| report.clone()).collect();
    let failed = |what: String| Failure(format!("{what} [{}]", reports.join("; ")));
    let errors: Vec<String> = ranks.iter().filter_map(|(outcome, _)| outcome.as_ref().err().map(ToString::to_string)).collect();
    if !errors.is_empty() {
        return Err(failed(errors.join("; ")));
    }
    let ranks = ranks.into_iter().map(|(outcome, _)| outcome).collect::<Result<Vec<_>, Failure>>()?;
    let mut comms = Vec::new();
    for (rank, (comm, reduced, gathered)) in ranks.into_iter().enumerate() {
        let sum = |i: usize| (i % 1000 + N + i % 1000) as f32;
        // The first wrong element and what it holds: zeros in one channel's range point at
        // that channel, a rank's own input at a lost contribution.
        let first_wrong = |got: &[f32], len: usize| (0..len).find(|&i| got[i] != sum(i % N)).map(|i| format!("element {i} holds {} for {}", got[i], sum(i % N)));
        if let Some(what) = first_wrong(&reduced, N) {
            return Err(failed(format!("rank {rank}'s all_reduce is wrong: {what}")));
        }
        if let Some(what) = first_wrong(&gathered, 2 * N) {
            return Err(failed(format!("rank {rank}'s all_gather is wrong: {what}")));
        }
        comms.push(comm);
    }
    comms[1].abort();
    let start = std::time::Instant::now();
    while comms[0].async_error().is_none() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let error = comms[0].async_error().map(|e| e.to_string()).unwrap_or_default();
    ensure(error.contains("rank 1 aborted"), || format!("rank 0 after rank 1's abort: {error:?}"))
}
