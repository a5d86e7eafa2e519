//! `WorkItem`: one unit of work as the host hands it to a rank's work loop, and the
//! validation both sides apply to it (the host before enqueueing, the device before
//! running it).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::algo::{CollFunction, NO_PEER};
use crate::dtype::DataType;
use crate::redop::RedOpKind;

/// What a work item asks the loop to do.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkKind {
    /// Nothing: completes at once (latency benchmarks, fences in the item order).
    NoOp = 0,
    /// Complete every earlier item, then leave the loop.
    Shutdown = 1,
    /// `dst = src` (no `src2`) or `dst = src ⊕ src2` (Sum), `count` elements of `dtype`,
    /// split over the channels.
    ReduceCopy = 2,
    /// Every channel of the rank waits for every other.
    Barrier = 3,
    /// A device function of [`DeviceFunction`], on the word at `arg`, with `count`.
    Call = 4,
    /// A collective or point-to-point operation of [`CollFunction`] with the rank's
    /// communicator.
    Collective = 5,
}

numbering!(WorkKind, u8, from_u8, [NoOp, Shutdown, ReduceCopy, Barrier, Call, Collective]);

/// Device functions a [`WorkKind::Call`] item can run.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceFunction {
    /// Channel 0 writes `%globaltimer` (ns) to the `u64` at `arg`.
    Timestamp = 0,
    /// Channel 0 adds 1 to the `u64` at `arg` (atomic, system scope).
    Increment = 1,
    /// Every channel waits until the `u64` at `arg` is at least `count` — a peer's flag,
    /// polled with acquire loads at system scope; ends with an error on abort or when
    /// the loop's spin budget runs out.
    WaitAtLeast = 2,
    /// Channel 0's CTA runs the symmetric heap's `barrier_all` as one block
    /// ([`Shmem::barrier_all`](crate::shmem::Shmem::barrier_all) with
    /// [`Block`](crate::shmem::Block)) for the PE whose `ShmemHandle` is at `arg`; the other
    /// channels do nothing. Ordering: the barrier's (a quiet before this PE arrives, then
    /// acquire loads of every PE's arrival); the loop's completion of the item comes after.
    /// Its waits read the heap's abort flag and spin budget.
    ShmemBarrierAll = 3,
    /// Channel 0's CTA runs the symmetric heap's `sum_reduce` as one block for the PE
    /// whose `ShmemHandle` is at `arg`: every PE's `dst[i]` becomes the sum, in PE order,
    /// of every PE's `src[i]`, `i < count`, elements of `dtype`; `src` and `dst` are
    /// symmetric addresses of disjoint ranges. Ordering and waits: as `ShmemBarrierAll`
    /// (two barriers, the first before any PE reads a source).
    ShmemSumReduce = 4,
    /// Every thread of channel 0's CTA calls the application's own device function,
    /// `ferroccl_app_work(function, arg)` with the item's `count` as `function` (see
    /// [`WorkItem::application`] and `crate::cabi::ferroccl_app_work`); the other channels
    /// do nothing. The loop completes the item after the CTA's barrier, so the next item
    /// (on any channel, and stream work after it) sees what the function wrote. A status
    /// other than success stops the loop: `Aborted`, a timeout (`WaitSite::Application`),
    /// or `BadItem::ApplicationRefused`.
    Application = 5,
}

numbering!(DeviceFunction, u32, from_u32, [Timestamp, Increment, WaitAtLeast, ShmemBarrierAll, ShmemSumReduce, Application]);

impl DeviceFunction {
    /// True for the symmetric heap's functions, whose `arg` is a PE's `ShmemHandle`.
    pub const fn is_shmem(self) -> bool {
        matches!(self, Self::ShmemBarrierAll | Self::ShmemSumReduce)
    }
}

