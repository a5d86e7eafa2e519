//! The LL one-shot collectives: a small stream-ordered all-reduce, all-gather or
//! reduce-scatter run by CTAs of the call kernel with nothing before them but a few checks
//! (no item validation pass, no plan, no channel context), its data travelling as NCCL's
//! LL packets. The all-reduce is described below; the all-gather sends the same line of
//! its input to every peer and stores every rank's line in that rank's block of the
//! output; the reduce-scatter sends each peer the line of the peer's block of its input
//! and reduces the lines of its own block, in rank order, into its output.
//!
//! The call's lines (line `l`: bytes `[8l, 8l + 8)` of every rank's block) are cut into
//! runs ([`LlPlan`], [`ll_runs`]); CTA `g` of the run, from the call kernel's first
//! call channel, takes run `g` on its own channel (the call channel it is), and each of its
//! threads the lines `t, t + nthreads, …` of the run: one where the call channels hold one
//! line a thread, a few more up to [`ll_max_bytes`]. A thread first sends each of its lines
//! (its first alone, the others in batches whose loads are in flight together):
//! it loads the line of the input (through the operator's pre-op) and writes it as one
//! 16-byte line of two packets into its rank's slot of every peer's packet region (see
//! `conn::PACKET_SLOT_BYTES`), each 8-byte packet 4 data bytes and the epoch's flag in one
//! single-copy atomic store. Then, its first line and then batch after batch, it waits
//! for the same line of every peer in its own region, reduces the ranks' lines in rank
//! order `((x0 ⊕ x1) ⊕ x2) ⊕ …` (the one-shot's order, so the same bits),
//! applies the post-op and stores its line of the output (its own rank's word of its
//! first line it keeps from the sending pass, of the others it loads again). A reader
//! that sees a line whose two flags are the epoch's has its 8 bytes: no fence, no
//! separate flag, and every wait polls local memory.
//!
//! The device takes it for calls of up to [`ll_max_bytes`] when it chooses the
//! algorithm ([`AlgorithmChoice::Auto`](super::AlgorithmChoice::Auto)); a communicator
//! that forces one-shot runs the one-shot at every size (the same bits). Small calls take
//! it because it has no preamble: an 8-byte all-reduce in a CUDA graph takes under half
//! the one-shot's time. A thread keeps one line's state at a time: a form that held up
//! to 16 lines a thread at once in arrays lost to the one-shot from 8 KiB (see
//! docs/tuning.md, `LlPlan`).
//!
//! Line 0 of each CTA's slot carries the call's descriptor (the one-shot/two-shot
//! collectives' digest of count, function, type and operator): each thread waits for every
//! peer's descriptor in the same poll as the peer's first line of its own (no separate
//! round trip, no barrier), compares it with its own before it stores any output, and stops
//! the call with `BadItem::RanksDisagree` where one differs. Every thread that stores reads
//! the same descriptors, so none stores where they differ.
//!
//! # Epochs and reuse
//!
//! Each CTA's run is an epoch of the one-shot/two-shot collectives of its channel: it reads
//! the channel's epoch, writes parity
//! `e % 2` of the packet regions, and stores `e` after its last barrier. Rank `r` writes
//! its slot of parity `e % 2` in peer `q`'s memory in epoch `e`, and before that in epoch
//! `e − 2` at the latest; `q` read those lines in epoch `e − 2` and used what it read
//! (reduced and stored it) before the CTA barrier that ends that epoch, so those loads had
//! returned before anything `q` wrote in epoch `e − 1`, which `r` saw before entering
//! epoch `e` (`q`'s packets of an LL epoch, or its flag of a one-shot/two-shot one, raised
//! after its reads of epoch `e − 2`). A stale line holds the flag of an earlier epoch of
//! its parity, never this epoch's ([`packet_flag`]), so it is never taken for this epoch's.
//!
//! Every wait is bounded by the abort flag and the spin budget (a timeout is reported at
//! `WaitSite::ShotFlag`).

use super::function::CollFunction;
use super::select::RANKS_DISAGREE;
use crate::abi::{LoopError, WaitSite};
use crate::arch::{self, AtomicWord};
use crate::conn::{ChannelStats, MAX_SHOT_RANKS, PACKET_SLOT_BYTES, StagingConns};
use crate::dtype::{Bf16, DataType, F16};
use crate::pack::BytePack;
use crate::redop::{Elem, Max, Min, PreMulSum, Prod, RedOp, RedOpKind, Sum, SumPostDiv};
use crate::spin::{Interrupted, SpinGuard};

pub use super::ll_plan::{LL_ALL_REDUCE_MAX_BYTES_OVER_TWO, LL_GATHER_SCATTER_MAX_BYTES, LL_MAX_BYTES, LlCall, LlComm, LlPlan, ll_max_bytes, ll_plan, ll_runs};

