//! NVLS collectives ([NCCL](https://github.com/NVIDIA/nccl)'s NVLS ReduceScatter, AllReduce
//! and AllGather): every rank is a head (`nHeads = nranks`), and each channel's CTA is
//! split into warp groups that run at once, each a [`Primitives`] over the channel's
//! [`NvlsConns`]:
//!
//! - **scatter** (`FanAsymmetric<0, MAX_NVLS_ARITY>`, `up_send`): sends head `h` its block
//!   of every chunk round (pre-op applied) into this rank's own reduce region of head `h`;
//! - **reduce** (`down_recv`, and for all-reduce `down_send`): this head waits until every
//!   rank has scattered a slot (NvlsMinPolling), load-reduces the slot from every rank's
//!   copy through multicast (`MULTIMEM_SRCS = 1`) and either stores the result to the
//!   output (reduce-scatter, `FanAsymmetric<1, 0>`) or, through `direct_recv_direct_send`
//!   (`FanSymmetric<1>`, `MULTIMEM_DSTS = 1`), to every rank's broadcast region of this
//!   head (all-reduce);
//! - **broadcast** (all-gather, `FanAsymmetric<0, 1>`, `down_send`): stores this rank's
//!   input to every rank's broadcast region of this head;
//! - **gather** (`FanAsymmetric<MAX_NVLS_ARITY, 0>`, `up_recv`): copies every head's
//!   result from this rank's own broadcast regions to the output.
//!
//! The thread split is computed here from the CTA's warps (`W = nthreads / 32`, at least
//! [`NVLS_MIN_THREADS`] threads, which the host requires of an NVLS communicator):
//! all-reduce gives scatter (group 0) and gather (group 1) `W / 3` warps each and reduce
//! (group 2) the rest; reduce-scatter gives scatter (group 0) `W / 2` and reduce
//! (group 1) the rest; all-gather gather (group 0) `W / 2` and broadcast (group 1) the
//! rest.
//! Every group has at least two warps (the primitives' roles need 64 threads), its own
//! shared memory and its own named barriers.
//!
//! Results: the multicast flavour reduces every rank's copy in rank order (the software
//! twin's table lists the ranks in order), so all-reduce and reduce-scatter give, on
//! every rank, the bits of a reduction in rank order (as one-shot and two-shot do).
//!
//! Device code; it must never choose an algorithm nor import from `work`.

use super::coll::{Coll, CollCtx, for_each_chunk, round_chunk};
use super::function::CollFunction;
use super::select::NVLS_MIN_THREADS;
use crate::abi::LoopError;
use crate::arch::{self, WARP_SIZE};
use crate::conn::{ConnInfo, MAX_NVLS_ARITY, NvlsConns};
use crate::prims::{DataOp, FanAsymmetric, FanSymmetric, GroupCtx, MulticastMovers, Primitives, Simple, decode_stop};

/// The scatter and gather protocol: one slice of one step per chunk, unicast FIFOs
/// (NCCL's `ProtoSimple<1, 1>`).
pub type NvlsProto = Simple<1, 1>;

/// The scatter group: a send end to every head.
type ScatterPrims<M> = Primitives<M, NvlsProto, FanAsymmetric<0, MAX_NVLS_ARITY>>;
/// The gather group: a receive end from every head.
type GatherPrims<M> = Primitives<M, NvlsProto, FanAsymmetric<MAX_NVLS_ARITY, 0>>;
/// All-reduce's reduce group: load-reduce through multicast, store through multicast
/// (NCCL's `ProtoSimple<1, 1, Unroll, 1, 1>`, `FanSymmetric<1>`).
type ReduceBroadcastPrims<M> = Primitives<M, Simple<1, 1, 1, 1>, FanSymmetric<1>>;
/// Reduce-scatter's reduce group: load-reduce through multicast into the output
/// (`ProtoSimple<1, 1, Unroll, 1, 0>`, `FanAsymmetric<1, 0>`).
type ReducePrims<M> = Primitives<M, Simple<1, 1, 1, 0>, FanAsymmetric<1, 0>>;
/// All-gather's broadcast group: the input stored through multicast
/// (`ProtoSimple<1, 1, Unroll, 0, 1>`, `FanAsymmetric<0, 1>`).
type BroadcastPrims<M> = Primitives<M, Simple<1, 1, 0, 1>, FanAsymmetric<0, 1>>;

