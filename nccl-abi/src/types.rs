//! NCCL's host-API types as the C header declares them (`include/nccl.h`): result codes,
//! element types, operators, the unique id and the versioned config; and how each maps to
//! ferroccl's.

use host_shim::device_rt::dtype::DataType;
use host_shim::ErrorKind;
use host_shim::comm::COMM_ID_BYTES;

use crate::error::Failure;

/// `ncclResult_t`.
pub type NcclResult = i32;
pub const SUCCESS: NcclResult = 0;
pub const UNHANDLED_CUDA_ERROR: NcclResult = 1;
pub const SYSTEM_ERROR: NcclResult = 2;
pub const INTERNAL_ERROR: NcclResult = 3;
pub const INVALID_ARGUMENT: NcclResult = 4;
pub const INVALID_USAGE: NcclResult = 5;
pub const REMOTE_ERROR: NcclResult = 6;
pub const IN_PROGRESS: NcclResult = 7;
/// `ncclNumResults`.
pub const NUM_RESULTS: NcclResult = 8;

/// `ncclGetErrorString`'s texts, by result.
pub const RESULT_TEXTS: [&std::ffi::CStr; NUM_RESULTS as usize] = [
    c"no error",
    c"unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    c"unhandled system error (run with NCCL_DEBUG=INFO for details)",
    c"internal error - please report this issue to the NCCL developers",
    c"invalid argument (run with NCCL_DEBUG=WARN for details)",
    c"invalid usage (run with NCCL_DEBUG=WARN for details)",
    c"remote process exited or there was a network error",
    c"NCCL operation in progress",
];

/// The result of a ferroccl error of kind `kind` (host-shim's `ErrorKind` names each
/// kind's NCCL counterpart).
pub fn result_of(kind: ErrorKind) -> NcclResult {
    match kind {
        ErrorKind::InvalidArgument => INVALID_ARGUMENT,
        ErrorKind::Unsupported | ErrorKind::Aborted => INVALID_USAGE,
        ErrorKind::Timeout => SYSTEM_ERROR,
        ErrorKind::PeerFailure => REMOTE_ERROR,
        ErrorKind::Cuda => UNHANDLED_CUDA_ERROR,
        _ => INTERNAL_ERROR,
    }
}

/// `ncclFloat8e4m3` and `ncclFloat8e5m2`.
const FP8_TYPES: [i32; 2] = [10, 11];

/// The `ncclDataType_t` of a call that computes with its elements (a reduction, a
/// PreMulSum scalar): NCCL's numbers 0 to 9 are ferroccl's `DataType`'s; FP8 is not served
/// (`ncclInvalidUsage`: ferroccl has no FP8 arithmetic); any other number is no type
/// (`ncclInvalidArgument`).
pub fn data_type(value: i32) -> Result<DataType, Failure> {
    if FP8_TYPES.contains(&value) {
        return Err(Failure::usage(format!(
            "datatype {value} (ncclFloat8e4m3 / ncclFloat8e5m2): ferroccl has no FP8 reductions (FP8 is served where elements are only moved: all-gather, broadcast, send/receive, gather, scatter, all-to-all)"
        )));
    }
    u8::try_from(value).ok().and_then(DataType::from_u8).ok_or_else(|| Failure::argument(format!("datatype {value} is no ncclDataType_t")))
}

/// The `ncclDataType_t` of a call that only moves its elements (all-gather, broadcast,
/// send/receive, gather, scatter, all-to-all): as [`data_type`], with FP8 moved as bytes
/// (`DataType::U8`: one byte an element, the bits arriving as sent).
pub fn moved_type(value: i32) -> Result<DataType, Failure> {
    if FP8_TYPES.contains(&value) { Ok(DataType::U8) } else { data_type(value) }
}

/// `ncclRedOp_t`'s built-in operators (`ncclSum` … `ncclAvg`); from `ncclNumOps` on, the
/// communicator's own (`ncclRedOpCreatePreMulSum`).
pub const NUM_OPS: i32 = 5;

/// `ncclScalarResidence_t`.
pub const SCALAR_DEVICE: i32 = 0;
pub const SCALAR_HOST_IMMEDIATE: i32 = 1;

/// `ncclUniqueId`: 128 bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    pub internal: [u8; COMM_ID_BYTES],
}

