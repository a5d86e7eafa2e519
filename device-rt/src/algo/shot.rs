//! The one-shot/two-shot collectives ([vLLM's custom all-reduce][vllm]): every rank
//! copies its share of the input into its own staging buffer, which every peer can read,
//! raises a flag on every peer, waits for the same channel's flag of every peer, then
//! reads the peers' staged data straight from their memory. One-shot all-reduce reduces
//! all of it; two-shot reduces its block of it into its own staging, raises a second
//! flag, and copies every peer's reduced block; all-gather copies it; reduce-scatter
//! reduces its own block of it; broadcast copies the root's (only the root stages);
//! reduce reduces all of it on the root. One-shot all-reduce, all-gather and
//! reduce-scatter, and two-shot, push their shares into the peers' staging instead where
//! the staging has room (see the push form below). Every element is reduced in rank
//! order, `((x0 ⊕ x1) ⊕ x2) ⊕ …`, by one rank's one mover, so every rank gets the same
//! bits, call after call, and one-shot and two-shot give the same bits. Every rank raises
//! and waits for every flag, whatever the function, so the ordering below holds for each.
//!
//! # Epochs, buffers and flags
//!
//! Each channel keeps, in its [`StagingConns`], the number of one-shot/two-shot collectives
//! it has run: its epoch. Channel `c`'s `e`-th one-shot/two-shot collective (from 1) stages
//! into its buffer `e % 2` and raises flag value `2e − 1` on every peer once its staged
//! data is written (`2e` once a two-shot's reduced block is); it waits until every peer's
//! flag for channel `c`, in its own memory, is at least the value it waits for. Every rank
//! makes the same plan of the same call (`select::plan`), so the same channels take part in
//! the same calls everywhere and a channel's epochs agree on every rank. Nothing is ever
//! reset: back-to-back calls and CUDA-graph replays are just further epochs.
//!
//! # Ordering
//!
//! A flag publishes data as the primitives' posts do: every thread's stores to the
//! staging, then the CTA barrier, then the signalling thread's `fence.acq_rel.sys` and a
//! relaxed system-scope store of the flag in the peer's memory. The waiting thread's
//! acquire load (system scope) that sees the flag, then the CTA barrier, come before any
//! thread's volatile loads of that peer's staging.
//!
//! A buffer is never overwritten while a peer may still read it. Rank `r`'s channel `c`
//! writes buffer `e % 2` in epoch `e`, and again only in epoch `e + 2`. Before that it has
//! waited, in epoch `e + 1`, for every peer's flag `2(e + 1) − 1`, which a peer raises only
//! after all its reads of `r`'s buffers in epoch `e` (its loads, the CTA barrier, then the
//! fence before its flag store): `r`'s stores of epoch `e + 2` come after its acquire of
//! that flag, so none of them can be seen by those loads. A peer one epoch ahead writes
//! the other buffer; it cannot get two ahead, since epoch `e + 2` waits for `r`'s flag of
//! `e + 1`. A two-shot rank writes its reduced block over its own staged block, which no
//! peer reads in the first step (each reads its own block), and peers read it only after
//! the second flag.
//!
//! Every wait is bounded by the abort flag and the spin budget; one that ends early stops
//! the collective with `Aborted` or `Timeout` at [`WaitSite::ShotFlag`], and no data is
//! read after it.
//!
//! # Push form
//!
//! A one-shot all-reduce, an all-gather or a reduce-scatter, or a two-shot all-reduce,
//! whose operator has no pre-op, whose inputs are staged, and whose channel's staging
//! buffer holds what every peer pushes into it (`select::push_fits`) pushes instead: each
//! rank writes what each peer needs straight into that peer's staging buffer of the
//! epoch, in its own slot there (the peer's peers in rank order, slot `s` at `s` units),
//! starting at the next rank round the ring so that the ranks' first pushes go to
//! different peers. One-shot all-reduce and all-gather push the share (an all-gather
//! copies it into its own output block in the same pass), reduce-scatter the share of
//! the peer's block; each rank raises its flag, and once it has every peer's reads only
//! its own memory: its own input where it lies and what the peers pushed, reduced in rank
//! order (the same bits as the pull form), or, for an all-gather, copied into the peers'
//! blocks. Two-shot pushes block `q` of the share to rank `q`; after the first flag each
//! rank reduces its own block the same way into its output and pushes the result into
//! every peer's buffer (in its slot after the first `nranks − 1`: the two halves never
//! overlap, since a peer may push a reduced block while this rank still reads what was
//! pushed in) or, where the peer allows it, straight into its output (see the direct
//! outputs below), raises the second flag, and once it has every peer's copies the
//! peers' reduced blocks from its own buffer (unless they came straight to its output).
//! Stores into a peer's memory go out without waiting
//! for a reply, where the pull form's loads of the peers' staging each wait for a round
//! trip over the link, and the own share is neither staged nor read back. Its flag
//! exchange takes longer (the fence waits for the stores to land in the peers' memory) and
//! everything after it shorter, so a call takes less time than pulling (see
//! docs/tuning.md, the push form). Every
//! rank decides alike for the same channel (the decision is arithmetic over the call and
//! the communicator), so a call never mixes the forms on one channel.
//!
//! Its ordering is the pull form's with the roles of the buffer's writer turned round: the
//! pushing threads' stores into the peers' memory, the CTA barrier, the signalling
//! thread's `fence.acq_rel.sys` and flag store; the peer's acquire of the flag, its CTA
//! barrier, then its volatile loads of its own staging. A buffer is still written in epoch
//! `e` only and read in epoch `e` only, now by its owner: rank `r` writes peer `q`'s
//! buffer `e % 2` in epoch `e` after it has seen every peer's flags of epoch `e − 1`,
//! which each raises after its reads of that buffer in epoch `e − 2` (its loads, used
//! before its CTA barrier, then the fence before the flag), so none of those loads can see
//! `r`'s new stores; a two-shot rank's reduced block reaches its output, then the CTA
//! barrier, before its threads read it back to push it. Whatever form each epoch of a
//! channel takes (a later call may pull on the same channel), every write of a buffer in
//! epoch `e` follows every read of it in epoch `e − 2` by this rule or by the writer's own
//! program order, as above.
//!
//! # Direct outputs
//!
//! With its first flag of each call a rank also stores, in each peer's output slot of
//! the epoch's parity, its output where the call says peers may write it
//! (`Coll::output_peer_mapped`), else `NOT_DIRECT`. A pushing two-shot rank then writes
//! its reduced block straight into the output of every peer that published one (at the
//! block's place there) instead of into that peer's staging, and a rank that published
//! its output copies nothing out after the second flag: the peers' blocks are already in
//! place. Each side decides from what the receiver published, so each pair of ranks
//! agrees. Order: rank `r` writes peer `q`'s output only after it has acquired `q`'s
//! first flag, which `q` raises after it has pushed (read) every block of its input but
//! its own; `r` writes block `r` only, which `q` neither reads nor writes itself, so an
//! in-place call is safe too. `r`'s stores precede its fence and second flag, which `q`
//! acquires before it completes the call: no write reaches `q`'s output after `q`'s
//! call. A slot of parity `e % 2` is written again in epoch `e + 2` only, as the
//! descriptors.
//!
//! # Inputs in the symmetric heap (zero copy)
//!
//! On a communicator on a symmetric heap (`CommDevice::heap`, PE `p` being rank `p`), a
//! two-shot all-reduce whose input lies in the rank's heap, out of place, with an
//! operator without a pre-op, stages nothing (vLLM's registered buffers): its first
//! flag says the input is ready (the item runs after the stream's earlier work), every
//! rank reduces its block straight from every rank's input, in place at the same offset
//! of each heap, and its second flag, which every rank waits for before it completes,
//! follows those reads: no rank's caller overwrites an input a peer still reads. The
//! same rank-order reduction: the same bits as the staging path. One-shot reads nothing
//! in place: where it pushes (the push form above, on any buffers) it makes no staging
//! copy either, since each rank's input goes once from the caller's buffer into the
//! peers' staging and no rank reads a peer's caller buffer. Reading in place would need a
//! second flag round trip (its reads must end before the call completes), which cost more
//! than the pull form's local staging copy at every size one-shot runs, and the push form
//! is faster still; two-shot reading in place is faster than staging (see docs/tuning.md,
//! inputs in a symmetric heap).
//!
//! # Call descriptors
//!
//! With the first flag of each call, a rank stores a digest of the call (count,
//! function, type, operator, root, and the heap offset it reads inputs at, or none) in
//! each peer's descriptor slot of the epoch's parity, before the fence. A rank that sees
//! a peer's flag compares that peer's descriptor with its own and stops the collective
//! with `BadItem::RanksDisagree` where they differ, before it reads any peer's data:
//! every rank sees every descriptor, so all of them stop. A slot of parity `e % 2` is
//! written again only in epoch `e + 2`, after the writer has seen every peer's flag of
//! `e + 1`, raised after the peer's reads of epoch `e`.
//!
//! [vllm]: https://github.com/vllm-project/vllm/blob/main/csrc/custom_all_reduce.cuh

