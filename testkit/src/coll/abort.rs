//! How fast `abort()` stops a communicator in the middle of a burst (GPU only): how many
//! calls were still accepted after it, and how long the ranks' streams took to drain.
//! What `ferroccl bench abort` reports (target: every later call refused at once, running
//! work stopped within 100 ms).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaSlice};
use host_shim::comm::{Comm, ReduceOp};
use host_shim::{Error, Result, device};

/// What [`abort_during_burst`] measured.
#[derive(Clone, Debug)]
pub struct AbortReport {
    /// Calls made (on every rank) before `abort()`.
    pub calls_before_abort: usize,
    /// Calls `Comm::all_reduce_in_place` accepted after `abort()` (should be 0).
    pub accepted_after_abort: usize,
    /// Calls it refused with `Error::Aborted` after `abort()`.
    pub refused_after_abort: usize,
    /// Milliseconds from `abort()` until every rank's stream had drained.
    pub drain_ms: f64,
    /// Each rank's `async_error()` afterwards, as text (`None`: no error).
    pub rank_errors: Vec<Option<String>>,
}

/// On one rank per entry of `ordinals` (a device may repeat), enqueues `calls` in-place
/// f32 sum all-reduces of `bytes` each on every rank's stream, calls `abort()` (through a
/// [`host_shim::comm::CommAbortHandle`]) after a quarter of them, keeps calling for the
/// rest, then waits (up to 60 s) for every stream to drain.
pub fn abort_during_burst(ordinals: &[usize], bytes: usize, calls: usize) -> Result<AbortReport> {
    let n = (bytes / 4).max(1);
    let mut contexts: BTreeMap<usize, Arc<CudaContext>> = BTreeMap::new();
    let mut streams = Vec::new();
    for &o in ordinals {
        let ctx = match contexts.get(&o) {
            Some(c) => c.clone(),
            None => contexts.entry(o).or_insert(device::context(o)?).clone(),
        };
        streams.push(ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?);
    }
    let mut bufs: Vec<CudaSlice<f32>> = Vec::new();
    let alloc_on = streams.clone();
    // Buffers are allocated before any loop starts (an allocation may wait for running
    // kernels).
    let comms = Comm::from_devices_tuned(streams, Default::default(), &mut |rank, _| {
        let stream = &alloc_on[rank as usize];
        bufs.push(stream.alloc_zeros::<f32>(n).map_err(Error::cuda("cuMemAllocAsync"))?);
        stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))
    })?;
    let handle = comms[0].abort_handle();
    let abort_at = calls / 4;
    let (mut accepted, mut refused) = (0, 0);
    let mut aborted = None;
    for call in 0..calls {
        if call == abort_at {
            handle.abort();
            aborted = Some(Instant::now());
        }
        for (comm, buf) in comms.iter().zip(bufs.iter_mut()) {
            let outcome = comm.all_reduce_in_place(buf, ReduceOp::Sum);
            match (aborted, outcome) {
                (None, r) => r?,
                (Some(_), Ok(())) => accepted += 1,
                (Some(_), Err(Error::Aborted)) => refused += 1,
                (Some(_), Err(e)) => return Err(e),
            }
        }
    }
    let aborted = aborted.unwrap_or_else(|| {
        handle.abort();
        Instant::now()
    });
    for comm in &comms {
        host_shim::stream::wait(comm.stream(), Duration::from_secs(60), "a rank's stream after abort")?;
    }
    let drain_ms = aborted.elapsed().as_secs_f64() * 1e3;
    let rank_errors = comms.iter().map(|c| c.async_error().map(|e| e.to_string())).collect();
    Ok(AbortReport { calls_before_abort: abort_at, accepted_after_abort: accepted, refused_after_abort: refused, drain_ms, rank_errors })
}
