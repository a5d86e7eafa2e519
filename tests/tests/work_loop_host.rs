//! The persistent work loop (`device_rt::work::work_loop`) on CPU threads through the host
//! twin, fed by host-shim's real producer (`host_shim::queue::Queue`): ordering over
//! thousands of items, backpressure, malformed items, abort, spin budgets, shutdown with
//! work outstanding, and the stream mailbox: `submit_to_mailbox` (the call kernel's body)
//! run from a host thread against the loop.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use device_rt::arch::{self, Site, WeakMemory};
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::abi::WaitSite;
use device_rt::algo::CollFunction;
use device_rt::work::{BadItem, ChannelPlacement, DeviceFunction, LOOP_SMEM_BYTES, LoopArgs, LoopState, MAILBOX_CLOSED, MAILBOX_GENERATION_ONE, MAILBOX_PENDING, QueueHeader, RingSlot, SubmitOutcome, WorkItem, shmem_work_loop, submit_to_mailbox, work_loop};
use host_shim::Error;
use host_shim::queue::{Queue, Ticket};

const LONG: Duration = Duration::from_secs(30);

/// A work loop running on the host twin, with its memory and producer.
struct TwinLoop {
    #[expect(clippy::redundant_allocation, reason = "the loop's raw header pointer is taken from the Box before it is shared: a stable, uniquely derived address")]
    header: Arc<Box<QueueHeader>>,
    /// The header's address, taken from the Box before it was shared (submissions write
    /// it).
    header_addr: usize,
    ring: Vec<RingSlot>,
    state: Box<LoopState>,
    queue: Queue,
    /// The loop's launches not yet joined: the first, and one more each time the queue
    /// launched the loop again after it slept (shared with the queue's relaunch hook).
    launches: Launches,
    /// Launches so far.
    launched: Arc<AtomicU64>,
    /// The weak-memory world the loop and its submissions run in, if any.
    memory: Option<WeakMemory>,
}

/// A loop's launches (threads) not yet joined.
type Launches = Arc<Mutex<Vec<JoinHandle<std::thread::Result<()>>>>>;

/// What a launch of a loop on the host twin takes: its body, grid and memory (addresses).
#[derive(Clone)]
struct LoopLaunch {
    entry: unsafe fn(LoopArgs),
    grid: u32,
    threads: u32,
    header: usize,
    ring: usize,
    capacity: u64,
    state: usize,
    budget_ns: u64,
    memory: Option<WeakMemory>,
}

impl LoopLaunch {
    /// Starts the loop on threads of its own; a trap (panic) comes back from the join.
    fn spawn(&self) -> JoinHandle<std::thread::Result<()>> {
        let launch = self.clone();
        std::thread::spawn(move || {
            catch_unwind(AssertUnwindSafe(|| {
                arch::launch_in(launch.memory.as_ref(), launch.grid, launch.threads, LOOP_SMEM_BYTES, || {
                    let args = LoopArgs {
                        header: launch.header as *mut QueueHeader,
                        ring: launch.ring as *const RingSlot,
                        capacity: launch.capacity,
                        state: launch.state as *mut LoopState,
                        spin_budget_ns: launch.budget_ns,
                        comm: std::ptr::null(),
                    };
                    // SAFETY: the header, ring, state and (null) communicator outlive the loop threads (`TwinLoop` joins them before dropping its memory), and this is the only loop on them (a launch after a sleep starts once the one before stored ASLEEP and ends).
                    unsafe { (launch.entry)(args) }
                })
            }))
        })
    }
}

impl TwinLoop {
    fn start(channels: u32, threads: u32, capacity: u64, budget: Duration) -> Self {
        Self::start_placed(channels, ChannelPlacement::default(), threads, capacity, budget, None)
    }

    /// A symmetric heap's loop (`shmem_work_loop`): it also runs the heap's items.
    fn start_heap(channels: u32, threads: u32, capacity: u64, budget: Duration) -> Self {
        Self::start_entry(shmem_work_loop, channels, ChannelPlacement::default(), threads, capacity, budget, None)
    }

    /// A loop of `grid` CTAs whose channels `placement` chooses (the default: the grid),
    /// in `memory`'s weak-memory world if given.
    fn start_placed(grid: u32, placement: ChannelPlacement, threads: u32, capacity: u64, budget: Duration, memory: Option<WeakMemory>) -> Self {
        Self::start_entry(work_loop, grid, placement, threads, capacity, budget, memory)
    }

    /// As `start_placed`, the loop's body `entry` (`work_loop` or `shmem_work_loop`).
    fn start_entry(entry: unsafe fn(LoopArgs), grid: u32, placement: ChannelPlacement, threads: u32, capacity: u64, budget: Duration, memory: Option<WeakMemory>) -> Self {
        Self::start_with(entry, grid, LoopState { placement, ..LoopState::default() }, threads, capacity, budget, memory)
    }

    /// A loop of one channel that leaves to sleep after polling for `sleep_after` with
    /// nothing to do (`LoopState::sleep_after_ns`), and that the queue launches again for
    /// the next work (`Queue::wake`), as a communicator's loop of one resident channel.
    fn start_sleeping(capacity: u64, sleep_after: Duration) -> Self {
        let state = LoopState { sleep_after_ns: sleep_after.as_nanos() as u64, ..LoopState::default() };
        Self::start_with(work_loop, 1, state, 32, capacity, LONG, None)
    }

    /// Starts `entry` on `grid` CTAs from `state`, with a queue that launches the loop
    /// again after it slept.
    fn start_with(entry: unsafe fn(LoopArgs), grid: u32, state: LoopState, threads: u32, capacity: u64, budget: Duration, memory: Option<WeakMemory>) -> Self {
        let channels = if state.placement.nchannels == 0 { grid } else { state.placement.nchannels };
        let mut header = Box::new(QueueHeader::new());
        let mut ring = vec![RingSlot::default(); capacity as usize];
        let mut state = Box::new(state);
        let (h, r, s) = (&raw mut *header as usize, ring.as_mut_ptr() as usize, &raw mut *state as usize);
        if let Some(memory) = &memory {
            memory.host_region(ring.as_ptr().cast(), ring.len() * size_of::<RingSlot>());
            memory.host_region((&raw const *header).cast(), size_of::<QueueHeader>());
        }
        let launch = LoopLaunch { entry, grid, threads, header: h, ring: r, capacity, state: s, budget_ns: budget.as_nanos() as u64, memory: memory.clone() };
        let launches: Launches = Arc::new(Mutex::new(vec![launch.spawn()]));
        let launched = Arc::new(AtomicU64::new(1));
        let header_ptr = &raw mut *header;
        let header = Arc::new(header);
        // SAFETY: a zeroed header kept alive by its shares, and a ring of `capacity` slots that `TwinLoop` keeps until the loop has left; only this queue and the loop write them.
        let mut queue = unsafe { Queue::new(header_ptr, ring.as_mut_ptr(), capacity, channels as usize, header.clone()) }.unwrap();
        let (relaunches, relaunched) = (Arc::clone(&launches), Arc::clone(&launched));
        // The queue launches the loop again only after it stored ASLEEP: its threads are
        // ending, and the new ones resume from the state it kept.
        queue.set_relaunch(Box::new(move || {
            relaunches.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(launch.spawn());
            relaunched.fetch_add(1, Ordering::AcqRel);
            Ok(())
        }));
        TwinLoop { header, header_addr: header_ptr as usize, ring, state, queue, launches, launched, memory }
    }

