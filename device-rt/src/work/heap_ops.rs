//! The symmetric heap's host operations on a stream (NVSHMEM's `barrier_all_on_stream`
//! and `sum_reduce_on_stream`), run by the work loop as [`DeviceFunction`] calls: channel
//! 0's CTA is one `Block` group of the PE, so a stream-ordered host call needs no kernel
//! launch of its own. Out of line, so the loop's own registers do not pay for them.
//!
//! [`DeviceFunction`]: super::item::DeviceFunction

use crate::abi::ShmemHandle;
use crate::dtype::{Bf16, DataType, F16};
use crate::shmem::{Block, Shmem};
use crate::spin::Interrupted;

use super::item::WorkItem;

/// `barrier_all` of the PE whose handle is at `item.arg`. Ordering: as
/// [`Shmem::barrier_all`].
///
/// # Safety
/// Every thread of the CTA calls it; `item` is a validated `ShmemBarrierAll` call whose
/// `arg` is the address of this PE's `ShmemHandle`, valid as [`Shmem::new`] asks (the
/// host's promise); every PE calls it (or the device API's barrier) as its next barrier.
#[inline(never)]
pub(super) unsafe fn barrier_all(item: &WorkItem) -> Result<(), Interrupted> {
    // SAFETY: the caller's contract.
    unsafe { Shmem::new(item.arg as *const ShmemHandle).barrier_all::<Block>() }
}

/// `sum_reduce` of `item.count` elements of `item.dtype` from `item.src` into `item.dst`
/// of the PE whose handle is at `item.arg`. Ordering: as [`Shmem::sum_reduce`].
///
/// # Safety
/// As [`barrier_all`], for a validated `ShmemSumReduce` call whose `src` and `dst` are
/// symmetric addresses of `count` elements in every PE's heap (the host's promise).
#[inline(never)]
pub(super) unsafe fn sum_reduce(item: &WorkItem) -> Result<(), Interrupted> {
    // SAFETY: the caller's contract.
    let sh = unsafe { Shmem::new(item.arg as *const ShmemHandle) };
    let (dst, src, n) = (item.dst, item.src, item.count as usize);
    let Some(dtype) = DataType::from_u8(item.dtype) else { crate::arch::trap() };
    // SAFETY: the caller's contract: `src` and `dst` hold `n` aligned elements of `dtype`.
    unsafe {
        match dtype {
            DataType::I8 => sh.sum_reduce::<Block, i8>(dst as *mut i8, src as *const i8, n),
            DataType::U8 => sh.sum_reduce::<Block, u8>(dst as *mut u8, src as *const u8, n),
            DataType::I32 => sh.sum_reduce::<Block, i32>(dst as *mut i32, src as *const i32, n),
            DataType::U32 => sh.sum_reduce::<Block, u32>(dst as *mut u32, src as *const u32, n),
            DataType::I64 => sh.sum_reduce::<Block, i64>(dst as *mut i64, src as *const i64, n),
            DataType::U64 => sh.sum_reduce::<Block, u64>(dst as *mut u64, src as *const u64, n),
            DataType::F16 => sh.sum_reduce::<Block, F16>(dst as *mut F16, src as *const F16, n),
            DataType::F32 => sh.sum_reduce::<Block, f32>(dst as *mut f32, src as *const f32, n),
            DataType::F64 => sh.sum_reduce::<Block, f64>(dst as *mut f64, src as *const f64, n),
            DataType::Bf16 => sh.sum_reduce::<Block, Bf16>(dst as *mut Bf16, src as *const Bf16, n),
        }
    }
}
