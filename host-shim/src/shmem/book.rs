//! The symmetric heap's bookkeeping, without a device: which ranges of every PE's heap
//! are allocated, the agreement a collective call needs, and the device handle's
//! contents. Pure, so it is tested on any machine; the GPU heap and the host-twin heap
//! both keep their books here.

use std::collections::BTreeMap;
use std::time::Duration;

use device_rt::abi::{MAX_PES, SHMEM_RESERVED_BYTES, ShmemHandle};

use crate::{Error, Result};

/// Alignment of every symmetric allocation (and of the heap's first one).
pub const ALLOC_ALIGN: u64 = 256;

/// The allocations of a symmetric heap: the same on every PE, by construction (every
/// change is one collective call whose arguments all PEs agreed on).
#[derive(Debug)]
pub struct HeapBook {
    heap_bytes: u64,
    /// Live allocations: offset → bytes (rounded up to [`ALLOC_ALIGN`]).
    live: BTreeMap<u64, u64>,
}

/// The one value every PE passed to a collective call, or the error every PE gets.
pub fn agree(call: &'static str, args: &[u64]) -> Result<u64> {
    match args.split_first() {
        None => Err(Error::InvalidArgument(format!("shmem {call}: no PE took part"))),
        Some((&first, rest)) if rest.iter().all(|&a| a == first) => Ok(first),
        Some(_) => Err(Error::SymmetricMismatch { call, args: args.to_vec() }),
    }
}

impl HeapBook {
    /// The book of a heap of `heap_bytes` per PE (its head reserved for the runtime).
    pub fn new(heap_bytes: u64) -> Result<Self> {
        if heap_bytes <= SHMEM_RESERVED_BYTES {
            return Err(Error::InvalidArgument(format!("a symmetric heap needs more than its {SHMEM_RESERVED_BYTES} reserved bytes, not {heap_bytes}")));
        }
        Ok(Self { heap_bytes, live: BTreeMap::new() })
    }

    /// Bytes of every PE's heap.
    pub fn heap_bytes(&self) -> u64 {
        self.heap_bytes
    }

    /// The collective `malloc`: `requests[pe]` is PE `pe`'s size. Every PE must ask for
    /// the same non-zero size; then the offset (the same on every PE) of a new allocation,
    /// [`ALLOC_ALIGN`]-aligned, first fit. A mismatch ([`Error::SymmetricMismatch`]) or a
    /// full heap ([`Error::HeapExhausted`]) is the error of every PE, and changes nothing.
    pub fn malloc(&mut self, requests: &[u64]) -> Result<u64> {
        let bytes = agree("malloc", requests)?;
        if bytes == 0 {
            return Err(Error::InvalidArgument("shmem malloc of 0 bytes".into()));
        }
        let want = bytes.checked_next_multiple_of(ALLOC_ALIGN).ok_or(Error::HeapExhausted { want: bytes, largest_free: self.largest_free() })?;
        let offset = self.gaps().find(|&(_, len)| len >= want).map(|(at, _)| at).ok_or(Error::HeapExhausted { want: bytes, largest_free: self.largest_free() })?;
        self.live.insert(offset, want);
        Ok(offset)
    }

    /// The collective `free`: `offsets[pe]` is the offset PE `pe` frees. Every PE must
    /// free the same live allocation; a mismatch or an offset that is not one is the
    /// error of every PE, and changes nothing.
    pub fn free(&mut self, offsets: &[u64]) -> Result<()> {
        let offset = agree("free", offsets)?;
        match self.live.remove(&offset) {
            Some(_) => Ok(()),
            None => Err(Error::InvalidArgument(format!("shmem free: offset {offset:#x} is not a live symmetric allocation"))),
        }
    }

    /// Refuses `bytes` at `offset` (`what`, in words, names them in the error) unless they
    /// lie inside one live allocation (its bytes as reserved: the size asked for, rounded
    /// up to [`ALLOC_ALIGN`]). No bytes are inside an allocation where `offset` is in it
    /// or at its end.
    pub fn check_extent(&self, what: &str, offset: u64, bytes: u64) -> Result<()> {
        let holder = self.live.range(..=offset).next_back().map(|(&at, &len)| (at, len));
        match holder {
            Some((at, len)) if offset.checked_add(bytes).is_some_and(|end| end <= at + len) => Ok(()),
            Some((at, len)) if offset < at + len => Err(Error::InvalidArgument(format!(
                "{what}: {bytes} bytes at heap offset {offset:#x} run past the end of the allocation at {at:#x} ({len} bytes)"
            ))),
            _ => Err(Error::InvalidArgument(format!("{what}: heap offset {offset:#x} is not inside a live symmetric allocation"))),
        }
    }

    /// Live allocations, `(offset, bytes)`, by offset.
    pub fn allocations(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.live.iter().map(|(&at, &len)| (at, len))
    }

    /// The free ranges, `(offset, bytes)`, by offset (allocations keep their alignment,
    /// so every gap starts aligned).
    fn gaps(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let ends = std::iter::once(SHMEM_RESERVED_BYTES).chain(self.live.iter().map(|(&at, &len)| at + len));
        let starts = self.live.keys().copied().chain(std::iter::once(self.heap_bytes));
        ends.zip(starts).map(|(end, next)| (end, next - end)).filter(|&(_, len)| len > 0)
    }

    /// The largest free range.
    fn largest_free(&self) -> u64 {
        self.gaps().map(|(_, len)| len).max().unwrap_or(0)
    }
}