    /// Waits for the loop's threads (every launch) to end; panics if they do not within
    /// `LONG`, and with a launch's own panic (a device trap) if one trapped.
    fn join(&mut self) {
        let threads = std::mem::take(&mut *self.launches.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let start = Instant::now();
        for thread in threads {
            while !thread.is_finished() {
                assert!(start.elapsed() < LONG, "the work loop did not leave");
                std::thread::sleep(Duration::from_millis(1));
            }
            if let Err(p) = thread.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                std::panic::resume_unwind(p);
            }
        }
    }

    /// Waits until the loop's launch `launch` (1: the first) has left to sleep: every
    /// step of that launch up to its decision to sleep has happened.
    fn wait_asleep(&self, launch: u64) {
        wait_until(&format!("launch {launch} of the loop leaving to sleep"), || {
            let launched = self.launched.load(Ordering::Acquire);
            assert!(launched <= launch, "the loop was launched {launched} times, expected {launch}");
            launched == launch && self.queue.asleep()
        });
    }

    /// Writes `item` (as is, unvalidated) into the slot of `position`, flagged as
    /// `position`'s: what a corrupted queue would look like to the device.
    fn publish_raw(&mut self, position: u64, item: WorkItem) {
        self.write_words(position, item, 0..16);
    }

    /// The words of the slot where `position` goes.
    fn slot_words(&self, position: u64) -> [u64; 16] {
        self.ring[((position - 1) % self.ring.len() as u64) as usize].words
    }

    /// Writes the words `words` of `item`'s slot for `position`.
    fn write_words(&mut self, position: u64, item: WorkItem, words: std::ops::Range<usize>) {
        let slot = ((position - 1) % self.ring.len() as u64) as usize;
        let encoded = RingSlot::encode(&item, position);
        for w in words {
            // SAFETY: `slot < ring.len()` and `w < 16`: an 8-byte aligned word of the live ring, which the loop reads atomically.
            unsafe { AtomicU64::from_ptr(&raw mut self.ring[slot].words[w]) }.store(encoded[w], Ordering::Release);
        }
    }

    fn completed(&self) -> u64 {
        // SAFETY: an aligned word of the live header, which the loop writes atomically.
        unsafe { AtomicU64::from_ptr((&raw const self.header.cta_completed[0]).cast_mut()) }.load(Ordering::Acquire)
    }

    /// The loop state's `stream_done`, the 32-bit word a stream's wait reads on the ring
    /// route.
    fn stream_done(&self) -> u64 {
        // SAFETY: an aligned word of the live loop state, which the loop writes atomically.
        u64::from(unsafe { std::sync::atomic::AtomicU32::from_ptr((&raw const self.state.stream_done).cast_mut()) }.load(Ordering::Acquire))
    }

    /// `stream_done` once it has reached `expected`, or as it stands after `LONG`: the
    /// channel stores it beside its completion, not before it, so a host that has seen
    /// the completion may read the previous value for a moment.
    fn stream_done_reaching(&self, expected: u64) -> u64 {
        let deadline = std::time::Instant::now() + LONG;
        loop {
            let seen = self.stream_done();
            if seen >= expected || std::time::Instant::now() >= deadline {
                return seen;
            }
            std::thread::yield_now();
        }
    }

    fn mailbox_state(&self) -> &AtomicU64 {
        // SAFETY: the mailbox state, an aligned word of the live loop state, accessed atomically by the loop.
        unsafe { AtomicU64::from_ptr((&raw const self.state.mailbox.state).cast_mut()) }
    }
}

impl Drop for TwinLoop {
    /// Stops a loop still running and waits for its launches, so that the memory outlives
    /// them. Every test joins its loop itself ([`TwinLoop::join`], which fails the test
    /// with a launch's trap); a loop left running here is one whose test already failed,
    /// and a drop must not panic.
    fn drop(&mut self) {
        let threads = std::mem::take(&mut *self.launches.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if threads.is_empty() {
            return;
        }
        self.queue.abort_handle().abort();
        for thread in threads {
            drop(thread.join());
        }
    }
}

fn word(v: &AtomicU64) -> u64 {
    v as *const AtomicU64 as u64
}

/// A loop launched with more CTAs than channels: the CTA on the listed SM (every host
/// thread is on SM 0) claims that SM's channel, one spare claims the channel whose SM
/// never came once the grace period is over, the other spares leave. The two channels
/// then split a copy between them, run a device function once, and leave on shutdown.
#[test]
fn spare_ctas_leave_and_every_channel_gets_one_cta() {
    const N: usize = 4099;
    let placement = ChannelPlacement::on_sms(&[7, 0], 2_000_000).unwrap();
    let mut lp = TwinLoop::start_placed(4, placement, 64, 8, LONG, None);
    let src: Vec<u32> = (0..N as u32).map(|x| x.wrapping_mul(2654435761)).collect();
    let dst = vec![0u32; N];
    let counter = AtomicU64::new(0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    unsafe { lp.queue.enqueue(WorkItem::copy(DataType::U32, src.as_ptr() as u64, dst.as_ptr() as u64, N as u64), LONG) }.unwrap();
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let last = unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) }.unwrap();
    lp.queue.wait(last, LONG).unwrap();
    assert_eq!(dst, src, "both channels' shares copied");
    assert_eq!(counter.load(Ordering::Relaxed), 1, "channel 0 runs the device function, once");
    lp.queue.shutdown(LONG).unwrap();
    lp.join();
    let p = &lp.state.placement;
    assert_eq!((p.claimed, p.claims[0], p.claims[1], p.claims[2]), (2, 1, 1, 0), "{p:?}");
    assert_eq!(lp.state.exited, 2, "only the channels count out");
    assert_eq!(lp.header.exited, 2, "the last channel out tells the host");
}

/// A placement names each SM once, at most 64 channels, and SMs below 256.
#[test]
fn placement_tables_refuse_what_they_cannot_hold() {
    let p = ChannelPlacement::on_sms(&[4, 130, 2], 1000).unwrap();
    assert_eq!((p.nchannels, p.grace_ns, p.sm_channel[4], p.sm_channel[130], p.sm_channel[2], p.sm_channel[0]), (3, 1000, 1, 2, 3, 0));
    assert!(ChannelPlacement::on_sms(&[], 1000).is_none());
    assert!(ChannelPlacement::on_sms(&[3, 3], 1000).is_none());
    assert!(ChannelPlacement::on_sms(&[256], 1000).is_none());
    assert!(ChannelPlacement::on_sms(&(0..65).collect::<Vec<u32>>(), 1000).is_none());
}

#[test]
fn thousands_of_items_run_in_order_across_channels() {
    items_run_in_order_across_channels(None, 300);
}

/// As above in a weak-memory world: the channels' barrier items hand each channel's
/// writes to the others.
#[test]
fn items_run_in_order_across_channels_in_weak_memory() {
    WeakMemory::every_seed_passes(0..2, |memory| {
        items_run_in_order_across_channels(Some(memory.clone()), 40);
        Ok(())
    });
}