use super::coll::{Coll, CollCtx};
use super::function::CollFunction;
use super::select::{Algorithm, Plan, RANKS_DISAGREE, push_fits, two_shot_block};
use crate::abi::{LoopError, MAX_PES, WaitSite};
use crate::arch::{self, Site};
use crate::conn::{MAX_SHOT_RANKS, StagingConns};
use crate::dtype::DataType;
use crate::redop::RedOpKind;
use crate::prims::{DataOp, Movers, NOT_DIRECT, decode_stop, reduce, transform};
use crate::spin::{Interrupted, SpinGuard};

/// One channel's part of a one-shot/two-shot collective.
struct Shot<'a> {
    cx: &'a CollCtx,
    conns: *mut StagingConns,
    epoch: u64,
    /// Byte offset of this epoch's buffer in every rank's staging for this channel.
    buffer: u64,
    data: DataOp,
    /// The whole CTA.
    w: Movers,
    /// Where the call reads every rank's input in the symmetric heap (zero copy): the
    /// input's offset in every heap, and every rank's heap base; `None`: it stages.
    heap_input: Option<(u64, *const [u64; MAX_PES])>,
    /// The digest of this call every rank compares (see the module's call descriptors).
    descriptor: u64,
    /// What this rank publishes with its first flag as the output its peers may write
    /// into (see the module's direct outputs): its output where the call says it is
    /// mapped for them, else [`NOT_DIRECT`].
    published_output: u64,
}