/// PE `my_pe`'s device handle for a heap of `heap_bytes` per PE whose PEs' heaps this PE
/// addresses at `bases` (0: not reachable), with its abort flag at `abort` and a spin
/// budget of `spin_budget` per wait.
pub fn device_handle(my_pe: usize, bases: &[u64], heap_bytes: u64, abort: u64, spin_budget: Duration) -> Result<ShmemHandle> {
    let n_pes = bases.len();
    if n_pes == 0 || n_pes > MAX_PES || my_pe >= n_pes {
        return Err(Error::InvalidArgument(format!("a symmetric heap of {n_pes} PEs (1 to {MAX_PES}) has no PE {my_pe}")));
    }
    if bases[my_pe] == 0 || abort == 0 {
        return Err(Error::InvalidArgument(format!("PE {my_pe}'s own heap and abort flag must be mapped")));
    }
    let mut handle = ShmemHandle {
        bases: [0; MAX_PES],
        heap_bytes,
        abort,
        spin_budget_ns: u64::try_from(spin_budget.as_nanos()).unwrap_or(u64::MAX),
        my_pe: my_pe as u32,
        n_pes: n_pes as u32,
    };
    handle.bases[..n_pes].copy_from_slice(bases);
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_first_fit_after_the_reserved_head() {
        let mut book = HeapBook::new(4096).unwrap();
        let a = book.malloc(&[100, 100, 100]).unwrap();
        let b = book.malloc(&[300, 300, 300]).unwrap();
        assert_eq!((a, b), (SHMEM_RESERVED_BYTES, SHMEM_RESERVED_BYTES + 256));
        book.free(&[a, a, a]).unwrap();
        assert_eq!(book.malloc(&[256, 256, 256]).unwrap(), a, "the freed range is reused");
        assert_eq!(book.allocations().collect::<Vec<_>>(), [(a, 256), (b, 512)]);
    }

    #[test]
    fn a_size_mismatch_is_every_pes_error_and_changes_nothing() {
        let mut book = HeapBook::new(4096).unwrap();
        let err = book.malloc(&[64, 64, 128]).unwrap_err();
        assert!(matches!(&err, Error::SymmetricMismatch { call: "malloc", args } if args == &[64, 64, 128]), "{err}");
        assert_eq!(book.allocations().count(), 0);
        assert_eq!(book.malloc(&[64, 64, 64]).unwrap(), SHMEM_RESERVED_BYTES);
    }

    #[test]
    fn a_free_mismatch_or_unknown_offset_fails_and_keeps_the_allocation() {
        let mut book = HeapBook::new(4096).unwrap();
        let a = book.malloc(&[64, 64]).unwrap();
        assert!(matches!(book.free(&[a, a + 256]), Err(Error::SymmetricMismatch { call: "free", .. })));
        assert!(matches!(book.free(&[a + 256, a + 256]), Err(Error::InvalidArgument(_))));
        assert_eq!(book.allocations().count(), 1);
        book.free(&[a, a]).unwrap();
        assert_eq!(book.allocations().count(), 0);
    }

    #[test]
    fn an_extent_must_lie_inside_one_live_allocation() {
        let mut book = HeapBook::new(4096).unwrap();
        let a = book.malloc(&[100]).unwrap();
        let b = book.malloc(&[256]).unwrap();
        assert_eq!(b, a + 256, "the first allocation reserves 256 bytes");
        for (offset, bytes) in [(a, 256), (a + 8, 248), (b, 256), (b + 256, 0), (a, 0)] {
            assert!(book.check_extent("view", offset, bytes).is_ok(), "{offset:#x} + {bytes}");
        }
        for (offset, bytes, why) in [
            (a, 257, "runs into the next allocation"),
            (b + 8, 256, "runs past the last allocation"),
            (a - 8, 8, "in the reserved head"),
            (b + 512, 8, "in free space"),
            (a + 8, u64::MAX, "wraps around"),
            (u64::MAX, 1, "far past the heap"),
        ] {
            let err = book.check_extent("view", offset, bytes).unwrap_err();
            assert!(matches!(&err, Error::InvalidArgument(m) if m.starts_with("view: ")), "{why}: {err}");
        }
        book.free(&[b]).unwrap();
        assert!(book.check_extent("view", b, 8).is_err(), "a freed allocation holds nothing");
        assert!(book.free(&[a + 8]).is_err(), "free takes an allocation's start, not an address inside it");
    }

    #[test]
    fn a_full_heap_says_how_much_is_free() {
        let mut book = HeapBook::new(SHMEM_RESERVED_BYTES + 1024).unwrap();
        book.malloc(&[512]).unwrap();
        let err = book.malloc(&[1024]).unwrap_err();
        assert!(matches!(err, Error::HeapExhausted { want: 1024, largest_free: 512 }), "{err}");
        assert!(matches!(book.malloc(&[0]), Err(Error::InvalidArgument(_))));
        assert!(HeapBook::new(SHMEM_RESERVED_BYTES).is_err());
    }

    #[test]
    fn the_device_handle_lists_every_pe_and_refuses_bad_shapes() {
        let h = device_handle(1, &[0x1000, 0x2000, 0], 4096, 0x9000, Duration::from_millis(5)).unwrap();
        assert_eq!((h.my_pe, h.n_pes, h.heap_bytes, h.abort, h.spin_budget_ns), (1, 3, 4096, 0x9000, 5_000_000));
        assert_eq!(&h.bases[..4], &[0x1000, 0x2000, 0, 0]);
        assert!(device_handle(2, &[0x1000, 0x2000, 0], 4096, 0x9000, Duration::ZERO).is_err(), "own heap unmapped");
        assert!(device_handle(3, &[0x1000; 3], 4096, 0x9000, Duration::ZERO).is_err(), "no such PE");
        assert!(device_handle(0, &[0x1000; MAX_PES + 1], 4096, 0x9000, Duration::ZERO).is_err(), "too many PEs");
    }
}