/// `rounds` rounds of items on 3 channels (in `memory`'s weak-memory world when given),
/// each round's items reading what a neighbouring channel wrote in the round before.
fn items_run_in_order_across_channels(memory: Option<WeakMemory>, rounds: usize) {
    const N: usize = 1000;
    const SHIFT: usize = 7;
    let mut a: Vec<u32> = (0..N as u32).collect();
    let ones = vec![1u32; N];
    let b = vec![0u32; N];
    let counter = AtomicU64::new(0);
    // After the buffers, so that it ends (joining the loop) before they are freed.
    let mut lp = TwinLoop::start_placed(3, ChannelPlacement::default(), 64, 8, LONG, memory);
    let (pa, pb, p1) = (a.as_mut_ptr() as u64, b.as_ptr() as u64, ones.as_ptr() as u64);
    let mut last = Ticket(0);
    for _ in 0..rounds {
        // b = a + 1; (every channel done) a[..N-SHIFT] = b[SHIFT..]: each channel reads
        // what a neighbouring channel wrote, so the barriers and the order both matter.
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        last = unsafe { lp.queue.enqueue(WorkItem::sum(DataType::U32, pa, p1, pb, N as u64), LONG) }.unwrap();
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        unsafe { lp.queue.enqueue(WorkItem::barrier(), LONG) }.unwrap();
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        unsafe { lp.queue.enqueue(WorkItem::copy(DataType::U32, pb + 4 * SHIFT as u64, pa, (N - SHIFT) as u64), LONG) }.unwrap();
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        unsafe { lp.queue.enqueue(WorkItem::barrier(), LONG) }.unwrap();
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) }.unwrap();
    }
    lp.queue.wait(last, LONG).unwrap();
    lp.queue.shutdown(LONG).unwrap();
    lp.join();
    let mut want: Vec<u32> = (0..N as u32).collect();
    for _ in 0..rounds {
        let bb: Vec<u32> = want.iter().map(|x| x + 1).collect();
        want[..N - SHIFT].copy_from_slice(&bb[SHIFT..]);
    }
    assert_eq!(a, want);
    assert_eq!(counter.load(Ordering::Relaxed), rounds as u64);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    assert_eq!(unsafe { lp.queue.enqueue(WorkItem::noop(), LONG) }.unwrap_err().to_string(), Error::LoopClosed.to_string());
}

#[test]
fn a_batch_written_at_once_runs_whole_and_in_order() {
    // One channel, 200 items written before the loop reads any: its reads grow from one
    // slot to a backlog of many, and each item copies what the previous one wrote.
    const ITEMS: usize = 200;
    let mut lp = TwinLoop::start(1, 32, 256, LONG);
    let mut chain = vec![0u32; ITEMS + 1];
    chain[0] = 7;
    let base = chain.as_mut_ptr() as u64;
    let at = |i: usize| base + 4 * i as u64;
    let items: Vec<WorkItem> = (0..ITEMS).map(|i| WorkItem::copy(DataType::U32, at(i), at(i + 1), 1)).collect();
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let last = unsafe { lp.queue.enqueue_batch(&items, LONG) }.unwrap();
    lp.queue.wait(last, LONG).unwrap();
    lp.queue.shutdown(LONG).unwrap();
    lp.join();
    assert_eq!(chain, vec![7u32; ITEMS + 1], "an item ran before the one it depends on");
}

#[test]
fn a_full_queue_blocks_the_producer_and_overwrites_nothing() {
    let mut lp = TwinLoop::start(2, 32, 4, LONG);
    let flag = AtomicU64::new(0);
    let counter = AtomicU64::new(0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), LONG) }.unwrap();
    for _ in 0..3 {
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) }.unwrap();
    }
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let err = unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), Duration::from_millis(100)) };
    assert!(matches!(err, Err(Error::Timeout { .. })), "{err:?}");
    let flags = lp.slot_words(5).map(|w| w >> 32);
    assert_eq!(flags, [u64::from(RingSlot::flag(1)); 16], "a refused enqueue must not touch the slot it waits for");
    assert_eq!(counter.load(Ordering::Relaxed), 0, "nothing runs past the blocked item");
    flag.store(1, Ordering::Release);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let t = unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) }.unwrap();
    lp.queue.wait(t, LONG).unwrap();
    assert_eq!(counter.load(Ordering::Relaxed), 4);
    lp.queue.shutdown(LONG).unwrap();
    lp.join();
}

#[test]
fn malformed_items_are_refused_by_the_host_and_stop_the_device() {
    let mut lp = TwinLoop::start(2, 32, 4, LONG);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let host_refused = unsafe { lp.queue.enqueue(WorkItem { kind: 99, ..WorkItem::noop() }, LONG) };
    assert!(matches!(host_refused, Err(Error::BadWorkItem { reason: BadItem::UnknownKind, seq: 0 })), "{host_refused:?}");
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let misaligned = unsafe { lp.queue.enqueue(WorkItem::copy(DataType::F32, 0x1002, 0x2000, 4), LONG) };
    assert!(matches!(misaligned, Err(Error::BadWorkItem { reason: BadItem::Misaligned, .. })), "{misaligned:?}");
    assert_eq!(lp.slot_words(1), [0; 16], "refused items are never written");
    // A null source that got past the host (a corrupted slot): the device refuses it.
    lp.publish_raw(1, WorkItem { seq: 1, ..WorkItem::copy(DataType::F32, 0, 0x2000, 4) });
    let err = lp.queue.wait(Ticket(1), LONG);
    assert!(matches!(err, Err(Error::BadWorkItem { reason: BadItem::NullPointer, seq: 1 })), "{err:?}");
    lp.join();
}

#[test]
fn a_collective_on_a_loop_without_a_communicator_is_refused() {
    let mut lp = TwinLoop::start(1, 128, 4, LONG);
    let data = [1.0f32; 4];
    let ptr = data.as_ptr() as u64;
    let item = WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, ptr, ptr, 4, 0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let t = unsafe { lp.queue.enqueue(item, LONG) }.unwrap();
    let err = lp.queue.wait(t, LONG);
    assert!(matches!(err, Err(Error::BadWorkItem { reason: BadItem::NoCommunicator, seq: 1 })), "{err:?}");
    lp.join();
}

#[test]
fn a_stale_slot_is_refused_by_its_sequence_number() {
    let mut lp = TwinLoop::start(1, 32, 4, LONG);
    lp.publish_raw(1, WorkItem { seq: 5, ..WorkItem::noop() });
    let err = lp.queue.wait(Ticket(1), LONG);
    assert!(matches!(err, Err(Error::BadWorkItem { reason: BadItem::WrongSequence, seq: 1 })), "{err:?}");
    lp.join();
}

/// How long an idle loop of [`TwinLoop::start_sleeping`] polls before it tries to sleep:
/// short, so that it sleeps as soon as it has nothing to do.
const SLEEP_AFTER: Duration = Duration::from_micros(20);

/// A slot written but for some of its words is never taken, and is taken once whole. Each
/// time, the slot's words are written while the loop sleeps and the host then launches it
/// again; the launch polls the slot, finds it torn and leaves to sleep again (the word an
/// idle loop reads before it sleeps is the slot's first, kept back every time): its sleep
/// is the observable state that follows its polls of the torn slot, so nothing has run by
/// then. Torn at words 0 and 7, then at word 0 alone; then whole.
#[test]
fn a_half_written_slot_is_not_taken_until_every_word_has_arrived() {
    let mut lp = TwinLoop::start_sleeping(4, SLEEP_AFTER);
    let counter = AtomicU64::new(0);
    let item = WorkItem { seq: 1, ..WorkItem::call(DeviceFunction::Increment, word(&counter), 0) };
    lp.wait_asleep(1);
    let mut launch = 1;
    for words in [[1..7, 8..16], [7..8, 0..0]] {
        for range in words {
            lp.write_words(1, item, range);
        }
        lp.queue.wake().unwrap();
        launch += 1;
        lp.wait_asleep(launch);
        assert_eq!((lp.completed(), counter.load(Ordering::Relaxed)), (0, 0), "launch {launch}: a torn slot must never run");
    }
    lp.write_words(1, item, 0..1);
    lp.queue.wake().unwrap();
    wait_until("the whole slot ran", || lp.completed() >= 1);
    assert_eq!(counter.load(Ordering::Relaxed), 1);
    lp.queue.abort_handle().abort();
    lp.join();
}

