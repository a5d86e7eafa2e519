//! A collective work item made again as the communicator's typed call
//! (`Comm::all_reduce` and its siblings) on cudarc slices: what a Rust user's call
//! costs, cudarc's tracking of the slices' reads and writes included. The GPU group's
//! typed path ([`super::group::SubmitPath::Typed`]).

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaViewMut};
use device_rt::algo::CollFunction;
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::work::WorkItem;
use host_shim::comm::{Comm, Element, ReduceOp};
use host_shim::{Error, Result};

/// One buffer of a rank as a cudarc slice over its bytes of the group's arena, made once
/// (its read and write events with it), as a user's buffer is. Dropping it leaks the
/// slice: the arena owns the memory.
pub struct TypedBuffer {
    addr: u64,
    bytes: usize,
    slice: Option<CudaSlice<u8>>,
}

impl TypedBuffer {
    /// The slice over `bytes` at `addr` on `stream`'s device.
    ///
    /// # Safety
    /// `addr .. addr + bytes` is device memory of `stream`'s device that outlives the
    /// buffer and every call made on it.
    pub unsafe fn new(stream: &Arc<CudaStream>, addr: u64, bytes: usize) -> Self {
        // SAFETY: this function's contract; the slice never frees the memory (`Drop`).
        let slice = unsafe { stream.upgrade_device_ptr::<u8>(addr, bytes) };
        Self { addr, bytes, slice: Some(slice) }
    }

