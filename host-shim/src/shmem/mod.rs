//! The symmetric heap ([NVSHMEM](https://docs.nvidia.com/nvshmem/api/)'s): every PE's
//! heap in its device's memory (CUDA VMM), every heap mapped for every device that can
//! reach it, collective `malloc`/`free`, and each PE's device handle for
//! `device_rt::shmem`. Two forms:
//!
//! - [`Heap::new`]: several PEs in this process, one per stream like the communicator's
//!   ranks. A collective call takes every PE's argument at once (`args[pe]`).
//! - [`Heap::join`]: one PE per process (NVSHMEM's model, started by `ferroccl run` or
//!   another launcher): each PE exports its heap as a POSIX file descriptor, the
//!   [`Bootstrap`] hands every descriptor to every PE, and each maps every peer's heap. A
//!   collective call takes this PE's argument; the bootstrap gathers everyone's.
//!
//! Either way PEs that disagree all get one error,
//! [`Error::SymmetricMismatch`], and the heap is
//! unchanged, so no PE waits for another that will never agree; in the process form a PE
//! that is gone fails every PE's call with [`Error::Bootstrap`].
//! The bookkeeping ([`book`]) is pure and shared with the host-twin heap of the tests.
//!
//! Stream-ordered heap operations ([`Heap::barrier_all_on_stream`],
//! [`Heap::sum_reduce_on_stream`]) run on a small work loop per local PE
//! ([`Heap::start_loops`]): the stream's call kernel hands the item to the loop, whose one
//! CTA runs the device API's block barrier or reduction; no kernel of its own per call.

pub(crate) mod abort;
pub mod book;
pub mod pes;
pub mod slice;
pub(crate) mod vmm;

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{CudaContext, CudaStream};
use device_rt::abi::ShmemHandle;
use device_rt::work::WorkItem;
use zerocopy::IntoBytes;

use crate::op::Element;
use crate::module::Module;
use crate::work::{LoopConfig, Placement, WorkLoop};

use crate::memory::HostMapped;
use crate::work::DeviceAlloc;
use crate::bootstrap::Bootstrap;
use crate::{Error, Result, device};
pub use abort::HeapAbortHandle;
use book::{HeapBook, agree, device_handle};
use pes::PeSet;
use vmm::VmmHeap;

/// A symmetric heap: every PE's heap mapped in this process, and the PEs of this process.
pub struct Heap {
    /// Each local PE's work loop for stream-ordered calls, once started: first, so that
    /// they are dropped (aborted) before the heaps.
    loops: Vec<WorkLoop>,
    book: HeapBook,
    /// Every PE's heap, by PE.
    heaps: Vec<VmmHeap>,
    pes: PeSet,
    /// Each local PE's `ShmemHandle`, in its device's memory.
    handles: Vec<DeviceAlloc>,
    /// The same handles by value, for kernels that take them as an argument.
    values: Vec<ShmemHandle>,
    /// The abort word every wait of the PEs' device code reads, shared with the handles
    /// [`Heap::abort_handle`] gives out, and the loops once started.
    abort: HeapAbortHandle,
    /// The bound of every wait: the device API's and the loops'.
    spin_budget: Duration,
}

impl Heap {
    /// A heap of at least `heap_bytes` per PE (rounded up to every device's allocation
    /// granularity) for one PE per stream, each wait of its device code bounded by
    /// `spin_budget`. PE `i`'s heap is opened to every device that can reach it; a PE
    /// whose heap a device cannot reach gets 0 for it in that device's PEs' handles (and
    /// `ptr` returns null). Create it before any kernel runs on these devices. Without a
    /// CUDA driver, [`Error::NoDriver`] ([`crate::init`]).
    pub fn new(streams: &[Arc<CudaStream>], heap_bytes: u64, spin_budget: Duration) -> Result<Self> {
        crate::init()?;
        let ctxs: Vec<_> = streams.iter().map(|s| s.context().clone()).collect();
        let Some(first) = ctxs.first() else {
            return Err(Error::InvalidArgument("a symmetric heap needs at least one PE".into()));
        };
        let mut granule = 1;
        for ctx in &ctxs {
            granule = granule.max(vmm::granularity(ctx)?);
        }
        let heap_bytes = heap_bytes.checked_next_multiple_of(granule).ok_or_else(|| Error::InvalidArgument(format!("a heap of {heap_bytes} bytes")))?;
        let book = HeapBook::new(heap_bytes)?;
        let ordinals: Vec<usize> = ctxs.iter().map(|c| c.ordinal()).collect();
        let mut reach = Vec::new();
        for &to in &ordinals {
            let mut readers = vec![to];
            for &from in &ordinals {
                if !readers.contains(&from) && device::can_access_peer(from, to)? {
                    readers.push(from);
                }
            }
            reach.push(readers);
        }
        let mut heaps = Vec::new();
        for (ctx, readers) in ctxs.iter().zip(&reach) {
            heaps.push(VmmHeap::new(ctx, heap_bytes, readers)?);
        }
        let abort = HostMapped::<u64>::zeroed(first, 1)?;
        let (mut handles, mut values) = (Vec::new(), Vec::new());
        for (pe, ctx) in ctxs.iter().enumerate() {
            let bases: Vec<u64> = heaps.iter().zip(&reach).map(|(h, readers)| if readers.contains(&ordinals[pe]) { h.base() } else { 0 }).collect();
            let value = device_handle(pe, &bases, heap_bytes, abort.device_ptr(), spin_budget)?;
            handles.push(handle_on_device(ctx, &value)?);
            values.push(value);
        }
        let abort = HeapAbortHandle::on_host_mapped(abort);
        Ok(Self { loops: Vec::new(), book, heaps, pes: PeSet::all_here(ctxs.len()), handles, values, abort, spin_budget })
    }

