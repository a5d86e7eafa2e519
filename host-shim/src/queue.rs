//! The host end of a work loop's queue, over memory the caller provides: host-mapped
//! memory for a GPU loop (`work::WorkLoop`), plain host memory for a loop running on the
//! host twin in tests. The protocol is `device_rt::work`'s (see its `queue` module).
//!
//! Every wait here has a timeout and also watches the loop's status, so a dead loop turns
//! into an `Err` at once instead of a wait.

use std::sync::{Arc, Mutex};
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::{Duration, Instant};

use device_rt::abi::{LoopError, MAX_CHANNELS, WaitSite};
use device_rt::work::{BadItem, LOOP_ASLEEP, LOOP_AWAKE, LOOP_LEAVING, QueueHeader, RingSlot, WorkItem};

use crate::{Error, Result};

/// A published item's sequence number: what `Queue::wait` and `Comm::wait` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// What keeps a queue's header memory alive: the queue and every [`AbortHandle`] hold a
/// share of it, so the header outlives the last of them, whatever the loop's owner does.
pub type HeaderOwner = Arc<dyn Send + Sync>;

/// Sets a loop's abort flag; `Send + Sync + Clone`, usable from any thread, never blocks.
/// It holds a share of the header's memory, so it stays valid after the loop is dropped
/// (aborting a loop that has left changes nothing).
#[derive(Clone)]
pub struct AbortHandle {
    header: *mut QueueHeader,
    _owner: HeaderOwner,
}

impl std::fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortHandle").field("header", &self.header).finish_non_exhaustive()
    }
}

// SAFETY: the flag is written only with an atomic store; `_owner` keeps the header's
// memory alive as long as the handle (`Queue::new`'s contract).
unsafe impl Send for AbortHandle {}
// SAFETY: as for `Send`: `abort` takes `&self` and does one atomic store.
unsafe impl Sync for AbortHandle {}

impl AbortHandle {
    /// Asks every channel of the loop to leave; waits in progress end with `Aborted`.
    ///
    /// Ordering: a release store; the device reads the flag with volatile loads.
    pub fn abort(&self) {
        // SAFETY: `_owner` keeps the header live; it is 8-byte aligned.
        unsafe { AtomicU64::from_ptr(&raw mut (*self.header).abort) }.store(1, Ordering::Release);
    }

    /// Whether the loop was aborted (the host's flag: the device only reads it; a loop that
    /// stops on an error of its own does not set it).
    ///
    /// Ordering: an acquire load, paired with [`AbortHandle::abort`]'s release store.
    pub fn aborted(&self) -> bool {
        // SAFETY: `_owner` keeps the header live as long as `self`.
        unsafe { header_word(self.header, HeaderWord::Abort) }.load(Ordering::Acquire) != 0
    }

    /// The error the loop stopped with, if it did: an error of its own, else
    /// [`Error::Aborted`] once aborted: what [`Queue::health`] says, but of a loop whose
    /// kernel has ended (a shut-down or sleeping loop is no error here).
    ///
    /// Ordering: acquire loads of the header's words, paired with the device's release
    /// stores of its status and [`AbortHandle::abort`]'s store.
    pub fn stopped(&self) -> Option<Error> {
        // SAFETY: `_owner` keeps the header live as long as `self`.
        stopped(|which| unsafe { header_word(self.header, which) }.load(Ordering::Acquire))
    }
}

/// A word of the queue header that the host reads or changes (the loop's protocol:
/// `device_rt::work`'s `queue` module).
#[derive(Clone, Copy, Debug)]
enum HeaderWord {
    Submits,
    Pinned,
    Awake,
    Status,
    ErrorSeq,
    Abort,
    Exited,
    /// Channel `c`'s `cta_completed` entry, `c` below [`MAX_CHANNELS`].
    Completed(usize),
}