/// The groups of `function` on a CTA of `nthreads` threads: each group's first thread,
/// and the end of the last (`[start0, start1, start2, end]`; a function of two groups
/// has `start2 == end`).
pub fn group_bounds(function: CollFunction, nthreads: u32) -> [u32; 4] {
    let warps = nthreads / WARP_SIZE;
    match function {
        CollFunction::AllReduce => {
            let third = warps / 3 * WARP_SIZE;
            [0, third, 2 * third, nthreads]
        }
        _ => {
            let half = warps / 2 * WARP_SIZE;
            [0, half, nthreads, nthreads]
        }
    }
}

/// Runs an NVLS all-reduce, reduce-scatter or all-gather on this channel with multicast
/// flavour `M`. Returns the first stopped group's error, if any, on every thread.
///
/// # Safety
/// As `ring::run`; `c.function` is one of the three; `cx.nvls` is this channel's
/// `NvlsConns` (non-null), wired for flavour `M`, and the CTA has at least
/// [`NVLS_MIN_THREADS`] threads.
#[inline(never)]
pub unsafe fn run<M: MulticastMovers>(cx: &CollCtx, c: &Coll, data: DataOp) -> Result<(), (LoopError, u32)> {
    let g = cx.group;
    if g.nthreads < NVLS_MIN_THREADS || cx.nvls.is_null() {
        arch::trap();
    }
    let bounds = group_bounds(c.function, g.nthreads);
    let ngroups = if bounds[2] == bounds[3] { 2 } else { 3 };
    if g.tid == 0 {
        for group in 0..ngroups {
            // SAFETY: `group < MAX_GROUPS`: the group's `PrimsShared` in this CTA's shared
            // memory (`CollCtx::new`'s contract); thread 0 alone writes it, before the CTA
            // barrier below.
            unsafe { arch::st_volatile_shared_b64(&raw mut (*cx.group_shared(group)).stopped, 0) };
        }
    }
    arch::barrier_sync_all();
    let group = (1..ngroups).rfind(|&k| g.tid >= bounds[k as usize]).unwrap_or(0);
    let (start, stop) = (bounds[group as usize], bounds[group as usize + 1]);
    let side = GroupCtx { tid: g.tid - start, nthreads: stop - start, group, shared: cx.group_shared(group), ..g };
    // SAFETY: the threads of `side` (a multiple of 32, at least 64: `group_bounds` on at
    // least `NVLS_MIN_THREADS`) all run this group's arm with the same arguments, over
    // connection ends that only this group uses in this item, with its own shared memory
    // (this function's contract and `CollCtx::new`'s).
    unsafe {
        match (c.function, group) {
            (CollFunction::AllReduce, 0) => all_reduce_scatter::<M>(cx, c, side, data),
            (CollFunction::AllReduce, 1) => all_reduce_gather::<M>(cx, c, side, data),
            (CollFunction::AllReduce, _) => all_reduce_reduce::<M>(cx, c, side, data),
            (CollFunction::ReduceScatter, 0) => reduce_scatter_scatter::<M>(cx, c, side, data),
            (CollFunction::ReduceScatter, _) => reduce_scatter_reduce::<M>(cx, c, side, data),
            (CollFunction::AllGather, 0) => all_gather_gather::<M>(cx, c, side, data),
            (CollFunction::AllGather, _) => all_gather_broadcast::<M>(cx, c, side, data),
            _ => arch::trap(),
        }
    }
    // Every group meets here; the first group's error wins.
    arch::barrier_sync_all();
    // SAFETY: every group's `stopped` word is in this CTA's shared memory (`CollCtx::new`'s
    // contract), and the CTA barrier above orders every write to them before these reads.
    let status = (0..ngroups).map(|k| unsafe { arch::ld_volatile_shared_b64(&raw const (*cx.group_shared(k)).stopped) }).find(|&s| s != 0);
    match status {
        None => Ok(()),
        Some(s) => Err(decode_stop(s)),
    }
}

