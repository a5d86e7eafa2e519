//! Aborting a symmetric heap from any thread: the abort word every wait of the heap's
//! device code reads (in host-mapped memory), and the queues of the loops that run its
//! stream-ordered calls.

use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, OnceLock};

use crate::memory::HostMapped;
use crate::queue::AbortHandle;

/// What keeps the abort word's memory alive: the heap and every handle hold a share, so
/// the word outlives the last of them.
type WordOwner = Arc<dyn Send + Sync>;

/// The heap's abort word in host-mapped memory, shared by the heap and its handles, which
/// reach it through a raw pointer: kept here only to stay allocated.
struct MappedWord {
    _memory: HostMapped<u64>,
}

// SAFETY: shared owners never touch the memory through this value; the handles reach it
// through a raw pointer with atomic loads and stores only.
unsafe impl Sync for MappedWord {}

/// Aborts a symmetric heap from any thread: `Send + Sync + Clone`, never blocks, valid
/// after the heap is dropped (it holds a share of the abort word's memory and of every
/// loop's queue header; aborting a heap that is gone changes nothing). [`super::Heap`]
/// itself is `Send` but not `Sync`: take one of these ([`super::Heap::abort_handle`]) to
/// abort from another thread while the heap is in use.
#[derive(Clone)]
pub struct HeapAbortHandle {
    word: *mut u64,
    /// The loops' abort handles, once [`super::Heap::start_loops`] has started them.
    loops: Arc<OnceLock<Vec<AbortHandle>>>,
    _owner: WordOwner,
}

impl std::fmt::Debug for HeapAbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeapAbortHandle").field("word", &self.word).field("loops", &self.loops.get().map_or(0, Vec::len)).finish_non_exhaustive()
    }
}

// SAFETY: the word is accessed only with atomic loads and stores; `_owner` keeps its
// memory alive as long as the handle (`new`'s contract); the loops' handles are `Send`.
unsafe impl Send for HeapAbortHandle {}
// SAFETY: as for `Send`: every method takes `&self` and does atomic accesses only.
unsafe impl Sync for HeapAbortHandle {}

impl HeapAbortHandle {
    /// The handle of the abort word `word` (zeroed, not yet aborted), whose memory lives
    /// as long as `owner`.
    ///
    /// # Safety
    /// `word` is 8-byte aligned, valid for reads and writes as long as `owner` lives, and
    /// accessed by the host only atomically.
    unsafe fn new(word: *mut u64, owner: WordOwner) -> Self {
        Self { word, loops: Arc::new(OnceLock::new()), _owner: owner }
    }

    /// The handle of the abort word `word`, a zeroed host-mapped word (kernels read it at
    /// `word.device_ptr()`), which it and its clones own from here on.
    pub(super) fn on_host_mapped(word: HostMapped<u64>) -> Self {
        let at = word.host_ptr();
        // SAFETY: a live host-mapped `u64` (8-byte aligned), owned by the handle from
        // here on; nothing else touches it from the host.
        unsafe { Self::new(at, Arc::new(MappedWord { _memory: word })) }
    }

    fn word(&self) -> &AtomicU64 {
        // SAFETY: `_owner` keeps the word alive and aligned (`new`'s contract); the host
        // accesses it only atomically.
        unsafe { AtomicU64::from_ptr(self.word) }
    }

    /// Sets the abort flag: every wait of the heap's device code ends with an error, and
    /// every loop of its stream-ordered calls stops (later calls fail).
    ///
    /// Ordering: a sequentially consistent store of the flag (the device reads it with
    /// volatile loads), then a sequentially consistent fence before looking for the
    /// loops, paired with `HeapAbortHandle::adopt_loops`'s fence: loops adopted
    /// meanwhile are aborted by one side or the other. Each loop's abort is a release
    /// store (`AbortHandle::abort`).
    pub fn abort(&self) {
        self.word().store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if let Some(loops) = self.loops.get() {
            loops.iter().for_each(AbortHandle::abort);
        }
    }

    /// Whether `other` is a handle of the same heap's abort word.
    pub fn same_word(&self, other: &HeapAbortHandle) -> bool {
        std::ptr::eq(self.word, other.word)
    }