/// The flag of epoch `epoch`'s packets: its low 32 bits, never 0 (a zeroed region holds
/// no packet of any epoch). Two epochs of one parity share a flag only 2³² epochs apart.
pub fn packet_flag(epoch: u64) -> u32 {
    match epoch as u32 {
        0 => 1,
        low => low,
    }
}

impl LlCall {
    /// The one-shot/two-shot collectives' call descriptor of this call (see `shot`).
    fn descriptor(&self) -> u64 {
        super::shot::call_digest(self.function, self.dtype, self.op, 0, self.count, None)
    }
}

/// What a CTA's [`ll_collective`] did without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LlRun {
    /// It ran its lines and advanced its channel's epoch.
    Done,
    /// Its `open` said no: it left before any effect (nothing sent or stored, the epoch
    /// kept).
    Left,
}

/// The CTA's `stopped` word once thread 0's `open` said no (its low half is no
/// `LoopError`).
const LEFT: u64 = u64::MAX;

/// Runs lines `lines` of every block of `call` as an LL collective on this CTA (see the
/// module doc), spread over its threads, every thread of the CTA calling it with the same
/// arguments; `stopped` is a `u64` of the CTA's shared memory that this function owns
/// for the call. Counts the run in the channel's statistics (`stats`, or null) as a
/// one-shot with its packets and its wait.
///
/// Thread 0 calls `open` once, before the CTA's first barrier and after every thread has
/// issued its loads of the epoch and of its first input line, and the whole CTA leaves
/// ([`LlRun::Left`]) where it says no: a caller that loads what `open` tests first hands
/// over its latency to those loads.
///
/// # Safety
/// `conns` is the staging memory of this CTA's channel (`first + g` of a [`ll_plan`] for
/// this CTA's thread count and `call`, `lines` its CTA `g`'s lines), on the rank's live
/// communicator whose fields `comm` holds ([`LlComm::load`]); `call`'s buffers hold what its function addresses
/// (`count` elements a rank's block); `stopped` is an aligned `u64` of this CTA's dynamic
/// shared memory that nothing else uses during the call; `abort` is
/// the host's abort flag, readable for the call; one CTA at a time runs the channel (the
/// call kernels of one stream run one after another).
#[allow(clippy::too_many_arguments)]
pub unsafe fn ll_collective(
    comm: &LlComm,
    conns: *mut StagingConns,
    call: &LlCall,
    lines: core::ops::Range<u64>,
    stopped: *mut u64,
    abort: *const u64,
    spin_budget_ns: u64,
    stats: *mut ChannelStats,
    open: impl FnOnce() -> bool,
) -> Result<LlRun, (LoopError, u32)> {
    let tid = arch::thread_idx();
    let (rank, nranks) = (comm.rank, comm.nranks);
    // SAFETY: `conns` is the channel's live staging memory (this function's contract);
    // every thread reads the epoch before the first barrier, thread 0 writes it after the
    // last.
    let epoch = unsafe { (&raw const (*conns).epoch).read_volatile() } + 1;
    let flag = u64::from(packet_flag(epoch)) << 32;
    let parity = (epoch & 1) * u64::from(nranks) * PACKET_SLOT_BYTES;
    // SAFETY: as above.
    let region = |p: u32| unsafe { packet_region(conns, parity, p) };
    let peer = |i: u32| peer_of(rank, nranks, i);
    // Its own region (every wait polls it) and its first peer's, loaded before the barrier.
    let (own_region, next_region) = (region(rank), region(peer(1)));
    let slot = |p: u32, sender: u32| {
        let base = if p == rank {
            own_region
        } else if p == peer(1) {
            next_region
        } else {
            region(p)
        };
        base + u64::from(sender) * PACKET_SLOT_BYTES
    };
    let started = if stats.is_null() { 0 } else { arch::globaltimer_ns() };
    let block = call.bytes();
    let (nthreads, run) = (u64::from(arch::block_dim()), lines.end - lines.start);
    let scatter = call.function == CollFunction::ReduceScatter;
    // Line `line` of the input that rank `p` gets (reduce-scatter: of block `p`), as loaded.
    let input_line = |p: u32, line: u64| {
        let from = if scatter { call.input + u64::from(p) * block } else { call.input };
        // SAFETY: a line of `lines` lies in the input's block of `count` elements (this
        // function's contract), element-aligned (`ll_plan`).
        unsafe { load_line(call, from, line) }
    };
    // What this rank sends: the input's line through the pre-op where the function reduces.
    let pre_op = |word: u64| if call.function == CollFunction::AllGather { word } else { pre_op_word(call, word) };
    let send = |p: u32, line: u64| pre_op(input_line(p, line));
    // The thread's first line of this rank's own (block of the) input, and of a
    // reduce-scatter also of its first peer's block, loaded before the barrier (their
    // pre-op after it) so that their latency overlaps the epoch's and `open`'s: only
    // loads, no effect.
    let has_first = u64::from(tid) < run;
    let first_loaded = if has_first { input_line(rank, lines.start + u64::from(tid)) } else { 0 };
    let next_loaded = if has_first && scatter { input_line(peer(1), lines.start + u64::from(tid)) } else { 0 };
    if tid == 0 {
        // SAFETY: `stopped` is this CTA's shared word (this function's contract), accessed
        // only through `arch`'s shared-word functions, written by thread 0 before the barrier
        // after which other threads may write it.
        unsafe { arch::st_volatile_shared_b64(stopped, if open() { 0 } else { LEFT }) };
    }
    arch::barrier_sync_all();
    // Only thread 0 writes `LEFT`, before the barrier, and nothing overwrites it (`stop`
    // writes a running call's word only); a faster thread may already have stopped the
    // call with an error, which is not `LEFT`: every thread answers alike.
    // SAFETY: as for `stopped`'s write above.
    if unsafe { arch::ld_volatile_shared_b64(stopped) } == LEFT {
        return Ok(LlRun::Left);
    }
    let first = pre_op(first_loaded);
    let first_to_next = if scatter { pre_op(next_loaded) } else { first };
    let packets = |word: u64| packets(word, flag);
    if tid == 0 {
        for p in (1..nranks).map(peer) {
            // SAFETY: line 0 of this rank's slot of this parity in `p`'s packet region,
            // 16-byte aligned, written only by this rank (see the module's reuse).
            unsafe { arch::st_volatile_global_v2b64(slot(p, rank), packets(call.descriptor())) };
        }
    }
    // The thread's lines are `lines.start + j` for `j = tid, tid + nthreads, …` below
    // `run`, line `j + 1` of a slot (after the descriptor's): its first one (loaded above)
    // here, the others, where it has more, in batches ([`send_rest`], [`receive_rest`]:
    // functions of their own, so that this path compiles alone).
    let at = slot_line(u64::from(tid));
    if has_first {
        for i in 1..nranks {
            let p = peer(i);
            let word = match (scatter, i) {
                (true, 1) => first_to_next,
                (true, _) => send(p, lines.start + u64::from(tid)),
                (false, _) => first,
            };
            // SAFETY: as above, line `tid + 1 <= PACKET_SHARE_BYTES / 8` of the slot (`ll_runs`:
            // at most that many lines a CTA), inside its `PACKET_SLOT_BYTES`.
            unsafe { arch::st_volatile_global_v2b64(slot(p, rank) + at, packets(word)) };
        }
    }
    let more = u64::from(tid) + nthreads < run;
    if more {
        // SAFETY: `conns` is the channel's staging memory, `lines` CTA `g`'s and `call`'s
        // buffers hold its blocks (this function's contract), `parity` and `flag` this
        // epoch's.
        unsafe { send_rest(call, conns, parity, rank, nranks, flag, lines.start, run) };
    }
    // With its first line, a thread waits for the peer's descriptor (line 0 of the slot at
    // `from`) too, in the same poll, and stores nothing where one differs from its own.
    // SAFETY: `abort` is readable for the call (this function's contract), the guards live
    // only in this call; both lines of the peer's slot in this rank's region.
    let checked = |from: u64| match unsafe { wait_lines([from, from + at], flag, stopped, abort, spin_budget_ns) } {
        Some([descriptor, word]) if descriptor == call.descriptor() => Some(word),
        Some(_) => {
            // SAFETY: `stopped` is this CTA's shared word (this function's contract).
            unsafe { stop(stopped, LoopError::BadItem.status(RANKS_DISAGREE)) };
            None
        }
        None => None,
    };
    // SAFETY: `stopped` is this CTA's shared word (this function's contract).
    let running = || unsafe { is_running(stopped) };
    if has_first && running() {
        let line = lines.start + u64::from(tid);
        let mut acc = 0;
        for p in 0..nranks {
            let word = if p == rank { Some(first) } else { checked(slot(rank, p)) };
            let Some(word) = word else { break };
            if call.function == CollFunction::AllGather {
                // SAFETY: as for the input, in rank `p`'s block of the output.
                unsafe { store_line(call, call.output + u64::from(p) * block, line, word) };
            } else {
                acc = if p == 0 { word } else { reduce_word(call, acc, word) };
            }
        }
        if call.function != CollFunction::AllGather && running() {
            // SAFETY: as for the input, in the output's `count` elements.
            unsafe { store_line(call, call.output, line, post_op_word(call, acc)) };
        }
    }
    if more && running() {
        // SAFETY: as for `send_rest`; `stopped` and `abort` as for `checked`; the
        // descriptors matched (this thread's first line's wait).
        unsafe { receive_rest(call, own_region, rank, nranks, lines.start, run, flag, stopped, abort, spin_budget_ns) };
    }
    arch::barrier_sync_all();
    // SAFETY: as for `stopped`'s write above; the barrier orders every thread's writes.
    let status = unsafe { arch::ld_volatile_shared_b64(stopped) };
    if status != 0 {
        return Err(crate::prims::decode_stop(status));
    }
    if tid == 0 {
        // SAFETY: as for the epoch's read: every thread read it before the barriers.
        unsafe { (&raw mut (*conns).epoch).write_volatile(epoch) };
        if !stats.is_null() {
            // SAFETY: a non-null `stats` is the channel's live counters, changed only by
            // atomic adds (this function's contract).
            unsafe {
                u64::atomic_add_relaxed_gpu(&raw mut (*stats).algorithm_items[super::Algorithm::OneShot as usize], 1);
                u64::atomic_add_relaxed_gpu(&raw mut (*stats).packet_items, 1);
                u64::atomic_add_relaxed_gpu(&raw mut (*stats).exchange_ns, arch::globaltimer_ns().wrapping_sub(started).max(1));
            }
        }
    }
    Ok(LlRun::Done)
}