/// Slot 1 whole and slot 2 short of words 0 and 5, both written while the loop sleeps:
/// the launch that follows reads both in one poll (a poll reads several slots at once),
/// must take only the first, runs it and leaves to sleep again (after polling the torn
/// slot: see above); then slot 2, made whole, runs.
#[test]
fn a_poll_takes_a_whole_slot_and_leaves_the_torn_one_after_it() {
    let mut lp = TwinLoop::start_sleeping(8, SLEEP_AFTER);
    let counter = AtomicU64::new(0);
    let first = WorkItem { seq: 1, ..WorkItem::call(DeviceFunction::Increment, word(&counter), 0) };
    let second = WorkItem { seq: 2, ..first };
    lp.wait_asleep(1);
    lp.write_words(2, second, 1..5);
    lp.write_words(2, second, 6..16);
    lp.write_words(1, first, 0..16);
    lp.queue.wake().unwrap();
    lp.wait_asleep(2);
    assert_eq!((lp.completed(), counter.load(Ordering::Relaxed)), (1, 1), "a torn slot after a whole one must never run");
    lp.write_words(2, second, 5..6);
    lp.write_words(2, second, 0..1);
    lp.queue.wake().unwrap();
    wait_until("the second slot ran once whole", || lp.completed() >= 2);
    assert_eq!(counter.load(Ordering::Relaxed), 2);
    lp.queue.abort_handle().abort();
    lp.join();
}

#[test]
fn abort_ends_a_spinning_wait_with_aborted() {
    let mut lp = TwinLoop::start(2, 32, 4, Duration::from_secs(3600));
    let flag = AtomicU64::new(0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let t = unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), LONG) }.unwrap();
    // The loop has taken the item: it spins in its wait, which only the abort ends.
    wait_slot_taken(&lp, 1);
    let abort = lp.queue.abort_handle();
    let aborter = std::thread::spawn(move || abort.abort());
    let err = lp.queue.wait(t, LONG);
    aborter.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert!(matches!(err, Err(Error::Aborted)), "{err:?}");
    lp.join();
}

/// After `abort()` every call is refused at once, before the loop has noticed (here it
/// is inside a wait that has not yet looked at the flag), and nothing is written.
#[test]
fn calls_after_abort_are_refused_at_once() {
    let mut lp = TwinLoop::start(1, 32, 8, Duration::from_secs(3600));
    let flag = AtomicU64::new(0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), LONG) }.unwrap();
    lp.queue.abort_handle().abort();
    let outstanding = lp.queue.outstanding();
    let counter = AtomicU64::new(0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let err = unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) };
    assert!(matches!(err, Err(Error::Aborted)), "{err:?}");
    assert_eq!(lp.queue.outstanding(), outstanding, "the refused item was not published");
    lp.join();
    assert_eq!(counter.load(Ordering::Relaxed), 0);
}

/// A burst of items that are each found at once (no wait, so no spin guard reads the abort
/// flag) stops at a fetch after the flag is set, not when the burst ends. The flag is set
/// at a known point of the burst, by an item of it (an increment of the header's abort
/// word: the host cannot time its own store into a burst the loop runs): the items before
/// it all ran, and of the ones after it only those fetched before the loop looked at the
/// flag (a look between items at most every 20 µs; the burst's last 899 items take far
/// longer). The first item holds the loop until the whole burst is in the ring.
#[test]
fn an_abort_stops_a_burst_of_items_found_at_once() {
    const BURST: u64 = 1000;
    const ABORT_AT: u64 = 100;
    let mut lp = TwinLoop::start(1, 32, 1024, Duration::from_secs(3600));
    let (flag, counter) = (AtomicU64::new(0), AtomicU64::new(0));
    let abort_word = lp.header_addr as u64 + std::mem::offset_of!(QueueHeader, abort) as u64;
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), LONG) }.unwrap();
    for k in 0..BURST {
        let target = if k == ABORT_AT { abort_word } else { word(&counter) };
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, target, 0), LONG) }.unwrap();
    }
    flag.store(1, Ordering::Release);
    lp.join();
    assert!(matches!(lp.queue.health(), Err(Error::Aborted)), "{:?}", lp.queue.health());
    let ran = counter.load(Ordering::Relaxed);
    assert!(ran >= ABORT_AT, "only {ran} of the {ABORT_AT} items before the abort ran");
    assert!(ran < BURST - 1, "all {} items of the burst after the abort ran", BURST - 1 - ABORT_AT);
}

/// An abort handle holds a share of the queue header: it stays valid after its loop and
/// queue are gone, and the memory goes with the last handle.
#[test]
fn an_abort_handle_keeps_the_header_alive_after_its_loop() {
    let mut lp = TwinLoop::start(1, 32, 4, Duration::from_secs(3600));
    let handle = lp.queue.abort_handle();
    let header = Arc::downgrade(&lp.header);
    lp.queue.abort_handle().abort();
    lp.join();
    drop(lp);
    let alive = header.upgrade().expect("the handle keeps the header alive");
    // SAFETY: `alive` keeps the header; the loop has left, nobody else writes it.
    let flag = || unsafe { AtomicU64::from_ptr((&raw const alive.abort).cast_mut()) }.load(Ordering::Acquire);
    // SAFETY: as above.
    unsafe { AtomicU64::from_ptr((&raw const alive.abort).cast_mut()) }.store(0, Ordering::Release);
    handle.clone().abort();
    assert_eq!(flag(), 1, "the handle wrote the live header");
    drop(alive);
    drop(handle);
    assert!(header.upgrade().is_none(), "the last handle released the header");
}

#[test]
fn an_idle_loop_leaves_on_abort_and_records_it() {
    // Nothing queued: every channel is polling its next slot, a wait without a budget
    // that only the abort flag can end.
    let mut lp = TwinLoop::start(3, 32, 4, Duration::from_secs(3600));
    std::thread::sleep(Duration::from_millis(50));
    lp.queue.abort_handle().abort();
    lp.join();
    assert!(matches!(lp.queue.health(), Err(Error::Aborted)), "{:?}", lp.queue.health());
    assert_eq!(lp.completed(), 0, "nothing ran");
}

#[test]
fn the_spin_budget_turns_a_missing_peer_into_a_timeout() {
    let mut lp = TwinLoop::start(2, 32, 4, Duration::from_millis(200));
    let flag = AtomicU64::new(0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let t = unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), LONG) }.unwrap();
    let err = lp.queue.wait(t, LONG);
    assert!(matches!(err, Err(Error::DeviceTimeout { site: Some(WaitSite::Flag), seq: 1 })), "{err:?}");
    lp.join();
}

/// A stream-ordered item whose own wait never ends, the loop and the submitter given the same
/// spin budget (as a communicator gives them): the loop's wait times out within the budget
/// and is what the host reads (the site that waited), while the submitter, which waits a
/// quarter longer (250 ms here, room for the twin's scheduling), finds the mailbox closed
/// instead of recording its own.
#[test]
fn a_submitted_item_stuck_in_its_wait_reports_that_wait_not_the_submission() {
    const BUDGET: Duration = Duration::from_secs(1);
    let mut lp = TwinLoop::start(1, 32, 4, BUDGET);
    let flag = AtomicU64::new(0);
    let start = Instant::now();
    assert_eq!(lp.submit(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), BUDGET), SubmitOutcome::Closed);
    assert!(start.elapsed() >= BUDGET);
    lp.join();
    let err = lp.queue.health();
    assert!(matches!(err, Err(Error::DeviceTimeout { site: Some(WaitSite::Flag), seq: 0 })), "{err:?}");
}