    /// This process's PE of a heap over one PE per process: `bootstrap` names the PE and
    /// reaches the others; `stream`'s device holds this PE's heap of at least `heap_bytes`
    /// (every PE must ask the same; the heap is rounded up to the largest granularity of
    /// any PE's device); each wait of its device code is bounded by `spin_budget`. A peer
    /// whose heap this device cannot reach gets 0 in the handle (`ptr` returns null).
    /// Every PE calls this at once, before any kernel runs on its device.
    pub fn join(stream: &Arc<CudaStream>, heap_bytes: u64, spin_budget: Duration, bootstrap: Bootstrap) -> Result<Self> {
        crate::init()?;
        let ctx = stream.context();
        let me = bootstrap.pe();
        let mut pes = PeSet::one_per_process(bootstrap);
        let heap_bytes = agree("init", &pes.gather("init", &[heap_bytes])?)?;
        let granule = pes.gather("granularity", &[vmm::granularity(ctx)?])?.into_iter().max().unwrap_or(1);
        let ordinals = pes.gather("device", &[ctx.ordinal() as u64])?;
        let heap_bytes = heap_bytes.checked_next_multiple_of(granule).ok_or_else(|| Error::InvalidArgument(format!("a heap of {heap_bytes} bytes")))?;
        let book = HeapBook::new(heap_bytes)?;
        let own = VmmHeap::new(ctx, heap_bytes, &[ctx.ordinal()])?;
        let exported = own.export()?;
        let parts = exchange(&mut pes, "shmem heaps", exported.as_fd())?;
        let mut own = Some(own);
        let (mut heaps, mut bases) = (Vec::new(), Vec::new());
        for (pe, (fd, &peer)) in parts.iter().zip(&ordinals).enumerate() {
            let heap = match own.take_if(|_| pe == me) {
                Some(own) => own,
                None => VmmHeap::import(ctx, fd, heap_bytes)?,
            };
            let reachable = pe == me || peer as usize == ctx.ordinal() || device::can_access_peer(ctx.ordinal(), peer as usize)?;
            bases.push(if reachable { heap.base() } else { 0 });
            heaps.push(heap);
        }
        let abort = HostMapped::<u64>::zeroed(ctx, 1)?;
        let value = device_handle(me, &bases, heap_bytes, abort.device_ptr(), spin_budget)?;
        let handle = handle_on_device(ctx, &value)?;
        let abort = HeapAbortHandle::on_host_mapped(abort);
        // No PE uses a peer's heap before every PE has mapped every heap.
        pes.gather("mapped", &[0])?;
        Ok(Self { loops: Vec::new(), book, heaps, pes, handles: vec![handle], values: vec![value], abort, spin_budget })
    }

    /// The bootstrap to the other processes' PEs, in the one-PE-per-process form
    /// ([`Heap::join`]).
    pub(crate) fn bootstrap(&mut self) -> Option<&mut Bootstrap> {
        self.pes.bootstrap()
    }

    /// The number of PEs.
    pub fn n_pes(&self) -> usize {
        self.heaps.len()
    }

    /// The PEs of this process: every PE in the single-process form, one in the process
    /// form. Collective calls take one argument per local PE, in this order.
    pub fn local_pes(&self) -> &[usize] {
        self.pes.local()
    }