/// Rank `p`'s packet region of the epoch parity at offset `parity` (see
/// [`ll_collective`]).
///
/// # Safety
/// `conns` is a live channel's staging memory, `p` a rank of its communicator
/// (`p < nranks <= MAX_SHOT_RANKS`, an entry the host wrote).
unsafe fn packet_region(conns: *const StagingConns, parity: u64, p: u32) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { (&raw const (*conns).packets[p as usize % MAX_SHOT_RANKS]).read() + parity }
}

/// Rank `rank`'s `i`-th peer of `nranks`: a rank sends to its peers in the order `rank + 1,
/// rank + 2, …` (modulo `nranks`), so the ranks do not all start with the same peer.
fn peer_of(rank: u32, nranks: u32, i: u32) -> u32 {
    if rank + i < nranks { rank + i } else { rank + i - nranks }
}

/// The two packets of a line that carries `word` in the epoch whose flag (shifted into
/// the high half) is `flag`.
fn packets(word: u64, flag: u64) -> [u64; 2] {
    [(word & 0xffff_ffff) | flag, (word >> 32) | flag]
}

/// Byte offset in a slot of the line of run index `j` (line 0 holds the descriptor).
fn slot_line(j: u64) -> u64 {
    (j + 1) * 16
}

/// The sending pass of [`ll_collective`] over the thread's lines past its first (run
/// indices `tid + nthreads, tid + 2 nthreads, …` below `run`, lines `start + j` of every
/// block): in [`Batch`]es whose loads are in flight together, each line sent as in the
/// first line's pass to every peer. A function of its own, entered only by threads with
/// more than one line.
///
/// # Safety
/// `conns` is the channel's staging memory of an LL run of `call` on a communicator of
/// `nranks` ranks whose rank is `rank`, `parity` and `flag` its epoch's; lines `start..start +
/// run` lie in each of `call`'s input blocks, element-aligned (`ll_plan`), and fit a
/// slot (`ll_runs`).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn send_rest(call: &LlCall, conns: *const StagingConns, parity: u64, rank: u32, nranks: u32, flag: u64, start: u64, run: u64) {
    let nthreads = u64::from(arch::block_dim());
    let scatter = call.function == CollFunction::ReduceScatter;
    let input_of = |p: u32| if scatter { call.input + u64::from(p) * call.bytes() } else { call.input };
    let mut batch = Batch::starting_at(u64::from(arch::thread_idx()) + nthreads, nthreads, run);
    while let Some(b) = batch {
        // SAFETY: a batch's lines lie in the run (`Batch`), in each input block (this
        // function's contract).
        let own = if scatter { [0; LL_BATCH] } else { unsafe { load_batch(call, input_of(rank), start, &b) } };
        for i in 1..nranks {
            let p = peer_of(rank, nranks, i);
            // SAFETY: as for `own`; `p` a rank of the communicator.
            let (words, to) = unsafe {
                let words = if scatter { load_batch(call, input_of(p), start, &b) } else { own };
                (words, packet_region(conns, parity, p) + u64::from(rank) * PACKET_SLOT_BYTES)
            };
            each(words, |k, word| {
                if k < b.len {
                    // SAFETY: line `j + 1` of this rank's slot in `p`'s region for a `j < run`,
                    // inside the slot (this function's contract), written only by this rank.
                    unsafe { arch::st_volatile_global_v2b64(to + slot_line(b.j[k]), packets(word, flag)) };
                }
            });
        }
        batch = b.next(nthreads, run);
    }
}

