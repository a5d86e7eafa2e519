//! What callers name: the element types of the collectives and the reduction operators,
//! and how each maps to the device's types and operator arguments.
//!
//! At the bottom of the crate, below every module that takes elements (`comm`'s
//! collectives, `shmem`'s symmetric slices), and using none of them; callers reach it as
//! `host_shim::comm::{Element, ReduceOp, scalar_arg}`.

use device_rt::dtype::{DataType, F16 as DevF16};
use device_rt::redop::RedOpKind;
use half::{bf16, f16};

/// An element type of the collectives.
pub trait Element {
    /// Its ferroccl type.
    const DTYPE: DataType;
}

macro_rules! element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl Element for $t {
            const DTYPE: DataType = DataType::$d;
        })*
    };
}

element!(i8 => I8, u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64,
         half::f16 => F16, half::bf16 => Bf16);

const _: () = assert!(size_of::<DevF16>() == size_of::<half::f16>());

/// A reduction operator as callers name it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    /// The average, as NCCL computes it: on floats every rank's input is multiplied by
    /// `1/n` (rounded to the element type; f16 and bf16 through f32), then summed
    /// (PreMulSum); on integers the sum is divided by `n`, truncating (SumPostDiv).
    Avg,
    /// Each rank's input multiplied by the scalar, then summed.
    PreMulSum(f64),
}

impl ReduceOp {
    /// The device operator and its argument for `dtype` in a communicator of `nranks`.
    pub fn device(self, dtype: DataType, nranks: u32) -> (RedOpKind, u64) {
        match self {
            Self::Sum => (RedOpKind::Sum, 0),
            Self::Prod => (RedOpKind::Prod, 0),
            Self::Max => (RedOpKind::Max, 0),
            Self::Min => (RedOpKind::Min, 0),
            Self::Avg if dtype.is_float() => (RedOpKind::PreMulSum, scalar_arg(dtype, 1.0 / f64::from(nranks))),
            Self::Avg => (RedOpKind::SumPostDiv, u64::from(nranks)),
            Self::PreMulSum(s) => (RedOpKind::PreMulSum, scalar_arg(dtype, s)),
        }
    }
}

/// `v` as the 64-bit scalar argument of an operator on `dtype` (PreMulSum's factor): the
/// element's bits for floats (rounded for 16-bit floats), `v` truncated toward zero for
/// integers.
pub fn scalar_arg(dtype: DataType, v: f64) -> u64 {
    match dtype {
        DataType::F16 => u64::from(f16::from_f32(v as f32).to_bits()),
        DataType::Bf16 => u64::from(bf16::from_f32(v as f32).to_bits()),
        DataType::F32 => u64::from((v as f32).to_bits()),
        DataType::F64 => v.to_bits(),
        _ => v as i64 as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NCCL's ncclAvg: PreMulSum by 1/n on floats (f16/bf16 rounded from f32), SumPostDiv
    /// by n on integers.
    #[test]
    fn avg_is_nccls_premulsum_on_floats_and_sumpostdiv_on_integers() {
        assert_eq!(ReduceOp::Avg.device(DataType::F32, 3), (RedOpKind::PreMulSum, u64::from(((1.0f64 / 3.0) as f32).to_bits())));
        assert_eq!(ReduceOp::Avg.device(DataType::F64, 3), (RedOpKind::PreMulSum, (1.0f64 / 3.0).to_bits()));
        assert_eq!(ReduceOp::Avg.device(DataType::F16, 3), (RedOpKind::PreMulSum, u64::from(f16::from_f32((1.0f64 / 3.0) as f32).to_bits())));
        assert_eq!(ReduceOp::Avg.device(DataType::Bf16, 5), (RedOpKind::PreMulSum, u64::from(bf16::from_f32(0.2).to_bits())));
        for dtype in [DataType::I8, DataType::U8, DataType::I32, DataType::U32, DataType::I64, DataType::U64] {
            assert_eq!(ReduceOp::Avg.device(dtype, 3), (RedOpKind::SumPostDiv, 3), "{dtype:?}");
        }
    }
}