/// One unit of work: 64 bytes, 16-byte aligned (the loop copies it in 16-byte pieces),
/// written by the host into the rank's queue (or a stream mailbox) and copied into shared
/// memory by the loop. Small on purpose: the loop reads it across PCIe.
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct WorkItem {
    /// Position in the rank's queue, from 1; the device checks it, so a slot the host
    /// has not finished writing is never run.
    pub seq: u64,
    /// A [`WorkKind`] number.
    pub kind: u8,
    /// A [`DataType`] number (ReduceCopy, Collective).
    pub dtype: u8,
    /// A [`RedOpKind`] number (ReduceCopy with `src2`; Collective).
    pub op: u8,
    /// Zero, but for a Collective's [`ITEM_OUTPUT_PEER_MAPPED`].
    pub flags: u8,
    /// A [`DeviceFunction`] number (Call); a [`CollFunction`] number (Collective).
    pub function: u32,
    /// Elements (ReduceCopy, Collective); the value operand (Call).
    pub count: u64,
    /// The operator's argument (ReduceCopy, Collective); SendRecv: elements received.
    pub op_arg: u64,
    /// Source (ReduceCopy); input (Collective).
    pub src: u64,
    /// Second source, 0 for a copy (ReduceCopy).
    pub src2: u64,
    /// Destination (ReduceCopy); output (Collective).
    pub dst: u64,
    /// The address a device function works on (Call); the root (Broadcast, Reduce);
    /// the peers (SendRecv).
    pub arg: u64,
}

/// `WorkItem::flags` of a Collective: the output buffer is mapped for every peer of the
/// communicator and peers may write into it directly: ring senders (NCCL's direct
/// operations, where the communicator's connections allow them) and pushing two-shot
/// ranks (`algo::shot`'s direct outputs). The host sets it per call from what the
/// driver says of the buffer, where the communicator allows direct writes; without it,
/// peers send into this rank's FIFO or staging only.
pub const ITEM_OUTPUT_PEER_MAPPED: u8 = 1;

static_assertions::const_assert_eq!(core::mem::size_of::<WorkItem>(), 64);
static_assertions::const_assert_eq!(core::mem::align_of::<WorkItem>(), 16);
static_assertions::const_assert_eq!(core::mem::offset_of!(WorkItem, kind), 8);
static_assertions::const_assert_eq!(core::mem::offset_of!(WorkItem, function), 12);
static_assertions::const_assert_eq!(core::mem::offset_of!(WorkItem, count), 16);
static_assertions::const_assert_eq!(core::mem::offset_of!(WorkItem, src), 32);
static_assertions::const_assert_eq!(core::mem::offset_of!(WorkItem, arg), 56);

/// Why a work item was refused. The number is what the device records.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BadItem {
    /// `kind` names no [`WorkKind`].
    UnknownKind = 1,
    /// `dtype` names no [`DataType`].
    UnknownDataType = 2,
    /// `op` names no [`RedOpKind`].
    UnknownOp = 3,
    /// The kind does not support this type and operator (ReduceCopy reduces with Sum).
    UnsupportedTypeOp = 4,
    /// A pointer the kind needs is null.
    NullPointer = 5,
    /// A pointer is not aligned to the element size (or 8 bytes for Call arguments).
    Misaligned = 6,
    /// `count` elements of `dtype` overflow the address space, or a buffer wraps around.
    CountOverflow = 7,
    /// `function` names no [`DeviceFunction`].
    UnknownFunction = 8,
    /// `flags` has a bit the item's kind does not define.
    ReservedNotZero = 9,
    /// `seq` is not the position the loop expected (a torn or stale slot).
    WrongSequence = 10,
    /// `function` names no [`CollFunction`].
    UnknownCollective = 11,
    /// A collective reached a loop that has no communicator.
    NoCommunicator = 12,
    /// A root or peer is not a rank of the communicator (or is the rank itself).
    BadRank = 13,
    /// SumPostDiv with a divisor of 0.
    ZeroDivisor = 14,
    /// The communicator forces an algorithm that cannot run this collective (too large
    /// for its staging buffers, or not an algorithm of this function).
    UnfitAlgorithm = 15,
    /// A symmetric-heap reduction's source and destination overlap.
    Overlapping = 16,
    /// A symmetric-heap function's buffer is not in the PE's heap.
    NotSymmetric = 17,
    /// A symmetric-heap function reached a loop that does not run them (the collectives'
    /// loop: the heap's loops are `shmem_work_loop`).
    NotHeapLoop = 18,
    /// The ranks' calls of a one-shot/two-shot collective differ: in count, function,
    /// type, operator or root, or one rank's input is in the symmetric heap (read in place)
    /// and another's is not, or not at the same offset. Found by every rank before any
    /// reads another's data.
    RanksDisagree = 19,
    /// An application's device function (`DeviceFunction::Application`) refused its
    /// function number or argument (it returned `Status::InvalidArgument`; the module's
    /// own definition, where the application linked none, refuses every one).
    ApplicationRefused = 20,
}

