//! What bounds a collective matmul's waits. A lane waits for a neighbour's word with
//! `cuStreamWaitValue64`, which takes no SM from the GEMMs running beside it (a resident
//! one-thread wait kernel costs a 4096-row GEMM a quarter of its time: `bench/NOTES.md`),
//! but which no abort flag or spin budget reaches: a neighbour that never signals would
//! hold the lane, and the caller's stream behind it, for ever.
//!
//! One thread per process (started with the first call) watches every call in flight.
//! Once a PE's call has run for the heap's spin budget since its stream reached it, or
//! the heap is aborted before the call has ended, the guard records why in the PE's
//! status ([`Release::why`]) and sets every signal word of the PE's workspace to
//! `u64::MAX`, which meets every wait of every call: the lanes run to their end, the
//! call's `C` is wrong and `RingMatmul::async_error` says why. It looks every [`TICK`]
//! while calls are in flight, and sleeps while none is.
//!
//! The stores are queued on a stream of their own, and a GPU runs a process's streams
//! through a few hardware queues, first in, first out across the streams mapped to each: a
//! store whose stream shares a queue with a stuck wait would wait behind it. A store not
//! done within [`STORE_TRY`] is queued again on a new stream (CUDA maps new streams to its
//! queues in turn), up to [`STORE_TRIES`] streams.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream, result};

use crate::shmem::HeapAbortHandle;

/// How often the guard looks at the calls in flight: a timeout or an abort is acted on
/// within this of happening.
pub const TICK: Duration = Duration::from_millis(2);

/// How long a release's stores may take on one stream before they are queued on another.
pub const STORE_TRY: Duration = Duration::from_millis(50);

/// Streams a release's stores are tried on: CUDA's hardware queues are at most 32
/// (`CUDA_DEVICE_MAX_CONNECTIONS`, 8 by default).
pub const STORE_TRIES: usize = 32;

/// Why a PE's waits were released (its status word's value).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The heap was aborted.
    Aborted = 1,
    /// A call ran past the heap's spin budget.
    TimedOut = 2,
}

/// What the guard makes of a call at one look.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every lane has passed the call: it is watched no more.
    Ended,
    /// Still queued or running within its budget.
    Running,
    /// Release the PE's waits, for this reason.
    Release(Why),
}

/// The verdict on a call that has `ended` (every lane past it) or not, whose stream has
/// `reached` it or not, on a heap `aborted` or not; `since` is when a look first saw it
/// reached (set here on that look), `now` this look's time. An ended call is never
/// released; an aborted heap releases a call still queued; the budget counts from the
/// first look that saw the call reached, so work queued before it on the caller's stream
/// never counts against it.
pub fn judge(ended: bool, reached: bool, aborted: bool, since: &mut Option<Instant>, now: Instant, budget: Duration) -> Verdict {
    if ended {
        return Verdict::Ended;
    }
    if aborted {
        return Verdict::Release(Why::Aborted);
    }
    if !reached {
        return Verdict::Running;
    }
    let since = *since.get_or_insert(now);
    if now.saturating_duration_since(since) >= budget { Verdict::Release(Why::TimedOut) } else { Verdict::Running }
}

/// A PE's way out of its waits, shared by its ring and the guard.
pub struct Release {
    /// The PE's device.
    ctx: Arc<CudaContext>,
    /// Every stream a store was queued on (kept until the ring's workspace goes).
    streams: Mutex<Vec<Arc<CudaStream>>>,
    /// 0, or the first [`Why`] its waits were released for.
    status: AtomicU32,
    abort: HeapAbortHandle,
    budget: Duration,
}

impl Release {
    /// The release of the waits of a PE on `ctx`'s device, for calls bounded by `budget`
    /// on the heap that `abort` aborts.
    pub fn new(ctx: Arc<CudaContext>, abort: HeapAbortHandle, budget: Duration) -> Self {
        Self { ctx, streams: Mutex::new(Vec::new()), status: AtomicU32::new(0), abort, budget }
    }

    /// Why the PE's waits were released, if they were. Ordering: an acquire load, paired
    /// with the release that stored it.
    pub fn why(&self) -> Option<Why> {
        match self.status.load(Ordering::Acquire) {
            1 => Some(Why::Aborted),
            2 => Some(Why::TimedOut),
            _ => None,
        }
    }