/// Runs `c` on this channel by `plan` (a one-shot/two-shot algorithm in which this channel
/// takes part).
///
/// # Safety
/// As `ring::run`; `plan` is the plan of `c` on this communicator, with a one-shot/two-shot
/// algorithm, and `cx.channel_index < plan.channels`, so `cx.staging` is this channel's
/// `StagingConns` (non-null: the plan needs staging).
#[inline(never)]
pub unsafe fn run(cx: &CollCtx, c: &Coll, data: DataOp, plan: Plan) -> Result<(), (LoopError, u32)> {
    let conns = cx.staging;
    // SAFETY: `conns` is this channel's `StagingConns` (this function's contract); its epoch
    // is read by every thread before the first barrier of the collective and written by
    // thread 0 after the last one.
    let epoch = unsafe { (&raw const (*conns).epoch).read_volatile() } + 1;
    if cx.group.tid == 0 {
        // SAFETY: `cx.group.shared` is group 0's `PrimsShared` in this CTA's shared memory
        // (`CollCtx::new`'s contract), whose `stopped` is an aligned `u64` accessed only
        // through `arch`'s shared-word functions; thread 0 alone writes it here, before the
        // barrier that starts the first exchange, after which waiting threads may write it.
        unsafe { arch::st_volatile_shared_b64(&raw mut (*cx.group.shared).stopped, 0) };
    }
    // SAFETY: `cx.heap` is null or this rank's `ShmemHandle` (`CollCtx::new`'s contract).
    let heap_input = unsafe { heap_input(cx, c, data, plan.algorithm) };
    let shot = Shot {
        cx,
        conns,
        epoch,
        buffer: (epoch % 2) * cx.staging_slot_bytes,
        data,
        w: Movers { tid: cx.group.tid, nthreads: cx.group.nthreads },
        heap_input,
        descriptor: descriptor(c, data, heap_input.map(|(offset, _)| offset)),
        published_output: if c.output_peer_mapped { c.output } else { NOT_DIRECT },
    };
    let (begin, len) = plan.range(cx.channel_index, c.count);
    // SAFETY: every thread of the CTA calls this with the same arguments; `[begin, begin +
    // len)` is this channel's share of the count, which fits its staging buffer (`plan`'s
    // arithmetic: `len <= share`, and reduce-scatter's `nranks × share` elements fit); the
    // user buffers hold what `c` addresses (this function's contract).
    let outcome = unsafe {
        match (c.function, plan.algorithm) {
            (CollFunction::AllReduce, Algorithm::OneShot) => shot.reduce_one_shot(c, begin, len, None),
            (CollFunction::AllReduce, Algorithm::TwoShot) => shot.all_reduce_two_shot(c, begin, len),
            (CollFunction::ReduceScatter, _) => shot.reduce_scatter(c, begin, len, plan.share),
            (CollFunction::AllGather, _) => shot.all_gather(c, begin, len),
            (CollFunction::Broadcast, _) => shot.broadcast(c, begin, len),
            (CollFunction::Reduce, _) => shot.reduce_one_shot(c, begin, len, Some(c.root)),
            _ => arch::trap(),
        }
    };
    if outcome.is_ok() && cx.group.tid == 0 {
        // SAFETY: as for the read above; every thread read the epoch before the first
        // exchange's barrier, which thread 0 has passed.
        unsafe { (&raw mut (*conns).epoch).write_volatile(epoch) };
    }
    outcome
}

/// Where `c` reads every rank's input in the symmetric heap: the input's offset in the
/// heap, and the heap's table of every rank's base; `None` where it stages (no heap, not
/// a two-shot all-reduce, in place, an operator with a pre-op, a rank's heap not mapped
/// here, or the input not wholly in this rank's heap).
///
/// # Safety
/// `cx.heap` is null or this rank's `ShmemHandle`, PE `p` being rank `p`, readable for the
/// item.
unsafe fn heap_input(cx: &CollCtx, c: &Coll, data: DataOp, algorithm: Algorithm) -> Option<(u64, *const [u64; MAX_PES])> {
    if cx.heap.is_null() || c.function != CollFunction::AllReduce || algorithm != Algorithm::TwoShot || c.input == c.output || data.has_pre_op() {
        return None;
    }
    // SAFETY: a non-null `cx.heap` is this rank's handle (this function's contract).
    let (bases, heap_bytes) = unsafe { (&raw const (*cx.heap).bases, (&raw const (*cx.heap).heap_bytes).read()) };
    // SAFETY: as above; `rank < nranks <= MAX_SHOT_RANKS <= MAX_PES`.
    let base = |p: u32| unsafe { (*bases)[p as usize % MAX_PES] };
    let mine = base(cx.rank);
    let end = c.input.checked_add(c.count.checked_mul(data.elt())?)?;
    let reachable = (0..cx.nranks).all(|p| base(p) != 0);
    (reachable && c.input >= mine && end <= mine + heap_bytes).then(|| (c.input - mine, bases))
}

/// The digest of a call that every rank of a one-shot/two-shot collective compares: count,
/// function, type, operator, root and the heap offset of its input (`None`: staged),
/// mixed so that calls differing in any of them differ.
fn descriptor(c: &Coll, data: DataOp, heap_offset: Option<u64>) -> u64 {
    call_digest(c.function, data.dtype, data.op, c.root, c.count, heap_offset)
}

/// The digest of a call's function, type, operator, root, count and heap offset (`None`:
/// staged), mixed so that calls differing in any of them differ: what ranks compare
/// before they read each other's data (here and in `ll`).
pub(super) fn call_digest(function: CollFunction, dtype: DataType, op: RedOpKind, root: u32, count: u64, heap_offset: Option<u64>) -> u64 {
    let shape = (function as u64) | (dtype as u64) << 8 | (op as u64) << 16 | u64::from(root) << 24;
    let inputs = heap_offset.map_or(0, |offset| offset.wrapping_add(1));
    count.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ shape.wrapping_mul(0xc2b2_ae3d_27d4_eb4f) ^ inputs.rotate_left(29).wrapping_mul(0x1656_67b1_9e37_79f9)
}

