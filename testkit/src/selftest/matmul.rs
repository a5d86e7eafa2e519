//! Collective matmuls through the communicator ([`Comm::matmul`]) on one GPU: two ranks of
//! one process sharing it.

use cudarc::driver::{CudaSlice, sys};
use half::f16;
use host_shim::comm::{Comm, CommMatmul};
use host_shim::device_rt::matmul::{Collective, Shape};
use host_shim::memory::HostMapped;

use super::*;
use crate::matmul::{Half, reference};

/// How long a stream may take to pass a call.
const CALL_WAIT: Duration = Duration::from_secs(20);

/// Rank `rank`'s matrix `which` (0: A, 1: B), entry `i`: a quarter of a small integer, so
/// every product and every sum of a row (at most `k` of them, below 2^11 in sixteenths)
/// is exact in f32, whatever the order: cuBLASLt's result is then the reference's, bit
/// for bit.
fn entry(rank: u32, which: u64, i: u64) -> f16 {
    let v = (i * 7 + u64::from(rank) * 3 + which * 5) % 9;
    f16::from_f32((v as f32 - 4.0) / 4.0)
}

/// One call of `mm` on the ranks' `a`, `b`, `c`.
fn call(mm: &mut CommMatmul, a: &[CudaSlice<f16>], b: &[CudaSlice<f16>], c: &mut [CudaSlice<f16>]) -> Result<(), Error> {
    let mut args: Vec<_> = a.iter().zip(b).zip(c.iter_mut()).map(|((a, b), c)| (a, b, c)).collect();
    mm.call(&mut args)
}

/// Every collective (all-gather × matmul one way and both ways, matmul × reduce-scatter
/// in one piece and in two) on two ranks of one communicator: each rank's `C` is the reference's bit for bit, on
/// two calls in a row. Refused before anything is enqueued: one rank of two, a bad shape,
/// a wrong length, a call on a stream capturing a CUDA graph. A call whose second rank never starts (its stream held behind a gate)
/// ends when the communicator is aborted, says [`Error::Aborted`], and later calls are
/// refused with it.
pub(super) fn comm_matmul(fx: &Fixture) -> Outcome {
    let (m, k, n) = (64u64, 128u64, 96u64);
    let streams = vec![fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?, fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?];
    let comms = Comm::from_devices(streams.clone())?;
    let ranks: Vec<&Comm> = comms.iter().collect();
    let one_of_two = Comm::matmul::<f16>(&ranks[1..], Collective::matmul_reduce_scatter(m), m, k, n);
    ensure(matches!(one_of_two, Err(Error::InvalidArgument(_))), || format!("a matmul on rank 1 of 2 alone: {:?}", one_of_two.err()))?;
    let bad_shape = Comm::matmul::<f16>(&ranks, Collective::matmul_reduce_scatter(m), m, k + 1, n);
    ensure(matches!(bad_shape, Err(Error::InvalidArgument(_))), || format!("k = {}: {:?}", k + 1, bad_shape.err()))?;
    let collectives = [
        Collective::AllGatherMatmul { bidirectional: false },
        Collective::AllGatherMatmul { bidirectional: true },
        Collective::MatmulReduceScatter { pieces: 1 },
        Collective::MatmulReduceScatter { pieces: 2 },
    ];
    for collective in collectives {
        let mut mm = Comm::matmul::<f16>(&ranks, collective, m, k, n)?;
        let shape: Shape = mm.shape();
        let [la, lb, lc] = shape.lens();
        let host_a: Vec<Vec<f16>> = (0..2).map(|r| (0..la).map(|i| entry(r, 0, i)).collect()).collect();
        let host_b: Vec<Vec<f16>> = (0..2).map(|r| (0..lb).map(|i| entry(r, 1, i)).collect()).collect();
        let want = reference(&shape, &host_a, &host_b);
        let upload = |s: &Arc<CudaStream>, v: &[f16]| s.clone_htod(v).map_err(Error::cuda("cuMemcpyHtoD"));
        let a = vec![upload(&streams[0], &host_a[0])?, upload(&streams[1], &host_a[1])?];
        let b = vec![upload(&streams[0], &host_b[0])?, upload(&streams[1], &host_b[1])?];
        let mut c: Vec<CudaSlice<f16>> = streams.iter().map(|s| s.alloc_zeros(lc as usize).map_err(Error::cuda("cuMemAlloc"))).collect::<Result<_, _>>()?;
        let mut short = streams[0].alloc_zeros::<f16>(lc as usize - 1).map_err(Error::cuda("cuMemAlloc"))?;
        let refused = mm.call(&mut [(&a[0], &b[0], &mut short), (&a[1], &b[1], &mut c[1])]);
        ensure(matches!(refused, Err(Error::InvalidArgument(_))), || format!("{collective:?}: a C one element short: {refused:?}"))?;
        streams[0].begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(Error::cuda("cuStreamBeginCapture"))?;
        let captured = call(&mut mm, &a, &b, &mut c);
        // Nothing was captured: the graph, if any, is empty.
        streams[0].end_capture(sys::CUgraphInstantiate_flags(0)).map_err(Error::cuda("cuStreamEndCapture"))?;
        ensure(matches!(captured, Err(Error::InvalidArgument(_))), || format!("{collective:?}: a call captured in a CUDA graph: {captured:?}"))?;
        for nth in 1..=2 {
            call(&mut mm, &a, &b, &mut c)?;
            for s in &streams {
                stream::wait(s, CALL_WAIT, "a collective matmul")?;
            }
            if let Some(e) = mm.async_error() {
                return Err(Failure(format!("{collective:?}, call {nth}: {e}")));
            }
            for (r, (s, c)) in streams.iter().zip(&c).enumerate() {
                let got: Vec<u16> = s.clone_dtoh(c).map_err(Error::cuda("cuMemcpyDtoH"))?.iter().map(|v| v.to_bits()).collect();
                let want: Vec<u16> = want[r].iter().map(|v| Half::to_bits(*v)).collect();
                ensure_eq_slices(&format!("{collective:?}, call {nth}, rank {r}'s C"), &got, &want)?;
            }
        }
    }
    aborted_mid_call(fx, &comms, &streams, m, k, n)?;
    println!("  {} collectives x 2 calls on 2 ranks exact; refusals and the abort held", collectives.len());
    Ok(())
}