/// The receiving pass of [`ll_collective`] over the thread's lines past its first (as
/// [`send_rest`] takes them): in [`Batch`]es whose polls are in flight together, each
/// line's ranks reduced in rank order (one switch over the type and operator a batch) and
/// stored, or of an all-gather stored in each rank's block. Stops at the first batch that
/// finds the call stopped.
///
/// # Safety
/// As [`send_rest`], with `own_region` this rank's packet region of the epoch's parity;
/// `stopped`, `abort` and `spin_budget_ns` as in [`ll_collective`]; the output holds what
/// the call's function addresses; the thread's first line found every peer's descriptor
/// equal to its own.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn receive_rest(call: &LlCall, own_region: u64, rank: u32, nranks: u32, start: u64, run: u64, flag: u64, stopped: *mut u64, abort: *const u64, spin_budget_ns: u64) {
    let nthreads = u64::from(arch::block_dim());
    let gather = call.function == CollFunction::AllGather;
    let block = call.bytes();
    let own_input = if call.function == CollFunction::ReduceScatter { call.input + u64::from(rank) * block } else { call.input };
    let mut batch = Batch::starting_at(u64::from(arch::thread_idx()) + nthreads, nthreads, run);
    // SAFETY: `stopped` is this CTA's shared word (this function's contract).
    while let Some(b) = batch.filter(|_| unsafe { is_running(stopped) }) {
        // SAFETY: as in `send_rest`.
        let own = unsafe { load_batch(call, own_input, start, &b) };
        let mut acc = [0; LL_BATCH];
        for p in 0..nranks {
            let from = own_region + u64::from(p) * PACKET_SLOT_BYTES;
            // SAFETY: the batch's lines of `p`'s slot in this rank's region (entries past
            // `len` repeat one); `abort` readable (this function's contract).
            let words = if p == rank { Some(own) } else { unsafe { wait_lines(b.j.map(|j| from + slot_line(j)), flag, stopped, abort, spin_budget_ns) } };
            let Some(words) = words else { break };
            if gather {
                each(words, |k, word| {
                    if k < b.len {
                        // SAFETY: a line of the run in rank `p`'s block of the output.
                        unsafe { store_line(call, call.output + u64::from(p) * block, start + b.j[k], word) };
                    }
                });
            } else {
                // The entries past `len` repeat a line: reduced, never stored.
                acc = if p == 0 { words } else { with_op(call, Words { step: Step::Reduce, a: acc, b: words }) };
            }
        }
        // SAFETY: as for the batch's test above.
        if !gather && unsafe { is_running(stopped) } {
            let out = with_op(call, Words { step: Step::PostOp, a: acc, b: [0; LL_BATCH] });
            each(out, |k, word| {
                if k < b.len {
                    // SAFETY: a line of the run in the output's `count` elements.
                    unsafe { store_line(call, call.output, start + b.j[k], word) };
                }
            });
        }
        batch = b.next(nthreads, run);
    }
}

