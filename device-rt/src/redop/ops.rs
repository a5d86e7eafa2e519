//! Element arithmetic ([`Elem`]) and the operators built on it ([`RedOp`]).
//!
//! A pack is reduced element by element, except where the hardware does two elements per
//! instruction (f16/bf16 pairs in 32-bit words: `add.rn.f16x2` …), which the
//! `*_pack` methods use for packs of 4 bytes and more.

use core::marker::PhantomData;

use zerocopy::{FromBytes, Immutable, IntoBytes};

use super::RedOpKind;
use crate::arch;
use crate::dtype::{Bf16, DataType, F16};
use crate::pack::{BytePack, PackSize, Size};

/// An element type the reduction operators work on.
pub trait Elem: Copy + PartialEq + Default + FromBytes + IntoBytes + Immutable + 'static {
    /// The host's name for the type.
    const DTYPE: DataType;
    /// An element type of the same size: copies move bits, so the copies of every type
    /// of one size share one instance of the copy code.
    type Bits: Elem;
    /// `a + b`, wrapping for integers, rounded to nearest even for floats.
    fn add(a: Self, b: Self) -> Self;
    /// `a * b`, wrapping for integers, rounded to nearest even for floats.
    fn mul(a: Self, b: Self) -> Self;
    /// The smaller; for floats the non-NaN operand when one is NaN.
    fn min(a: Self, b: Self) -> Self;
    /// The larger; for floats the non-NaN operand when one is NaN.
    fn max(a: Self, b: Self) -> Self;
    /// `a / n` (integers truncate toward zero; f16/bf16 divide in f32 and round once).
    /// `n` is never 0: the host refuses such an operator argument.
    fn div(a: Self, n: u64) -> Self;
    /// The element whose bits are the low bits of an operator argument.
    fn from_arg(arg: u64) -> Self;

    /// [`Elem::add`] over a pack.
    #[inline(always)]
    fn add_pack<const N: usize>(a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        a.zip(b, Self::add)
    }
    /// [`Elem::mul`] over a pack.
    #[inline(always)]
    fn mul_pack<const N: usize>(a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        a.zip(b, Self::mul)
    }
    /// [`Elem::min`] over a pack.
    #[inline(always)]
    fn min_pack<const N: usize>(a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        a.zip(b, Self::min)
    }
    /// [`Elem::max`] over a pack.
    #[inline(always)]
    fn max_pack<const N: usize>(a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        a.zip(b, Self::max)
    }
}

macro_rules! int_elem {
    ($t:ty, $dtype:ident, $wide:ty, $bits:ty) => {
        impl Elem for $t {
            const DTYPE: DataType = DataType::$dtype;
            type Bits = $bits;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a.wrapping_add(b)
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a.wrapping_mul(b)
            }
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                Ord::min(a, b)
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                Ord::max(a, b)
            }
            #[inline(always)]
            fn div(a: Self, n: u64) -> Self {
                (a as $wide).wrapping_div(n as $wide) as $t
            }
            #[inline(always)]
            fn from_arg(arg: u64) -> Self {
                arg as $t
            }
        }
    };
}

int_elem!(i8, I8, i64, u8);
int_elem!(u8, U8, u64, u8);
int_elem!(i32, I32, i64, u32);
int_elem!(u32, U32, u64, u32);
int_elem!(i64, I64, i64, u64);
int_elem!(u64, U64, u64, u64);

macro_rules! float_elem {
    ($t:ty, $dtype:ident, $bits:ty) => {
        impl Elem for $t {
            const DTYPE: DataType = DataType::$dtype;
            type Bits = $bits;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                a + b
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                a * b
            }
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                a.min(b)
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                a.max(b)
            }
            #[inline(always)]
            fn div(a: Self, n: u64) -> Self {
                a / n as $t
            }
            #[inline(always)]
            fn from_arg(arg: u64) -> Self {
                <$t>::from_bits(arg as $bits)
            }
        }
    };
}