/// A reduce-scatter whose rank 1 never starts (its stream waits on a gate) ends on rank
/// 0 once the communicator is aborted; the matmul then reports and refuses with
/// [`Error::Aborted`].
fn aborted_mid_call(fx: &Fixture, comms: &[Comm], streams: &[Arc<CudaStream>], m: u64, k: u64, n: u64) -> Outcome {
    let ranks: Vec<&Comm> = comms.iter().collect();
    let mut mm = Comm::matmul::<f16>(&ranks, Collective::MatmulReduceScatter { pieces: 2 }, m, k, n)?;
    let [la, lb, lc] = mm.shape().lens();
    let zeros = |s: &Arc<CudaStream>, len: u64| s.alloc_zeros::<f16>(len as usize).map_err(Error::cuda("cuMemAlloc"));
    let a = vec![zeros(&streams[0], la)?, zeros(&streams[1], la)?];
    let b = vec![zeros(&streams[0], lb)?, zeros(&streams[1], lb)?];
    let mut c = vec![zeros(&streams[0], lc)?, zeros(&streams[1], lc)?];
    let gate = HostMapped::<u32>::zeroed(&fx.ctx, 1)?;
    let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
    // SAFETY: `gate` is one host-mapped u32 that outlives the stream's wait (opened and
    // the stream waited for below, before it drops).
    unsafe { sys::cuStreamWaitValue32_v2(streams[1].cu_stream(), gate.device_ptr(), 1, geq) }.result().map_err(Error::cuda("cuStreamWaitValue32"))?;
    call(&mut mm, &a, &b, &mut c)?;
    std::thread::sleep(Duration::from_millis(200));
    let early = stream::idle(&streams[0])?;
    comms[0].abort();
    let ended = stream::wait(&streams[0], CALL_WAIT, "rank 0 after the abort");
    // Ordering: a volatile store to host-mapped memory, which the stream's wait polls.
    // SAFETY: `gate.host_ptr()` is the gate's one live, aligned u32.
    unsafe { gate.host_ptr().write_volatile(1) };
    stream::wait(&streams[1], CALL_WAIT, "rank 1 after the gate opened")?;
    ensure(!early, || "rank 0's call ended before its peer started".into())?;
    ended?;
    ensure(matches!(mm.async_error(), Some(Error::Aborted)), || format!("after the abort: {:?}", mm.async_error()))?;
    let later = call(&mut mm, &a, &b, &mut c);
    ensure(matches!(later, Err(Error::Aborted)), || format!("a call after the abort: {later:?}"))
}
