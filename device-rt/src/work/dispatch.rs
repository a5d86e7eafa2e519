//! Dispatch: runs a validated item with every thread of the CTA, through a `match` on its
//! kind into monomorphized functions: reduce-copies, the barrier across the loop's
//! channels, device functions (the symmetric heap's among them) and collectives (checked
//! against the communicator, planned and run by `algo`). What stops the loop comes back as
//! a [`Stop`].

use super::channel::Channel;
use super::item::{BadItem, DeviceFunction, ITEM_OUTPUT_PEER_MAPPED, WorkItem, WorkKind};
use super::queue::LoopShared;
use crate::abi::{LoopError, ShmemHandle, Status, WaitSite};
use crate::algo::{Coll, CollCtx, CollFunction, Plan, plan_collective, run_collective};
use crate::arch::{self, AtomicWord};
use crate::cabi;
use crate::copy::reduce_copy_grid;
use crate::dtype::{Bf16, DataType, F16};
use crate::redop::{RedOpKind, Sum};
use crate::shmem::{Block, Shmem};
use crate::spin::{Interrupted, spin_until};

/// Why an item stopped the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// This channel hit an error: record it (the first recorded error wins).
    Error(LoopError, u32),
    /// Another channel already recorded an error: leave quietly.
    PeerFailed,
}

/// `wait_result` when a wait ended because another channel failed.
const WAIT_PEER_FAILED: u64 = u64::MAX;

/// Runs a validated item with every thread of the CTA.
///
/// # Safety
/// `a` is this CTA's [`Channel`] and `shared` is this CTA's `LoopShared`; `kind` is
/// `item`'s kind as `validate` returned it; every thread of the CTA calls this with the
/// same arguments.
pub(super) unsafe fn execute<const SHMEM: bool>(a: &Channel, kind: WorkKind, item: &WorkItem, shared: *mut LoopShared) -> Result<(), Stop> {
    match kind {
        WorkKind::NoOp | WorkKind::Shutdown => Ok(()),
        WorkKind::ReduceCopy => {
            // SAFETY: every thread of the CTA runs the validated item, whose buffers hold
            // `count` elements as the host promised when it queued it; `(index, count)` is this
            // channel's share of the grid.
            unsafe { run_reduce_copy(item, (a.index, a.count)) };
            Ok(())
        }
        // SAFETY: `a` is this CTA's channel, `shared` its `LoopShared`, and every thread of the
        // CTA calls this.
        WorkKind::Barrier => unsafe { channels_barrier(a, shared) },
        // SAFETY: as above.
        WorkKind::Call => unsafe { call::<SHMEM>(a, item, shared) },
        // A heap loop has no communicator (and leaves out the collectives' code).
        WorkKind::Collective if SHMEM => Err(Stop::Error(LoopError::BadItem, BadItem::NoCommunicator as u32)),
        // SAFETY: as above.
        WorkKind::Collective => unsafe { collective(a, item, shared, a.index) },
    }
}

/// Runs part `part` of a collective item with the rank's communicator on channel
/// `a.index` (its connections and staging), after checking it against the communicator
/// (the host has checked it too) and planning it. The part is the channel itself, but
/// for an item that runs on the call kernel alone: see [`planned_collective`].
///
/// # Safety
/// As [`execute`], for a Collective item; `part` is `a.index`.
#[inline(never)]
pub(super) unsafe fn collective(a: &Channel, item: &WorkItem, shared: *mut LoopShared, part: u32) -> Result<(), Stop> {
    if a.comm.is_null() {
        return Err(Stop::Error(LoopError::BadItem, BadItem::NoCommunicator as u32));
    }
    // SAFETY: `a.comm` is non-null, so it is the rank's `CommDevice` in device memory, valid
    // for the launch (`work_loop`'s contract), and only read by the loop.
    let (rank, nranks) = unsafe { ((*a.comm).rank, (*a.comm).nranks) };
    if let Err(why) = item.validate_in_comm(rank, nranks) {
        return Err(Stop::Error(LoopError::BadItem, why as u32));
    }
    // SAFETY: as above; `shared` is this CTA's `LoopShared` and the item passed both checks
    // (this function's contract and the check above).
    let (c, cx) = unsafe { part_context(a, item, shared, part) };
    let Ok(plan) = plan_collective(&cx, &c.0, c.1) else {
        return Err(Stop::Error(LoopError::BadItem, BadItem::UnfitAlgorithm as u32));
    };
    // SAFETY: every thread of the CTA runs this with the same arguments; `cx` was built by
    // `CollCtx::new` for this rank's communicator and channel, `c` passed `validate` and
    // `validate_in_comm` (the host also checked that its buffers hold what the function
    // addresses), and `plan` is its plan.
    unsafe { run_part(&cx, c, plan) }
}