/// True while no thread has stopped the call. Ordering: relaxed (the word carries only
/// itself; the CTA's barriers order what each thread did before it).
///
/// # Safety
/// `stopped` is the CTA's shared word of [`ll_collective`]: an aligned `u64` in the CTA's
/// shared memory that its threads access only through `arch`'s shared-word functions.
unsafe fn is_running(stopped: *mut u64) -> bool {
    // SAFETY: the CTA's shared word (this function's contract), which threads may write
    // while others read.
    unsafe { arch::ld_volatile_shared_b64(stopped) == 0 }
}

/// Records why the call stops (the first reason wins, or any when two threads stop at
/// once). Ordering: relaxed, as [`is_running`].
///
/// # Safety
/// As [`is_running`].
unsafe fn stop(stopped: *mut u64, status: u64) {
    // SAFETY: this function's contract is `is_running`'s, and the word is writable.
    unsafe {
        if is_running(stopped) {
            arch::st_volatile_shared_b64(stopped, status);
        }
    }
}

/// Waits until each line of `at` holds two packets of `flag` and returns their 8 data
/// bytes each, or `None` once the call is stopped (by this wait's abort or timeout, or by
/// another thread). Every line is loaded in each poll, the loads in flight together.
///
/// Ordering: none beyond the lines' own single-copy atomic halves: a packet that carries
/// the flag carries its data.
///
/// # Safety
/// Every `at` is a 16-byte aligned line of this rank's packet region; `stopped` and
/// `abort` as in [`ll_collective`].
unsafe fn wait_lines<const N: usize>(at: [u64; N], flag: u64, stopped: *mut u64, abort: *const u64, spin_budget_ns: u64) -> Option<[u64; N]> {
    // SAFETY: the caller keeps `abort` readable for the wait.
    let mut guard = unsafe { SpinGuard::new(abort, spin_budget_ns) };
    loop {
        // SAFETY: the caller's lines, each written by one peer with single-copy atomic halves.
        let seen = at.map(|line| unsafe { arch::ld_volatile_global_v2b64(line) });
        if seen.iter().all(|&[a, b]| a & !0xffff_ffff == flag && b & !0xffff_ffff == flag) {
            return Some(seen.map(|[a, b]| (a & 0xffff_ffff) | b << 32));
        }
        // SAFETY: `stopped` is the CTA's shared word (the caller's contract).
        if unsafe { !is_running(stopped) } {
            return None;
        }
        match guard.tick() {
            Ok(()) => {}
            // SAFETY: as above.
            Err(Interrupted::Aborted) => unsafe { stop(stopped, LoopError::Aborted.status(0)) },
            // SAFETY: as above.
            Err(Interrupted::TimedOut) => unsafe { stop(stopped, LoopError::Timeout.status(WaitSite::ShotFlag as u32)) },
        }
    }
}