/// The step bytes of this channel's NVLS ends (the same on every one of them).
///
/// # Safety
/// `cx.nvls` is this channel's `NvlsConns`, written by the host before the launch.
unsafe fn step_bytes(cx: &CollCtx) -> u64 {
    // SAFETY: this function's contract.
    unsafe { (*cx.nvls).down_recv.step_bytes }
}

/// The ends `field` picks for every head `h < nranks` (null beyond).
fn per_head(cx: &CollCtx, field: fn(*mut NvlsConns, usize) -> *mut ConnInfo) -> [*mut ConnInfo; MAX_NVLS_ARITY] {
    core::array::from_fn(|h| if h < cx.nranks as usize { field(cx.nvls, h) } else { core::ptr::null_mut() })
}

/// The rounds of an all-reduce of `size` elements on this channel, as NCCL's NVLS
/// all-reduce cuts them: each round gives each channel `nranks` blocks of `real`
/// elements; calls `f(first element of the channel's blocks, real)`.
fn all_reduce_rounds(cx: &CollCtx, elt: i64, size: i64, chunk: i64, mut f: impl FnMut(i64, i64)) {
    let (nch, nheads) = (i64::from(cx.nchannels), i64::from(cx.nranks));
    let mut grid_offset = 0;
    while grid_offset < size {
        let real = round_chunk(elt, size - grid_offset, nch * nheads, chunk);
        f(grid_offset + i64::from(cx.channel_index) * nheads * real, real);
        grid_offset += nch * nheads * chunk;
    }
}

/// All-reduce's scatter group: each round, block `h` of the channel's blocks to head `h`.
///
/// # Safety
/// As [`run`], for this group's threads (`side`).
unsafe fn all_reduce_scatter<M: MulticastMovers>(cx: &CollCtx, c: &Coll, side: GroupCtx, data: DataOp) {
    // SAFETY: `cx.nvls` is valid (`run`'s contract); only addresses are taken.
    let send = per_head(cx, |n, h| unsafe { &raw mut (*n).up_send[h] });
    // SAFETY: `run`'s contract: this group's ends, used by it alone, and its shared memory.
    let mut prims = unsafe { ScatterPrims::<M>::new(side, &[], &send[..cx.nranks as usize], step_bytes(cx), c.input, 0, data) };
    let (size, chunk) = (c.count as i64, prims.chunk_capacity());
    all_reduce_rounds(cx, data.elt() as i64, size, chunk, |offset, real| {
        let nelem = (i64::from(cx.nranks) * real).min(size - offset).max(0);
        // SAFETY: every thread of the group runs the same rounds; the input holds the
        // `nelem` elements from `offset`, `real <= chunk`.
        unsafe { prims.scatter(offset, nelem, real, real, -1, 0) };
    });
}

/// All-reduce's gather group: each round, block `h` of the channel's blocks from head `h`.
///
/// # Safety
/// As [`run`], for this group's threads (`side`).
unsafe fn all_reduce_gather<M: MulticastMovers>(cx: &CollCtx, c: &Coll, side: GroupCtx, data: DataOp) {
    // SAFETY: `cx.nvls` is valid (`run`'s contract); only addresses are taken.
    let recv = per_head(cx, |n, h| unsafe { &raw mut (*n).up_recv[h] });
    // SAFETY: `run`'s contract: this group's ends, used by it alone, and its shared memory.
    let mut prims = unsafe { GatherPrims::<M>::new(side, &recv[..cx.nranks as usize], &[], step_bytes(cx), 0, c.output, data) };
    let (size, chunk) = (c.count as i64, prims.chunk_capacity());
    all_reduce_rounds(cx, data.elt() as i64, size, chunk, |offset, real| {
        let nelem = (i64::from(cx.nranks) * real).min(size - offset).max(0);
        // SAFETY: every thread of the group runs the same rounds; the output holds the
        // `nelem` elements from `offset`, `real <= chunk`.
        unsafe { prims.gather(offset, nelem, real, real, -1, 0) };
    });
}