/// A word of the loop queue header at `header` as an atomic (panics for a channel at or
/// past [`MAX_CHANNELS`]).
///
/// # Safety
/// `header` is a live header, and stays live for `'a`.
unsafe fn header_word<'a>(header: *mut QueueHeader, which: HeaderWord) -> &'a AtomicU64 {
    // SAFETY: `header` is live (this function's contract); only a field's address is
    // computed (the array index is bounds-checked), no reference to the header made.
    let field = unsafe {
        match which {
            HeaderWord::Submits => &raw mut (*header).submits,
            HeaderWord::Pinned => &raw mut (*header).pinned,
            HeaderWord::Awake => &raw mut (*header).awake,
            HeaderWord::Status => &raw mut (*header).status,
            HeaderWord::ErrorSeq => &raw mut (*header).error_seq,
            HeaderWord::Abort => &raw mut (*header).abort,
            HeaderWord::Exited => &raw mut (*header).exited,
            HeaderWord::Completed(c) => &raw mut (*header).cta_completed[c],
        }
    };
    // SAFETY: `field` is an 8-byte aligned word of the header, live for `'a`; the device
    // accesses it with single-copy-atomic 64-bit operations, the host through atomics only.
    unsafe { AtomicU64::from_ptr(field) }
}

/// The error a loop stopped with, read from its header's words by `load`: an error of
/// its own (its status), else [`Error::Aborted`] where its abort flag is set.
fn stopped(load: impl Fn(HeaderWord) -> u64) -> Option<Error> {
    let status = load(HeaderWord::Status);
    if status != 0 {
        return Some(status_error(status, load(HeaderWord::ErrorSeq)));
    }
    (load(HeaderWord::Abort) != 0).then_some(Error::Aborted)
}

/// [`Queue::health`] of a loop of `channels` channels whose header words `load` reads (in
/// the order its ordering needs: the exit count before the status).
fn health_of(load: impl Fn(HeaderWord) -> u64, channels: usize) -> Result<()> {
    let left = load(HeaderWord::Exited) >= channels as u64;
    if let Some(e) = stopped(&load) {
        return Err(e);
    }
    if left {
        return Err(Error::LoopClosed);
    }
    Ok(())
}

/// Launches a loop that slept again, on its own stream after the kernel that ended
/// (see [`Queue::set_relaunch`]).
pub type Relaunch = Box<dyn Fn() -> Result<()> + Send + Sync>;

/// The producer side of one loop's ring.
pub struct Queue {
    header: *mut QueueHeader,
    ring: *mut RingSlot,
    capacity: u64,
    channels: usize,
    /// The next item's sequence number (locked by producers that share the queue:
    /// [`Queue::try_enqueue`]).
    next_seq: Mutex<u64>,
    owner: HeaderOwner,
    relaunch: Option<Relaunch>,
}

// SAFETY: a `Queue` is the only producer of its ring; the memory outlives it (`new`);
// the relaunch hook is `Send`.
unsafe impl Send for Queue {}
// SAFETY: the methods that take `&self` only load the header, change it with atomic
// read-modify-writes (`announce_submit`), call the `Sync` relaunch hook, or write the ring
// under the `next_seq` lock (`try_enqueue`).
unsafe impl Sync for Queue {}

impl Queue {
    /// The producer of the loop whose header and ring of `capacity` slots are at these
    /// addresses (host addresses), with `channels` channels; `owner` keeps the header's
    /// memory alive (the queue and its abort handles hold shares of it).
    ///
    /// # Safety
    /// The header is zeroed and stays valid as long as `owner` lives; the ring stays valid
    /// for the queue's life; neither is written by anyone but this queue (and its abort
    /// handles) and the loop.
    pub unsafe fn new(header: *mut QueueHeader, ring: *mut RingSlot, capacity: u64, channels: usize, owner: HeaderOwner) -> Result<Self> {
        if capacity == 0 || !(1..=MAX_CHANNELS).contains(&channels) {
            return Err(Error::InvalidArgument(format!(
                "a queue needs a capacity of at least 1 and 1..={MAX_CHANNELS} channels (got {capacity}, {channels})"
            )));
        }
        Ok(Self { header, ring, capacity, channels, next_seq: Mutex::new(1), owner, relaunch: None })
    }

    /// How the queue launches its loop again after the loop slept (a loop of one channel
    /// given a sleep time); without a hook, work that finds the loop asleep is refused
    /// with [`Error::InvalidState`].
    pub fn set_relaunch(&mut self, relaunch: Relaunch) {
        self.relaunch = Some(relaunch);
    }

    /// A header word as an atomic (panics for a channel at or past [`MAX_CHANNELS`]).
    fn word(&self, which: HeaderWord) -> &AtomicU64 {
        // SAFETY: the header stays live as long as `self.owner`, so as `&self`.
        unsafe { header_word(self.header, which) }
    }