/// Line `line` of `buffer` (the bytes `[8 line, 8 line + 8)` of the call's, those past
/// its end 0): one 8-byte load where the line is whole and aligned, else one load per
/// element.
///
/// # Safety
/// `buffer` holds the call's `count` elements, element-aligned.
unsafe fn load_line(call: &LlCall, buffer: u64, line: u64) -> u64 {
    let (elt, bytes, at) = (call.dtype.size() as u64, call.bytes(), buffer + line * 8);
    if at % 8 == 0 && line * 8 + 8 <= bytes {
        // SAFETY: 8 aligned bytes inside the buffer (the caller's contract).
        return unsafe { arch::ld_volatile_global_b64(at) };
    }
    let mut word = 0;
    let mut k = 0;
    while k < 8 && line * 8 + k < bytes {
        // SAFETY: an element of the buffer, aligned to its size (the caller's contract).
        let v = unsafe {
            match elt {
                1 => u64::from(arch::ld_volatile_global_b8(at + k)),
                2 => u64::from(arch::ld_volatile_global_b16(at + k)),
                4 => u64::from(arch::ld_volatile_global_b32(at + k)),
                _ => arch::ld_volatile_global_b64(at + k),
            }
        };
        word |= v << (8 * k);
        k += elt;
    }
    word
}

/// Lines a thread's loads and polls take at once past its first line ([`send_rest`],
/// [`receive_rest`]): four lines of a 512 KiB all-reduce on two ranks' 63 call channels
/// take one batch.
const LL_BATCH: usize = 4;

/// `[f(0, a[0]), …, f(3, a[3])]`, written out: a loop over the entries, which the compiler
/// keeps rolled where `f` is large, would index the arrays at run time and put them in
/// local memory.
#[inline(always)]
fn each<T: Copy, U>(a: [T; LL_BATCH], mut f: impl FnMut(usize, T) -> U) -> [U; LL_BATCH] {
    [f(0, a[0]), f(1, a[1]), f(2, a[2]), f(3, a[3])]
}

/// Up to [`LL_BATCH`] of one thread's lines of an LL run: run indices `j[0]`, `j[0] +
/// nthreads`, … below the run's end, `len` (at least 1) of them; the entries past `len`
/// repeat `j[0]`, so that a poll of every entry reads only the batch's lines.
#[derive(Clone, Copy)]
struct Batch {
    j: [u64; LL_BATCH],
    len: usize,
}

impl Batch {
    /// The batch whose first line is run index `first`, of a thread of `nthreads` in a run
    /// of `run` lines, or `None` at or past its end.
    #[inline(always)]
    fn starting_at(first: u64, nthreads: u64, run: u64) -> Option<Self> {
        if first >= run {
            return None;
        }
        // Every index a constant one, so that the batch lives in registers.
        let j = each([0; LL_BATCH], |k, _| first + k as u64 * nthreads);
        let len = j.iter().filter(|&&j| j < run).count();
        Some(Self { j: each(j, |_, j| if j < run { j } else { first }), len })
    }

    /// The thread's next batch.
    #[inline(always)]
    fn next(&self, nthreads: u64, run: u64) -> Option<Self> {
        Self::starting_at(self.j[0] + LL_BATCH as u64 * nthreads, nthreads, run)
    }
}