    /// Whether the heap has been aborted.
    ///
    /// Ordering: an acquire load of the flag.
    pub fn aborted(&self) -> bool {
        self.word().load(Ordering::Acquire) != 0
    }

    /// Hands the handle (and its clones) the loops' abort handles, once: a later call
    /// changes nothing. A heap aborted before gets them aborted now.
    ///
    /// Ordering: the loops are published (release), then a sequentially consistent fence
    /// before the flag is read, paired with [`HeapAbortHandle::abort`]'s.
    pub(super) fn adopt_loops(&self, loops: Vec<AbortHandle>) {
        if self.loops.set(loops).is_err() {
            return;
        }
        fence(Ordering::SeqCst);
        if self.word().load(Ordering::SeqCst) != 0 {
            self.loops.get().into_iter().flatten().for_each(AbortHandle::abort);
        }
    }
}

/// The handle crosses threads.
const _: fn() = || {
    fn send_sync_clone<T: Send + Sync + Clone + 'static>() {}
    send_sync_clone::<HeapAbortHandle>();
};

/// Abort words and loop queues in host memory, for tests of what aborts what.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::queue::Queue;
    use device_rt::work::{QueueHeader, RingSlot};

    /// A heap's abort word in host memory (a stand-in for the host-mapped word) and its
    /// handle.
    pub(crate) fn host_word() -> (Arc<AtomicU64>, HeapAbortHandle) {
        let word = Arc::new(AtomicU64::new(0));
        // SAFETY: the `AtomicU64` is aligned and lives as long as the share the handle holds.
        let handle = unsafe { HeapAbortHandle::new(word.as_ptr(), word.clone()) };
        (word, handle)
    }

    /// A loop's queue over host memory (no loop runs), for its abort flag, and its ring.
    pub(crate) fn host_queue() -> (Queue, Vec<RingSlot>) {
        let mut header = Box::new(QueueHeader::new());
        let header_ptr = &raw mut *header;
        let mut ring = vec![RingSlot::default(); 1];
        // SAFETY: a zeroed header that the queue's share owns, and a one-slot ring whose
        // buffer the caller keeps as long as the queue (moving the `Vec` keeps it).
        let queue = unsafe { Queue::new(header_ptr, ring.as_mut_ptr(), 1, 1, Arc::new(header)) }.unwrap();
        (queue, ring)
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{host_queue, host_word};
    use super::*;
    use crate::Error;

    #[test]
    fn a_handle_outlives_its_heap_and_releases_the_word_last() {
        let (word, handle) = host_word();
        let weak = Arc::downgrade(&word);
        let copy = handle.clone();
        // The heap's own share goes (its drop).
        drop(word);
        assert!(!copy.aborted());
        copy.abort();
        let alive = weak.upgrade().expect("the handles keep the word alive");
        assert_eq!(alive.load(Ordering::Acquire), 1, "the handle wrote the live word");
        assert!(handle.aborted(), "every clone shares the word");
        drop(alive);
        drop(handle);
        assert!(weak.upgrade().is_some(), "one handle still holds it");
        drop(copy);
        assert!(weak.upgrade().is_none(), "the last handle released the word");
    }

    #[test]
    fn an_abort_reaches_loops_adopted_before_or_after_it() {
        let (_word, handle) = host_word();
        let (queue, _ring) = host_queue();
        let taken_early = handle.clone();
        handle.adopt_loops(vec![queue.abort_handle()]);
        assert!(queue.health().is_ok());
        taken_early.abort();
        assert!(matches!(queue.health(), Err(Error::Aborted)), "a handle taken before the loops started aborts them");

        let (_word, handle) = host_word();
        let (queue, _ring) = host_queue();
        handle.abort();
        handle.adopt_loops(vec![queue.abort_handle()]);
        assert!(matches!(queue.health(), Err(Error::Aborted)), "loops started after an abort are aborted at once");
        let (later, _later_ring) = host_queue();
        handle.adopt_loops(vec![later.abort_handle()]);
        assert!(later.health().is_ok(), "the loops are adopted once");
    }
}