    /// The stream-ordered path, before a call kernel is launched: counts the submission
    /// (outside a graph capture) or, for a call kernel captured in a CUDA graph
    /// (`captured`), pins the loop awake for good (the graph's replays submit without the
    /// host); then makes sure the loop runs or will (see [`Queue::wake`]).
    ///
    /// Ordering: the count or the pin is a sequentially consistent read-modify-write (a
    /// full fence on the host) before `wake`'s load: the store half of the host's side of
    /// the sleep handshake (`device_rt::work`'s `queue` module).
    pub fn announce_submit(&self, captured: bool) -> Result<()> {
        if captured {
            if self.word(HeaderWord::Pinned).swap(1, Ordering::SeqCst) == 0 && crate::driver::loads_lazily() {
                log::warn!(
                    "work loop: a call captured in a CUDA graph keeps this loop on its GPU until the communicator is shut down, and CUDA loads kernels lazily in this process: the first launch of any kernel on this device may wait for the loop as long (set CUDA_MODULE_LOADING=EAGER, or launch every kernel once before the capture)"
                );
            }
            return self.wake();
        }
        self.word(HeaderWord::Submits).fetch_add(1, Ordering::SeqCst);
        self.wake().inspect_err(|_| self.retract_submit())
    }

    /// Takes back a submission counted by [`Queue::announce_submit`] that was not launched
    /// after all (the loop would otherwise wait for it and never sleep again).
    pub fn retract_submit(&self) {
        self.word(HeaderWord::Submits).fetch_sub(1, Ordering::SeqCst);
    }

    /// After the host published work (a submission announced, ring slots written, each
    /// followed by a sequentially consistent fence): reads the loop's `awake` word. Awake:
    /// the loop sees the work. Deciding whether to sleep: waits (up to a second) for its
    /// answer. Asleep: swaps in AWAKE and launches the loop again (one caller wins the swap
    /// and launches; the others find it awake).
    pub fn wake(&self) -> Result<()> {
        let awake = self.word(HeaderWord::Awake);
        let start = Instant::now();
        loop {
            match awake.load(Ordering::SeqCst) {
                LOOP_AWAKE => return Ok(()),
                LOOP_ASLEEP => {
                    let Some(relaunch) = &self.relaunch else {
                        return Err(Error::InvalidState("the work loop slept and its queue cannot launch it again"));
                    };
                    if awake.compare_exchange(LOOP_ASLEEP, LOOP_AWAKE, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                        continue;
                    }
                    log::debug!("work loop: launching it again after it slept");
                    return relaunch().inspect_err(|_| awake.store(LOOP_ASLEEP, Ordering::SeqCst));
                }
                LOOP_LEAVING if start.elapsed() < Duration::from_secs(1) => std::hint::spin_loop(),
                LOOP_LEAVING => return Err(Error::Timeout { what: "the work loop's answer to its sleep handshake".into(), after: Duration::from_secs(1) }),
                other => return Err(Error::UnknownLoopStatus(other)),
            }
        }
    }

    /// Whether the loop runs (not asleep, not deciding whether to sleep).
    pub fn awake(&self) -> bool {
        self.word(HeaderWord::Awake).load(Ordering::Acquire) == LOOP_AWAKE
    }

    #[cfg(feature = "testing")]
    /// Whether the loop has left to sleep (it is launched again with the next work).
    pub fn asleep(&self) -> bool {
        self.word(HeaderWord::Awake).load(Ordering::Acquire) == LOOP_ASLEEP
    }

    #[cfg(feature = "testing")]
    /// The header's words as the host reads them now (acquire loads, one at a time, so not
    /// one snapshot): what a failure report shows of a loop that stopped or hung.
    pub fn header_report(&self) -> String {
        let awake = match self.load(HeaderWord::Awake) {
            LOOP_AWAKE => "awake".to_string(),
            LOOP_LEAVING => "leaving".to_string(),
            LOOP_ASLEEP => "asleep".to_string(),
            other => format!("unknown ({other})"),
        };
        let completed: Vec<u64> = (0..self.channels).map(|c| self.load(HeaderWord::Completed(c))).collect();
        format!(
            "{awake}, submits {}, pinned {}, status {:#x}, error item {}, abort {}, exited {}, ring items published {}, completed per channel {completed:?}",
            self.load(HeaderWord::Submits),
            self.load(HeaderWord::Pinned),
            self.load(HeaderWord::Status),
            self.load(HeaderWord::ErrorSeq),
            self.load(HeaderWord::Abort),
            self.load(HeaderWord::Exited),
            self.peek_next_seq() - 1,
        )
    }

