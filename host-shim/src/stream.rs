//! Waiting for streams without hanging.

use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaStream, result, result::DriverError, sys};

use crate::{Error, Result};

/// Waits until all work queued on `stream` has finished, polling `cuStreamQuery`, or
/// returns [`Error::Timeout`] after `timeout` (the work may then still be running; the
/// caller must not free memory it uses). Polls without sleeping for the first
/// [`SPIN_BEFORE_SLEEP`] (a sleep lasts 50 µs or more, longer than most waits), then
/// sleeps between polls.
///
/// Ordering: on `Ok`, every write of the finished work is visible to the host.
pub fn wait(stream: &CudaStream, timeout: Duration, what: &str) -> Result<()> {
    // SAFETY: `stream` is a live stream.
    unsafe { wait_raw(stream.cu_stream(), timeout, what) }
}

/// Whether every operation queued on `stream` has completed (one `cuStreamQuery`).
pub fn idle(stream: &CudaStream) -> Result<bool> {
    // SAFETY: `stream` is a live stream.
    unsafe { idle_raw(stream.cu_stream()) }
}

/// [`idle`] on a raw stream.
///
/// # Safety
/// `stream` is a live stream of the current context.
unsafe fn idle_raw(stream: sys::CUstream) -> Result<bool> {
    // SAFETY: `stream` is a live stream (this function's contract).
    match unsafe { sys::cuStreamQuery(stream) } {
        sys::cudaError_enum::CUDA_SUCCESS => Ok(true),
        sys::cudaError_enum::CUDA_ERROR_NOT_READY => Ok(false),
        e => Err(Error::Cuda { call: "cuStreamQuery", source: DriverError(e) }),
    }
}

/// [`wait`] on a stream that cudarc does not own (one made with `cuStreamCreate`).
///
/// # Safety
/// `stream` is a live stream of the current context, not destroyed while this runs.
pub unsafe fn wait_raw(stream: sys::CUstream, timeout: Duration, what: &str) -> Result<()> {
    let start = Instant::now();
    loop {
        // SAFETY: `stream` is a live stream (this function's contract).
        if unsafe { idle_raw(stream) }? {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(Error::Timeout { what: what.to_owned(), after: timeout });
        }
        if start.elapsed() < SPIN_BEFORE_SLEEP {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

/// How long [`wait`] polls before it starts sleeping between polls.
pub const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(200);

/// Runs `work` (which queues operations) on a new non-blocking stream of `ctx` and waits
/// for it, up to [`PRIVATE_WORK_TIMEOUT`]: nothing else on the device is waited for (a
/// context synchronization would wait for running persistent loops). Named `what` in a
/// timeout.
pub(crate) fn on_private_stream(ctx: &CudaContext, what: &str, work: impl FnOnce(sys::CUstream) -> Result<()>) -> Result<()> {
    ctx.bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
    let stream = result::stream::create(result::stream::StreamKind::NonBlocking).map_err(Error::cuda("cuStreamCreate"))?;
    // SAFETY: `stream` was just created in the current context and is destroyed only
    // below, after the wait; destroying it with work pending (after a timeout) lets that
    // work finish.
    let done = work(stream).and_then(|()| unsafe { wait_raw(stream, PRIVATE_WORK_TIMEOUT, what) });
    // SAFETY: as above; no use of `stream` follows.
    let destroyed = unsafe { result::stream::destroy(stream) }.map_err(Error::cuda("cuStreamDestroy"));
    done.and(destroyed)
}

/// How long the runtime waits for its own work on a private stream (zeroing, an upload): far beyond
/// what either takes (milliseconds for gigabytes) on a working device.
pub(crate) const PRIVATE_WORK_TIMEOUT: Duration = Duration::from_secs(60);