/// Lines `start + b.j[..b.len]` of `buffer` ([`load_lines`]) through the call's pre-op
/// where its function reduces (the entries past `b.len` 0, or their pre-op).
///
/// # Safety
/// As [`load_lines`].
#[inline(always)]
unsafe fn load_batch(call: &LlCall, buffer: u64, start: u64, b: &Batch) -> [u64; LL_BATCH] {
    // SAFETY: the caller's contract.
    let words = unsafe { load_lines(call, buffer, each(b.j, |_, j| start + j), b.len) };
    if call.function == CollFunction::AllGather { words } else { with_op(call, Words { step: Step::PreOp, a: words, b: [0; LL_BATCH] }) }
}

/// Lines `lines[..len]` of `buffer` as [`load_line`] loads each, every load issued before
/// any is used (one 8-byte load each where the lines are whole and aligned); the entries
/// from `len` on are 0.
///
/// # Safety
/// As [`load_line`] for each of `lines[..len]`, which increase, `1 <= len <= LL_BATCH`.
#[inline(always)]
unsafe fn load_lines(call: &LlCall, buffer: u64, lines: [u64; LL_BATCH], len: usize) -> [u64; LL_BATCH] {
    // The last line is the largest (the entries past `len` repeat the first).
    let last = lines.iter().fold(0, |m, &line| m.max(line));
    if buffer.is_multiple_of(8) && last * 8 + 8 <= call.bytes() {
        // SAFETY: 8 aligned bytes inside the buffer each (the last line whole, the others
        // before it; the caller's contract).
        return each(lines, |k, line| if k < len { unsafe { arch::ld_volatile_global_b64(buffer + line * 8) } } else { 0 });
    }
    // SAFETY: the caller's contract.
    each(lines, |k, line| if k < len { unsafe { load_line(call, buffer, line) } } else { 0 })
}

/// Stores `word` as line `line` of `buffer`, only the bytes inside the call's.
///
/// # Safety
/// As [`load_line`], and the buffer is writable.
unsafe fn store_line(call: &LlCall, buffer: u64, line: u64, word: u64) {
    let (elt, bytes, at) = (call.dtype.size() as u64, call.bytes(), buffer + line * 8);
    if at % 8 == 0 && line * 8 + 8 <= bytes {
        // SAFETY: 8 aligned bytes inside the buffer (the caller's contract).
        return unsafe { arch::st_global_b64(at, word) };
    }
    let mut k = 0;
    while k < 8 && line * 8 + k < bytes {
        let v = word >> (8 * k);
        // SAFETY: an element of the buffer, aligned to its size (the caller's contract).
        unsafe {
            match elt {
                1 => arch::st_global_b8(at + k, v as u8),
                2 => arch::st_global_b16(at + k, v as u16),
                4 => arch::st_global_b32(at + k, v as u32),
                _ => arch::st_global_b64(at + k, v),
            }
        }
        k += elt;
    }
}

/// Which of an operator's steps a word goes through.
#[derive(Clone, Copy)]
enum Step {
    PreOp,
    Reduce,
    PostOp,
}

/// `a ⊕ b` of the elements packed in two 8-byte words, by the call's type and operator.
fn reduce_word(call: &LlCall, a: u64, b: u64) -> u64 {
    let [word] = with_op(call, Words { step: Step::Reduce, a: [a], b: [b] });
    word
}

/// The call's pre-op of every element in `word` (PreMulSum's; the others leave it).
fn pre_op_word(call: &LlCall, word: u64) -> u64 {
    let [word] = with_op(call, Words { step: Step::PreOp, a: [word], b: [0] });
    word
}

/// The call's post-op of every element in `word` (SumPostDiv's; the others leave it).
fn post_op_word(call: &LlCall, word: u64) -> u64 {
    let [word] = with_op(call, Words { step: Step::PostOp, a: [word], b: [0] });
    word
}

/// Work on 8-byte words of a call's elements that [`with_op`] runs with the call's
/// operator.
trait OnOp {
    type Out;
    /// The work with `op`, the call's operator on its element type.
    fn run<Op: RedOp>(self, op: Op) -> Self::Out;
}

/// `task` run with the call's operator on its element type: one switch over both, so that
/// each arm holds the whole of `task`.
#[inline(always)]
fn with_op<T: OnOp>(call: &LlCall, task: T) -> T::Out {
    match call.dtype {
        DataType::I8 => with_op_on::<i8, T>(call, task),
        DataType::U8 => with_op_on::<u8, T>(call, task),
        DataType::I32 => with_op_on::<i32, T>(call, task),
        DataType::U32 => with_op_on::<u32, T>(call, task),
        DataType::I64 => with_op_on::<i64, T>(call, task),
        DataType::U64 => with_op_on::<u64, T>(call, task),
        DataType::F16 => with_op_on::<F16, T>(call, task),
        DataType::F32 => with_op_on::<f32, T>(call, task),
        DataType::F64 => with_op_on::<f64, T>(call, task),
        DataType::Bf16 => with_op_on::<Bf16, T>(call, task),
    }
}