    /// A typed view of `len` elements of `T` at `addr`, a symmetric address of local PE
    /// `pe` (what [`Heap::malloc`] gave it, plus an offset), used on `stream` (a stream of
    /// the PE's device): the communicator's calls take it as a send or receive buffer
    /// (`Comm::from_heap`'s communicators read such inputs in place). The view borrows
    /// the heap (see [`slice::HeapSlice`]). Refused where the elements do not all lie in
    /// one live allocation of the PE's heap, or are misaligned for `T`.
    pub fn slice<T>(&self, pe: usize, addr: u64, len: usize, stream: &Arc<CudaStream>) -> Result<slice::HeapSlice<'_, T>> {
        let at = self.local_at(pe)?;
        self.on_device_of(at, stream)?;
        let size = std::mem::size_of::<T>() as u64;
        let bytes = (len as u64).checked_mul(size).ok_or_else(|| Error::InvalidArgument(format!("{len} elements of {size} bytes overflow")))?;
        self.in_allocation(pe, "the view", addr, bytes)?;
        if !addr.is_multiple_of(std::mem::align_of::<T>() as u64) {
            return Err(Error::InvalidArgument(format!("the view at {addr:#x} is misaligned for elements of {size} bytes")));
        }
        Ok(slice::HeapSlice::new(addr, len, stream.clone()))
    }

    /// The device ordinal of local PE `pe` (`None`: not a PE of this process).
    pub fn device_of(&self, pe: usize) -> Option<usize> {
        let at = self.pes.local().iter().position(|&p| p == pe)?;
        Some(self.handles[at].context().ordinal())
    }

    /// The device address of local PE `pe`'s `ShmemHandle`: what its kernels give
    /// `device_rt::shmem::Shmem::new`.
    ///
    /// # Panics
    /// Where `pe` is not a PE of this process.
    pub fn handle(&self, pe: usize) -> u64 {
        let at = self.pes.local().iter().position(|&p| p == pe);
        self.handles[at.unwrap_or_else(|| panic!("PE {pe} is not a PE of this process ({:?})", self.pes.local()))].ptr()
    }

    /// Local PE `pe`'s handle by value: what a kernel of another runtime takes as its
    /// argument (`ferroccl_heap` in C: `linker/include/ferroccl_device.h`) and hands by
    /// address to the device runtime's C functions (`device_rt::cabi`), or a Rust kernel to
    /// `device_rt::shmem::Shmem::new`. Valid on PE `pe`'s device while the heap lives (it
    /// names the heaps' mappings and the abort word); nothing in it changes after the heap
    /// is made. [`Error::InvalidArgument`] for a PE not of this process.
    pub fn device_handle(&self, pe: usize) -> Result<ShmemHandle> {
        let at = self.pes.local().iter().position(|&p| p == pe);
        at.map(|at| self.values[at]).ok_or_else(|| Error::InvalidArgument(format!("PE {pe} is not a PE of this process ({:?})", self.pes.local())))
    }

    /// Collective `malloc`: `bytes[i]` is local PE `i`'s size, the same on every PE.
    /// Returns every local PE's symmetric address of the new allocation (in its own heap;
    /// not zeroed). A mismatch, or a full heap, is every PE's error, and changes nothing.
    pub fn malloc(&mut self, bytes: &[u64]) -> Result<Vec<u64>> {
        let offset = self.book.malloc(&self.pes.gather("malloc", bytes)?)?;
        Ok(self.pes.local().iter().map(|&pe| self.heaps[pe].base() + offset).collect())
    }

    /// Waits until every PE has called it with the same `what` (collective, on the host:
    /// the bootstrap's exchange; no device work). A PE that does not come ends it with the
    /// bootstrap's error.
    pub fn host_barrier(&mut self, what: &str) -> Result<()> {
        let zeros = vec![0; self.pes.local().len()];
        self.pes.gather(what, &zeros).map(|_| ())
    }

    /// Collective `free`: `addrs[i]` is local PE `i`'s symmetric address of one allocation
    /// (what [`Heap::malloc`] returned), the same allocation on every PE; no kernel may
    /// use it any more, and no view of the heap may live ([`Heap::slice`]'s borrow). A
    /// mismatch, or an address that is not the start of a live allocation, is every PE's
    /// error, and changes nothing.
    pub fn free(&mut self, addrs: &[u64]) -> Result<()> {
        let local = self.pes.local();
        // A wrong count of arguments is refused by `gather`.
        let offsets: Vec<u64> = addrs.iter().enumerate().map(|(i, &a)| a.wrapping_sub(local.get(i).map_or(0, |&pe| self.heaps[pe].base()))).collect();
        self.book.free(&self.pes.gather("free", &offsets)?)
    }

    /// Sets the abort flag every wait of this process's PEs reads: their waits end with an
    /// error; the loops' too. Never blocks. Ordering: see [`HeapAbortHandle::abort`].
    pub fn abort(&self) {
        self.abort.abort();
    }

    /// A handle that aborts the heap (as [`Heap::abort`]) from any thread, while the heap
    /// is in use or after it is gone (then it changes nothing): it holds a share of the
    /// abort word's memory.
    pub fn abort_handle(&self) -> HeapAbortHandle {
        self.abort.clone()
    }

    /// Starts a work loop for each local PE (one resident channel of 256 threads: it
    /// holds one CTA of the PE's GPU until [`Heap::finalize`] or the heap's drop), which
    /// the stream-ordered calls hand their work to. `modules[i]` is the module loaded on
    /// local PE `i`'s device (`Module::load`). Start them before launching kernels that
    /// use the heap, and never with another process's persistent loop on the same GPU
    /// (kernels of two processes time-slice). Called again, it changes nothing.
    pub fn start_loops(&mut self, modules: &[&Module]) -> Result<()> {
        if !self.loops.is_empty() {
            return Ok(());
        }
        if modules.len() != self.handles.len() {
            return Err(Error::InvalidArgument(format!("{} modules for {} local PEs", modules.len(), self.handles.len())));
        }
        let cfg = LoopConfig { channels: 1, call_channels: 0, threads: 256, resident_threads: 0, capacity: 64, spin_budget: self.spin_budget, placement: Placement::Hardware, sleep_after: None, burst_gap: crate::work::BURST_GAP };
        let mut loops = Vec::new();
        for (handle, module) in self.handles.iter().zip(modules) {
            let mut lp = WorkLoop::new_for_heap(handle.context(), module, cfg)?;
            lp.start()?;
            loops.push(lp);
        }
        // Loops started after an abort are aborted here.
        self.abort.adopt_loops(loops.iter().map(WorkLoop::abort_handle).collect());
        self.loops = loops;
        Ok(())
    }

    /// `barrier_all` for local PE `pe`, ordered on `stream` (a stream of `pe`'s device):
    /// once the stream reaches it, every PE has reached its own `barrier_all` and every
    /// put issued before it on any PE is complete (the device API's
    /// `Shmem::barrier_all` (device-rt), a quiet then the
    /// arrivals). Every PE calls it, or the device API's `barrier_all`, as its next heap
    /// barrier; no kernel of this PE may be inside a heap barrier meanwhile. Calls on
    /// several streams run in the order they were made (`WorkLoop::enqueue_on_stream`'s
    /// ordering). A wait past the spin budget, or an abort, stops the loop;
    /// later calls return that error ([`Heap::async_error`] tells it at once).
    pub fn barrier_all_on_stream(&self, pe: usize, stream: &CudaStream) -> Result<()> {
        let at = self.local_at(pe)?;
        self.submit(at, stream, WorkItem::shmem_barrier_all(self.handles[at].ptr()))
    }

    /// `sum_reduce` for local PE `pe`, ordered on `stream`: every PE's `count` elements at
    /// `dst` become the sum, in PE order (the same bits on every PE), of every PE's
    /// elements at `src`; both are symmetric addresses (what [`Heap::malloc`] gave this PE,
    /// plus an offset) of disjoint ranges. A barrier before the reads and one after, as
    /// the device API's `sum_reduce`; the rest as [`Heap::barrier_all_on_stream`]. Bad
    /// addresses (not inside one live allocation each, misaligned, overlapping) are
    /// refused here, before anything is enqueued.
    pub fn sum_reduce_on_stream<T: Element>(&self, pe: usize, stream: &CudaStream, dst: u64, src: u64, count: usize) -> Result<()> {
        let at = self.local_at(pe)?;
        let bytes = (count as u64).checked_mul(T::DTYPE.size() as u64).ok_or_else(|| Error::InvalidArgument(format!("{count} elements overflow")))?;
        if count > 0 {
            self.in_allocation(pe, "sum_reduce's source", src, bytes)?;
            self.in_allocation(pe, "sum_reduce's destination", dst, bytes)?;
        }
        let item = WorkItem::shmem_sum_reduce(T::DTYPE, self.handles[at].ptr(), src, dst, count as u64);
        self.submit(at, stream, item)
    }

    /// The error that stopped local PE `pe`'s loop, if one has.
    pub fn async_error(&self, pe: usize) -> Option<Error> {
        self.local_at(pe).ok().and_then(|at| self.loops.get(at)).and_then(WorkLoop::async_error)
    }

    /// Stops the loops once they have run every call handed to them (waiting up to
    /// `timeout` each), then frees the heap: `finalize`. The streams that submitted calls
    /// must have run them first. A loop that does not stop in time is aborted and the
    /// error returned.
    pub fn finalize(mut self, timeout: Duration) -> Result<()> {
        let mut first = Ok(());
        for lp in &mut self.loops {
            first = first.and(lp.shutdown(timeout));
        }
        first
    }

    /// The index among this process's PEs of PE `pe`.
    fn local_at(&self, pe: usize) -> Result<usize> {
        self.pes.local().iter().position(|&p| p == pe).ok_or_else(|| Error::InvalidArgument(format!("PE {pe} is not a PE of this process ({:?})", self.pes.local())))
    }

    /// Hands `item` to local PE `at`'s loop on `stream`.
    fn submit(&self, at: usize, stream: &CudaStream, item: WorkItem) -> Result<()> {
        let Some(lp) = self.loops.get(at) else {
            return Err(Error::InvalidState("the heap's loops are not started (Heap::start_loops)"));
        };
        self.on_device_of(at, stream)?;
        // SAFETY: the heap's items name the PE's own handle and, for a reduction, ranges
        // checked to lie in the PE's heap; that memory lives until the heap is finalized
        // or dropped, which `Heap::finalize`'s doc orders after the streams have run the
        // calls.
        unsafe { lp.enqueue_on_stream(stream, item) }
    }

    /// Refuses `stream` unless it is a stream of local PE `at`'s device.
    fn on_device_of(&self, at: usize, stream: &CudaStream) -> Result<()> {
        let (given, device) = (stream.context().ordinal(), self.handles[at].context().ordinal());
        if given != device {
            return Err(Error::InvalidArgument(format!("a stream of device {given} for a PE on device {device}")));
        }
        Ok(())
    }

    /// Refuses `bytes` at `addr` (`what`, in words) unless they lie inside one live
    /// allocation of PE `pe`'s heap (the book's [`HeapBook::check_extent`]).
    fn in_allocation(&self, pe: usize, what: &str, addr: u64, bytes: u64) -> Result<()> {
        let (base, size) = (self.heaps[pe].base(), self.book.heap_bytes());
        match addr.checked_sub(base) {
            Some(offset) if offset < size => self.book.check_extent(what, offset, bytes),
            _ => Err(Error::InvalidArgument(format!("{what} at {addr:#x} is not in PE {pe}'s heap ({base:#x} + {size} bytes)"))),
        }
    }
}