/// All-reduce's reduce group: each round, this head's block, reduced over every rank and
/// stored to every rank.
///
/// # Safety
/// As [`run`], for this group's threads (`side`).
unsafe fn all_reduce_reduce<M: MulticastMovers>(cx: &CollCtx, c: &Coll, side: GroupCtx, data: DataOp) {
    // SAFETY: `cx.nvls` is valid (`run`'s contract); only the address is taken.
    let recv: *mut ConnInfo = unsafe { &raw mut (*cx.nvls).down_recv };
    // SAFETY: `cx.nvls` is valid (`run`'s contract); only the address is taken.
    let send: *mut ConnInfo = unsafe { &raw mut (*cx.nvls).down_send };
    // SAFETY: `run`'s contract: this group's ends, used by it alone, and its shared memory.
    let mut prims = unsafe { ReduceBroadcastPrims::<M>::new(side, &[recv], &[send], step_bytes(cx), 0, 0, data) };
    let (size, chunk) = (c.count as i64, prims.chunk_capacity());
    all_reduce_rounds(cx, data.elt() as i64, size, chunk, |first, real| {
        let offset = first + i64::from(cx.rank) * real;
        let nelem = real.min(size - offset).max(0);
        // SAFETY: every thread of the group runs the same rounds; no user buffer is touched
        // (direct operations are off), `nelem <= real <= chunk`.
        unsafe { prims.direct_recv_direct_send(offset, offset, nelem) };
    });
}

/// Reduce-scatter's scatter group: each chunk of the channel, from every head's block of
/// the input to that head.
///
/// # Safety
/// As [`run`], for this group's threads (`side`).
unsafe fn reduce_scatter_scatter<M: MulticastMovers>(cx: &CollCtx, c: &Coll, side: GroupCtx, data: DataOp) {
    // SAFETY: `cx.nvls` is valid (`run`'s contract); only addresses are taken.
    let send = per_head(cx, |n, h| unsafe { &raw mut (*n).up_send[h] });
    // SAFETY: `run`'s contract: this group's ends, used by it alone, and its shared memory.
    let mut prims = unsafe { ScatterPrims::<M>::new(side, &[], &send[..cx.nranks as usize], step_bytes(cx), c.input, 0, data) };
    let (size, chunk) = (c.count as i64, prims.chunk_capacity());
    let total = i64::from(cx.nranks) * size;
    // SAFETY: every thread of the group runs the same chunks; the input holds `nranks`
    // blocks of `size` elements, each chunk at most `chunk`.
    for_each_chunk(cx, data.elt() as i64, size, chunk, |offset, n| unsafe { prims.scatter(offset, total, n, size, -1, 0) });
}

/// Reduce-scatter's reduce group: each chunk of the channel, this head's block reduced
/// over every rank into the output (post-op applied).
///
/// # Safety
/// As [`run`], for this group's threads (`side`).
unsafe fn reduce_scatter_reduce<M: MulticastMovers>(cx: &CollCtx, c: &Coll, side: GroupCtx, data: DataOp) {
    // SAFETY: `cx.nvls` is valid (`run`'s contract); only the address is taken.
    let recv: *mut ConnInfo = unsafe { &raw mut (*cx.nvls).down_recv };
    // SAFETY: `run`'s contract: this group's end, used by it alone, and its shared memory.
    let mut prims = unsafe { ReducePrims::<M>::new(side, &[recv], &[], step_bytes(cx), 0, c.output, data) };
    let (size, chunk) = (c.count as i64, prims.chunk_capacity());
    // SAFETY: every thread of the group runs the same chunks; the output holds `size`
    // elements, each chunk at most `chunk`.
    for_each_chunk(cx, data.elt() as i64, size, chunk, |offset, n| unsafe { prims.recv_with_post_op(offset, n) });
}

/// All-gather's gather group: each chunk of the channel, from every head into that
/// head's block of the output.
///
/// # Safety
/// As [`run`], for this group's threads (`side`).
unsafe fn all_gather_gather<M: MulticastMovers>(cx: &CollCtx, c: &Coll, side: GroupCtx, data: DataOp) {
    // SAFETY: `cx.nvls` is valid (`run`'s contract); only addresses are taken.
    let recv = per_head(cx, |n, h| unsafe { &raw mut (*n).up_recv[h] });
    // SAFETY: `run`'s contract: this group's ends, used by it alone, and its shared memory.
    let mut prims = unsafe { GatherPrims::<M>::new(side, &recv[..cx.nranks as usize], &[], step_bytes(cx), 0, c.output, data) };
    let (size, chunk) = (c.count as i64, prims.chunk_capacity());
    let total = i64::from(cx.nranks) * size;
    // SAFETY: every thread of the group runs the same chunks; the output holds `nranks`
    // blocks of `size` elements, each chunk at most `chunk`.
    for_each_chunk(cx, data.elt() as i64, size, chunk, |offset, n| unsafe { prims.gather(offset, total, n, size, -1, 0) });
}

