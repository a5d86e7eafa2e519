//! A symmetric heap whose PEs run on the host twin: host memory stands in for every PE's
//! heap, host-shim's book keeps the collective malloc/free, and each local PE's kernel is
//! one `arch::launch` on its own OS thread, all at once (in a weak-memory world if given).
//!
//! Two forms, as on GPUs: [`TwinHeap::new`], every PE in this process; [`TwinHeap::join`],
//! one PE per process (started by `ferroccl run`), each heap a shared-memory file
//! (`memfd`) that the bootstrap hands to every PE and each maps: the GPU heap's export and
//! import, with the CPU's shared memory in place of NVLink.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use device_rt::abi::ShmemHandle;
use device_rt::arch::{self, WeakMemory};
use device_rt::shmem::Shmem;
use host_shim::bootstrap::Bootstrap;
use host_shim::shmem::book::{HeapBook, agree, device_handle};
use host_shim::shmem::exchange;
use host_shim::shmem::pes::PeSet;
use host_shim::{Error, Result};
use zerocopy::{FromBytes, Immutable, IntoBytes};

use crate::shared::{SharedMap, shared_file};

/// One PE's heap as this process sees it.
enum Region {
    /// Host memory of this process (16-byte aligned).
    Owned(Vec<u128>),
    /// A shared-memory file mapped here.
    Shared(SharedMap),
}

impl Region {
    fn base(&self) -> *mut u8 {
        match self {
            Self::Owned(words) => words.as_ptr().cast_mut().cast(),
            Self::Shared(map) => map.base(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Owned(words) => words.len() * 16,
            Self::Shared(map) => map.len(),
        }
    }
}

/// The heap of host-twin PEs.
pub struct TwinHeap {
    book: HeapBook,
    /// Every PE's heap, as mapped here, by PE.
    heaps: Vec<Region>,
    pes: PeSet,
    /// The abort flag every local PE's waits read.
    abort: Box<u64>,
    /// Each local PE's handle.
    handles: Vec<ShmemHandle>,
    memory: Option<WeakMemory>,
}

impl TwinHeap {
    /// `n_pes` PEs in this process with heaps of `heap_bytes`, each wait bounded by
    /// `spin_budget`, their kernels in `memory`'s weak-memory world when given.
    pub fn new(n_pes: usize, heap_bytes: u64, spin_budget: Duration, memory: Option<WeakMemory>) -> Result<Self> {
        let book = HeapBook::new(heap_bytes)?;
        let heaps: Vec<Region> = (0..n_pes).map(|_| Region::Owned(vec![0u128; heap_bytes.div_ceil(16) as usize])).collect();
        Self::assemble(book, heaps, PeSet::all_here(n_pes), spin_budget, memory)
    }

    /// This process's PE of a heap over one PE per process (see the module doc):
    /// `bootstrap` names the PE and reaches the others; every PE asks for `heap_bytes`
    /// (rounded up to whole pages); each wait is bounded by `spin_budget`.
    pub fn join(heap_bytes: u64, spin_budget: Duration, bootstrap: Bootstrap) -> Result<Self> {
        let me = bootstrap.pe();
        let mut pes = PeSet::one_per_process(bootstrap);
        let heap_bytes = agree("init", &pes.gather("init", &[heap_bytes])?)?.next_multiple_of(4096);
        let book = HeapBook::new(heap_bytes)?;
        let len = usize::try_from(heap_bytes).map_err(|_| Error::InvalidArgument(format!("a heap of {heap_bytes} bytes")))?;
        let own = shared_file(len, c"ferroccl-twin-heap")?;
        let fds = exchange(&mut pes, "twin heaps", own.as_fd())?;
        let heaps = fds.iter().enumerate().map(|(pe, fd)| SharedMap::map(if pe == me { &own } else { fd }, len).map(Region::Shared)).collect::<Result<Vec<_>>>()?;
        let mut heap = Self::assemble(book, heaps, pes, spin_budget, None)?;
        // No PE uses a peer's heap before every PE has mapped every heap.
        heap.pes.gather("mapped", &[0])?;
        Ok(heap)
    }

    fn assemble(book: HeapBook, heaps: Vec<Region>, pes: PeSet, spin_budget: Duration, memory: Option<WeakMemory>) -> Result<Self> {
        let abort = Box::new(0u64);
        let bases: Vec<u64> = heaps.iter().map(|h| h.base() as u64).collect();
        let handles = pes.local().iter().map(|&pe| device_handle(pe, &bases, book.heap_bytes(), &raw const *abort as u64, spin_budget)).collect::<Result<_>>()?;
        if let Some(memory) = &memory {
            memory.host_region((&raw const *abort).cast(), size_of::<u64>());
        }
        Ok(Self { book, heaps, pes, abort, handles, memory })
    }

