//! `BytePack<N>`: the unit every data path moves, N = 1, 2, 4, 8 or 16 bytes, aligned to
//! its size so one load or store instruction moves it.
//!
//! This module gives packs their type and element view, and maps the generic
//! [`ld_volatile_global`]/[`st_global`] onto `arch`'s sized instructions. It must never
//! contain inline PTX itself.

use core::mem::size_of;

use static_assertions::{assert_eq_align, assert_eq_size};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::arch;

/// Names a pack size and the zero-sized type that gives the pack its alignment.
pub trait PackSize {
    /// A type with the pack's size as its alignment.
    type Align: Copy + FromBytes + IntoBytes + Immutable + KnownLayout;
}

/// The pack size `N`, as a type (`Size<N>: PackSize` holds for N = 1, 2, 4, 8, 16).
pub struct Size<const N: usize>;

/// 16-byte alignment, for `BytePack<16>`.
#[repr(C, align(16))]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Align16([u8; 16]);

impl PackSize for Size<1> {
    type Align = u8;
}
impl PackSize for Size<2> {
    type Align = u16;
}
impl PackSize for Size<4> {
    type Align = u32;
}
impl PackSize for Size<8> {
    type Align = u64;
}
impl PackSize for Size<16> {
    type Align = Align16;
}

/// `N` bytes, aligned to `N`: NCCL's `BytePack<N>` union, viewed through [`Self::elem`]
/// and [`Self::set_elem`] instead of union fields.
#[repr(C)]
#[derive(Clone, Copy, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct BytePack<const N: usize>
where
    Size<N>: PackSize,
{
    align: [<Size<N> as PackSize>::Align; 0],
    /// The pack's bytes, in memory order.
    pub bytes: [u8; N],
}

assert_eq_size!(BytePack<1>, u8);
assert_eq_size!(BytePack<2>, u16);
assert_eq_size!(BytePack<4>, u32);
assert_eq_size!(BytePack<8>, u64);
assert_eq_size!(BytePack<16>, [u64; 2]);
assert_eq_align!(BytePack<1>, u8);
assert_eq_align!(BytePack<2>, u16);
assert_eq_align!(BytePack<4>, u32);
assert_eq_align!(BytePack<8>, u64);
assert_eq_align!(BytePack<16>, Align16);

impl<const N: usize> BytePack<N>
where
    Size<N>: PackSize,
{
    /// A pack of zero bytes.
    #[inline(always)]
    pub const fn zeroed() -> Self {
        Self { align: [], bytes: [0; N] }
    }

    /// A pack holding `v` in every `T` element.
    #[inline(always)]
    pub fn splat<T: IntoBytes + Immutable + Copy>(v: T) -> Self {
        let mut p = Self::zeroed();
        let mut i = 0;
        while i < Self::elems::<T>() {
            p.set_elem(i, v);
            i += 1;
        }
        p
    }

    /// The pack with the bytes of `v`, which must be exactly `N` bytes long: callers
    /// choose `T` by `N`, so a mismatch is a broken invariant and traps.
    #[inline(always)]
    pub fn from_value<T: IntoBytes + Immutable>(v: T) -> Self {
        match Self::read_from_bytes(v.as_bytes()) {
            Ok(p) => p,
            Err(_) => arch::trap(),
        }
    }

    /// The pack's bytes as one `T`, which must be exactly `N` bytes long (else traps, as
    /// [`Self::from_value`]).
    #[inline(always)]
    pub fn to_value<T: FromBytes>(self) -> T {
        match T::read_from_bytes(&self.bytes) {
            Ok(v) => v,
            Err(_) => arch::trap(),
        }
    }

    /// Elements of type `T` in the pack (0 when `T` is wider than the pack).
    #[inline(always)]
    pub const fn elems<T>() -> usize {
        N / size_of::<T>()
    }

    /// Element `i` of the pack viewed as `[T; N / size_of::<T>()]`.
    ///
    /// `i` must be below [`Self::elems`]; `T` is one of the element types, whose
    /// alignment equals its size, so the read is aligned.
    #[inline(always)]
    pub fn elem<T: FromBytes + Copy>(&self, i: usize) -> T {
        debug_assert!(i < Self::elems::<T>());
        // SAFETY: in bounds (above), aligned (the pack is aligned to N ≥ size_of::<T>(),
        // and i·size_of::<T>() keeps that), and any bytes are a valid `T` (FromBytes).
        unsafe { self.bytes.as_ptr().cast::<T>().add(i).read() }
    }

    /// Sets element `i` of the pack viewed as `[T; N / size_of::<T>()]`.
    #[inline(always)]
    pub fn set_elem<T: IntoBytes + Immutable + Copy>(&mut self, i: usize, v: T) {
        debug_assert!(i < Self::elems::<T>());
        // SAFETY: as in `elem`.
        unsafe { self.bytes.as_mut_ptr().cast::<T>().add(i).write(v) }
    }

    /// Applies `f` to every `T` element of the pack.
    #[inline(always)]
    pub fn map<T: FromBytes + IntoBytes + Immutable + Copy>(mut self, f: impl Fn(T) -> T) -> Self {
        let mut i = 0;
        while i < Self::elems::<T>() {
            self.set_elem(i, f(self.elem::<T>(i)));
            i += 1;
        }
        self
    }

    /// Combines the `T` elements of `self` and `other` pairwise with `f`.
    #[inline(always)]
    pub fn zip<T: FromBytes + IntoBytes + Immutable + Copy>(mut self, other: Self, f: impl Fn(T, T) -> T) -> Self {
        let mut i = 0;
        while i < Self::elems::<T>() {
            self.set_elem(i, f(self.elem::<T>(i), other.elem::<T>(i)));
            i += 1;
        }
        self
    }
}