#[test]
fn shutdown_with_work_outstanding_reports_it() {
    let mut lp = TwinLoop::start(2, 32, 8, LONG);
    let flag = AtomicU64::new(0);
    let counter = AtomicU64::new(0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), LONG) }.unwrap();
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) }.unwrap();
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) }.unwrap();
    let err = lp.queue.shutdown(Duration::from_millis(200));
    assert!(matches!(err, Err(Error::ShutdownIncomplete { outstanding: 4 })), "{err:?}");
    // Once the blocking item can finish, the shutdown drains everything.
    flag.store(1, Ordering::Release);
    lp.queue.wait(Ticket(4), LONG).unwrap();
    assert_eq!(counter.load(Ordering::Relaxed), 2);
    lp.join();
}

/// Whether a stream's `cuStreamWaitValue32(GEQ, seq)` on `stream_done` goes on: the
/// driver's cyclic comparison of the low 32 bits.
fn stream_released(stream_done: u64, seq: u64) -> bool {
    (stream_done as u32).wrapping_sub(seq as u32) as i32 >= 0
}

/// The ring route of stream-ordered calls: a loop of one channel stores each completion
/// in `stream_done` too (a stream waits for it); a loop of two leaves it alone (the host
/// takes the route only with one channel).
#[test]
fn a_one_channel_loop_publishes_stream_done_with_its_completions() {
    for channels in [1, 2] {
        let mut lp = TwinLoop::start(channels, 32, 8, LONG);
        let counter = AtomicU64::new(0);
        for round in 1..=20u64 {
            // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
            let t = unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) }.unwrap();
            lp.queue.wait(t, LONG).unwrap();
            let expected = if channels == 1 { round } else { 0 };
            assert_eq!(lp.stream_done_reaching(expected), expected, "{channels} channel(s), round {round}");
        }
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        let t = unsafe { lp.queue.enqueue(WorkItem::noop(), LONG) }.unwrap();
        lp.queue.wait(t, LONG).unwrap();
        let expected = if channels == 1 { 21 } else { 0 };
        assert_eq!(lp.stream_done_reaching(expected), expected, "a no-op's completion too");
        lp.queue.shutdown(LONG).unwrap();
        lp.join();
        assert_eq!(counter.load(Ordering::Relaxed), 20, "each call ran once");
    }
}

/// A stream waiting on the ring route never waits for an item the loop will not run: a
/// loop that leaves (abort, timeout, a refused item) stores its last completion plus
/// 2^30, which releases every item still queued.
#[test]
fn a_leaving_one_channel_loop_releases_every_waiting_stream() {
    for why in ["abort", "timeout", "refused item"] {
        let budget = if why == "timeout" { Duration::from_millis(100) } else { LONG };
        let mut lp = TwinLoop::start(1, 32, 8, budget);
        let (flag, counter) = (AtomicU64::new(0), AtomicU64::new(0));
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        let first = unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) }.unwrap();
        lp.queue.wait(first, LONG).unwrap();
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        let blocked = unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), LONG) }.unwrap();
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG) }.unwrap();
        assert!(!stream_released(lp.stream_done(), blocked.0), "{why}: released before the loop left");
        match why {
            "abort" => lp.queue.abort_handle().abort(),
            "refused item" => {
                // SAFETY: the loop's ring has room (3 of 8 slots used); an item of an unknown kind is what the test wants refused.
                unsafe { lp.queue.publish_unchecked(WorkItem { seq: 4, kind: 250, ..WorkItem::noop() }) };
                flag.store(1, Ordering::Release);
            }
            _ => {}
        }
        lp.join();
        assert!(lp.queue.health().is_err(), "{why}: the loop left with an error");
        let done = lp.stream_done();
        let completed = lp.completed();
        assert!((completed + 1..=completed + 8).all(|seq| stream_released(done, seq)), "{why}: stream_done {done} keeps a stream waiting for an item the loop will not run");
        assert_eq!(done, completed + u64::from(device_rt::work::STREAM_DONE_RELEASE), "{why}");
    }
}

/// Runs `submit_to_mailbox` as the call kernel does (thread 0 of a 32-thread CTA on the
/// host twin, in `memory`'s weak-memory world if given) against `state` and `header`, and
/// returns how it ended.
fn submit_raw(memory: Option<&WeakMemory>, state: *mut LoopState, header: *mut QueueHeader, item: WorkItem, budget: Duration) -> SubmitOutcome {
    let (s, h) = (state as usize, header as usize);
    let outcome = std::sync::Mutex::new(None);
    arch::launch_in(memory, 1, 32, 0, || {
        if arch::thread_idx() == 0 {
            // SAFETY: the caller's loop state and header outlive this launch; one submitter
            // at a time (each test submits from one thread).
            let got = unsafe { submit_to_mailbox(s as *mut LoopState, h as *mut QueueHeader, item, budget.as_nanos() as u64) };
            *outcome.lock().unwrap() = Some(got);
        }
    });
    outcome.into_inner().unwrap().expect("thread 0 submitted")
}

impl TwinLoop {
    fn state_ptr(&mut self) -> *mut LoopState {
        &raw mut *self.state
    }

    fn header_ptr(&self) -> *mut QueueHeader {
        self.header_addr as *mut QueueHeader
    }

    /// Submits `item` from a host thread, as the call kernel does.
    fn submit(&mut self, item: WorkItem, budget: Duration) -> SubmitOutcome {
        submit_raw(self.memory.clone().as_ref(), self.state_ptr(), self.header_ptr(), item, budget)
    }

    /// Submits `item` from another thread; join the handle for the outcome.
    fn submit_in_background(&mut self, item: WorkItem, budget: Duration) -> JoinHandle<SubmitOutcome> {
        let (s, h, memory) = (self.state_ptr() as usize, self.header_ptr() as usize, self.memory.clone());
        std::thread::spawn(move || submit_raw(memory.as_ref(), s as *mut LoopState, h as *mut QueueHeader, item, budget))
    }
}

/// Waits until the polling channel has taken ring slot `seq`: from then on it runs that
/// item before it looks at the mailbox (which it otherwise looks at first).
fn wait_slot_taken(lp: &TwinLoop, seq: u64) {
    // SAFETY: an aligned word of the live loop state, which the loop changes only atomically.
    let seen = unsafe { AtomicU64::from_ptr((&raw const lp.state.seen_seq).cast_mut()) };
    wait_until(&format!("the loop taking slot {seq}"), || seen.load(Ordering::Acquire) >= seq);
}

/// Waits until the mailbox state has PENDING set (the submission has published its item).
fn wait_pending(lp: &TwinLoop) {
    wait_until("the submission publishing its item", || lp.mailbox_state().load(Ordering::Acquire) & MAILBOX_PENDING != 0);
}

/// Yields until `done()` holds; panics naming `what` if it does not within `LONG`.
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < LONG, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// Submits `count` increments of `counter`, each checked to run exactly once before its
/// submission returns.
fn submit_increments(lp: &mut TwinLoop, counter: &AtomicU64, count: u64) {
    let item = WorkItem::call(DeviceFunction::Increment, word(counter), 0);
    let before = counter.load(Ordering::Relaxed);
    for i in 1..=count {
        assert_eq!(lp.submit(item, LONG), SubmitOutcome::Done);
        assert_eq!(counter.load(Ordering::Relaxed), before + i, "each submission runs exactly once, before it returns");
    }
}

#[test]
fn mailbox_items_run_once_per_submission() {
    let mut lp = TwinLoop::start(3, 32, 4, LONG);
    let counter = AtomicU64::new(0);
    submit_increments(&mut lp, &counter, 50);
    assert_eq!(lp.mailbox_state().load(Ordering::Relaxed), 50 * MAILBOX_GENERATION_ONE, "one generation per submission, none pending");
    lp.queue.shutdown(LONG).unwrap();
    lp.join();
    assert_eq!(lp.mailbox_state().load(Ordering::Relaxed), (50 * MAILBOX_GENERATION_ONE) | MAILBOX_CLOSED, "leaving keeps the generation and adds CLOSED");
    assert_eq!(counter.load(Ordering::Relaxed), 50);
}