/// `ncclConfig_t`'s first fields, which every version since 2.17 has at these offsets;
/// `size` says how much of the caller's struct there is.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ConfigHead {
    pub size: usize,
    pub magic: u32,
    pub version: u32,
    pub blocking: i32,
    pub cga_cluster_size: i32,
    pub min_ctas: i32,
    pub max_ctas: i32,
}

/// `ncclConfig_t::magic`.
pub const CONFIG_MAGIC: u32 = 0xcafe_beef;
/// `NCCL_CONFIG_UNDEF_INT`.
pub const CONFIG_UNDEF_INT: i32 = i32::MIN;
/// `NCCL_SPLIT_NOCOLOR`.
pub const SPLIT_NOCOLOR: i32 = -1;

/// The version `ncclGetVersion` reports: the NCCL API level served (2.28.9).
pub const VERSION_CODE: i32 = 22809;

const _: () = assert!(size_of::<UniqueId>() == 128);
const _: () = assert!(size_of::<ConfigHead>() == 32);

/// The device argument of a PreMulSum scalar given as the bytes of one `dtype` value
/// (little-endian): floats' bits; integers sign- or zero-extended, as
/// `host_shim::comm::scalar_arg` makes them.
pub fn scalar_bits(dtype: DataType, bytes: [u8; 8]) -> u64 {
    let raw = u64::from_le_bytes(bytes);
    match dtype {
        DataType::I8 => raw as u8 as i8 as i64 as u64,
        DataType::I32 => raw as u32 as i32 as i64 as u64,
        DataType::U8 => raw & 0xff,
        DataType::U32 => raw & 0xffff_ffff,
        DataType::F16 | DataType::Bf16 => raw & 0xffff,
        DataType::F32 => raw & 0xffff_ffff,
        DataType::I64 | DataType::U64 | DataType::F64 => raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccls_type_numbers_are_ferroccls_and_fp8_is_moved_not_reduced() {
        for (value, dtype) in [(0, DataType::I8), (7, DataType::F32), (9, DataType::Bf16)] {
            assert_eq!((data_type(value).unwrap(), moved_type(value).unwrap()), (dtype, dtype));
        }
        for fp8 in [10, 11] {
            let refused = data_type(fp8).unwrap_err();
            assert!(refused.why.contains("FP8") && refused.result == INVALID_USAGE, "{refused:?}");
            assert_eq!(moved_type(fp8).unwrap(), DataType::U8);
        }
        for unknown in [12, -1, 256] {
            for refused in [data_type(unknown).unwrap_err(), moved_type(unknown).unwrap_err()] {
                assert!(refused.why.contains("no ncclDataType_t") && refused.result == INVALID_ARGUMENT, "{refused:?}");
            }
        }
    }

    #[test]
    fn scalars_extend_as_the_device_takes_them() {
        let le = |v: u64| v.to_le_bytes();
        assert_eq!(scalar_bits(DataType::I8, le(0xfe)), (-2i64) as u64);
        assert_eq!(scalar_bits(DataType::U8, le(0x1fe)), 0xfe);
        assert_eq!(scalar_bits(DataType::I32, le(0xffff_fffd)), (-3i64) as u64);
        assert_eq!(scalar_bits(DataType::F32, le(u64::from(2.5f32.to_bits()) | 0xdead_0000_0000)), u64::from(2.5f32.to_bits()));
        assert_eq!(scalar_bits(DataType::F64, le(0.1f64.to_bits())), 0.1f64.to_bits());
        assert_eq!(scalar_bits(DataType::F32, le(u64::from(0.5f32.to_bits()))), host_shim::comm::scalar_arg(DataType::F32, 0.5));
        assert_eq!(scalar_bits(DataType::I32, le(0xffff_fff9)), host_shim::comm::scalar_arg(DataType::I32, -7.0));
    }

    #[test]
    fn every_error_kind_has_nccls_result() {
        assert_eq!(result_of(ErrorKind::InvalidArgument), INVALID_ARGUMENT);
        assert_eq!(result_of(ErrorKind::Unsupported), INVALID_USAGE);
        assert_eq!(result_of(ErrorKind::PeerFailure), REMOTE_ERROR);
        assert_eq!(result_of(ErrorKind::Cuda), UNHANDLED_CUDA_ERROR);
        assert_eq!(result_of(ErrorKind::Internal), INTERNAL_ERROR);
        assert_eq!(RESULT_TEXTS.len(), NUM_RESULTS as usize);
        assert_eq!(RESULT_TEXTS[IN_PROGRESS as usize], c"NCCL operation in progress");
    }
}