/// Runs part `part` of an item that runs on the call kernel alone (`call_kernel`), on call
/// channel `a.index = resident + part`, by `plan`: the plan `call_kernel_only_plan` made
/// after checking the item against the communicator, handed over so that a small call is
/// checked and planned once (on a GPU each is a few hundred dependent scalar
/// instructions on the call's path). Apart from the loop's [`collective`], whose registers
/// a capped loop has none to spare for the plan.
///
/// # Safety
/// As [`execute`], for a Collective item valid against the communicator (non-null);
/// `plan` is its plan, a one-shot/two-shot algorithm of which `part` is a part.
#[inline(never)]
pub(super) unsafe fn planned_collective(a: &Channel, item: &WorkItem, shared: *mut LoopShared, part: u32, plan: Plan) -> Result<(), Stop> {
    // SAFETY: this function's contract is `part_context`'s.
    let (c, cx) = unsafe { part_context(a, item, shared, part) };
    // SAFETY: as in `collective`, with the plan `call_kernel_only_plan` made of the checked
    // item.
    unsafe { run_part(&cx, c, plan) }
}

/// A checked collective item as the algorithms take it (the collective, its element type
/// and operator), and where part `part` of it runs on `a`'s channel.
///
/// # Safety
/// `a` is this CTA's [`Channel`] with a non-null communicator, `shared` this CTA's
/// `LoopShared`; `item` passed `validate` and `validate_in_comm`.
#[inline(always)]
unsafe fn part_context(a: &Channel, item: &WorkItem, shared: *mut LoopShared, part: u32) -> ((Coll, DataType, RedOpKind), CollCtx) {
    // `validate` and `validate_in_comm` guarantee known numbers.
    let (Some(function), Some(dtype), Some(kind)) =
        (CollFunction::from_u32(item.function), DataType::from_u8(item.dtype), RedOpKind::from_u8(item.op))
    else {
        arch::trap()
    };
    let c = Coll {
        function,
        count: item.count,
        recv_count: if function == CollFunction::SendRecv { item.op_arg } else { 0 },
        input: item.src,
        output: item.dst,
        output_peer_mapped: item.flags & ITEM_OUTPUT_PEER_MAPPED != 0,
        red_arg: item.op_arg,
        root: item.arg as u32,
        send_peer: item.arg as u32,
        recv_peer: (item.arg >> 32) as u32,
    };
    // SAFETY: `shared` is this CTA's `LoopShared`; only the address of its `MAX_GROUPS`
    // primitives groups' shared memory is taken.
    let prims = unsafe { (&raw mut (*shared).prims).cast() };
    // SAFETY: `a.comm` is the rank's valid `CommDevice`, whose connection arrays cover the
    // loop's `count` channels (the host sized them); `prims` holds `MAX_GROUPS` groups' shared
    // memory, and `header.abort` is the host's abort flag, readable for the launch.
    let cx = CollCtx { channel_index: part, ..unsafe { CollCtx::new(a.comm, (a.index, a.count), prims, &raw const (*a.header).abort, a.spin_budget_ns) } };
    ((c, dtype, kind), cx)
}

/// Runs `c` (a collective, its element type and operator) by `plan` where `cx` says.
///
/// # Safety
/// `run_collective`'s contract.
#[inline(always)]
unsafe fn run_part(cx: &CollCtx, c: (Coll, DataType, RedOpKind), plan: Plan) -> Result<(), Stop> {
    // SAFETY: this function's contract.
    match unsafe { run_collective(cx, &c.0, c.1, c.2, plan) } {
        Ok(()) => Ok(()),
        Err((error, detail)) => Err(Stop::Error(error, detail)),
    }
}

