//! Reduction operators: NCCL's `FuncSum`, `FuncProd`, `FuncMinMax`, `FuncPreMulSum` and
//! `FuncSumPostDiv`, and how each applies to a whole [`BytePack`](crate::pack::BytePack)
//! (NCCL's `Apply_Reduce`, `Apply_PreOp`, `Apply_PostOp`).
//!
//! [`RedOpKind`] is always compiled (the host names operators with it); the operators
//! themselves need `arch` (f16/bf16 arithmetic is hardware instructions on the GPU).

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
mod ops;
#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub use ops::*;

/// A reduction operator, as the host names it.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RedOpKind {
    /// `a + b` (wrapping for integers).
    Sum = 0,
    /// `a * b` (wrapping for integers).
    Prod = 1,
    /// The larger (for floats: the non-NaN one when one is NaN).
    Max = 2,
    /// The smaller (for floats: the non-NaN one when one is NaN).
    Min = 3,
    /// Sum of each input multiplied by a scalar (the op argument, in the element type).
    PreMulSum = 4,
    /// Sum, then divided by an integer (the op argument): averages.
    SumPostDiv = 5,
}

numbering!(RedOpKind, u8, from_u8, [Sum, Prod, Max, Min, PreMulSum, SumPostDiv]);

impl RedOpKind {
    /// The name used on command lines and in reports (nccl-tests' names where they exist).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Sum => "sum",
            Self::Prod => "prod",
            Self::Max => "max",
            Self::Min => "min",
            Self::PreMulSum => "premulsum",
            Self::SumPostDiv => "avg",
        }
    }

    /// True for the operators whose reduction is a sum (what `multimem.ld_reduce.add`
    /// can do for them).
    pub const fn is_sum(self) -> bool {
        matches!(self, Self::Sum | Self::PreMulSum | Self::SumPostDiv)
    }

    /// True for min and max.
    pub const fn is_min_max(self) -> bool {
        matches!(self, Self::Min | Self::Max)
    }
}