    /// Waits, up to `timeout` for each stream, until the stores of a release queued so far
    /// are done.
    pub fn wait_for_stores(&self, timeout: Duration) -> crate::Result<()> {
        let streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner).clone();
        streams.iter().try_for_each(|s| crate::stream::wait(s, timeout, "a collective matmul's release of its waits"))
    }

    /// Records `why` (unless a reason is recorded already: the first stays), then queues
    /// the store of `u64::MAX` into each `u64` of the `bytes` bytes of signal words at
    /// device address `words`. Never blocks on the PE's calls. A failure of the store is
    /// logged: the status still says why the call failed.
    fn release(&self, why: Why, words: u64, bytes: u64) {
        // Ordering: release, paired with `why`'s acquire load.
        let _ = self.status.compare_exchange(0, why as u32, Ordering::Release, Ordering::Relaxed);
        for _ in 0..STORE_TRIES {
            match self.store(words, bytes) {
                Ok(stream) => {
                    let stored = crate::stream::wait(&stream, STORE_TRY, "a release's stores");
                    self.streams.lock().unwrap_or_else(PoisonError::into_inner).push(stream);
                    if stored.is_ok() {
                        return;
                    }
                }
                Err(e) => {
                    log::error!("collective matmul: the release of a PE's waits ({why:?}) failed: {e}");
                    return;
                }
            }
        }
        log::error!("collective matmul: the release of a PE's waits ({why:?}) queued on {STORE_TRIES} streams, none done within {STORE_TRY:?}");
    }

    /// Queues the stores of `u64::MAX` into the words on a new stream of the PE's device.
    fn store(&self, words: u64, bytes: u64) -> crate::Result<Arc<CudaStream>> {
        let stream = super::side_lane(&self.ctx)?;
        // SAFETY: `words .. words + bytes` is the PE's signal words, device memory of the
        // context (current: `side_lane` bound it) live while any call may run
        // (`Watched::new`'s contract); the stream is live.
        unsafe { result::memset_d8_async(words, 0xff, bytes as usize, stream.cu_stream()) }.map_err(crate::Error::cuda("cuMemsetD8Async"))?;
        Ok(stream)
    }
}

/// One PE's call in flight.
pub struct Watched {
    /// Recorded on the caller's stream before the call's first operation.
    reached: CudaEvent,
    /// Recorded on each lane after the call's last operation.
    ended: Vec<CudaEvent>,
    /// When a look first saw `reached` complete.
    since: Option<Instant>,
    release: Arc<Release>,
    /// The PE's signal words: `bytes` bytes from device address `words`.
    words: u64,
    bytes: u64,
}

impl Watched {
    /// A call of the PE `release` frees, between `reached` and every event of `ended`,
    /// whose waits are on the `bytes` bytes of signal words at device address `words`
    /// (the release's device).
    ///
    /// # Safety
    /// The words stay allocated until every lane of the PE has passed the call and every
    /// call after it (a release stores into them while any may run).
    pub unsafe fn new(reached: CudaEvent, ended: Vec<CudaEvent>, release: Arc<Release>, words: u64, bytes: u64) -> Self {
        Self { reached, ended, since: None, release, words, bytes }
    }

    /// Looks at the call at `now`; whether it is still watched. A query that fails counts
    /// as not complete (the budget then bounds the call).
    fn look(&mut self, now: Instant) -> bool {
        let done = |e: &CudaEvent| e.try_is_complete().unwrap_or(false);
        let ended = self.ended.iter().all(done);
        let reached = ended || done(&self.reached);
        match judge(ended, reached, self.release.abort.aborted(), &mut self.since, now, self.release.budget) {
            Verdict::Ended => false,
            Verdict::Running => true,
            Verdict::Release(why) => {
                self.release.release(why, self.words, self.bytes);
                false
            }
        }
    }
}

/// Calls handed over since the guard last looked (held only to push or take).
static INCOMING: Mutex<Vec<Watched>> = Mutex::new(Vec::new());
static HANDED_OVER: Condvar = Condvar::new();

/// The calls the guard watches (held through a look, and by [`stop_guarding`]).
static WATCHING: Mutex<Vec<Watched>> = Mutex::new(Vec::new());

/// Set at the process's exit: the guard looks no more (read under [`WATCHING`]'s lock).
static EXITING: AtomicBool = AtomicBool::new(false);