/// `dst = src` or `dst = src + src2` over this channel's share: share `part.0` of
/// `part.1`.
///
/// # Safety
/// Every thread of the CTA calls this with the same arguments; `item` is a validated
/// ReduceCopy item, whose buffers hold `count` elements of its type, aligned to it (the
/// host's promise); `part` is this channel's share of the loop's channels.
#[inline(never)]
unsafe fn run_reduce_copy(item: &WorkItem, part: (u32, u32)) {
    let (src, src2, dst, n) = (item.src, item.src2, item.dst, item.count);
    // `validate` guarantees a known type.
    let Some(dtype) = DataType::from_u8(item.dtype) else { arch::trap() };
    // SAFETY: every thread of the CTA (a multiple of 32: `work_loop`'s contract) calls this
    // with the same arguments; the validated item's buffers hold `n` elements of `dtype`,
    // aligned to it (the host's promise when it queued the item); each arm's type has `dtype`'s
    // size.
    unsafe {
        if src2 == 0 {
            // A copy moves bits: any type of the element's size will do.
            match dtype.size() {
                1 => reduce_copy_grid::<Sum<u8>, 1, 1>([src], [dst], n, part),
                2 => reduce_copy_grid::<Sum<F16>, 1, 1>([src], [dst], n, part),
                4 => reduce_copy_grid::<Sum<u32>, 1, 1>([src], [dst], n, part),
                _ => reduce_copy_grid::<Sum<u64>, 1, 1>([src], [dst], n, part),
            }
            return;
        }
        let (s, d) = ([src, src2], [dst]);
        match dtype {
            DataType::I8 => reduce_copy_grid::<Sum<i8>, 2, 1>(s, d, n, part),
            DataType::U8 => reduce_copy_grid::<Sum<u8>, 2, 1>(s, d, n, part),
            DataType::I32 => reduce_copy_grid::<Sum<i32>, 2, 1>(s, d, n, part),
            DataType::U32 => reduce_copy_grid::<Sum<u32>, 2, 1>(s, d, n, part),
            DataType::I64 => reduce_copy_grid::<Sum<i64>, 2, 1>(s, d, n, part),
            DataType::U64 => reduce_copy_grid::<Sum<u64>, 2, 1>(s, d, n, part),
            DataType::F16 => reduce_copy_grid::<Sum<F16>, 2, 1>(s, d, n, part),
            DataType::F32 => reduce_copy_grid::<Sum<f32>, 2, 1>(s, d, n, part),
            DataType::F64 => reduce_copy_grid::<Sum<f64>, 2, 1>(s, d, n, part),
            DataType::Bf16 => reduce_copy_grid::<Sum<Bf16>, 2, 1>(s, d, n, part),
        }
    }
}

/// Thread 0 waits until `ready()`, bounded by the abort flag and the spin budget; every
/// thread of the CTA gets the outcome.
///
/// # Safety
/// `a` is this CTA's [`Channel`] and `shared` is this CTA's `LoopShared`; every thread of
/// the CTA calls this (thread 0 alone calls `ready`).
unsafe fn cta_wait(a: &Channel, shared: *mut LoopShared, site: WaitSite, mut ready: impl FnMut() -> bool) -> Result<(), Stop> {
    if arch::thread_idx() == 0 {
        // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); only the address of
        // `error_claimed` is taken.
        let claimed = unsafe { &raw const (*a.state).error_claimed };
        let mut peer_failed = false;
        // SAFETY: `header.abort` is the host's abort flag, readable for the launch; `claimed`
        // is an aligned `u64` of the loop state changed only by `arch` atomics.
        let waited = unsafe {
            spin_until(&raw const (*a.header).abort, a.spin_budget_ns, || {
                peer_failed = arch::ld_volatile_global(claimed) != 0;
                peer_failed || ready()
            })
        };
        let outcome = match waited {
            Ok(()) if peer_failed => WAIT_PEER_FAILED,
            Ok(()) => 0,
            Err(Interrupted::Aborted) => LoopError::Aborted.status(0),
            Err(Interrupted::TimedOut) => LoopError::Timeout.status(site as u32),
        };
        // SAFETY: `shared` is this CTA's `LoopShared`; thread 0 alone writes `wait_result`,
        // before the CTA barrier below.
        unsafe { (&raw mut (*shared).wait_result).write_volatile(outcome) };
    }
    arch::barrier_sync_all();
    // SAFETY: the barrier above orders thread 0's write before every thread's read, and nothing
    // writes `wait_result` again before the next item's barrier.
    match unsafe { (&raw const (*shared).wait_result).read_volatile() } {
        0 => Ok(()),
        WAIT_PEER_FAILED => Err(Stop::PeerFailed),
        s if s as u32 == LoopError::Aborted as u32 => Err(Stop::Error(LoopError::Aborted, 0)),
        s => Err(Stop::Error(LoopError::Timeout, (s >> 32) as u32)),
    }
}