#[test]
fn a_one_channel_loop_completes_submissions_without_counting_arrivals() {
    let mut lp = TwinLoop::start(1, 32, 4, LONG);
    let counter = AtomicU64::new(0);
    submit_increments(&mut lp, &counter, 20);
    // SAFETY: an aligned word of the live loop state, which the loop changes only atomically.
    let arrived = unsafe { AtomicU64::from_ptr((&raw const lp.state.mailbox.arrived).cast_mut()) }.load(Ordering::Relaxed);
    assert_eq!(arrived, 0, "one channel has no one to count");
    lp.queue.shutdown(LONG).unwrap();
    lp.join();
}

/// After a submission, the polling channel watches only the mailbox for a while; ring items
/// enqueued then (and interleaved with more submissions) still all run, in order.
#[test]
fn ring_items_between_submissions_all_run() {
    let mut lp = TwinLoop::start(2, 32, 8, LONG);
    let (submitted, queued) = (AtomicU64::new(0), AtomicU64::new(0));
    let submit_item = WorkItem::call(DeviceFunction::Increment, word(&submitted), 0);
    let ring_item = WorkItem::call(DeviceFunction::Increment, word(&queued), 0);
    let mut last = None;
    for round in 0..30u64 {
        assert_eq!(lp.submit(submit_item, LONG), SubmitOutcome::Done);
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        last = Some(unsafe { lp.queue.enqueue(ring_item, LONG) }.unwrap());
        if round % 3 == 0 {
            lp.queue.wait(last.unwrap(), LONG).unwrap();
            assert_eq!(queued.load(Ordering::Relaxed), round + 1, "a ring item right after a submission runs");
        }
    }
    lp.queue.wait(last.unwrap(), LONG).unwrap();
    assert_eq!((submitted.load(Ordering::Relaxed), queued.load(Ordering::Relaxed)), (30, 30));
    lp.queue.shutdown(LONG).unwrap();
    lp.join();
}

#[test]
fn submissions_after_the_loop_closed_return_at_once_and_run_nothing() {
    let mut lp = TwinLoop::start(2, 32, 4, LONG);
    lp.queue.shutdown(LONG).unwrap();
    lp.join();
    let counter = AtomicU64::new(0);
    // More submissions than the flag byte could absorb if a closed submission left its
    // PENDING behind; each with no time to wait at all, so that one that waited for the
    // loop (instead of seeing CLOSED at once) would time out instead.
    for _ in 0..300 {
        assert_eq!(lp.submit(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), Duration::ZERO), SubmitOutcome::Closed);
    }
    assert_eq!(lp.mailbox_state().load(Ordering::Relaxed), MAILBOX_CLOSED, "CLOSED kept, every PENDING taken back");
    assert_eq!(counter.load(Ordering::Relaxed), 0);
}

#[test]
fn a_loop_that_closes_while_a_submission_waits_releases_it() {
    let mut lp = TwinLoop::start(1, 32, 4, LONG);
    let (flag, counter) = (AtomicU64::new(0), AtomicU64::new(0));
    // The loop is busy with item 1, taken with Shutdown behind it (slot 2 written first,
    // so the poll that finds slot 1 whole takes both); the submission publishes and waits;
    // when the wait ends the loop runs Shutdown from its cache and leaves without looking
    // at the mailbox.
    let busy = WorkItem { seq: 1, ..WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1) };
    lp.write_words(2, WorkItem { seq: 2, ..WorkItem::shutdown() }, 0..16);
    lp.write_words(1, busy, 0..16);
    wait_slot_taken(&lp, 2);
    let submitter = lp.submit_in_background(WorkItem::call(DeviceFunction::Increment, word(&counter), 0), LONG);
    wait_pending(&lp);
    flag.store(1, Ordering::Release);
    assert_eq!(submitter.join().unwrap_or_else(|p| std::panic::resume_unwind(p)), SubmitOutcome::Closed);
    lp.join();
    assert_eq!(counter.load(Ordering::Relaxed), 0, "the item never ran");
    assert_eq!(lp.mailbox_state().load(Ordering::Relaxed), MAILBOX_PENDING | MAILBOX_CLOSED, "CLOSED added, PENDING kept");
}

#[test]
fn abort_releases_a_waiting_submission() {
    // No loop at all: only the abort flag can end the submission's wait.
    let mut state = Box::new(LoopState::default());
    let mut header = Box::new(QueueHeader::new());
    let (s, h) = (&raw mut *state as usize, &raw mut *header as usize);
    let submitter = std::thread::spawn(move || submit_raw(None, s as *mut LoopState, h as *mut QueueHeader, WorkItem::noop(), LONG));
    // SAFETY: the mailbox state, an aligned word of the live loop state, which the submitter changes only atomically.
    let pending = unsafe { AtomicU64::from_ptr(&raw mut (*(s as *mut LoopState)).mailbox.state) };
    wait_until("the submission publishing its item", || pending.load(Ordering::Acquire) & MAILBOX_PENDING != 0);
    // SAFETY: the header's aligned abort word, which the submitter reads atomically.
    unsafe { AtomicU64::from_ptr(&raw mut header.abort) }.store(1, Ordering::Release);
    assert_eq!(submitter.join().unwrap_or_else(|p| std::panic::resume_unwind(p)), SubmitOutcome::Aborted);
    assert_eq!(state.mailbox.state, MAILBOX_PENDING);
    assert_eq!(header.status, 0, "an abort is the host's, not an error the submitter records");

    // A running loop, busy in a wait: the abort ends both.
    let mut lp = TwinLoop::start(2, 32, 4, Duration::from_secs(3600));
    let flag = AtomicU64::new(0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), LONG) }.unwrap();
    wait_slot_taken(&lp, 1);
    let submitter = lp.submit_in_background(WorkItem::noop(), LONG);
    wait_pending(&lp);
    lp.queue.abort_handle().abort();
    let outcome = submitter.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert!(matches!(outcome, SubmitOutcome::Aborted | SubmitOutcome::Closed), "{outcome:?}");
    lp.join();
    assert!(matches!(lp.queue.health(), Err(Error::Aborted)), "{:?}", lp.queue.health());
}

#[test]
fn a_submission_the_loop_never_answers_ends_at_its_budget_and_stops_the_loop() {
    let mut lp = TwinLoop::start(2, 32, 4, Duration::from_secs(3600));
    let flag = AtomicU64::new(0);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    unsafe { lp.queue.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, word(&flag), 1), LONG) }.unwrap();
    wait_slot_taken(&lp, 1);
    let start = Instant::now();
    assert_eq!(lp.submit(WorkItem::noop(), Duration::from_millis(200)), SubmitOutcome::TimedOut);
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert_ne!(lp.header.abort, 0, "the timeout set the abort flag");
    // The loop leaves (its wait sees the abort flag) and the host's next call fails.
    lp.join();
    let err = lp.queue.health();
    assert!(matches!(err, Err(Error::DeviceTimeout { site: Some(WaitSite::MailboxSubmit), seq: 0 })), "{err:?}");
    assert_eq!(lp.mailbox_state().load(Ordering::Relaxed), MAILBOX_PENDING | MAILBOX_CLOSED);
}

// ---------------------------------------------------------------------------------------
// Weak memory (`arch/weak/`): the ring, the mailbox and the completion path, with every
// ordering kept, pass every seed; with one ordering removed (a negative control) each
// fails within a few seeds.
// ---------------------------------------------------------------------------------------