/// Hands `call` to the guard (starting it once per process); never blocks on a look.
/// Where no thread can be started, nothing releases the calls: said once in the log.
pub fn watch(call: Watched) {
    start_guard();
    INCOMING.lock().unwrap_or_else(PoisonError::into_inner).push(call);
    HANDED_OVER.notify_one();
}

/// Has the guard watch none of `release`'s calls from here on: a look in progress ends
/// first, and none releases them later (queued stores may still run:
/// [`Release::wait_for_stores`]).
pub fn forget(release: &Arc<Release>) {
    let mut watching = WATCHING.lock().unwrap_or_else(PoisonError::into_inner);
    watching.append(&mut INCOMING.lock().unwrap_or_else(PoisonError::into_inner));
    watching.retain(|call| !Arc::ptr_eq(&call.release, release));
}

fn start_guard() {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| match std::thread::Builder::new().name("ferroccl-matmul-guard".into()).spawn(guard) {
        Ok(_) => {
            // SAFETY: registers a function of no arguments that never unwinds.
            if unsafe { libc::atexit(stop_guarding) } != 0 {
                log::warn!("collective matmul: no exit handler for the guard: it may still query events while the driver shuts down");
            }
        }
        Err(e) => log::error!("collective matmul: no guard thread ({e}): a neighbour that never signals holds a call for ever"),
    });
}

/// Run at the process's exit (`atexit`): stops the guard, which would otherwise query
/// events while the driver shuts down. A look in progress ends first (its lock).
extern "C" fn stop_guarding() {
    EXITING.store(true, Ordering::Relaxed);
    drop(WATCHING.lock().unwrap_or_else(PoisonError::into_inner));
}

/// The guard: waits for calls, then looks at them every [`TICK`] until none is left.
fn guard() {
    loop {
        // Locks are taken WATCHING first, then INCOMING, or one alone.
        let watching_none = WATCHING.lock().unwrap_or_else(PoisonError::into_inner).is_empty();
        if watching_none {
            let incoming = INCOMING.lock().unwrap_or_else(PoisonError::into_inner);
            drop(HANDED_OVER.wait_while(incoming, |incoming| incoming.is_empty()).unwrap_or_else(PoisonError::into_inner));
        }
        let mut watching = WATCHING.lock().unwrap_or_else(PoisonError::into_inner);
        if EXITING.load(Ordering::Relaxed) {
            return;
        }
        watching.append(&mut INCOMING.lock().unwrap_or_else(PoisonError::into_inner));
        let now = Instant::now();
        watching.retain_mut(|call| call.look(now));
        drop(watching);
        std::thread::sleep(TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: Duration = Duration::from_secs(10);

    #[test]
    fn an_ended_call_is_never_released_even_aborted_or_past_its_budget() {
        let t0 = Instant::now();
        let mut since = Some(t0);
        assert_eq!(judge(true, true, true, &mut since, t0 + 2 * BUDGET, BUDGET), Verdict::Ended);
        assert_eq!(judge(true, false, false, &mut None, t0, BUDGET), Verdict::Ended);
    }

    #[test]
    fn an_abort_releases_a_call_queued_or_running() {
        let t0 = Instant::now();
        assert_eq!(judge(false, false, true, &mut None, t0, BUDGET), Verdict::Release(Why::Aborted));
        assert_eq!(judge(false, true, true, &mut Some(t0), t0, BUDGET), Verdict::Release(Why::Aborted));
    }

    #[test]
    fn the_budget_counts_from_the_first_look_that_saw_the_call_reached() {
        let t0 = Instant::now();
        let mut since = None;
        // Queued behind other work for longer than the budget: never timed out.
        assert_eq!(judge(false, false, false, &mut since, t0 + 3 * BUDGET, BUDGET), Verdict::Running);
        assert_eq!(since, None);
        let reached_at = t0 + 3 * BUDGET;
        assert_eq!(judge(false, true, false, &mut since, reached_at, BUDGET), Verdict::Running);
        assert_eq!(since, Some(reached_at));
        assert_eq!(judge(false, true, false, &mut since, reached_at + BUDGET - Duration::from_millis(1), BUDGET), Verdict::Running);
        assert_eq!(judge(false, true, false, &mut since, reached_at + BUDGET, BUDGET), Verdict::Release(Why::TimedOut));
        // A clock read before the first sighting does not underflow.
        assert_eq!(judge(false, true, false, &mut since, t0, BUDGET), Verdict::Running);
    }
}