// The one-shot/two-shot collectives report disagreeing ranks with this detail (`algo` sits
// below this layer and cannot name the enum).
const _: () = assert!(BadItem::RanksDisagree as u32 == crate::algo::RANKS_DISAGREE);

numbering!(
    BadItem,
    u32,
    from_u32,
    [
        UnknownKind,
        UnknownDataType,
        UnknownOp,
        UnsupportedTypeOp,
        NullPointer,
        Misaligned,
        CountOverflow,
        UnknownFunction,
        ReservedNotZero,
        WrongSequence,
        UnknownCollective,
        NoCommunicator,
        BadRank,
        ZeroDivisor,
        UnfitAlgorithm,
        Overlapping,
        NotSymmetric,
        NotHeapLoop,
        RanksDisagree,
        ApplicationRefused,
    ]
);

impl BadItem {
    /// What is wrong, in words.
    pub const fn describe(self) -> &'static str {
        match self {
            Self::UnknownKind => "unknown work kind",
            Self::UnknownDataType => "unknown data type",
            Self::UnknownOp => "unknown reduction operator",
            Self::UnsupportedTypeOp => "unsupported data type / operator pair for this kind",
            Self::NullPointer => "null pointer",
            Self::Misaligned => "misaligned pointer",
            Self::CountOverflow => "element count overflows the buffer's address range",
            Self::UnknownFunction => "unknown device function",
            Self::ReservedNotZero => "flags field has a bit this kind of item does not define",
            Self::WrongSequence => "sequence number out of order",
            Self::UnknownCollective => "unknown collective function",
            Self::NoCommunicator => "collective on a work loop without a communicator",
            Self::BadRank => "root or peer is not another rank of the communicator",
            Self::ZeroDivisor => "average (SumPostDiv) with a divisor of 0",
            Self::UnfitAlgorithm => "the communicator's forced algorithm cannot run this collective",
            Self::Overlapping => "the symmetric-heap reduction's source and destination overlap",
            Self::NotSymmetric => "a symmetric-heap buffer is not in the PE's heap",
            Self::NotHeapLoop => "a symmetric-heap function on a loop without the heap's functions",
            Self::RanksDisagree => "the ranks' calls of this collective differ (count, function, type, operator, root, or the symmetric heap's input offset)",
            Self::ApplicationRefused => "the application's device function refused its function number or argument (or the module holds no application function)",
        }
    }
}

/// True when `addr` is a multiple of `size`, a power of two (every element size is): a
/// mask, where `%` would be a 64-bit division, which the GPU runs as a long subroutine on
/// every call's path.
const fn aligned_to(addr: u64, size: u64) -> bool {
    addr & (size - 1) == 0
}

impl WorkItem {
    /// The item's eight 64-bit words, as the mailbox holds them (and the call kernel's
    /// parameters carry them).
    pub fn to_words(self) -> [u64; 8] {
        zerocopy::transmute!(self)
    }

    /// The item whose words [`WorkItem::to_words`] gave.
    pub fn from_words(words: [u64; 8]) -> Self {
        zerocopy::transmute!(words)
    }

    /// A no-op.
    pub fn noop() -> Self {
        Self { kind: WorkKind::NoOp as u8, ..Self::default() }
    }

    /// The loop's last item.
    pub fn shutdown() -> Self {
        Self { kind: WorkKind::Shutdown as u8, ..Self::default() }
    }