/// Words each weak-memory round copies.
const WEAK_WORDS: usize = 200;
/// Rounds of a weak-memory run.
const WEAK_ROUNDS: u32 = 12;
/// Buffer pairs the rounds cycle through.
const WEAK_PAIRS: usize = 3;

/// Round `round`'s values: different in every round and word.
fn round_values(round: u32) -> Vec<u32> {
    (0..WEAK_WORDS as u32).map(|i| round * 100_000 + i).collect()
}

/// What the device wrote into `dst`, read with atomic loads (the loop threads write it
/// atomically).
fn read_words(dst: &[u32]) -> Vec<u32> {
    // SAFETY: aligned words of a live buffer, accessed by the loop only atomically.
    dst.iter().map(|w| unsafe { std::sync::atomic::AtomicU32::from_ptr(std::ptr::from_ref(w).cast_mut()) }.load(Ordering::Acquire)).collect()
}

/// Rounds of: the host writes new values into one of `WEAK_PAIRS` source buffers (through
/// the model), `submit` hands the loop a copy of it into its destination, and once that
/// completed the host checks the destination. A loop of `channels` channels × 64
/// threads.
fn weak_round_trips(memory: &WeakMemory, channels: u32, submit: impl Fn(&mut TwinLoop, WorkItem) -> Result<(), String>) -> Result<(), String> {
    // The buffers outlive the loop (declared first, dropped last): a store may land as
    // late as the launch's end.
    let src = vec![vec![0u32; WEAK_WORDS]; WEAK_PAIRS];
    let dst = vec![vec![0u32; WEAK_WORDS]; WEAK_PAIRS];
    let mut lp = TwinLoop::start_placed(channels, ChannelPlacement::default(), 64, 8, Duration::from_secs(10), Some(memory.clone()));
    for round in 1..=WEAK_ROUNDS {
        let pair = round as usize % WEAK_PAIRS;
        let values = round_values(round);
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        // SAFETY: `src[pair]` holds `WEAK_WORDS` words, which no kernel thread writes.
        unsafe { memory.host_write(src[pair].as_ptr().cast_mut().cast(), &bytes) };
        submit(&mut lp, WorkItem::copy(DataType::U32, src[pair].as_ptr() as u64, dst[pair].as_ptr() as u64, WEAK_WORDS as u64))?;
        memory.host_acquired();
        if read_words(&dst[pair]) != values {
            return Err(format!("round {round}: the copy's destination does not hold the round's values"));
        }
    }
    lp.queue.shutdown(LONG).map_err(|e| e.to_string())?;
    lp.join();
    Ok(())
}

/// Round trips through the ring (the host's queue, waited for by ticket).
fn ring_round_trips(memory: &WeakMemory) -> Result<(), String> {
    weak_round_trips(memory, 2, |lp, item| {
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        let ticket = unsafe { lp.queue.enqueue(item, LONG) }.map_err(|e| e.to_string())?;
        lp.queue.wait(ticket, LONG).map_err(|e| e.to_string())
    })
}

/// Items per batch in [`ring_batch_round_trips`]: fewer than one poll reads, so that a
/// poll (not a backlog read) may take several at once.
const WEAK_BATCH: usize = 3;

/// Round trips of [`WEAK_BATCH`] copies written into the ring at once, each from a source
/// the host wrote before the batch, waited for by the last ticket.
fn ring_batch_round_trips(memory: &WeakMemory) -> Result<(), String> {
    let src = vec![vec![0u32; WEAK_WORDS]; WEAK_BATCH];
    let dst = vec![vec![0u32; WEAK_WORDS]; WEAK_BATCH];
    let mut lp = TwinLoop::start_placed(1, ChannelPlacement::default(), 64, 8, Duration::from_secs(10), Some(memory.clone()));
    for round in 1..=WEAK_ROUNDS {
        let values: Vec<Vec<u32>> = (0..WEAK_BATCH as u32).map(|k| round_values(round * WEAK_BATCH as u32 + k)).collect();
        for (buffer, values) in src.iter().zip(&values) {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
            // SAFETY: `buffer` holds `WEAK_WORDS` words, which no kernel thread writes.
            unsafe { memory.host_write(buffer.as_ptr().cast_mut().cast(), &bytes) };
        }
        let items: Vec<WorkItem> = src.iter().zip(&dst).map(|(s, d)| WorkItem::copy(DataType::U32, s.as_ptr() as u64, d.as_ptr() as u64, WEAK_WORDS as u64)).collect();
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        let last = unsafe { lp.queue.enqueue_batch(&items, LONG) }.map_err(|e| e.to_string())?;
        lp.queue.wait(last, LONG).map_err(|e| e.to_string())?;
        memory.host_acquired();
        for (k, (buffer, values)) in dst.iter().zip(&values).enumerate() {
            if &read_words(buffer) != values {
                return Err(format!("round {round}: copy {k} of the batch does not hold the round's values"));
            }
        }
    }
    lp.queue.shutdown(LONG).map_err(|e| e.to_string())?;
    lp.join();
    Ok(())
}

/// Round trips through the mailbox (a call kernel, which returns once the loop is done).
fn mailbox_round_trips(memory: &WeakMemory) -> Result<(), String> {
    weak_round_trips(memory, 2, |lp, item| match lp.submit(item, Duration::from_secs(10)) {
        SubmitOutcome::Done => Ok(()),
        other => Err(format!("the submission ended {other:?}")),
    })
}

/// Round trips of the ring route: the item through the ring of a one-channel loop, waited
/// for as a stream's `cuStreamWaitValue32` waits, on `stream_done` alone.
fn stream_route_round_trips(memory: &WeakMemory) -> Result<(), String> {
    weak_round_trips(memory, 1, |lp, item| {
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        let Ticket(seq) = unsafe { lp.queue.enqueue(item, LONG) }.map_err(|e| e.to_string())?;
        let start = Instant::now();
        while !stream_released(lp.stream_done(), seq) {
            if start.elapsed() > LONG {
                return Err(format!("stream_done never reached item {seq}"));
            }
            std::thread::yield_now();
        }
        Ok(())
    })
}

#[test]
fn weak_stream_route_round_trips_pass_every_seed() {
    WeakMemory::every_seed_passes(0..3, stream_route_round_trips);
}

/// Negative control: `stream_done` stored without the fence before it may let the
/// stream's next operation run before the item's writes have arrived.
#[test]
fn weak_stream_done_without_fence_fails() {
    let (runs, why) = WeakMemory::first_failure(0..12, &[Site::RingComplete], stream_route_round_trips);
    eprintln!("stream_done without its fence failed after {runs} run(s): {why}");
}

#[test]
fn weak_ring_round_trips_pass_every_seed() {
    WeakMemory::every_seed_passes(0..3, ring_round_trips);
}

/// Negative control: a channel that takes ring slots without acquiring them may read the
/// buffers the host wrote before them as they were.
#[test]
fn weak_ring_slots_taken_without_acquire_fail() {
    let (runs, why) = WeakMemory::first_failure(0..12, &[Site::RingPoll, Site::RingBacklogFence], ring_round_trips);
    eprintln!("ring slots taken without acquire failed after {runs} run(s): {why}");
}

#[test]
fn weak_ring_batches_pass_every_seed() {
    WeakMemory::every_seed_passes(0..3, ring_batch_round_trips);
}

/// Negative control: a poll that takes several slots at once without acquiring them may
/// read the buffers the host wrote before them as they were.
#[test]
fn weak_ring_batches_taken_without_acquire_fail() {
    let (runs, why) = WeakMemory::first_failure(0..12, &[Site::RingPoll, Site::RingBacklogFence], ring_batch_round_trips);
    eprintln!("ring batches taken without acquire failed after {runs} run(s): {why}");
}

