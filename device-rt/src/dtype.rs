//! Element types and their names as the host and the device exchange them.
//!
//! Always compiled (also without `arch`): host-shim validates work items with these.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// An element type, numbered as NCCL's `ncclDataType_t`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    I8 = 0,
    U8 = 1,
    I32 = 2,
    U32 = 3,
    I64 = 4,
    U64 = 5,
    F16 = 6,
    F32 = 7,
    F64 = 8,
    Bf16 = 9,
}

numbering!(DataType, u8, from_u8, [I8, U8, I32, U32, I64, U64, F16, F32, F64, Bf16]);

impl DataType {
    /// Bytes per element: a power of two (checks and plans mask and shift by it).
    pub const fn size(self) -> usize {
        // Each type's size in the nibble at its number (I8 1, U8 1, I32 4, U32 4, I64 8,
        // U64 8, F16 2, F32 4, F64 8, Bf16 2): a shift and a mask. A `match` here became a
        // table in global memory, one more dependent load at the start of every small
        // stream-ordered call on the GPU (see docs/tuning.md, `SIZES`).
        const SIZES: u64 = 0x28_4288_4411;
        ((SIZES >> (4 * self as u32)) & 0xf) as usize
    }

    /// True for the floating-point types.
    pub const fn is_float(self) -> bool {
        matches!(self, Self::F16 | Self::Bf16 | Self::F32 | Self::F64)
    }

    /// The short name that ends the names of per-type kernels (`reduce_copy_f32`).
    pub const fn short_name(self) -> &'static str {
        match self {
            Self::I8 => "i8",
            Self::U8 => "u8",
            Self::I32 => "i32",
            Self::U32 => "u32",
            Self::I64 => "i64",
            Self::U64 => "u64",
            Self::F16 => "f16",
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::Bf16 => "bf16",
        }
    }

    /// The lower-case name used on command lines and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::I8 => "int8",
            Self::U8 => "uint8",
            Self::I32 => "int32",
            Self::U32 => "uint32",
            Self::I64 => "int64",
            Self::U64 => "uint64",
            Self::F16 => "half",
            Self::F32 => "float",
            Self::F64 => "double",
            Self::Bf16 => "bfloat16",
        }
    }
}

/// An IEEE binary16 value, as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct F16(pub u16);

/// A bfloat16 value (the upper half of an f32), as its bits.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct Bf16(pub u16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_round_trips_and_sizes_match_rust_types() {
        for (i, t) in DataType::ALL.into_iter().enumerate() {
            assert_eq!(t as u8 as usize, i);
            assert_eq!(DataType::from_u8(i as u8), Some(t));
            assert!(t.size().is_power_of_two(), "alignment checks and plans mask and shift by sizes: {t:?}");
        }
        assert_eq!(DataType::from_u8(10), None);
        use core::mem::size_of;
        let rust_sizes = [size_of::<i8>(), size_of::<u8>(), size_of::<i32>(), size_of::<u32>(), size_of::<i64>(), size_of::<u64>(), size_of::<F16>(), size_of::<f32>(), size_of::<f64>(), size_of::<Bf16>()];
        assert_eq!(DataType::ALL.map(DataType::size), rust_sizes);
        assert!(DataType::Bf16.is_float() && !DataType::U64.is_float());
    }
}
