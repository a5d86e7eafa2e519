//! A symmetric heap whose PEs run on the host twin: host memory stands in for every PE's
//! heap, host-shim's book keeps the collective malloc/free, and each PE's kernel is one
//! `arch::launch` on its own OS thread, all at once (in a weak-memory world if given).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use device_rt::abi::ShmemHandle;
use device_rt::arch::{self, WeakMemory};
use device_rt::shmem::Shmem;
use host_shim::Result;
use host_shim::shmem::book::{HeapBook, device_handle};
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// The heap of `n_pes` host-twin PEs.
pub struct TwinHeap {
    book: HeapBook,
    /// Every PE's heap: 16-byte aligned host memory.
    heaps: Vec<Vec<u128>>,
    /// The abort flag every PE's waits read.
    abort: Box<u64>,
    handles: Vec<ShmemHandle>,
    memory: Option<WeakMemory>,
}

impl TwinHeap {
    /// `n_pes` PEs with heaps of `heap_bytes`, each wait bounded by `spin_budget`, their
    /// kernels in `memory`'s weak-memory world when given.
    pub fn new(n_pes: usize, heap_bytes: u64, spin_budget: Duration, memory: Option<WeakMemory>) -> Result<Self> {
        let book = HeapBook::new(heap_bytes)?;
        let heaps: Vec<Vec<u128>> = (0..n_pes).map(|_| vec![0u128; heap_bytes.div_ceil(16) as usize]).collect();
        let abort = Box::new(0u64);
        let bases: Vec<u64> = heaps.iter().map(|h| h.as_ptr() as u64).collect();
        let handles = (0..n_pes).map(|pe| device_handle(pe, &bases, heap_bytes, &raw const *abort as u64, spin_budget)).collect::<Result<_>>()?;
        if let Some(memory) = &memory {
            memory.host_region((&raw const *abort).cast(), size_of::<u64>());
        }
        Ok(Self { book, heaps, abort, handles, memory })
    }

    /// Collective malloc (`bytes[pe]` per PE): every PE's symmetric address, or the error
    /// of every PE.
    pub fn malloc(&mut self, bytes: &[u64]) -> Result<Vec<u64>> {
        let offset = self.book.malloc(bytes)?;
        Ok(self.heaps.iter().map(|h| h.as_ptr() as u64 + offset).collect())
    }

    /// Collective free (`addrs[pe]` per PE).
    pub fn free(&mut self, addrs: &[u64]) -> Result<()> {
        let offsets: Vec<u64> = addrs.iter().zip(&self.heaps).map(|(&a, h)| a.wrapping_sub(h.as_ptr() as u64)).collect();
        self.book.free(&offsets)
    }

    /// Copies `data` to `addr` in PE `pe`'s heap while no kernel runs (told to the
    /// weak-memory world, if any).
    ///
    /// # Panics
    /// When the range is not inside PE `pe`'s heap.
    pub fn write<T: IntoBytes + Immutable>(&mut self, pe: usize, addr: u64, data: &[T]) {
        let bytes = data.as_bytes();
        let at = self.offset(pe, addr, bytes.len());
        let dst = self.heaps[pe].as_mut_bytes()[at..].as_mut_ptr();
        match &self.memory {
            // SAFETY: `dst` holds `bytes.len()` bytes (checked above); no kernel runs.
            Some(memory) => unsafe { memory.host_write(dst, bytes) },
            // SAFETY: as above.
            None => unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) },
        }
    }

    /// `n` values from `addr` in PE `pe`'s heap, read while no kernel runs.
    ///
    /// # Panics
    /// When the range is not inside PE `pe`'s heap.
    pub fn read<T: FromBytes + Immutable>(&self, pe: usize, addr: u64, n: usize) -> Vec<T> {
        let at = self.offset(pe, addr, n * size_of::<T>());
        let bytes = &self.heaps[pe].as_bytes()[at..at + n * size_of::<T>()];
        bytes.chunks_exact(size_of::<T>()).map(|c| T::read_from_bytes(c).unwrap_or_else(|_| unreachable!("a chunk of the type's size"))).collect()
    }

    fn offset(&self, pe: usize, addr: u64, len: usize) -> usize {
        let at = addr.checked_sub(self.heaps[pe].as_ptr() as u64).expect("an address in the PE's heap") as usize;
        assert!(at + len <= self.heaps[pe].len() * 16, "{len} bytes at {addr:#x} overflow PE {pe}'s heap");
        at
    }

    /// Sets the abort flag (every PE's waits then end with `Aborted`).
    pub fn abort(&self) {
        // SAFETY: the flag is a live, aligned `u64` that the kernels only load atomically.
        unsafe { AtomicU64::from_ptr((&raw const *self.abort).cast_mut()) }.store(1, Ordering::Relaxed);
    }

    /// Runs `kernel` on every PE at once: PE `pe`'s is a launch of `block` threads in one
    /// CTA, each thread given PE `pe`'s view of the heap. `Err` with the first trap
    /// (panic) of any PE's kernel, once every launch has ended.
    pub fn run(&self, block: u32, kernel: impl Fn(Shmem) + Sync) -> std::result::Result<(), String> {
        self.run_shared(block, 0, kernel)
    }

    /// As [`TwinHeap::run`], each CTA given `smem_bytes` of dynamic shared memory.
    pub fn run_shared(&self, block: u32, smem_bytes: u32, kernel: impl Fn(Shmem) + Sync) -> std::result::Result<(), String> {
        let kernel = &kernel;
        let outcomes: Vec<std::thread::Result<()>> = std::thread::scope(|scope| {
            let launches: Vec<_> = self
                .handles
                .iter()
                .map(|handle| {
                    let (handle, memory) = (handle as *const ShmemHandle as usize, self.memory.as_ref());
                    scope.spawn(move || {
                        arch::launch_in(memory, 1, block, smem_bytes, || {
                            // SAFETY: every PE's handle and heap outlive the launches, which
                            // the scope joins; kernels access the heaps only through `arch`
                            // while they run.
                            kernel(unsafe { Shmem::new(handle as *const ShmemHandle) })
                        })
                    })
                })
                .collect();
            launches.into_iter().map(|l| l.join()).collect()
        });
        match outcomes.into_iter().position(|o| o.is_err()) {
            Some(pe) => Err(format!("PE {pe}'s kernel trapped")),
            None => Ok(()),
        }
    }
}