/// All-gather's broadcast group: each chunk of the channel, this rank's input stored to
/// every rank's broadcast region of this head.
///
/// # Safety
/// As [`run`], for this group's threads (`side`).
unsafe fn all_gather_broadcast<M: MulticastMovers>(cx: &CollCtx, c: &Coll, side: GroupCtx, data: DataOp) {
    // SAFETY: `cx.nvls` is valid (`run`'s contract); only the address is taken.
    let send: *mut ConnInfo = unsafe { &raw mut (*cx.nvls).down_send };
    // SAFETY: `run`'s contract: this group's end, used by it alone, and its shared memory.
    let mut prims = unsafe { BroadcastPrims::<M>::new(side, &[], &[send], step_bytes(cx), c.input, 0, data) };
    let (size, chunk) = (c.count as i64, prims.chunk_capacity());
    // SAFETY: every thread of the group runs the same chunks; the input holds `size`
    // elements, each chunk at most `chunk`.
    for_each_chunk(cx, data.elt() as i64, size, chunk, |offset, n| unsafe { prims.send(offset, n) });
}

/// One NVLS collective on this CTA's channel through hardware multicast (`HwMulticast`:
/// `multimem.ld_reduce` and `multimem.st` on multicast addresses): the door of the
/// `ferroccl_nvls_hardware` kernel, which `host_shim::nvls_hw` launches once a caller
/// opts in on multicast-capable devices (never on shared machines, see docs/nvls.md: there
/// it is compiled and checked by ptxas only). Channel `block_idx`
/// of `grid_dim`; `function`, `dtype` and `op` are known numbers the host checked
/// (`host_shim::multicast::check_hardware_nvls`); the result is the first stopped
/// group's error.
///
/// # Safety
/// `comm` is a valid `CommDevice` whose `nvls` connections carry multicast addresses
/// (`buff` of a multicast end the address of slot 0, `offs_fifo` 0, `head`/`tail`
/// multicast addresses); the CTA has at least [`NVLS_MIN_THREADS`] threads and
/// `MAX_GROUPS` groups' `PrimsShared` of dynamic shared memory; the buffers hold what the
/// function addresses; `abort` is the host's abort flag.
#[cfg(target_arch = "nvptx64")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn run_hardware(
    comm: *const crate::conn::CommDevice,
    function: CollFunction,
    dtype: crate::dtype::DataType,
    op: crate::redop::RedOpKind,
    count: u64,
    buffers: (u64, u64),
    red_arg: u64,
    abort: *const u64,
    spin_budget_ns: u64,
) -> Result<(), (LoopError, u32)> {
    let shared = arch::dyn_smem().cast::<crate::abi::PrimsShared>();
    // SAFETY: `comm` is a valid communicator whose connection arrays cover the grid's
    // channels and `shared` holds `MAX_GROUPS` groups' shared memory (this function's
    // contract).
    let cx = unsafe { CollCtx::new(comm, (arch::block_idx(), arch::grid_dim()), shared, abort, spin_budget_ns) };
    let c = Coll { function, count, recv_count: 0, input: buffers.0, output: buffers.1, output_peer_mapped: false, red_arg, root: 0, send_peer: 0, recv_peer: 0 };
    let data = DataOp { dtype, op: if function.reduces() { op } else { crate::redop::RedOpKind::Sum }, arg: red_arg };
    // SAFETY: every thread of the CTA calls this with the same arguments; `cx` is this
    // channel's context, its NVLS ends wired with multicast addresses (this function's
    // contract), which is `run`'s for `HwMulticast`.
    unsafe { run::<crate::multicast::HwMulticast>(&cx, &c, data) }
}
