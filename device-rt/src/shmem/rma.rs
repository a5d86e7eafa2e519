//! Remote memory access: p/g (one element) and put/get (many), blocking and `_nbi`.
//!
//! Puts are weak stores into the peer's mapped heap, gets volatile loads from it; see the
//! module `shmem`'s ordering section for what orders them.

use core::mem::size_of;

use super::group::Group;
use super::pe::Shmem;
use crate::pack::{self, BytePack, PackIo, PackSize, Size};
use crate::redop::Elem;

/// Stores `v` at `addr` with one weak store of its size.
///
/// # Safety
/// `addr` is a global address of a writable, aligned `T`, accessed as `arch` requires.
#[inline(always)]
pub(super) unsafe fn store_elem<T: Elem>(addr: u64, v: T) {
    // SAFETY: the caller's contract, with the pack of `T`'s size (the one arm that runs).
    unsafe {
        match size_of::<T>() {
            1 => pack::st_global::<1>(addr, BytePack::from_value(v)),
            2 => pack::st_global::<2>(addr, BytePack::from_value(v)),
            4 => pack::st_global::<4>(addr, BytePack::from_value(v)),
            _ => pack::st_global::<8>(addr, BytePack::from_value(v)),
        }
    }
}

/// Loads the `T` at `addr` with one volatile load of its size.
///
/// # Safety
/// `addr` is a global address of a readable, aligned `T`, accessed as `arch` requires.
#[inline(always)]
pub(super) unsafe fn load_elem<T: Elem>(addr: u64) -> T {
    // SAFETY: as in `store_elem`.
    unsafe {
        match size_of::<T>() {
            1 => pack::ld_volatile_global::<1>(addr).to_value(),
            2 => pack::ld_volatile_global::<2>(addr).to_value(),
            4 => pack::ld_volatile_global::<4>(addr).to_value(),
            _ => pack::ld_volatile_global::<8>(addr).to_value(),
        }
    }
}

/// Copies `bytes` from `src` to `dst` with the group's threads, in packs of the widest
/// size (16 bytes down to 1) that `dst`, `src` and `bytes` are all aligned to, pack `i`
/// by thread `i mod size`; then the group's barrier.
///
/// # Safety
/// `src` holds `bytes` readable bytes, `dst` `bytes` writable ones, not overlapping,
/// accessed as `arch` requires; every thread of `G` calls it with the same arguments.
#[inline(always)]
unsafe fn copy_bytes<G: Group>(dst: u64, src: u64, bytes: u64) {
    let common = dst | src | bytes;
    // SAFETY: the pack size divides `dst`, `src` and `bytes`, so every pack is aligned and
    // inside the buffers (the caller's contract).
    unsafe {
        match common.trailing_zeros() {
            0 => copy_packs::<G, 1>(dst, src, bytes),
            1 => copy_packs::<G, 2>(dst, src, bytes),
            2 => copy_packs::<G, 4>(dst, src, bytes),
            3 => copy_packs::<G, 8>(dst, src, bytes),
            _ => copy_packs::<G, 16>(dst, src, bytes),
        }
    }
    G::sync();
}

/// `copy_bytes` in packs of `N` bytes.
///
/// # Safety
/// As `copy_bytes`, with `dst`, `src` and `bytes` multiples of `N`.
#[inline(always)]
unsafe fn copy_packs<G: Group, const N: usize>(dst: u64, src: u64, bytes: u64)
where
    Size<N>: PackSize + PackIo<N>,
{
    let mut at = u64::from(G::rank()) * N as u64;
    let stride = u64::from(G::size()) * N as u64;
    while at < bytes {
        // SAFETY: `at + N <= bytes` (both multiples of `N`), inside both buffers and aligned
        // (this function's contract).
        unsafe { pack::st_global::<N>(dst + at, pack::ld_volatile_global::<N>(src + at)) };
        at += stride;
    }
}

impl Shmem {
    /// Stores `v` into PE `pe`'s copy of `dst` (`nvshmem_p`): one weak store, blocking
    /// (issued on return). Ordering: by the table of module `shmem` (a blocking put).
    ///
    /// # Safety
    /// `dst` is an aligned symmetric address of a `T` and `pe` a PE whose heap is mapped
    /// here (else the kernel traps); no conflicting access (module `shmem`).
    #[inline(always)]
    pub unsafe fn p<T: Elem>(self, dst: *mut T, v: T, pe: u32) {
        // SAFETY: the caller's contract; `remote` traps unless the address is in `pe`'s heap.
        unsafe { store_elem(self.remote(dst as u64, pe), v) }
    }

