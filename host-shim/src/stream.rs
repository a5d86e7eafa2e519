//! Waiting for streams without hanging.

use std::time::{Duration, Instant};

use cudarc::driver::{CudaStream, result::DriverError, sys};

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