    /// Its first address.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Runs `f` on bytes `offset .. offset + len` of it, as `len / size_of::<T>()`
    /// elements of `T`.
    fn with_view<T, R>(&mut self, offset: usize, len: usize, f: impl FnOnce(&mut CudaViewMut<'_, T>) -> Result<R>) -> Result<R> {
        let slice = self.slice.as_mut().ok_or(Error::InvalidState("a typed buffer without its slice"))?;
        let mut bytes = slice.slice_mut(offset..offset + len);
        // SAFETY: the bytes lie in the buffer; every element type of the collectives is
        // plain data, valid for any bits.
        let mut elements = unsafe { bytes.transmute_mut::<T>(len / size_of::<T>()) }.ok_or(Error::InvalidState("a typed view larger than its bytes"))?;
        f(&mut elements)
    }
}

impl Drop for TypedBuffer {
    fn drop(&mut self) {
        if let Some(slice) = self.slice.take() {
            slice.leak();
        }
    }
}

/// Runs `item` (a collective other than send/recv) on `comm` as its typed call, on the
/// buffers of `buffers` that hold its input and output (in place: one buffer; out of
/// place: two). Refused where no typed call makes the item: send/recv, an operator the
/// typed calls name differently (PreMulSum; the average of floating-point types, which
/// the typed calls take as NCCL does, pre-multiplied), buffers not in `buffers`.
pub fn call(comm: &Comm, buffers: &mut [TypedBuffer], item: &WorkItem) -> Result<()> {
    let dtype = DataType::from_u8(item.dtype).ok_or_else(|| refused(format!("element type {}", item.dtype)))?;
    match dtype {
        DataType::I8 => call_as::<i8>(comm, buffers, item),
        DataType::U8 => call_as::<u8>(comm, buffers, item),
        DataType::I32 => call_as::<i32>(comm, buffers, item),
        DataType::U32 => call_as::<u32>(comm, buffers, item),
        DataType::I64 => call_as::<i64>(comm, buffers, item),
        DataType::U64 => call_as::<u64>(comm, buffers, item),
        DataType::F16 => call_as::<half::f16>(comm, buffers, item),
        DataType::F32 => call_as::<f32>(comm, buffers, item),
        DataType::F64 => call_as::<f64>(comm, buffers, item),
        DataType::Bf16 => call_as::<half::bf16>(comm, buffers, item),
    }
}

/// An [`Error::InvalidArgument`] saying what the typed path cannot make.
fn refused(what: String) -> Error {
    Error::InvalidArgument(format!("the typed path has no call for this item: {what}"))
}

/// The typed operator that gives `item`'s device operator on `dtype` and `nranks` ranks.
fn operator(item: &WorkItem, dtype: DataType, nranks: u32) -> Result<ReduceOp> {
    let kind = RedOpKind::from_u8(item.op);
    let op = match kind {
        Some(RedOpKind::Sum) => ReduceOp::Sum,
        Some(RedOpKind::Prod) => ReduceOp::Prod,
        Some(RedOpKind::Max) => ReduceOp::Max,
        Some(RedOpKind::Min) => ReduceOp::Min,
        Some(RedOpKind::SumPostDiv) => ReduceOp::Avg,
        other => return Err(refused(format!("operator {other:?}"))),
    };
    if kind.map(|k| (k, item.op_arg)) != Some(op.device(dtype, nranks)) {
        return Err(refused(format!("{op:?} on {} is another device operator than the item's", dtype.name())));
    }
    Ok(op)
}

/// [`call`] with the element type `T`.
fn call_as<T: Element>(comm: &Comm, buffers: &mut [TypedBuffer], item: &WorkItem) -> Result<()> {
    let function = CollFunction::from_u32(item.function).ok_or_else(|| refused(format!("function {}", item.function)))?;
    let size = size_of::<T>() as u64;
    let (n, nranks, rank) = (item.count, comm.world_size() as u64, comm.rank() as u64);
    let (src, dst) = (item.src, item.dst);
    let root = usize::try_from(item.arg).map_err(|_| refused(format!("root {}", item.arg)))?;
    let op = || operator(item, T::DTYPE, nranks as u32);
    // In place: the one buffer, from its first element, as NCCL lays it out.
    match function {
        CollFunction::AllReduce if src == dst => in_place::<T>(buffers, dst, n * size, |b| comm.all_reduce_in_place(b, op()?)),
        CollFunction::AllGather if src == dst + rank * n * size => in_place::<T>(buffers, dst, nranks * n * size, |b| comm.all_gather_in_place(b)),
        CollFunction::ReduceScatter if dst == src + rank * n * size => in_place::<T>(buffers, src, nranks * n * size, |b| comm.reduce_scatter_in_place(b, op()?)),
        CollFunction::Broadcast if src == dst => in_place::<T>(buffers, dst, n * size, |b| comm.broadcast(None::<&CudaViewMut<'_, T>>, b, root)),
        CollFunction::Reduce if src == dst => in_place::<T>(buffers, dst, n * size, |b| comm.reduce_in_place(b, op()?, root)),
        CollFunction::SendRecv => Err(refused("send/recv".into())),
        _ => {
            let (input, output) = match function {
                CollFunction::AllGather => (n, nranks * n),
                CollFunction::ReduceScatter => (nranks * n, n),
                _ => (n, n),
            };
            out_of_place::<T>(buffers, (src, input * size), (dst, output * size), |send, recv| match function {
                CollFunction::AllReduce => comm.all_reduce(send, recv, op()?),
                CollFunction::AllGather => comm.all_gather(send, recv),
                CollFunction::ReduceScatter => comm.reduce_scatter(send, recv, op()?),
                CollFunction::Broadcast => comm.broadcast(Some(send), recv, root),
                _ => comm.reduce(send, recv, op()?, root),
            })
        }
    }
}

/// Where `[addr, addr + bytes)` lies: the index of its buffer in `buffers` and its offset
/// there.
fn locate(buffers: &[TypedBuffer], addr: u64, bytes: u64) -> Result<(usize, usize)> {
    buffers
        .iter()
        .position(|b| addr >= b.addr && addr + bytes <= b.addr + b.bytes as u64)
        .map(|i| (i, (addr - buffers[i].addr) as usize))
        .ok_or_else(|| refused(format!("{bytes} bytes at {addr:#x} lie in no buffer of the rank")))
}

/// Runs `f` on the `bytes` bytes at `addr`, as elements of `T`.
fn in_place<T>(buffers: &mut [TypedBuffer], addr: u64, bytes: u64, f: impl FnOnce(&mut CudaViewMut<'_, T>) -> Result<()>) -> Result<()> {
    let (i, offset) = locate(buffers, addr, bytes)?;
    buffers[i].with_view(offset, bytes as usize, f)
}

/// Runs `f` on an out-of-place call's input and output (in two different buffers), as
/// elements of `T`.
fn out_of_place<T>(
    buffers: &mut [TypedBuffer],
    (src, src_bytes): (u64, u64),
    (dst, dst_bytes): (u64, u64),
    f: impl FnOnce(&CudaViewMut<'_, T>, &mut CudaViewMut<'_, T>) -> Result<()>,
) -> Result<()> {
    let ((i, src_offset), (j, dst_offset)) = (locate(buffers, src, src_bytes)?, locate(buffers, dst, dst_bytes)?);
    let [input, output] = buffers.get_disjoint_mut([i, j]).map_err(|_| refused("an out-of-place call within one buffer".into()))?;
    input.with_view(src_offset, src_bytes as usize, |send| output.with_view(dst_offset, dst_bytes as usize, |recv| f(send, recv)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(dtype: DataType, op: RedOpKind, op_arg: u64) -> WorkItem {
        WorkItem::collective(CollFunction::AllReduce, dtype, op, op_arg, 0, 0, 1, 0)
    }

    #[test]
    fn operators_are_the_typed_calls_that_give_the_items_device_operator() {
        for (kind, op) in [(RedOpKind::Sum, ReduceOp::Sum), (RedOpKind::Prod, ReduceOp::Prod), (RedOpKind::Max, ReduceOp::Max), (RedOpKind::Min, ReduceOp::Min)] {
            assert_eq!(operator(&item(DataType::F32, kind, 0), DataType::F32, 2).unwrap(), op);
        }
        // The integer average is the sum divided by the ranks, in both.
        assert_eq!(operator(&item(DataType::I32, RedOpKind::SumPostDiv, 4), DataType::I32, 4).unwrap(), ReduceOp::Avg);
        // On floats the typed average is NCCL's (pre-multiplied), not the item's division.
        let avg = operator(&item(DataType::F32, RedOpKind::SumPostDiv, 2), DataType::F32, 2).unwrap_err();
        assert!(avg.to_string().contains("another device operator"), "{avg}");
        assert!(operator(&item(DataType::F32, RedOpKind::PreMulSum, 0), DataType::F32, 2).is_err());
    }

    #[test]
    fn extents_are_found_in_the_buffer_that_holds_them_whole() {
        let buffers = [TypedBuffer { addr: 0x1000, bytes: 256, slice: None }, TypedBuffer { addr: 0x2000, bytes: 512, slice: None }];
        assert_eq!(locate(&buffers, 0x1000, 256).unwrap(), (0, 0));
        assert_eq!(locate(&buffers, 0x2100, 256).unwrap(), (1, 0x100));
        for (addr, bytes) in [(0x1000, 257), (0x0fff, 8), (0x2100, 257), (0x3000, 1)] {
            assert!(locate(&buffers, addr, bytes).unwrap_err().to_string().contains("lie in no buffer"), "{addr:#x} + {bytes}");
        }
    }
}