/// [`with_op`] with the element type `E`.
#[inline(always)]
fn with_op_on<E: Elem, T: OnOp>(call: &LlCall, task: T) -> T::Out {
    match call.op {
        RedOpKind::Sum => task.run(Sum::<E>::new(call.arg)),
        RedOpKind::Prod => task.run(Prod::<E>::new(call.arg)),
        RedOpKind::Max => task.run(Max::<E>::new(call.arg)),
        RedOpKind::Min => task.run(Min::<E>::new(call.arg)),
        RedOpKind::PreMulSum => task.run(PreMulSum::<E>::new(call.arg)),
        RedOpKind::SumPostDiv => task.run(SumPostDiv::<E>::new(call.arg)),
    }
}

/// `step` of the call's operator on each word of `a` (with the same word of `b` where it
/// reduces): of one word, or of a batch's ([`LL_BATCH`]).
struct Words<W: WordLanes> {
    step: Step,
    a: W,
    b: W,
}

impl<W: WordLanes> OnOp for Words<W> {
    type Out = W;

    #[inline(always)]
    fn run<Op: RedOp>(self, op: Op) -> W {
        self.a.zip_map(self.b, |a, b| {
            let (a, b) = (BytePack::<8>::from_value(a), BytePack::<8>::from_value(b));
            match self.step {
                Step::PreOp if Op::HAS_PRE_OP => op.pre_op_pack(a),
                Step::Reduce => op.reduce_pack(a, b),
                Step::PostOp if Op::HAS_POST_OP => op.post_op_pack(a),
                _ => a,
            }
            .to_value()
        })
    }
}

/// Words that [`Words`] takes at once: one, or a batch's.
trait WordLanes: Copy {
    /// `f` of each word and the same word of `b`, written out one call a word: a loop over
    /// them, which the compiler keeps rolled where `f` is large (a division per element),
    /// would index the arrays at run time and put them in local memory.
    fn zip_map(self, b: Self, f: impl FnMut(u64, u64) -> u64) -> Self;
}

impl WordLanes for [u64; 1] {
    #[inline(always)]
    fn zip_map(self, b: Self, mut f: impl FnMut(u64, u64) -> u64) -> Self {
        [f(self[0], b[0])]
    }
}

impl WordLanes for [u64; LL_BATCH] {
    #[inline(always)]
    fn zip_map(self, b: Self, mut f: impl FnMut(u64, u64) -> u64) -> Self {
        each(self, |k, a| f(a, b[k]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::PACKET_SHARE_BYTES;

    /// An all-reduce goes LL up to 1 MiB on two ranks and 256 KiB on more; an
    /// all-gather or reduce-scatter up to 2 MiB on two ranks and 1 MiB on more (a default
    /// communicator's 63 call channels of 256 threads). At each 2-rank edge a rank's 1 MiB
    /// block takes 57 CTAs of 2304 lines (nine a thread), inside a 20 KiB packet share.
    #[test]
    fn the_ll_edges_follow_the_rank_count() {
        let runs = |function, nranks: u32, bytes: u64| {
            let per_rank = if function == CollFunction::AllReduce { bytes } else { bytes / u64::from(nranks) };
            ll_runs(function, 4, per_rank / 4, nranks, 63, 256)
        };
        let edge = LlPlan { ctas: 57, lines_per_cta: 2304 };
        assert_eq!(runs(CollFunction::AllReduce, 2, 1 << 20), Some(edge));
        assert!(runs(CollFunction::AllReduce, 2, (1 << 20) + 16).is_none());
        assert!(edge.lines_per_cta * 8 <= PACKET_SHARE_BYTES);
        for function in [CollFunction::AllGather, CollFunction::ReduceScatter] {
            assert_eq!(runs(function, 2, 2 << 20), Some(edge), "{function:?}");
            assert!(runs(function, 2, (2 << 20) + 32).is_none(), "{function:?}");
        }
        for nranks in [3, 4, 8] {
            assert!(runs(CollFunction::AllReduce, nranks, 256 << 10).is_some(), "{nranks}");
            assert!(runs(CollFunction::AllReduce, nranks, (256 << 10) + 16).is_none(), "{nranks}");
            for function in [CollFunction::AllGather, CollFunction::ReduceScatter] {
                assert!(runs(function, nranks, 1 << 20).is_some(), "{function:?} {nranks}");
                assert!(runs(function, nranks, (1 << 20) + 16 * u64::from(nranks)).is_none(), "{function:?} {nranks}");
            }
        }
    }
}