impl Drop for Heap {
    /// Never blocks: a loop still running is aborted (its drop) and the heaps and abort
    /// word it may still read are left mapped (leaked) rather than unmapped under it. The
    /// abort word stays while an abort handle lives.
    fn drop(&mut self) {
        self.abort.abort();
        let running = self.loops.iter().any(|lp| !lp.kernel_done());
        self.loops.clear();
        if running {
            log::warn!("symmetric heap dropped while its loops ran: its memory stays mapped");
            std::mem::take(&mut self.heaps).into_iter().for_each(std::mem::forget);
            std::mem::forget(self.abort.clone());
        }
    }
}

/// `handle` in `ctx`'s device memory.
fn handle_on_device(ctx: &Arc<CudaContext>, handle: &ShmemHandle) -> Result<DeviceAlloc> {
    let alloc = DeviceAlloc::zeroed(ctx, size_of::<ShmemHandle>())?;
    // SAFETY: the allocation holds one `ShmemHandle`; no kernel uses it yet.
    unsafe { alloc.upload(0, handle.as_bytes()) }?;
    Ok(alloc)
}

/// Hands `fd` (this PE's exported heap) to every PE through the bootstrap and returns
/// every PE's, in PE order (this PE's own as a copy).
pub fn exchange(pes: &mut PeSet, what: &str, fd: BorrowedFd<'_>) -> Result<Vec<OwnedFd>> {
    let bootstrap = pes.bootstrap().ok_or(Error::InvalidState("exchanging heaps needs PEs in several processes"))?;
    let parts = bootstrap.all_gather(what, &[], &[fd])?;
    let mut fds = Vec::new();
    for (pe, part) in parts.into_iter().enumerate() {
        let fd = part.fds.into_iter().next().ok_or_else(|| Error::Bootstrap(format!("PE {pe} sent no heap for {what}")))?;
        fds.push(fd);
    }
    Ok(fds)
}