/// Negative control: a completion published without release may reach the host before
/// the item's writes.
#[test]
fn weak_ring_completions_without_release_fail() {
    let (runs, why) = WeakMemory::first_failure(0..12, &[Site::RingComplete], ring_round_trips);
    eprintln!("ring completions without release failed after {runs} run(s): {why}");
}

#[test]
fn weak_mailbox_round_trips_pass_every_seed() {
    WeakMemory::every_seed_passes(0..3, mailbox_round_trips);
}

/// Negative control: a submission that publishes PENDING without release may be taken
/// before its item's words arrived.
#[test]
fn weak_mailbox_published_without_release_fails() {
    let (runs, why) = WeakMemory::first_failure(0..12, &[Site::MailboxPublish], mailbox_round_trips);
    eprintln!("mailbox items published without release failed after {runs} run(s): {why}");
}

/// Negative control: a channel that takes the mailbox without acquiring its state may
/// read the item's words as they were.
#[test]
fn weak_mailbox_taken_without_acquire_fails() {
    let (runs, why) = WeakMemory::first_failure(0..12, &[Site::MailboxTake], mailbox_round_trips);
    eprintln!("mailbox items taken without acquire failed after {runs} run(s): {why}");
}

/// Negative control: channels that count themselves done and store DONE without release
/// (and no fence before) may let DONE reach the submitter before their writes.
#[test]
fn weak_mailbox_done_without_release_fails() {
    let sites = [Site::MailboxDoneFence, Site::MailboxArrive, Site::MailboxDone];
    let (runs, why) = WeakMemory::first_failure(0..12, &sites, mailbox_round_trips);
    eprintln!("mailbox completions without release failed after {runs} run(s): {why}");
}

/// Random normal `f32`s for PE `pe` (`bits`: the same values as raw bits).
fn heap_values(pe: usize, n: usize) -> Vec<f32> {
    let mut rng = ferroccl_testkit::reference::Rng::new(0x5eed + pe as u64);
    let bytes = ferroccl_testkit::reference::normal_elements(DataType::F32, n, &mut rng);
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// The symmetric heap's stream-ordered calls as the loop runs them (the host's
/// `barrier_all` and `sum_reduce`, handed to one loop per PE): three PEs, each with a loop
/// of two channels, run barriers in a row, then an f32 and an i32 sum reduction; every
/// PE gets the PE-order sum, bit for bit, in its own heap.
#[test]
fn loops_run_the_heaps_barrier_and_sum_reduce() {
    const PES: usize = 3;
    const N: usize = 301;
    let mut heap = ferroccl_testkit::shmem::TwinHeap::new(PES, 1 << 16, LONG, None).unwrap();
    let bytes = [4 * N as u64; PES];
    let (src, dst) = (heap.malloc(&bytes).unwrap(), heap.malloc(&bytes).unwrap());
    let (isrc, idst) = (heap.malloc(&bytes).unwrap(), heap.malloc(&bytes).unwrap());
    for pe in 0..PES {
        heap.write(pe, src[pe], &heap_values(pe, N));
        heap.write(pe, isrc[pe], &(0..N as i32).map(|i| i * (pe as i32 + 1) - 7).collect::<Vec<_>>());
    }
    let mut loops: Vec<TwinLoop> = (0..PES).map(|_| TwinLoop::start_heap(2, 128, 16, LONG)).collect();
    let mut last = Vec::new();
    for (pe, lp) in loops.iter_mut().enumerate() {
        for _ in 0..3 {
            // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
            unsafe { lp.queue.enqueue(WorkItem::shmem_barrier_all(heap.handle(pe)), LONG) }.unwrap();
        }
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        unsafe { lp.queue.enqueue(WorkItem::shmem_sum_reduce(DataType::F32, heap.handle(pe), src[pe], dst[pe], N as u64), LONG) }.unwrap();
        // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
        last.push(unsafe { lp.queue.enqueue(WorkItem::shmem_sum_reduce(DataType::I32, heap.handle(pe), isrc[pe], idst[pe], N as u64), LONG) }.unwrap());
    }
    for (lp, ticket) in loops.iter().zip(last) {
        lp.queue.wait(ticket, LONG).unwrap();
    }
    let want: Vec<u32> = (0..N).map(|i| (1..PES).fold(heap_values(0, N)[i], |a, pe| a + heap_values(pe, N)[i]).to_bits()).collect();
    let iwant: Vec<i32> = (0..N as i32).map(|i| (0..PES as i32).map(|pe| i * (pe + 1) - 7).sum()).collect();
    for pe in 0..PES {
        let got: Vec<u32> = heap.read::<f32>(pe, dst[pe], N).into_iter().map(f32::to_bits).collect();
        assert_eq!(got, want, "PE {pe}'s f32 sums, bit for bit");
        assert_eq!(heap.read::<i32>(pe, idst[pe], N), iwant, "PE {pe}'s i32 sums");
    }
    for lp in &mut loops {
        lp.queue.shutdown(LONG).unwrap();
        lp.join();
    }
}

/// Bad heap items: overlapping buffers and a null handle are refused by the host, a
/// buffer outside the heap by the device (only it can read the heap's bounds), before
/// any barrier; a PE whose peers never arrive has its loop stopped by the heap's spin
/// budget, at the heap barrier's wait site; the collectives' loop (`work_loop`) refuses
/// heap items.
#[test]
fn bad_heap_items_are_refused_and_a_lone_pe_times_out() {
    let mut heap = ferroccl_testkit::shmem::TwinHeap::new(2, 1 << 16, Duration::from_millis(200), None).unwrap();
    let buf = heap.malloc(&[64, 64]).unwrap();
    let mut lp = TwinLoop::start_heap(1, 128, 8, LONG);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let overlap = unsafe { lp.queue.enqueue(WorkItem::shmem_sum_reduce(DataType::F32, heap.handle(0), buf[0], buf[0] + 4, 8), LONG) };
    assert!(matches!(overlap, Err(Error::BadWorkItem { reason: BadItem::Overlapping, .. })), "{overlap:?}");
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let null = unsafe { lp.queue.enqueue(WorkItem::shmem_barrier_all(0), LONG) };
    assert!(matches!(null, Err(Error::BadWorkItem { reason: BadItem::NullPointer, .. })), "{null:?}");
    let outside = [0f32; 16];
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let t = unsafe { lp.queue.enqueue(WorkItem::shmem_sum_reduce(DataType::F32, heap.handle(0), outside.as_ptr() as u64, buf[0], 16), LONG) }.unwrap();
    let err = lp.queue.wait(t, LONG);
    assert!(matches!(err, Err(Error::BadWorkItem { reason: BadItem::NotSymmetric, .. })), "{err:?}");
    lp.join();
    let mut lone = TwinLoop::start_heap(1, 128, 8, LONG);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let t = unsafe { lone.queue.enqueue(WorkItem::shmem_barrier_all(heap.handle(0)), LONG) }.unwrap();
    let err = lone.queue.wait(t, LONG);
    assert!(matches!(err, Err(Error::DeviceTimeout { site: Some(WaitSite::ShmemBarrier), .. })), "{err:?}");
    lone.join();
    let mut collectives_loop = TwinLoop::start(1, 128, 8, LONG);
    // SAFETY: the item names this test's memory or none, kept until the item has run or the loop has left.
    let t = unsafe { collectives_loop.queue.enqueue(WorkItem::shmem_barrier_all(heap.handle(0)), LONG) }.unwrap();
    let err = collectives_loop.queue.wait(t, LONG);
    assert!(matches!(err, Err(Error::BadWorkItem { reason: BadItem::NotHeapLoop, .. })), "the collectives' loop refuses heap items: {err:?}");
    collectives_loop.join();
}