    /// `dst = src`, `count` elements of `dtype`.
    pub fn copy(dtype: DataType, src: u64, dst: u64, count: u64) -> Self {
        Self { kind: WorkKind::ReduceCopy as u8, dtype: dtype as u8, src, dst, count, ..Self::default() }
    }

    /// `dst = src + src2`, `count` elements of `dtype`.
    pub fn sum(dtype: DataType, src: u64, src2: u64, dst: u64, count: u64) -> Self {
        Self { src2, op: RedOpKind::Sum as u8, ..Self::copy(dtype, src, dst, count) }
    }

    /// A barrier across the rank's channels.
    pub fn barrier() -> Self {
        Self { kind: WorkKind::Barrier as u8, ..Self::default() }
    }

    /// A call of `function` on the word at `arg`, with the value operand `count`.
    pub fn call(function: DeviceFunction, arg: u64, count: u64) -> Self {
        Self { kind: WorkKind::Call as u8, function: function as u32, arg, count, ..Self::default() }
    }

    /// The application's device function number `function` on `arg` (an 8-byte aligned,
    /// non-null value the application gives meaning to: usually the address of its
    /// arguments in device memory), run by channel 0's CTA (see
    /// [`DeviceFunction::Application`]).
    pub fn application(function: u32, arg: u64) -> Self {
        Self::call(DeviceFunction::Application, arg, u64::from(function))
    }

    /// The symmetric heap's `barrier_all` for the PE whose `ShmemHandle` is at `handle`
    /// (see [`DeviceFunction::ShmemBarrierAll`]).
    pub fn shmem_barrier_all(handle: u64) -> Self {
        Self::call(DeviceFunction::ShmemBarrierAll, handle, 0)
    }

    /// The symmetric heap's `sum_reduce` of `count` elements of `dtype` from the symmetric
    /// address `src` into `dst`, for the PE whose `ShmemHandle` is at `handle` (see
    /// [`DeviceFunction::ShmemSumReduce`]).
    pub fn shmem_sum_reduce(dtype: DataType, handle: u64, src: u64, dst: u64, count: u64) -> Self {
        Self { dtype: dtype as u8, src, dst, ..Self::call(DeviceFunction::ShmemSumReduce, handle, count) }
    }

    /// A collective: `function` over `count` elements of `dtype` with `op` (argument
    /// `op_arg`) from `src` to `dst`; `arg` is the root or the SendRecv peers.
    #[allow(clippy::too_many_arguments)]
    pub fn collective(function: CollFunction, dtype: DataType, op: RedOpKind, op_arg: u64, src: u64, dst: u64, count: u64, arg: u64) -> Self {
        Self {
            kind: WorkKind::Collective as u8,
            function: function as u32,
            dtype: dtype as u8,
            op: op as u8,
            op_arg,
            src,
            dst,
            count,
            arg,
            ..Self::default()
        }
    }

    /// Checks a collective item against its communicator (`rank` of `nranks`): roots and
    /// peers are ranks (peers other than `rank`), and the buffers' extents fit the
    /// address space. Both sides apply it, after [`WorkItem::validate`]; items of other
    /// kinds pass (their `function` is not a collective's).
    pub fn validate_in_comm(&self, rank: u32, nranks: u32) -> Result<(), BadItem> {
        if self.kind != WorkKind::Collective as u8 {
            return Ok(());
        }
        let Some(function) = CollFunction::from_u32(self.function) else { return Err(BadItem::UnknownCollective) };
        let is_rank = |r: u64| r < u64::from(nranks);
        match function {
            CollFunction::Broadcast | CollFunction::Reduce if !is_rank(self.arg) => return Err(BadItem::BadRank),
            CollFunction::SendRecv => {
                for peer in [self.arg & 0xFFFF_FFFF, self.arg >> 32] {
                    if peer != u64::from(NO_PEER) && (!is_rank(peer) || peer == u64::from(rank)) {
                        return Err(BadItem::BadRank);
                    }
                }
            }
            _ => {}
        }
        let size = DataType::from_u8(self.dtype).ok_or(BadItem::UnknownDataType)?.size() as u64;
        let recv_count = if function == CollFunction::SendRecv { self.op_arg } else { 0 };
        let (input, output) = function.extents(self.count, recv_count, u64::from(nranks)).ok_or(BadItem::CountOverflow)?;
        for (p, n) in [(self.src, input), (self.dst, output)] {
            let bytes = n.checked_mul(size).ok_or(BadItem::CountOverflow)?;
            p.checked_add(bytes).ok_or(BadItem::CountOverflow)?;
        }
        Ok(())
    }