    /// The PEs of this process, in the order of a collective call's arguments.
    pub fn local_pes(&self) -> &[usize] {
        self.pes.local()
    }

    /// The address of local PE `pe`'s `ShmemHandle`: what a work loop's heap items take.
    ///
    /// # Panics
    /// Where `pe` is not a PE of this process.
    pub fn handle(&self, pe: usize) -> u64 {
        let at = self.pes.local().iter().position(|&p| p == pe).expect("a PE of this process");
        &raw const self.handles[at] as u64
    }

    /// Collective malloc (`bytes[i]` per local PE): every local PE's symmetric address, or
    /// the error of every PE.
    pub fn malloc(&mut self, bytes: &[u64]) -> Result<Vec<u64>> {
        let offset = self.book.malloc(&self.pes.gather("malloc", bytes)?)?;
        Ok(self.pes.local().iter().map(|&pe| self.heaps[pe].base() as u64 + offset).collect())
    }

    /// Collective free (`addrs[i]` per local PE).
    pub fn free(&mut self, addrs: &[u64]) -> Result<()> {
        let local = self.pes.local();
        // A wrong count of arguments is refused by `gather`.
        let offsets: Vec<u64> = addrs.iter().enumerate().map(|(i, &a)| a.wrapping_sub(local.get(i).map_or(0, |&pe| self.heaps[pe].base() as u64))).collect();
        self.book.free(&self.pes.gather("free", &offsets)?)
    }

    /// Copies `data` to `addr` in PE `pe`'s heap while no kernel runs (told to the
    /// weak-memory world, if any).
    ///
    /// # Panics
    /// When the range is not inside PE `pe`'s heap.
    pub fn write<T: IntoBytes + Immutable>(&mut self, pe: usize, addr: u64, data: &[T]) {
        let bytes = data.as_bytes();
        let at = self.offset(pe, addr, bytes.len());
        // SAFETY: `at + bytes.len()` is inside PE `pe`'s heap (checked above).
        let dst = unsafe { self.heaps[pe].base().add(at) };
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
        // SAFETY: the range is inside PE `pe`'s heap (checked above); no kernel runs.
        let bytes = unsafe { std::slice::from_raw_parts(self.heaps[pe].base().add(at), n * size_of::<T>()) };
        bytes.chunks_exact(size_of::<T>()).map(|c| T::read_from_bytes(c).unwrap_or_else(|_| unreachable!("a chunk of the type's size"))).collect()
    }

    fn offset(&self, pe: usize, addr: u64, len: usize) -> usize {
        let at = addr.checked_sub(self.heaps[pe].base() as u64).expect("an address in the PE's heap") as usize;
        assert!(at + len <= self.heaps[pe].len(), "{len} bytes at {addr:#x} overflow PE {pe}'s heap");
        at
    }

    /// Sets the abort flag (every PE's waits then end with `Aborted`).
    pub fn abort(&self) {
        // SAFETY: the flag is a live, aligned `u64` that the kernels only load atomically.
        unsafe { AtomicU64::from_ptr((&raw const *self.abort).cast_mut()) }.store(1, Ordering::Relaxed);
    }

    /// Runs `kernel` on every PE at once: PE `pe`'s is a launch of `block` threads in one
    /// CTA, each thread given PE `pe`'s view of the heap. `Err` with the first trap
    /// (panic) of any PE's kernel and what it said, once every launch has ended.
    pub fn run(&self, block: u32, kernel: impl Fn(Shmem) + Sync) -> std::result::Result<(), String> {
        self.run_shared(block, 0, kernel)
    }

    /// As [`TwinHeap::run`], each CTA given `smem_bytes` of dynamic shared memory.
    pub fn run_shared(&self, block: u32, smem_bytes: u32, kernel: impl Fn(Shmem) + Sync) -> std::result::Result<(), String> {
        self.run_grid(1, block, smem_bytes, kernel)
    }

    /// As [`TwinHeap::run_shared`], each PE's launch a grid of `grid` CTAs.
    pub fn run_grid(&self, grid: u32, block: u32, smem_bytes: u32, kernel: impl Fn(Shmem) + Sync) -> std::result::Result<(), String> {
        let kernel = &kernel;
        let outcomes: Vec<std::thread::Result<()>> = std::thread::scope(|scope| {
            let launches: Vec<_> = self
                .handles
                .iter()
                .map(|handle| {
                    let (handle, memory) = (handle as *const ShmemHandle as usize, self.memory.as_ref());
                    scope.spawn(move || {
                        arch::launch_in(memory, grid, block, smem_bytes, || {
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
        match outcomes.into_iter().enumerate().find_map(|(i, o)| o.err().map(|payload| (i, payload))) {
            Some((i, payload)) => Err(format!("PE {}'s kernel trapped: {}", self.pes.local()[i], crate::panic_message(payload.as_ref()))),
            None => Ok(()),
        }
    }
}