float_elem!(f32, F32, u32);
float_elem!(f64, F64, u64);

macro_rules! half_elem {
    ($t:ident, $dtype:ident, $add:ident, $mul:ident, $min:ident, $max:ident,
     $add2:ident, $mul2:ident, $min2:ident, $max2:ident, $to_f32:ident, $from_f32:ident) => {
        impl Elem for $t {
            const DTYPE: DataType = DataType::$dtype;
            type Bits = F16;
            #[inline(always)]
            fn add(a: Self, b: Self) -> Self {
                $t(arch::$add(a.0, b.0))
            }
            #[inline(always)]
            fn mul(a: Self, b: Self) -> Self {
                $t(arch::$mul(a.0, b.0))
            }
            #[inline(always)]
            fn min(a: Self, b: Self) -> Self {
                $t(arch::$min(a.0, b.0))
            }
            #[inline(always)]
            fn max(a: Self, b: Self) -> Self {
                $t(arch::$max(a.0, b.0))
            }
            #[inline(always)]
            fn div(a: Self, n: u64) -> Self {
                $t(arch::$from_f32(arch::$to_f32(a.0) / n as f32))
            }
            #[inline(always)]
            fn from_arg(arg: u64) -> Self {
                $t(arg as u16)
            }
            #[inline(always)]
            fn add_pack<const N: usize>(a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
            where
                Size<N>: PackSize,
            {
                half_pack(a, b, arch::$add2, arch::$add)
            }
            #[inline(always)]
            fn mul_pack<const N: usize>(a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
            where
                Size<N>: PackSize,
            {
                half_pack(a, b, arch::$mul2, arch::$mul)
            }
            #[inline(always)]
            fn min_pack<const N: usize>(a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
            where
                Size<N>: PackSize,
            {
                half_pack(a, b, arch::$min2, arch::$min)
            }
            #[inline(always)]
            fn max_pack<const N: usize>(a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
            where
                Size<N>: PackSize,
            {
                half_pack(a, b, arch::$max2, arch::$max)
            }
        }
    };
}

/// Two 16-bit floats per instruction where the pack holds 32-bit words, else one.
#[inline(always)]
fn half_pack<const N: usize>(
    a: BytePack<N>,
    b: BytePack<N>,
    pair: fn(u32, u32) -> u32,
    single: fn(u16, u16) -> u16,
) -> BytePack<N>
where
    Size<N>: PackSize,
{
    if N >= 4 { a.zip(b, pair) } else { a.zip(b, single) }
}

half_elem!(F16, F16, add_f16, mul_f16, min_f16, max_f16, add_f16x2, mul_f16x2, min_f16x2, max_f16x2, f16_to_f32, f32_to_f16);
half_elem!(Bf16, Bf16, add_bf16, mul_bf16, min_bf16, max_bf16, add_bf16x2, mul_bf16x2, min_bf16x2, max_bf16x2, bf16_to_f32, f32_to_bf16);

/// A reduction operator over one element type: how two values combine, and what happens
/// to each input before (pre-op) and to the result after (post-op).
pub trait RedOp: Copy {
    /// The element type.
    type Elt: Elem;
    /// The host's name for the operator.
    const KIND: RedOpKind;
    /// True when [`RedOp::pre_op`] is not the identity.
    const HAS_PRE_OP: bool = false;
    /// True when [`RedOp::post_op`] is not the identity.
    const HAS_POST_OP: bool = false;

    /// The operator with its argument (PreMulSum's scalar bits, SumPostDiv's divisor;
    /// ignored by the others).
    fn new(arg: u64) -> Self;
    /// Combines two values.
    fn reduce(&self, a: Self::Elt, b: Self::Elt) -> Self::Elt;
    /// [`RedOp::reduce`] over a pack (NCCL's `Apply_Reduce`).
    fn reduce_pack<const N: usize>(&self, a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize;
    /// Applied to an input before it is reduced.
    #[inline(always)]
    fn pre_op(&self, a: Self::Elt) -> Self::Elt {
        a
    }
    /// [`RedOp::pre_op`] over a pack (NCCL's `Apply_PreOp`).
    #[inline(always)]
    fn pre_op_pack<const N: usize>(&self, a: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        a
    }
    /// Applied to the final result.
    #[inline(always)]
    fn post_op(&self, a: Self::Elt) -> Self::Elt {
        a
    }
    /// [`RedOp::post_op`] over a pack (NCCL's `Apply_PostOp`).
    #[inline(always)]
    fn post_op_pack<const N: usize>(&self, a: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        a
    }
}

macro_rules! plain_op {
    ($(#[$doc:meta])* $name:ident, $kind:ident, $scalar:ident, $pack:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name<T>(PhantomData<T>);

        impl<T: Elem> RedOp for $name<T> {
            type Elt = T;
            const KIND: RedOpKind = RedOpKind::$kind;
            #[inline(always)]
            fn new(_arg: u64) -> Self {
                Self(PhantomData)
            }
            #[inline(always)]
            fn reduce(&self, a: T, b: T) -> T {
                T::$scalar(a, b)
            }
            #[inline(always)]
            fn reduce_pack<const N: usize>(&self, a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
            where
                Size<N>: PackSize,
            {
                T::$pack(a, b)
            }
        }
    };
}

plain_op!(/** NCCL's `FuncSum`. */ Sum, Sum, add, add_pack);
plain_op!(/** NCCL's `FuncProd`. */ Prod, Prod, mul, mul_pack);
plain_op!(/** NCCL's `FuncMinMax` as min. */ Min, Min, min, min_pack);
plain_op!(/** NCCL's `FuncMinMax` as max. */ Max, Max, max, max_pack);

/// NCCL's `FuncPreMulSum`: each input times a scalar, then summed.
#[derive(Clone, Copy, Debug)]
pub struct PreMulSum<T> {
    scalar: T,
}

impl<T: Elem> RedOp for PreMulSum<T> {
    type Elt = T;
    const KIND: RedOpKind = RedOpKind::PreMulSum;
    const HAS_PRE_OP: bool = true;
    #[inline(always)]
    fn new(arg: u64) -> Self {
        Self { scalar: T::from_arg(arg) }
    }
    #[inline(always)]
    fn reduce(&self, a: T, b: T) -> T {
        T::add(a, b)
    }
    #[inline(always)]
    fn reduce_pack<const N: usize>(&self, a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        T::add_pack(a, b)
    }
    #[inline(always)]
    fn pre_op(&self, a: T) -> T {
        T::mul(a, self.scalar)
    }
    #[inline(always)]
    fn pre_op_pack<const N: usize>(&self, a: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        T::mul_pack(a, BytePack::splat(self.scalar))
    }
}

/// NCCL's `FuncSumPostDiv`: summed, then the result divided by an integer.
#[derive(Clone, Copy, Debug)]
pub struct SumPostDiv<T> {
    divisor: u64,
    elem: PhantomData<T>,
}

impl<T: Elem> RedOp for SumPostDiv<T> {
    type Elt = T;
    const KIND: RedOpKind = RedOpKind::SumPostDiv;
    const HAS_POST_OP: bool = true;
    #[inline(always)]
    fn new(arg: u64) -> Self {
        Self { divisor: arg, elem: PhantomData }
    }
    #[inline(always)]
    fn reduce(&self, a: T, b: T) -> T {
        T::add(a, b)
    }
    #[inline(always)]
    fn reduce_pack<const N: usize>(&self, a: BytePack<N>, b: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        T::add_pack(a, b)
    }
    #[inline(always)]
    fn post_op(&self, a: T) -> T {
        T::div(a, self.divisor)
    }
    #[inline(always)]
    fn post_op_pack<const N: usize>(&self, a: BytePack<N>) -> BytePack<N>
    where
        Size<N>: PackSize,
    {
        a.map(|x| T::div(x, self.divisor))
    }
}