    /// A ShmemSumReduce item's buffers: `count` elements of `dtype` at `src` and `dst`,
    /// aligned, without wrapping around, disjoint (whether they lie in the heap only the
    /// device can tell: it refuses them with [`BadItem::NotSymmetric`]). Not inlined: the
    /// loop's item code, which inlines `validate`, keeps its registers.
    #[inline(never)]
    fn validate_sum_reduce(&self) -> Result<(), BadItem> {
        let size = DataType::from_u8(self.dtype).ok_or(BadItem::UnknownDataType)?.size() as u64;
        if self.count == 0 {
            return Ok(());
        }
        let bytes = self.count.checked_mul(size).ok_or(BadItem::CountOverflow)?;
        for p in [self.src, self.dst] {
            if p == 0 {
                return Err(BadItem::NullPointer);
            }
            if !aligned_to(p, size) {
                return Err(BadItem::Misaligned);
            }
            p.checked_add(bytes).ok_or(BadItem::CountOverflow)?;
        }
        if self.src < self.dst + bytes && self.dst < self.src + bytes {
            return Err(BadItem::Overlapping);
        }
        Ok(())
    }

    /// Checks every field the item's kind uses (the sequence number is the queue's
    /// business): what the host refuses before enqueueing, and what the device refuses
    /// before running.
    pub fn validate(&self) -> Result<WorkKind, BadItem> {
        let kind = WorkKind::from_u8(self.kind).ok_or(BadItem::UnknownKind)?;
        let defined = if kind == WorkKind::Collective { ITEM_OUTPUT_PEER_MAPPED } else { 0 };
        if self.flags & !defined != 0 {
            return Err(BadItem::ReservedNotZero);
        }
        match kind {
            WorkKind::NoOp | WorkKind::Shutdown | WorkKind::Barrier => {}
            WorkKind::ReduceCopy => {
                let dtype = DataType::from_u8(self.dtype).ok_or(BadItem::UnknownDataType)?;
                let op = RedOpKind::from_u8(self.op).ok_or(BadItem::UnknownOp)?;
                if self.src2 != 0 && op != RedOpKind::Sum {
                    return Err(BadItem::UnsupportedTypeOp);
                }
                let size = dtype.size() as u64;
                let bytes = self.count.checked_mul(size).ok_or(BadItem::CountOverflow)?;
                for p in [self.src, self.dst].into_iter().chain((self.src2 != 0).then_some(self.src2)) {
                    if p == 0 {
                        return Err(BadItem::NullPointer);
                    }
                    if !aligned_to(p, size) {
                        return Err(BadItem::Misaligned);
                    }
                    p.checked_add(bytes).ok_or(BadItem::CountOverflow)?;
                }
            }
            WorkKind::Collective => {
                let function = CollFunction::from_u32(self.function).ok_or(BadItem::UnknownCollective)?;
                let dtype = DataType::from_u8(self.dtype).ok_or(BadItem::UnknownDataType)?;
                let op = RedOpKind::from_u8(self.op).ok_or(BadItem::UnknownOp)?;
                if function.reduces() && op == RedOpKind::SumPostDiv && self.op_arg == 0 {
                    return Err(BadItem::ZeroDivisor);
                }
                let size = dtype.size() as u64;
                let (sends, receives) = match function {
                    CollFunction::SendRecv => (self.arg & 0xFFFF_FFFF != u64::from(NO_PEER) && self.count > 0, self.arg >> 32 != u64::from(NO_PEER) && self.op_arg > 0),
                    _ => (self.count > 0, self.count > 0),
                };
                for (p, used) in [(self.src, sends), (self.dst, receives)] {
                    if used && p == 0 {
                        return Err(BadItem::NullPointer);
                    }
                    if !aligned_to(p, size) {
                        return Err(BadItem::Misaligned);
                    }
                }
            }
            WorkKind::Call => {
                let function = DeviceFunction::from_u32(self.function).ok_or(BadItem::UnknownFunction)?;
                if self.arg == 0 {
                    return Err(BadItem::NullPointer);
                }
                if !self.arg.is_multiple_of(8) {
                    return Err(BadItem::Misaligned);
                }
                if function == DeviceFunction::ShmemSumReduce {
                    self.validate_sum_reduce()?;
                }
            }
        }
        Ok(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_items_pass() {
        assert_eq!(WorkItem::noop().validate(), Ok(WorkKind::NoOp));
        assert_eq!(WorkItem::copy(DataType::F32, 0x1000, 0x2000, 10).validate(), Ok(WorkKind::ReduceCopy));
        assert_eq!(WorkItem::sum(DataType::Bf16, 0x1000, 0x3000, 0x2000, 7).validate(), Ok(WorkKind::ReduceCopy));
        assert_eq!(WorkItem::call(DeviceFunction::Increment, 0x40, 0).validate(), Ok(WorkKind::Call));
        let mapped = WorkItem { flags: ITEM_OUTPUT_PEER_MAPPED, ..WorkItem::collective(CollFunction::AllGather, DataType::F32, RedOpKind::Sum, 0, 0x1000, 0x2000, 4, 0) };
        assert_eq!(mapped.validate(), Ok(WorkKind::Collective), "a collective's output may be marked mapped for its peers");
        // A call's function number is not a collective's: the communicator's check passes
        // it (read as a collective, 3 would be a Broadcast whose root, `arg`, is no rank).
        assert_eq!(WorkItem { function: 3, ..WorkItem::call(DeviceFunction::Timestamp, u64::MAX - 7, 0) }.validate_in_comm(0, 2), Ok(()));
    }

    #[test]
    fn every_malformed_field_is_refused_with_its_reason() {
        let copy = WorkItem::copy(DataType::F32, 0x1000, 0x2000, 10);
        let cases = [
            (WorkItem { kind: 99, ..copy }, BadItem::UnknownKind),
            (WorkItem { dtype: 10, ..copy }, BadItem::UnknownDataType),
            (WorkItem { op: 6, ..copy }, BadItem::UnknownOp),
            (WorkItem { op: RedOpKind::Max as u8, src2: 0x3000, ..copy }, BadItem::UnsupportedTypeOp),
            (WorkItem { src: 0, ..copy }, BadItem::NullPointer),
            (WorkItem { dst: 0x2002, ..copy }, BadItem::Misaligned),
            (WorkItem { count: u64::MAX / 2, ..copy }, BadItem::CountOverflow),
            (WorkItem { src: u64::MAX - 7, ..copy }, BadItem::CountOverflow),
            (WorkItem { flags: ITEM_OUTPUT_PEER_MAPPED, ..copy }, BadItem::ReservedNotZero),
            (WorkItem { flags: 2, ..WorkItem::collective(CollFunction::AllGather, DataType::F32, RedOpKind::Sum, 0, 0x1000, 0x2000, 4, 0) }, BadItem::ReservedNotZero),
            (WorkItem { function: 7, ..WorkItem::call(DeviceFunction::Timestamp, 8, 0) }, BadItem::UnknownFunction),
            (WorkItem::call(DeviceFunction::Timestamp, 0, 0), BadItem::NullPointer),
            (WorkItem::call(DeviceFunction::WaitAtLeast, 12, 1), BadItem::Misaligned),
        ];
        for (item, why) in cases {
            assert_eq!(item.validate(), Err(why), "{item:?}");
        }
        for r in BadItem::ALL {
            assert_eq!(BadItem::from_u32(r as u32), Some(r));
        }
    }
}