    /// Loads PE `pe`'s copy of `src` (`nvshmem_g`): one volatile load, complete on
    /// return. Ordering: none with other accesses; a `wait_until` or barrier before it
    /// orders it after what it waited for.
    ///
    /// # Safety
    /// As [`Shmem::p`], for a readable `T`.
    #[inline(always)]
    pub unsafe fn g<T: Elem>(self, src: *const T, pe: u32) -> T {
        // SAFETY: as in `p`.
        unsafe { load_elem(self.remote(src as u64, pe)) }
    }

    /// Copies `n` elements from the local `src` to PE `pe`'s copy of `dst` with the
    /// group's threads (`nvshmem_put`, `nvshmemx_put_warp`, `nvshmemx_put_block`):
    /// blocking, so `src` may be reused on return (its data was loaded); the stores are
    /// issued, delivered once a fence or quiet orders them (a blocking put in the table of
    /// module `shmem`). Ends with the group's barrier.
    ///
    /// # Safety
    /// `dst` is a symmetric address of `n` writable `T`s, `src` holds `n` readable `T`s
    /// (any global memory), both aligned to `T`; `pe`'s heap is mapped here (else the
    /// kernel traps); every thread of `G` calls it with the same arguments; no conflicting
    /// access.
    #[inline(always)]
    pub unsafe fn put<G: Group, T: Elem>(self, dst: *mut T, src: *const T, n: usize, pe: u32) {
        let bytes = (n * size_of::<T>()) as u64;
        // SAFETY: the caller's contract; `remote` checks the first byte and the last.
        unsafe { copy_bytes::<G>(self.remote_range(dst as u64, bytes, pe), src as u64, bytes) }
    }

    /// [`Shmem::put`] as a non-blocking put (`nvshmem_put_nbi` and its group variants):
    /// here the same stores, issued before it returns; only [`Shmem::quiet`] (or a
    /// barrier) guarantees their completion, to the same PE and to others alike.
    ///
    /// # Safety
    /// As [`Shmem::put`].
    #[inline(always)]
    pub unsafe fn put_nbi<G: Group, T: Elem>(self, dst: *mut T, src: *const T, n: usize, pe: u32) {
        // SAFETY: forwarded.
        unsafe { self.put::<G, T>(dst, src, n, pe) }
    }

    /// Copies `n` elements from PE `pe`'s copy of `src` to the local `dst` with the
    /// group's threads (`nvshmem_get` and its group variants): blocking, `dst` holds the
    /// data on return (for every thread of the group: it ends with the group's barrier).
    /// Ordering: the loads are not ordered after earlier accesses; a `wait_until` or a
    /// barrier before it orders them after what it waited for.
    ///
    /// # Safety
    /// `src` is a symmetric address of `n` readable `T`s, `dst` holds `n` writable `T`s
    /// (any global memory), both aligned to `T`; otherwise as [`Shmem::put`].
    #[inline(always)]
    pub unsafe fn get<G: Group, T: Elem>(self, dst: *mut T, src: *const T, n: usize, pe: u32) {
        let bytes = (n * size_of::<T>()) as u64;
        // SAFETY: as in `put`.
        unsafe { copy_bytes::<G>(dst as u64, self.remote_range(src as u64, bytes, pe), bytes) }
    }

    /// [`Shmem::get`] as a non-blocking get (`nvshmem_get_nbi`): here the same loads,
    /// complete on return; [`Shmem::quiet`] is what a program must call before reading
    /// `dst`.
    ///
    /// # Safety
    /// As [`Shmem::get`].
    #[inline(always)]
    pub unsafe fn get_nbi<G: Group, T: Elem>(self, dst: *mut T, src: *const T, n: usize, pe: u32) {
        // SAFETY: forwarded.
        unsafe { self.get::<G, T>(dst, src, n, pe) }
    }

    /// `addr`'s place in `pe`'s heap for `bytes` from it: traps unless both its first and
    /// its last byte are in the heap.
    #[inline(always)]
    fn remote_range(self, addr: u64, bytes: u64, pe: u32) -> u64 {
        let at = self.remote(addr, pe);
        if bytes > 0 {
            self.remote(addr + bytes - 1, pe);
        }
        at
    }
}
