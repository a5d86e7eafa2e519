//! The symmetric heap (NVSHMEM's, seed 004) for PEs in this process, one per stream like
//! the communicator's ranks: every PE's heap in its device's memory (CUDA VMM, exportable
//! as a POSIX file descriptor), every heap mapped for every device that can reach it,
//! collective `malloc`/`free`, and each PE's device handle for `device_rt::shmem`.
//!
//! A collective call takes every PE's argument at once (`args[pe]`): PEs that disagree
//! get one error, [`Error::SymmetricMismatch`](crate::Error::SymmetricMismatch), and the
//! heap is unchanged, so no PE waits for another that will never agree. The bookkeeping
//! ([`book`]) is pure and shared with the host-twin heap of the tests.
//!
//! Not yet here: PEs in other processes (the exported handles and a bootstrap), and
//! host-side operations on streams.

pub mod book;
mod vmm;

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{CudaStream, result};
use device_rt::abi::ShmemHandle;
use zerocopy::IntoBytes;

use crate::memory::HostMapped;
use crate::work::DeviceAlloc;
use crate::{Error, Result, device};
use book::{HeapBook, device_handle};
use vmm::VmmHeap;

/// A symmetric heap over the PEs of this process (PE `i` on stream `i`'s device).
pub struct Heap {
    book: HeapBook,
    heaps: Vec<VmmHeap>,
    /// Each PE's `ShmemHandle`, in its device's memory.
    handles: Vec<DeviceAlloc>,
    abort: HostMapped<u64>,
}

impl Heap {
    /// A heap of at least `heap_bytes` per PE (rounded up to every device's allocation
    /// granularity) for one PE per stream, each wait of its device code bounded by
    /// `spin_budget`. PE `i`'s heap is opened to every device that can reach it; a PE
    /// whose heap a device cannot reach gets 0 for it in that device's PEs' handles (and
    /// `ptr` returns null). Create it before any kernel runs on these devices.
    pub fn new(streams: &[Arc<CudaStream>], heap_bytes: u64, spin_budget: Duration) -> Result<Self> {
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
        let mut handles = Vec::new();
        for (pe, ctx) in ctxs.iter().enumerate() {
            let bases: Vec<u64> = heaps.iter().zip(&reach).map(|(h, readers)| if readers.contains(&ordinals[pe]) { h.base() } else { 0 }).collect();
            let handle = device_handle(pe, &bases, heap_bytes, abort.device_ptr(), spin_budget)?;
            let alloc = DeviceAlloc::zeroed(ctx, size_of::<ShmemHandle>())?;
            // SAFETY: the allocation holds one `ShmemHandle`; no kernel uses it yet.
            unsafe { result::memcpy_htod_sync(alloc.ptr(), handle.as_bytes()) }.map_err(Error::cuda("cuMemcpyHtoD"))?;
            handles.push(alloc);
        }
        Ok(Self { book, heaps, handles, abort })
    }

    /// The number of PEs.
    pub fn n_pes(&self) -> usize {
        self.heaps.len()
    }

    /// The device address of PE `pe`'s `ShmemHandle`: what its kernels give
    /// `device_rt::shmem::Shmem::new`.
    pub fn handle(&self, pe: usize) -> u64 {
        self.handles[pe].ptr()
    }

    /// Collective `malloc`: `bytes[pe]` is PE `pe`'s size, the same on every PE. Returns
    /// every PE's symmetric address of the new allocation (in its own heap; not zeroed).
    /// A mismatch, or a full heap, is every PE's error, and changes nothing.
    pub fn malloc(&mut self, bytes: &[u64]) -> Result<Vec<u64>> {
        self.check_pes("malloc", bytes.len())?;
        let offset = self.book.malloc(bytes)?;
        Ok(self.heaps.iter().map(|h| h.base() + offset).collect())
    }

    /// Collective `free`: `addrs[pe]` is PE `pe`'s symmetric address of one allocation
    /// (what [`Heap::malloc`] returned), the same allocation on every PE; no kernel may
    /// use it any more. A mismatch is every PE's error, and changes nothing.
    pub fn free(&mut self, addrs: &[u64]) -> Result<()> {
        self.check_pes("free", addrs.len())?;
        let offsets: Vec<u64> = addrs.iter().zip(&self.heaps).map(|(&a, h)| a.wrapping_sub(h.base())).collect();
        self.book.free(&offsets)
    }

    /// Sets the abort flag every wait of every PE reads: their waits end with an error.
    /// Never blocks.
    pub fn abort(&mut self) {
        self.abort.write(0, 1);
    }

    fn check_pes(&self, call: &str, args: usize) -> Result<()> {
        if args == self.heaps.len() {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!("shmem {call}: {args} arguments for {} PEs", self.heaps.len())))
    }
}