/// Every channel of the loop waits for every other (sense by generation).
///
/// Ordering: the arrival is an acq_rel atomic and the release of the generation a
/// release store, so everything each channel did before the barrier is visible to every
/// channel after it.
///
/// # Safety
/// As [`cta_wait`].
unsafe fn channels_barrier(a: &Channel, shared: *mut LoopShared) -> Result<(), Stop> {
    let state = a.state;
    // SAFETY: `a.state` is the loop's `LoopState` (`Channel`); only the field's address is
    // taken.
    let generation_ptr = unsafe { &raw mut (*state).barrier_generation };
    let mut generation = 0;
    if arch::thread_idx() == 0 {
        // SAFETY: `barrier_generation` is an aligned `u64` of the loop state, changed only
        // through `arch`.
        generation = unsafe { arch::ld_acquire_sys_global(generation_ptr) };
        // SAFETY: `barrier_arrived` is an aligned `u64` of the loop state, changed only through
        // `arch` atomics.
        let arrived = unsafe { u64::atomic_add_acq_rel_sys(&raw mut (*state).barrier_arrived, 1) } + 1;
        if arrived == u64::from(a.count) {
            // SAFETY: as above; only the last channel to arrive resets it.
            unsafe { arch::st_relaxed_sys_global(&raw mut (*state).barrier_arrived, 0) };
            // SAFETY: as for the load above.
            unsafe { arch::st_release_sys_global(generation_ptr, generation + 1) };
        }
    }
    // SAFETY: `a` is this CTA's channel, `shared` its `LoopShared`, and every thread of the CTA
    // calls this; `generation_ptr` stays valid for the launch.
    unsafe { cta_wait(a, shared, WaitSite::Barrier, || arch::ld_acquire_sys_global(generation_ptr) != generation) }
}

/// Runs a device function.
///
/// # Safety
/// As [`execute`], for a Call item, whose `arg` is the address of an aligned `u64` in
/// device or host-mapped memory that the kernel accesses only through `arch` (the host's
/// promise).
unsafe fn call<const SHMEM: bool>(a: &Channel, item: &WorkItem, shared: *mut LoopShared) -> Result<(), Stop> {
    let Some(function) = DeviceFunction::from_u32(item.function) else { arch::trap() };
    let leader = a.index == 0 && arch::thread_idx() == 0;
    let word = item.arg as *mut u64;
    match function {
        DeviceFunction::Timestamp => {
            if leader {
                // SAFETY: a validated Timestamp item's `arg` is the address of an aligned,
                // writable `u64` in device or host-mapped memory (the host's promise), written
                // only by this leader thread while the item runs.
                unsafe { arch::st_volatile_global(word, arch::globaltimer_ns()) };
            }
            Ok(())
        }
        DeviceFunction::Increment => {
            if leader {
                // SAFETY: a validated Increment item's `arg` is the address of an aligned `u64`
                // in device or host-mapped memory (the host's promise), changed only by
                // atomics.
                unsafe { u64::atomic_add_relaxed_sys(word, 1) };
            }
            Ok(())
        }
        DeviceFunction::WaitAtLeast => {
            let want = item.count;
            // SAFETY: a validated WaitAtLeast item's `arg` is the address of an aligned `u64`
            // in device or host-mapped memory (the host's promise); `a` is this CTA's channel,
            // `shared` its `LoopShared`, and every thread of the CTA calls this.
            unsafe { cta_wait(a, shared, WaitSite::Flag, || arch::ld_acquire_sys_global(word) >= want) }
        }
        DeviceFunction::Application if a.index != 0 => Ok(()),
        // SAFETY: every thread of channel 0's CTA calls it with the same item; what the
        // application's function does with `arg` is its contract with the host that
        // enqueued the item.
        DeviceFunction::Application => unsafe { application(item) },
        DeviceFunction::ShmemBarrierAll | DeviceFunction::ShmemSumReduce if !SHMEM => Err(Stop::Error(LoopError::BadItem, BadItem::NotHeapLoop as u32)),
        DeviceFunction::ShmemBarrierAll | DeviceFunction::ShmemSumReduce if a.index != 0 => Ok(()),
        // SAFETY: a validated shmem item's `arg` is this PE's `ShmemHandle` (the host's
        // promise); every thread of channel 0's CTA calls this.
        DeviceFunction::ShmemBarrierAll | DeviceFunction::ShmemSumReduce => unsafe { shmem_call(function, item) },
    }
}