/// Pack sizes that one global load or store instruction moves.
pub trait PackIo<const N: usize>: PackSize
where
    Size<N>: PackSize,
{
    /// See [`ld_volatile_global`].
    ///
    /// # Safety
    /// As [`ld_volatile_global`].
    unsafe fn ld_volatile_global(addr: u64) -> BytePack<N>;
    /// See [`st_global`].
    ///
    /// # Safety
    /// As [`st_global`].
    unsafe fn st_global(addr: u64, v: BytePack<N>);
}

macro_rules! pack_io {
    ($n:literal, $ld:ident, $st:ident) => {
        impl PackIo<$n> for Size<$n> {
            #[inline(always)]
            unsafe fn ld_volatile_global(addr: u64) -> BytePack<$n> {
                // SAFETY: the caller gives an `N`-aligned global address of `N` readable
                // bytes, accessed as `arch` requires (this trait's contract), which is
                // the contract of the `N`-byte `arch` load named here.
                BytePack::from_value(unsafe { arch::$ld(addr) })
            }

            #[inline(always)]
            unsafe fn st_global(addr: u64, v: BytePack<$n>) {
                // SAFETY: as in `ld_volatile_global` above, with `N` writable bytes: the
                // contract of the `N`-byte `arch` store named here.
                unsafe { arch::$st(addr, v.to_value()) }
            }
        }
    };
}

pack_io!(1, ld_volatile_global_b8, st_global_b8);
pack_io!(2, ld_volatile_global_b16, st_global_b16);
pack_io!(4, ld_volatile_global_b32, st_global_b32);
pack_io!(8, ld_volatile_global_b64, st_global_b64);
pack_io!(16, ld_volatile_global_v2b64, st_global_v2b64);

/// `ld.volatile.global` of one pack (NCCL's `ld_volatile_global<N>`): one instruction,
/// never served from a stale L1 line, so data a peer wrote is seen once the flag that
/// published it was; orders nothing by itself.
///
/// # Safety
/// `addr` must be an `N`-aligned global address of `N` readable bytes that, on the host
/// twin, every thread accesses only through `arch`'s functions while the kernel runs.
#[inline(always)]
pub unsafe fn ld_volatile_global<const N: usize>(addr: u64) -> BytePack<N>
where
    Size<N>: PackIo<N>,
{
    // SAFETY: `PackIo::ld_volatile_global`'s contract is this function's, which the
    // caller keeps.
    unsafe { <Size<N> as PackIo<N>>::ld_volatile_global(addr) }
}

/// `st.global` of one pack (NCCL's `st_global<N>`): a weak store; publish it with a fence
/// (or a release) before the flag a peer waits on.
///
/// # Safety
/// `addr` must be an `N`-aligned global address of `N` writable bytes, accessed as
/// [`ld_volatile_global`] requires.
#[inline(always)]
pub unsafe fn st_global<const N: usize>(addr: u64, v: BytePack<N>)
where
    Size<N>: PackIo<N>,
{
    // SAFETY: `PackIo::st_global`'s contract is this function's, which the caller keeps.
    unsafe { <Size<N> as PackIo<N>>::st_global(addr, v) }
}