/// Two-shot's block of rank `p` in a share of `n` elements cut into blocks of `block`:
/// its first element and its length (the last blocks shorter, or empty).
fn block_range(p: u32, block: u64, n: u64) -> (u64, u64) {
    let from = (u64::from(p) * block).min(n);
    (from, (from + block).min(n) - from)
}

impl Shot<'_> {
    /// Bytes per element.
    fn elt(&self) -> u64 {
        self.data.elt()
    }

    /// Rank `p`'s staging buffer of this epoch for this channel, at element `ix`.
    fn staged(&self, p: u32, ix: u64) -> u64 {
        // SAFETY: `conns` is this channel's `StagingConns` (`run`'s contract), written by the
        // host before the launch; `p < nranks <= MAX_SHOT_RANKS` (the plan needs staging).
        let base = unsafe { (&raw const (*self.conns).staging[p as usize % MAX_SHOT_RANKS]).read() };
        base + self.buffer + ix * self.elt()
    }

    /// Every rank's input at element `ix` in its heap, in rank order (`heap`: the input's
    /// offset and the bases, as [`heap_input`] gave them).
    ///
    /// # Safety
    /// `heap` is what [`heap_input`] returned for this collective: its bases are the table
    /// of this rank's live `ShmemHandle`.
    unsafe fn in_heaps(&self, heap: (u64, *const [u64; MAX_PES]), ix: u64) -> [u64; MAX_SHOT_RANKS] {
        let (offset, bases) = heap;
        // SAFETY: `bases` is this rank's handle's table (this function's contract), and `p <
        // nranks <= MAX_PES`.
        core::array::from_fn(|p| if p < self.cx.nranks as usize { unsafe { (*bases)[p] + offset + ix * self.elt() } } else { 0 })
    }

    /// Every rank's staging buffer of this epoch at element `ix`, in rank order.
    fn every_rank(&self, ix: u64) -> [u64; MAX_SHOT_RANKS] {
        core::array::from_fn(|p| if p < self.cx.nranks as usize { self.staged(p as u32, ix) } else { 0 })
    }

    /// Publishes this rank's writes to its staging (or, with `value` even, its reduced
    /// block) to every peer and waits until every peer has published as much: the CTA
    /// barrier; then thread `p` (`p < nranks`, not this rank) raises flag `value` on peer
    /// `p` and waits until `p`'s flag here is at least `value`; then the CTA barrier. A
    /// wait that ends early (abort, spin budget) stops the collective. See the module's
    /// ordering. With `value` odd (a call's first flag), thread `p` stores the call's
    /// descriptor on peer `p` before the fence and, once it has seen `p`'s flag, stops the
    /// collective where `p`'s descriptor differs (see the module's call descriptors).
    /// Thread 0 counts the time from the first barrier to the last in the channel's
    /// `exchange_ns`, when statistics are kept.
    ///
    /// # Safety
    /// Every thread of the CTA calls it, with the same `value`.
    #[inline(never)]
    unsafe fn exchange(&self, value: u64) -> Result<(), (LoopError, u32)> {
        let g = self.cx.group;
        let started = g.clock();
        arch::barrier_sync_all();
        let peer = g.tid;
        if peer < self.cx.nranks && peer != self.cx.rank {
            let first = value % 2 == 1;
            // Descriptor slots of this epoch's parity, after the `nranks` flags.
            let slots = self.descriptor_slots();
            // SAFETY: `conns` is this channel's `StagingConns` (`run`'s contract); `peer <
            // nranks <= MAX_SHOT_RANKS` is another rank, whose `signal` entry the host
            // wrote: the aligned `u64` flag this rank raises in `peer`'s memory, written
            // only by this thread of this channel, through `arch`; `slots` words on lies
            // the peer's descriptor slot for this rank, and `2 × nranks` words further its
            // output slot (its flags hold `5 × nranks` words).
            unsafe {
                let signal = (&raw const (*self.conns).signal[peer as usize]).read() as *mut u64;
                if first {
                    // `signal` is entry `rank` of the peer's flags: entry `rank` of its descriptor
                    // slots lies `slots` words on, of its output slots `2 × nranks` further.
                    arch::st_relaxed_sys_global(signal.wrapping_add(slots as usize), self.descriptor);
                    arch::st_relaxed_sys_global(signal.wrapping_add(self.output_slots() as usize), self.published_output);
                }
                arch::site(Site::ShotSignalFence);
                arch::fence_acq_rel_sys();
                arch::st_relaxed_sys_global(signal, value);
            }
            // SAFETY: `flags` is this channel's `[u64; nranks]` in this rank's memory and `peer
            // < nranks`: an aligned `u64` that only `peer` writes, read through `arch`.
            let flag = unsafe { ((&raw const (*self.conns).flags).read() as *const u64).add(peer as usize) };
            // SAFETY: `g.abort` is the host's abort flag, readable for the whole item
            // (`CollCtx::new`'s contract), and the guard lives only in this call.
            let mut guard = unsafe { SpinGuard::new(g.abort, g.spin_budget_ns) };
            loop {
                arch::site(Site::ShotFlagPoll);
                // SAFETY: as above, for `flag`.
                if unsafe { arch::ld_acquire_sys_global(flag) } >= value || self.stopped() != 0 {
                    break;
                }
                match guard.tick() {
                    Ok(()) => {}
                    Err(Interrupted::Aborted) => self.stop(LoopError::Aborted.status(0)),
                    Err(Interrupted::TimedOut) => self.stop(LoopError::Timeout.status(WaitSite::ShotFlag as u32)),
                }
            }
            // SAFETY: the peer's descriptor slot of this parity in this rank's flags (`flags`
            // holds `5 × nranks` words), written only by the peer before the fence that
            // precedes the flag just acquired.
            if first && self.stopped() == 0 && unsafe { arch::ld_volatile_global(flag.wrapping_add(slots as usize)) } != self.descriptor {
                self.stop(LoopError::BadItem.status(RANKS_DISAGREE));
            }
        }
        arch::barrier_sync_all();
        if g.tid == 0 {
            // SAFETY: `g.stats` is null or this channel's live `ChannelStats` (`CollCtx::new`'s
            // contract), and the closure, called only with it non-null, projects it onto one of
            // its counters (only the address is taken): `count`'s contract.
            unsafe { g.count(|s| &raw mut (*s).exchange_ns, g.clock().wrapping_sub(started)) };
        }
        match self.stopped() {
            0 => Ok(()),
            s => Err(decode_stop(s)),
        }
    }

    /// Why the collective stopped (0: it has not). Ordering: relaxed (the word carries
    /// only itself; the CTA's barriers order what each thread did before it).
    fn stopped(&self) -> u64 {
        // SAFETY: group 0's `PrimsShared` in this CTA's shared memory (`CollCtx::new`'s
        // contract): an aligned `u64` that waiting threads may write while others read,
        // accessed only through `arch`'s shared-word functions.
        unsafe { arch::ld_volatile_shared_b64(&raw const (*self.cx.group.shared).stopped) }
    }

    /// Records why the collective stops (the first reason wins, or any when two threads
    /// stop at once). Ordering: relaxed, as `stopped`.
    fn stop(&self, status: u64) {
        if self.stopped() == 0 {
            // SAFETY: as in `stopped`.
            unsafe { arch::st_volatile_shared_b64(&raw mut (*self.cx.group.shared).stopped, status) };
        }
    }

    /// Words from this channel's flags to the call descriptors of this epoch's parity
    /// (entry `p`: rank `p`'s).
    fn descriptor_slots(&self) -> u64 {
        u64::from(self.cx.nranks) * (1 + self.epoch % 2)
    }

    /// Words from this channel's flags to the published outputs of this epoch's parity
    /// (entry `p`: rank `p`'s).
    fn output_slots(&self) -> u64 {
        u64::from(self.cx.nranks) * (3 + self.epoch % 2)
    }

    /// The output peer `p` published with its first flag of this epoch, where it may be
    /// written by its peers; `None` where it published [`NOT_DIRECT`].
    ///
    /// # Safety
    /// After this epoch's first exchange (which ended with the CTA barrier that follows
    /// the acquire of `p`'s flag), `p < nranks`, not this rank.
    unsafe fn peer_output(&self, p: u32) -> Option<u64> {
        // SAFETY: `flags` is this channel's `[u64; 5 × nranks]` in this rank's memory; entry
        // `output_slots() + p` is written only by `p`, before the fence that precedes the
        // flag this epoch's exchange acquired (this function's contract), and not again
        // before this rank's flag of the next epoch.
        let published = unsafe {
            let flags = (&raw const (*self.conns).flags).read() as *const u64;
            arch::ld_volatile_global(flags.wrapping_add((self.output_slots() + u64::from(p)) as usize))
        };
        (published != NOT_DIRECT).then_some(published)
    }

    /// Copies `n` elements from `src` into `owner`'s staging buffer of this epoch at
    /// element `at` (and into `also`, when given), through the operator's pre-op: this
    /// rank's own staging, or a peer's (the push form: stores into the peer's memory).
    ///
    /// # Safety
    /// Every thread of the CTA calls it with the same arguments; `owner < nranks`; `src`
    /// (and `also`) hold `n` elements, `[at, at + n)` lies in this channel's staging buffer,
    /// and `also` is disjoint from `src`.
    unsafe fn stage_in(&self, src: u64, owner: u32, at: u64, also: Option<u64>, n: u64) {
        let staged = self.staged(owner, at);
        let (dsts, ndsts) = match also {
            Some(dst) => ([staged, dst], 2),
            None => ([staged, staged], 1),
        };
        // SAFETY: the whole CTA (a multiple of 32 threads) calls it with the same arguments;
        // the buffers hold `n` element-aligned elements (this function's contract), the
        // staging is disjoint from the user buffers.
        unsafe { transform(self.w, self.data, true, false, src, dsts, ndsts, n as usize) }
    }

    /// True when this channel's part of a `function` run by `algorithm`, of `n` elements,
    /// pushes (see the push form): staged inputs, an operator without a pre-op (the own
    /// input is reduced where it lies, so it must need nothing done to it first), and
    /// staging with room for what every peer pushes ([`push_fits`]).
    fn pushes(&self, function: CollFunction, algorithm: Algorithm, n: u64) -> bool {
        self.heap_input.is_none() && !self.data.has_pre_op() && push_fits(function, algorithm, self.elt(), n, self.cx.nranks, self.cx.staging_slot_bytes)
    }

    /// Where rank `from`'s pushed data lies in rank `to`'s staging buffer (`from != to`),
    /// in units of what each peer pushes: `to`'s peers in rank order.
    fn slot(from: u32, to: u32) -> u64 {
        u64::from(if from < to { from } else { from - 1 })
    }

    /// This rank's peers, from the next rank on round the ring: each rank starts its
    /// pushes at a different peer.
    fn peers(&self) -> impl Iterator<Item = u32> {
        let (rank, nranks) = (self.cx.rank, self.cx.nranks);
        (1..nranks).map(move |k| if rank + k < nranks { rank + k } else { rank + k - nranks })
    }

    /// A pushed call's sources in rank order: this rank's `own` (its input, where it lies)
    /// and what every peer pushed into this rank's staging buffer of this epoch, `unit`
    /// elements each, from element `at`.
    fn own_and_pushed(&self, own: u64, at: u64, unit: u64) -> [u64; MAX_SHOT_RANKS] {
        let (rank, nranks) = (self.cx.rank, self.cx.nranks);
        core::array::from_fn(|p| match p as u32 {
            p if p >= nranks => 0,
            p if p == rank => own,
            p => self.staged(rank, at + Self::slot(p, rank) * unit),
        })
    }

    /// Copies `n` elements from `src` to `dst` as they are.
    ///
    /// # Safety
    /// Every thread of the CTA calls it with the same arguments; `src` and `dst` hold `n`
    /// elements, disjoint.
    unsafe fn copy(&self, src: u64, dst: u64, n: u64) {
        // SAFETY: this function's contract is `transform`'s for a plain copy.
        unsafe { transform(self.w, self.data, false, false, src, [dst, dst], 1, n as usize) }
    }

    /// Copies `n` elements from `src` to both `dsts` as they are, in one pass.
    ///
    /// # Safety
    /// Every thread of the CTA calls it with the same arguments; `src` and both `dsts`
    /// hold `n` elements, the destinations disjoint from the source.
    unsafe fn copy_to_both(&self, src: u64, dsts: [u64; 2], n: u64) {
        // SAFETY: this function's contract is `transform`'s for a plain copy to two
        // destinations.
        unsafe { transform(self.w, self.data, false, false, src, dsts, 2, n as usize) }
    }

    /// Reduces `n` elements at `srcs` (every rank's, in rank order) into `dsts` (the first
    /// `ndsts`), with the operator's post-op.
    ///
    /// # Safety
    /// Every thread of the CTA calls it with the same arguments; the first `nranks` of
    /// `srcs` and the first `ndsts` of `dsts` hold `n` elements, destinations overlapping
    /// sources only exactly.
    unsafe fn reduce(&self, srcs: [u64; MAX_SHOT_RANKS], dsts: [u64; 2], ndsts: usize, n: u64) {
        // SAFETY: this function's contract is `reduce`'s for `2 <= nranks <=
        // MAX_SHOT_RANKS` sources (a one-shot/two-shot plan runs on such communicators
        // only).
        unsafe { reduce::<MAX_SHOT_RANKS, 0>(self.w, self.data, true, srcs, self.cx.nranks as usize, dsts, ndsts, n as usize) }
    }

    /// The flag value of this epoch's staged data.
    fn shot_flag(&self) -> u64 {
        2 * self.epoch - 1
    }

    /// One-shot all-reduce (`root` `None`: every rank reduces into its output) or reduce
    /// (only the root does) of elements `[begin, begin + n)`: every rank stages its share,
    /// then reduces every rank's.
    ///
    /// # Safety
    /// As [`run`], for this channel's share.
    #[inline(never)]
    unsafe fn reduce_one_shot(&self, c: &Coll, begin: u64, n: u64, root: Option<u32>) -> Result<(), (LoopError, u32)> {
        let elt = self.elt();
        if root.is_none() && self.pushes(CollFunction::AllReduce, Algorithm::OneShot, n) {
            let (own, out) = (c.input + begin * elt, c.output + begin * elt);
            // SAFETY: the caller's contract: the share is in the user buffers and, in its slot,
            // in every peer's staging buffer of this epoch, which holds every peer's
            // (`pushes`); the output overlaps the input only exactly (in place).
            unsafe {
                for q in self.peers() {
                    self.stage_in(own, q, Self::slot(self.cx.rank, q) * n, None, n);
                }
                self.exchange(self.shot_flag())?;
                self.reduce(self.own_and_pushed(own, 0, n), [out, out], 1, n);
            }
            return Ok(());
        }
        // SAFETY: the caller's contract: the share is in the user buffers (the output: on
        // every rank that writes it) and the staging.
        unsafe {
            self.stage_in(c.input + begin * elt, self.cx.rank, 0, None, n);
            self.exchange(self.shot_flag())?;
            if root.is_none_or(|r| r == self.cx.rank) {
                let out = c.output + begin * elt;
                self.reduce(self.every_rank(0), [out, out], 1, n);
            }
        }
        Ok(())
    }

    /// Two-shot all-reduce of elements `[begin, begin + n)`: rank `r` reduces block `r`
    /// of the share (blocks of whole packs, the last ones shorter or empty) into its
    /// staging and its output, then copies every peer's block. Inputs read in the heap
    /// are not staged: block `r` is reduced from them.
    ///
    /// # Safety
    /// As [`run`], for this channel's share.
    #[inline(never)]
    unsafe fn all_reduce_two_shot(&self, c: &Coll, begin: u64, n: u64) -> Result<(), (LoopError, u32)> {
        let elt = self.elt();
        let block = two_shot_block(n, self.cx.nranks, elt);
        let (from, len) = block_range(self.cx.rank, block, n);
        let out = c.output + (begin + from) * elt;
        if self.pushes(CollFunction::AllReduce, Algorithm::TwoShot, n) {
            // SAFETY: as below; every peer's staging buffer holds a block from each of its
            // peers at `slot × block` and another from `(nranks − 1) × block` on (`pushes`).
            return unsafe { self.all_reduce_two_shot_pushed(c, begin, n, block) };
        }
        // SAFETY: the caller's contract: the share is in the user buffers and the staging;
        // each block lies inside the share; a rank's reduced block goes over its own staged
        // block exactly; `heap_input` is what `heap_input` returned (`run`), `in_heaps`'s
        // contract.
        unsafe {
            if self.heap_input.is_none() {
                self.stage_in(c.input + begin * elt, self.cx.rank, 0, None, n);
            }
            self.exchange(self.shot_flag())?;
            let srcs = match self.heap_input {
                Some(heap) => self.in_heaps(heap, begin + from),
                None => self.every_rank(from),
            };
            self.reduce(srcs, [self.staged(self.cx.rank, from), out], 2, len);
            self.exchange(2 * self.epoch)?;
            self.gather_blocks(c.output + begin * elt, block, n);
        }
        Ok(())
    }

    /// Two-shot all-reduce of elements `[begin, begin + n)` in the push form: rank `r`
    /// pushes block `q` of its input into peer `q`'s staging (in `r`'s slot), reduces its
    /// own block from its input and what the peers pushed into its output, and pushes
    /// that to every peer: straight into the peer's output where the peer published one
    /// (see the module's direct outputs), else into its staging (in `r`'s slot after the
    /// first `nranks − 1`), two peers a pass after the first; once every peer has done the
    /// same, a rank that published no output copies every peer's reduced block from its
    /// own staging into its output.
    ///
    /// # Safety
    /// As [`run`], for this channel's share, where [`Shot::pushes`] holds for it
    /// (`block`: its [`two_shot_block`]).
    #[inline(never)]
    unsafe fn all_reduce_two_shot_pushed(&self, c: &Coll, begin: u64, n: u64, block: u64) -> Result<(), (LoopError, u32)> {
        let (elt, rank) = (self.elt(), self.cx.rank);
        // SAFETY: the caller's contract: every block lies inside the share, in the user
        // buffers, and every slot inside the staging buffers (`pushes`); the output overlaps
        // the input only exactly (in place), and block `r` of the output is written only
        // after block `r` of the input was read, other blocks only after the first flag
        // (by the peers, into an output they published) or the second (by this rank).
        unsafe {
            for q in self.peers() {
                let (from, len) = block_range(q, block, n);
                self.stage_in(c.input + (begin + from) * elt, q, Self::slot(rank, q) * block, None, len);
            }
            self.exchange(self.shot_flag())?;
            self.send_reduced_block(c, begin, n, block);
            self.exchange(2 * self.epoch)?;
            if self.published_output == NOT_DIRECT {
                self.copy_reduced_blocks_out(c, begin, n, block);
            }
        }
        Ok(())
    }

    /// Pushed two-shot, after the first flag: reduces this rank's block from its input and
    /// what the peers pushed into its output and into the first peer's destination
    /// ([`Shot::reduced_destination`]), then copies it to the other peers', two a pass.
    ///
    /// # Safety
    /// As [`Shot::all_reduce_two_shot_pushed`], after its first exchange.
    #[inline(never)]
    unsafe fn send_reduced_block(&self, c: &Coll, begin: u64, n: u64, block: u64) {
        let (elt, rank) = (self.elt(), self.cx.rank);
        let (from, len) = block_range(rank, block, n);
        let out = c.output + (begin + from) * elt;
        // SAFETY: the caller's contract: after the first exchange, so every peer's published
        // output is read as `reduced_destination` needs; the block lies inside the share,
        // and every destination holds it (a peer's output at the same elements, or this
        // rank's slot of the peer's staging).
        unsafe {
            let mut peers = self.peers();
            let first = peers.next().map_or(out, |q| self.reduced_destination(q, begin + from, block));
            self.reduce(self.own_and_pushed(c.input + (begin + from) * elt, 0, block), [out, first], 2, len);
            if self.cx.nranks > 2 {
                // Every thread's stores to `out` before any thread's loads of it.
                arch::barrier_sync_all();
                while let Some(q) = peers.next() {
                    let to = self.reduced_destination(q, begin + from, block);
                    match peers.next() {
                        Some(q2) => self.copy_to_both(out, [to, self.reduced_destination(q2, begin + from, block)], len),
                        None => self.copy(out, to, len),
                    }
                }
            }
        }
    }

    /// Where peer `q` takes this rank's reduced block, whose first element is `ix` of the
    /// count: straight in its output where it published one (see the module's direct
    /// outputs), else this rank's slot of its staging after the first `nranks − 1`.
    ///
    /// # Safety
    /// As [`Shot::peer_output`].
    unsafe fn reduced_destination(&self, q: u32, ix: u64, block: u64) -> u64 {
        let reduced = u64::from(self.cx.nranks - 1) * block;
        // SAFETY: this function's contract is `peer_output`'s.
        match unsafe { self.peer_output(q) } {
            Some(output) => output + ix * self.elt(),
            None => self.staged(q, reduced + Self::slot(self.cx.rank, q) * block),
        }
    }

    /// Pushed two-shot, after the second flag, on a rank that published no output: copies
    /// every peer's reduced block from its slot of this rank's staging into the output.
    ///
    /// # Safety
    /// As [`Shot::all_reduce_two_shot_pushed`], after its second exchange.
    #[inline(never)]
    unsafe fn copy_reduced_blocks_out(&self, c: &Coll, begin: u64, n: u64, block: u64) {
        let (elt, rank) = (self.elt(), self.cx.rank);
        let reduced = u64::from(self.cx.nranks - 1) * block;
        for p in self.peers() {
            let (from, len) = block_range(p, block, n);
            // SAFETY: the caller's contract: every peer's reduced block lies in its slot of
            // this rank's staging, and at the same elements of the output.
            unsafe { self.copy(self.staged(rank, reduced + Self::slot(p, rank) * block), c.output + (begin + from) * elt, len) };
        }
    }

    /// Two-shot's second step: copies every peer's reduced block (block `p`: elements `[p
    /// × block, (p + 1) × block)` of the `n`, clipped) from its staging to `out` at the
    /// same elements.
    ///
    /// # Safety
    /// Every thread of the CTA calls it with the same arguments, after the second
    /// exchange; `out` holds `n` elements.
    #[inline(never)]
    unsafe fn gather_blocks(&self, out: u64, block: u64, n: u64) {
        let elt = self.elt();
        for p in (0..self.cx.nranks).filter(|&p| p != self.cx.rank) {
            let (from, len) = block_range(p, block, n);
            // SAFETY: block `p` lies inside the share, in the peer's staging and in `out`.
            unsafe { self.copy(self.staged(p, from), out + from * elt, len) };
        }
    }

    /// Reduce-scatter of elements `[begin, begin + n)` of every block: stages this
    /// channel's share of every rank's block (block `p` at `p × share` in the staging),
    /// then reduces its own block of every rank's staging into its output.
    ///
    /// # Safety
    /// As [`run`], for this channel's share (`share` the plan's, `nranks × share`
    /// elements fitting the staging buffer).
    #[inline(never)]
    unsafe fn reduce_scatter(&self, c: &Coll, begin: u64, n: u64, share: u64) -> Result<(), (LoopError, u32)> {
        let elt = self.elt();
        let block = |p: u32| c.input + (u64::from(p) * c.count + begin) * elt;
        if self.pushes(CollFunction::ReduceScatter, Algorithm::OneShot, n) {
            let out = c.output + begin * elt;
            // SAFETY: the caller's contract: each peer's block's share is inside the input and
            // fits its slot of the peer's staging buffer (`pushes`); the own block's share is
            // inside the input, and the output, which holds `count`, overlaps it only exactly
            // (in place: the own block is the output).
            unsafe {
                for q in self.peers() {
                    self.stage_in(block(q), q, Self::slot(self.cx.rank, q) * n, None, n);
                }
                self.exchange(self.shot_flag())?;
                self.reduce(self.own_and_pushed(block(self.cx.rank), 0, n), [out, out], 1, n);
            }
            return Ok(());
        }
        // SAFETY: the caller's contract: block `p`'s share is inside the input's `nranks ×
        // count` elements and fits at `p × share` in the staging; the output holds `count`.
        unsafe {
            for p in 0..self.cx.nranks {
                self.stage_in(block(p), self.cx.rank, u64::from(p) * share, None, n);
            }
            self.exchange(self.shot_flag())?;
            let out = c.output + begin * elt;
            self.reduce(self.every_rank(u64::from(self.cx.rank) * share), [out, out], 1, n);
        }
        Ok(())
    }

    /// All-gather of elements `[begin, begin + n)` of every rank's input: stages the
    /// share (and copies it into the own block of the output, unless in place), then
    /// copies every peer's staged share into its block.
    ///
    /// # Safety
    /// As [`run`], for this channel's share.
    #[inline(never)]
    unsafe fn all_gather(&self, c: &Coll, begin: u64, n: u64) -> Result<(), (LoopError, u32)> {
        let elt = self.elt();
        let block = |p: u32| c.output + (u64::from(p) * c.count + begin) * elt;
        let in_place = c.input == c.output.wrapping_add(u64::from(self.cx.rank) * c.count * elt);
        if self.pushes(CollFunction::AllGather, Algorithm::OneShot, n) {
            let rank = self.cx.rank;
            // SAFETY: the caller's contract: the share is inside the input, inside every block of
            // the output (in place, the own block is the input itself) and, in its slot, in
            // every peer's staging buffer of this epoch and this rank's (`pushes`).
            unsafe {
                let mut own_block = (!in_place).then(|| block(rank));
                for q in self.peers() {
                    self.stage_in(c.input + begin * elt, q, Self::slot(rank, q) * n, own_block.take(), n);
                }
                self.exchange(self.shot_flag())?;
                for p in self.peers() {
                    self.copy(self.staged(rank, Self::slot(p, rank) * n), block(p), n);
                }
            }
            return Ok(());
        }
        // SAFETY: the caller's contract: the share is inside the input and inside every
        // block of the output; in place, the own block is the input itself.
        unsafe {
            self.stage_in(c.input + begin * elt, self.cx.rank, 0, (!in_place).then(|| block(self.cx.rank)), n);
            self.exchange(self.shot_flag())?;
            for p in (0..self.cx.nranks).filter(|&p| p != self.cx.rank) {
                self.copy(self.staged(p, 0), block(p), n);
            }
        }
        Ok(())
    }

    /// Broadcast of elements `[begin, begin + n)`: the root stages its share (and copies
    /// it into its output, unless in place), every rank exchanges flags, the others copy
    /// the root's staged share.
    ///
    /// # Safety
    /// As [`run`], for this channel's share.
    #[inline(never)]
    unsafe fn broadcast(&self, c: &Coll, begin: u64, n: u64) -> Result<(), (LoopError, u32)> {
        let elt = self.elt();
        let out = c.output + begin * elt;
        // SAFETY: the caller's contract: the share is inside the input and the output, which
        // are the same buffer or disjoint.
        unsafe {
            if self.cx.rank == c.root {
                self.stage_in(c.input + begin * elt, self.cx.rank, 0, (c.input != c.output).then_some(out), n);
            }
            self.exchange(self.shot_flag())?;
            if self.cx.rank != c.root {
                self.copy(self.staged(c.root, 0), out, n);
            }
        }
        Ok(())
    }
}