/// Runs the application's device function of an Application item on channel 0's CTA
/// (the barrier that follows every item in the loop and the call kernel performs every
/// thread's writes before the item completes). Not inlined: the loop's other items keep
/// their registers.
///
/// # Safety
/// Every thread of the CTA calls this with the same item; the application's function's
/// own contract holds for the item's `arg`.
#[inline(never)]
unsafe fn application(item: &WorkItem) -> Result<(), Stop> {
    // SAFETY: this function's contract.
    let status = unsafe { cabi::ferroccl_app_work(item.count as u32, item.arg) };
    match status {
        Status::Success => Ok(()),
        Status::Aborted => Err(Stop::Error(LoopError::Aborted, 0)),
        Status::TimedOut => Err(Stop::Error(LoopError::Timeout, WaitSite::Application as u32)),
        Status::InvalidArgument => Err(Stop::Error(LoopError::BadItem, BadItem::ApplicationRefused as u32)),
    }
}

/// Runs a symmetric-heap function on channel 0's CTA, as one [`Block`] group. A buffer
/// outside the PE's heap is refused ([`BadItem::NotSymmetric`]) before any barrier, so the
/// PEs' barrier state stays agreed only if every PE refuses it too (the host checks it
/// first). Not inlined: the loop's other items keep their registers.
///
/// # Safety
/// `item` is a validated ShmemBarrierAll or ShmemSumReduce item whose `arg` points to
/// this PE's `ShmemHandle` (see [`Shmem::new`]); every thread of the CTA calls this with
/// the same item, and no other group of this PE is in a heap barrier meanwhile.
#[inline(never)]
unsafe fn shmem_call(function: DeviceFunction, item: &WorkItem) -> Result<(), Stop> {
    // SAFETY: this function's contract.
    let shmem = unsafe { Shmem::new(item.arg as *const ShmemHandle) };
    let reduced = match function {
        DeviceFunction::ShmemSumReduce => {
            let Some(dtype) = DataType::from_u8(item.dtype) else { arch::trap() };
            let bytes = item.count * dtype.size() as u64;
            let me = shmem.my_pe();
            let in_heap = |p: u64| item.count == 0 || (!shmem.ptr(p as *const u8, me).is_null() && !shmem.ptr((p + bytes - 1) as *const u8, me).is_null());
            if !in_heap(item.src) || !in_heap(item.dst) {
                return Err(Stop::Error(LoopError::BadItem, BadItem::NotSymmetric as u32));
            }
            // SAFETY: both ranges lie in this PE's heap, hold `count` aligned elements of
            // `dtype` and do not overlap (validated); the rest is this function's contract.
            unsafe { shmem_sum_reduce(shmem, dtype, item.src, item.dst, item.count as usize) }
        }
        // SAFETY: this function's contract.
        _ => unsafe { shmem.barrier_all::<Block>() },
    };
    reduced.map_err(|why| {
        let error = match why {
            Interrupted::Aborted => LoopError::Aborted,
            Interrupted::TimedOut => LoopError::Timeout,
        };
        Stop::Error(error, WaitSite::ShmemBarrier as u32)
    })
}

/// [`Shmem::sum_reduce`] by one block over `count` elements of `dtype`.
///
/// # Safety
/// As [`Shmem::sum_reduce`] with `G = Block`: `src` and `dst` are symmetric, disjoint
/// ranges of `count` aligned elements of `dtype`.
unsafe fn shmem_sum_reduce(shmem: Shmem, dtype: DataType, src: u64, dst: u64, count: usize) -> Result<(), Interrupted> {
    // SAFETY: each arm's type is `dtype`'s, so `sum_reduce`'s contract is this function's.
    unsafe {
        match dtype {
            DataType::I8 => shmem.sum_reduce::<Block, i8>(dst as *mut i8, src as *const i8, count),
            DataType::U8 => shmem.sum_reduce::<Block, u8>(dst as *mut u8, src as *const u8, count),
            DataType::I32 => shmem.sum_reduce::<Block, i32>(dst as *mut i32, src as *const i32, count),
            DataType::U32 => shmem.sum_reduce::<Block, u32>(dst as *mut u32, src as *const u32, count),
            DataType::I64 => shmem.sum_reduce::<Block, i64>(dst as *mut i64, src as *const i64, count),
            DataType::U64 => shmem.sum_reduce::<Block, u64>(dst as *mut u64, src as *const u64, count),
            DataType::F16 => shmem.sum_reduce::<Block, F16>(dst as *mut F16, src as *const F16, count),
            DataType::F32 => shmem.sum_reduce::<Block, f32>(dst as *mut f32, src as *const f32, count),
            DataType::F64 => shmem.sum_reduce::<Block, f64>(dst as *mut f64, src as *const f64, count),
            DataType::Bf16 => shmem.sum_reduce::<Block, Bf16>(dst as *mut Bf16, src as *const Bf16, count),
        }
    }
}