    /// A handle that aborts the loop from any thread.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle { header: self.header, _owner: self.owner.clone() }
    }

    /// A header word the device writes with release stores, read with an acquire load.
    fn load(&self, which: HeaderWord) -> u64 {
        self.word(which).load(Ordering::Acquire)
    }

    /// The last item every channel has completed.
    pub fn completed(&self) -> u64 {
        // `c < channels <= MAX_CHANNELS` (`new`).
        (0..self.channels).map(|c| self.load(HeaderWord::Completed(c))).min().unwrap_or(0)
    }

    /// Items published and not yet completed.
    pub fn outstanding(&self) -> u64 {
        (self.peek_next_seq() - 1).saturating_sub(self.completed())
    }

    /// The loop's recorded error, if any; else `Err(Aborted)` as soon as the abort flag is
    /// set (before the loop has seen it: nothing more is enqueued); `Err(LoopClosed)` once
    /// every channel has left without an error (each channel publishes its completions
    /// before it leaves, so a completion check made after this returned is final).
    ///
    /// Ordering: the exit count is read first (acquire, paired with the last channel's
    /// release store of it, which every channel's status store happens before), then the
    /// status: a loop that stopped with an error and then left is reported with its error,
    /// never as closed (read the other way round, the status could be read before the
    /// error's store and the count after the exit).
    pub fn health(&self) -> Result<()> {
        health_of(|which| self.load(which), self.channels)
    }

    /// Validates `item`, waits (up to `timeout`) for a free slot and writes it (the loop
    /// polls the slot itself; a loop that slept is launched again, see [`Queue::wake`]).
    /// Refused items change nothing; if launching a sleeping loop again fails, that error
    /// is returned and the item stays queued (it runs once a later call has launched the
    /// loop).
    ///
    /// An item names raw addresses, so the call is `unsafe`:
    ///
    /// ```compile_fail,E0133
    /// # fn f(queue: &mut host_shim::queue::Queue, item: device_rt::work::WorkItem) {
    /// let _ = queue.enqueue(item, std::time::Duration::from_secs(1));
    /// # }
    /// ```
    ///
    /// # Safety
    /// The loop runs whatever passes the checks of its form (kind, counts, alignment,
    /// null pointers, ranks); no one can check its addresses. Every address `item` carries
    /// (its kind's buffers, a device function's word, a heap handle) names memory the
    /// loop's device may read and write, whole extent (every byte the item's kind and
    /// counts make it touch): on a GPU, memory mapped for that device (its own, or host
    /// or peer memory mapped for it); on the host twin, this process's memory. That memory
    /// stays allocated, and nothing else reads or writes it but as the item's own protocol
    /// has it (the item's peers, the setter of a word it waits for), until the item has
    /// completed ([`Queue::wait`] returned for it, or the loop has left).
    pub unsafe fn enqueue(&mut self, item: WorkItem, timeout: Duration) -> Result<Ticket> {
        item.validate().map_err(|reason| Error::BadWorkItem { reason, seq: 0 })?;
        self.health()?;
        let seq = *self.next_seq_mut();
        self.wait_for(timeout, "a free slot in the work queue", |q| q.completed() + q.capacity >= seq)?;
        // SAFETY: the loop has completed every item up to `seq - capacity`, so the slot of
        // `seq` is free.
        unsafe { self.write_slot(seq, WorkItem { seq, ..item }) };
        *self.next_seq_mut() = seq + 1;
        fence(Ordering::SeqCst);
        self.wake()?;
        Ok(Ticket(seq))
    }

    /// A producer sharing the queue (`&self`: the ring route of stream-ordered calls,
    /// `WorkLoop::enqueue_on_stream`): if the slot of the next item is free now (nothing
    /// is waited for), writes `item` as [`Queue::enqueue`] does, but does not wake the
    /// loop: call [`Queue::wake`] next. `None`: no free slot, nothing written. The item
    /// must be valid ([`WorkItem::validate`]); check [`Queue::health`] first.
    ///
    /// ```compile_fail,E0133
    /// # fn f(queue: &host_shim::queue::Queue, item: device_rt::work::WorkItem) {
    /// let _ = queue.try_enqueue(item);
    /// # }
    /// ```
    ///
    /// # Safety
    /// As [`Queue::enqueue`]'s, for `item`.
    pub unsafe fn try_enqueue(&self, item: WorkItem) -> Option<Ticket> {
        let mut next_seq = self.next_seq.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let seq = *next_seq;
        if self.completed() + self.capacity < seq {
            return None;
        }
        // SAFETY: the loop has completed every item up to `seq - capacity`, so the slot of
        // `seq` is free; the lock keeps every other producer out.
        unsafe { self.write_slot(seq, WorkItem { seq, ..item }) };
        *next_seq = seq + 1;
        drop(next_seq);
        fence(Ordering::SeqCst);
        Some(Ticket(seq))
    }

    /// The next item's sequence number, for a producer that holds the queue alone.
    fn next_seq_mut(&mut self) -> &mut u64 {
        self.next_seq.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The next item's sequence number, as it stands.
    fn peek_next_seq(&self) -> u64 {
        *self.next_seq.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[cfg(feature = "testing")]
    /// Writes `items` into the ring at once (they must fit: the ring must be idle and hold
    /// them all). For back-to-back dispatch.
    ///
    /// ```compile_fail,E0133
    /// # fn f(queue: &mut host_shim::queue::Queue, items: &[device_rt::work::WorkItem]) {
    /// let _ = queue.enqueue_batch(items, std::time::Duration::from_secs(1));
    /// # }
    /// ```
    ///
    /// # Safety
    /// As [`Queue::enqueue`]'s, for each item of `items` (each until it has completed).
    pub unsafe fn enqueue_batch(&mut self, items: &[WorkItem], timeout: Duration) -> Result<Ticket> {
        if items.is_empty() || items.len() as u64 > self.capacity {
            return Err(Error::InvalidArgument(format!(
                "a batch of {} items does not fit a queue of {}",
                items.len(),
                self.capacity
            )));
        }
        for item in items {
            item.validate().map_err(|reason| Error::BadWorkItem { reason, seq: 0 })?;
        }
        self.health()?;
        let first = *self.next_seq_mut();
        let last = first + items.len() as u64 - 1;
        self.wait_for(timeout, "room for a batch in the work queue", |q| q.completed() + q.capacity >= last)?;
        for (k, item) in items.iter().enumerate() {
            let seq = first + k as u64;
            // SAFETY: the loop has completed every item up to `last - capacity`, so every
            // slot of the batch is free.
            unsafe { self.write_slot(seq, WorkItem { seq, ..*item }) };
        }
        *self.next_seq_mut() = last + 1;
        fence(Ordering::SeqCst);
        self.wake()?;
        Ok(Ticket(last))
    }

    #[cfg(feature = "testing")]
    /// Writes `item` unvalidated, with its own `seq`, into the next slot: what a corrupted
    /// queue looks like to the device (self-tests of the device's own checks).
    ///
    /// # Safety
    /// The device runs whatever passes its checks: every address `item` carries must be
    /// memory the loop may read and write for the item's whole run. No room is waited
    /// for: the loop must have taken every earlier slot of this ring position (fewer than
    /// `capacity` items outstanding).
    pub unsafe fn publish_unchecked(&mut self, item: WorkItem) {
        let seq = *self.next_seq_mut();
        // SAFETY: the caller guarantees room in the ring and vouches for `item`'s
        // addresses.
        unsafe { self.write_slot(seq, item) };
        *self.next_seq_mut() = seq + 1;
        fence(Ordering::SeqCst);
        if let Err(e) = self.wake() {
            log::warn!("work loop: could not wake it for an unchecked item: {e}");
        }
    }

    /// Writes `item` into the slot of `seq`, flagged as `seq`'s, word by word.
    ///
    /// Ordering: each word is one release store (8 bytes, single-copy atomic), so
    /// everything written before (the item's buffers) is visible to the loop once it has
    /// seen the word and issued its `fence.acq_rel.sys`; the loop takes the slot only when
    /// every word carries `seq`'s flag.
    ///
    /// # Safety
    /// The slot of `seq` is free: the loop has taken the item `capacity` positions back.
    unsafe fn write_slot(&self, seq: u64, item: WorkItem) {
        // SAFETY: `(seq - 1) % capacity < capacity`: a slot of the live ring.
        let slot = unsafe { self.ring.add(((seq - 1) % self.capacity) as usize) }.cast::<u64>();
        for (w, word) in RingSlot::encode(&item, seq).into_iter().enumerate() {
            // SAFETY: `w` < the slot's 16 words, each 8-byte aligned; the loop reads them
            // with atomic loads.
            unsafe { AtomicU64::from_ptr(slot.add(w)) }.store(word, Ordering::Release);
        }
    }

    /// Waits until every channel has completed `ticket`, the loop fails, or `timeout`.
    pub fn wait(&self, ticket: Ticket, timeout: Duration) -> Result<()> {
        self.wait_for(timeout, "a work item", |q| q.completed() >= ticket.0)
    }

    /// Polls `done` until it holds; checks the loop's health on every round.
    fn wait_for(&self, timeout: Duration, what: &str, mut done: impl FnMut(&Self) -> bool) -> Result<()> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let health = self.health();
            if done(self) {
                return Ok(());
            }
            health?;
            if start.elapsed() > timeout {
                return Err(Error::Timeout { what: what.to_owned(), after: timeout });
            }
            spins += 1;
            if spins > 1000 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Enqueues a Shutdown item and waits for it: every earlier item completes first.
    /// On timeout, reports how many items were still outstanding.
    pub fn shutdown(&mut self, timeout: Duration) -> Result<()> {
        // SAFETY: a Shutdown item carries no address.
        let ticket = unsafe { self.enqueue(WorkItem::shutdown(), timeout) }?;
        match self.wait(ticket, timeout) {
            Err(Error::Timeout { .. }) => Err(Error::ShutdownIncomplete { outstanding: self.outstanding() }),
            other => other,
        }
    }
}

/// The error a non-zero device status word names (`LoopError::status`: the error in the
/// low half, its detail in the high half), for the item of sequence number `seq`.
pub(crate) fn status_error(status: u64, seq: u64) -> Error {
    let detail = (status >> 32) as u32;
    match LoopError::from_u32(status as u32) {
        Some(LoopError::BadItem) => Error::BadWorkItem { reason: BadItem::from_u32(detail).unwrap_or(BadItem::UnknownKind), seq },
        Some(LoopError::Aborted) => Error::Aborted,
        Some(LoopError::Timeout) => Error::DeviceTimeout { site: WaitSite::from_u32(detail), seq },
        Some(LoopError::PeerMismatch) => Error::PeerMismatch { seq },
        None => Error::UnknownLoopStatus(status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A status word the host does not know is its own error, not an argument error.
    #[test]
    fn an_unknown_loop_status_is_reported_as_such() {
        let mut header = Box::new(QueueHeader::new());
        header.status = 0xdead_0000_00ff;
        let header_ptr = &raw mut *header;
        let mut ring = vec![RingSlot::default(); 1];
        let owner: HeaderOwner = Arc::new(header);
        // SAFETY: a zeroed-but-status header and a one-slot ring, alive for the test; no
        // loop runs.
        let queue = unsafe { Queue::new(header_ptr, ring.as_mut_ptr(), 1, 1, owner) }.unwrap();
        assert!(matches!(queue.health(), Err(Error::UnknownLoopStatus(0xdead_0000_00ff))), "{:?}", queue.health());
    }

    /// A loop that stops with an error and leaves between two of `health`'s reads is
    /// reported with its error, not as closed: the header's words as the host reads them,
    /// the loop's last channel storing its timeout and its exit right after the first read.
    #[test]
    fn a_loop_that_stops_with_an_error_while_health_reads_is_reported_with_it() {
        use std::cell::Cell;
        let reads = Cell::new(0);
        let load = |which: HeaderWord| {
            let stopped = reads.get() > 0;
            reads.set(reads.get() + 1);
            match which {
                HeaderWord::Status if stopped => LoopError::Timeout as u64 | (WaitSite::ShmemBarrier as u64) << 32,
                HeaderWord::ErrorSeq if stopped => 7,
                HeaderWord::Exited if stopped => 1,
                _ => 0,
            }
        };
        let health = health_of(load, 1);
        assert!(matches!(health, Err(Error::DeviceTimeout { site: Some(WaitSite::ShmemBarrier), seq: 7 })), "{health:?}");
        let closed = health_of(|which| u64::from(matches!(which, HeaderWord::Exited)), 1);
        assert!(matches!(closed, Err(Error::LoopClosed)), "a loop that left without an error: {closed:?}");
    }

    /// The header report names the loop's sleep state, the host's counts and every
    /// channel's completion as the header holds them.
    #[cfg(feature = "testing")]
    #[test]
    fn the_header_report_says_what_the_header_holds() {
        let mut header = Box::new(QueueHeader::new());
        (header.submits, header.status, header.exited, header.awake) = (3, LoopError::Timeout as u64 | (WaitSite::MailboxSubmit as u64) << 32, 2, LOOP_ASLEEP);
        header.cta_completed[1] = 5;
        let header_ptr = &raw mut *header;
        let mut ring = vec![RingSlot::default(); 4];
        let owner: HeaderOwner = Arc::new(header);
        // SAFETY: a header and a four-slot ring, alive for the test; no loop runs.
        let queue = unsafe { Queue::new(header_ptr, ring.as_mut_ptr(), 4, 2, owner) }.unwrap();
        let report = queue.header_report();
        for part in ["asleep", "submits 3", "status 0x500000003", "exited 2", "ring items published 0", "completed per channel [0, 5]"] {
            assert!(report.contains(part), "{part:?} not in {report:?}");
        }
    }

    /// The host's half of the sleep handshake, with no loop: work that finds the loop
    /// awake launches nothing; asleep, the queue launches it once and marks it awake;
    /// leaving, it waits for the loop's answer; a failed launch leaves it asleep, and
    /// without a hook the work is refused. A submission outside a capture is counted; one
    /// inside pins the loop.
    #[test]
    fn work_wakes_a_sleeping_loop_once() {
        use std::sync::atomic::AtomicUsize;
        let mut header = Box::new(QueueHeader::new());
        let header_ptr = &raw mut *header;
        let mut ring = vec![RingSlot::default(); 4];
        let owner: HeaderOwner = Arc::new(header);
        // SAFETY: a zeroed header and a four-slot ring, alive for the test; no loop runs.
        let mut queue = unsafe { Queue::new(header_ptr, ring.as_mut_ptr(), 4, 1, owner) }.unwrap();
        // SAFETY: a field of the live header.
        let awake = unsafe { AtomicU64::from_ptr(&raw mut (*header_ptr).awake) };
        let set = |v| awake.store(v, Ordering::SeqCst);
        queue.announce_submit(false).unwrap();
        set(LOOP_ASLEEP);
        assert!(matches!(queue.announce_submit(false), Err(Error::InvalidState(_))), "no hook: refused");
        let launched = Arc::new(AtomicUsize::new(0));
        let fail = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (l, f) = (launched.clone(), fail.clone());
        queue.set_relaunch(Box::new(move || {
            l.fetch_add(1, Ordering::SeqCst);
            if f.load(Ordering::SeqCst) { Err(Error::InvalidState("launch failed")) } else { Ok(()) }
        }));
        assert!(queue.announce_submit(false).is_err());
        assert_eq!((awake.load(Ordering::SeqCst), launched.load(Ordering::SeqCst)), (LOOP_ASLEEP, 1), "a failed launch leaves it asleep");
        fail.store(false, Ordering::SeqCst);
        // SAFETY: a no-op carries no address.
        unsafe { queue.enqueue(WorkItem::noop(), Duration::from_secs(1)) }.unwrap();
        assert_eq!((awake.load(Ordering::SeqCst), launched.load(Ordering::SeqCst)), (LOOP_AWAKE, 2));
        queue.announce_submit(true).unwrap();
        assert_eq!(launched.load(Ordering::SeqCst), 2, "awake: nothing launched");
        set(LOOP_LEAVING);
        let resolve = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            awake.store(LOOP_AWAKE, Ordering::SeqCst);
        });
        queue.announce_submit(false).unwrap();
        resolve.join().unwrap();
        assert_eq!(launched.load(Ordering::SeqCst), 2, "the loop answered AWAKE: nothing launched");
        // SAFETY: fields of the live header.
        let (submits, pinned) = unsafe { ((*header_ptr).submits, (*header_ptr).pinned) };
        assert_eq!((submits, pinned), (2, 1), "submissions counted outside captures (the refused ones taken back), the capture pinned");
    }
}
