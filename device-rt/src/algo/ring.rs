//! Ring collectives (NCCL's `runRing` for AllReduce, ReduceScatter, AllGather,
//! Broadcast and Reduce): each channel (CTA) takes its share of every chunk round and
//! moves it around the ring through its own connections.

use super::{Coll, CollCtx};
use crate::work::{CollFunction, LoopError};
use crate::conn::ConnInfo;
use crate::multicast::SwMulticast;
use crate::prims::{div_up, Primitives, Simple};
use crate::redop::RedOp;

/// The ring protocol: 2 slices of 2 steps per chunk (NCCL's ALLREDUCE_CHUNKSTEPS and
/// ALLREDUCE_SLICESTEPS for Simple).
pub type RingProto = Simple<2, 2>;

/// The ring primitives of operator `Op`.
type RingPrims<Op> = Primitives<Op, SwMulticast, RingProto, 1, 1>;

/// Chunks start on multiples of this many bytes (full copy hunks, aligned packs).
const CHUNK_ALIGN_BYTES: i64 = 4096;

/// The chunk of `remaining` elements this round gives each of `parts` parts: at most
/// `chunk` (one chunk of the FIFO), rounded up to whole `CHUNK_ALIGN_BYTES`.
fn round_chunk<T>(remaining: i64, parts: i64, chunk: i64) -> i64 {
    let align = (CHUNK_ALIGN_BYTES / size_of::<T>() as i64).max(1);
    (div_up(div_up(remaining, parts), align) * align).min(chunk)
}

/// `a`, counted modulo `n`.
fn mod_ranks(a: u32, n: u32) -> u32 {
    if a >= n { a - n } else { a }
}

/// Runs a reducing collective (AllReduce, ReduceScatter, Reduce) on this channel's
/// ring with operator `Op`. Returns the group's outcome.
///
/// # Safety
/// Every thread of the CTA calls this with the same arguments; `cx` describes this
/// rank's communicator and channel; the buffers hold what `c` addresses.
#[inline(never)]
pub unsafe fn run_reduction<Op: RedOp>(cx: &CollCtx, c: &Coll) -> Result<(), (LoopError, u32)> {
    unsafe {
        with_prims::<Op>(cx, c, |prims, chunk| match c.function {
            CollFunction::AllReduce => all_reduce(cx, c, prims, chunk),
            CollFunction::ReduceScatter => reduce_scatter(cx, c, prims, chunk),
            CollFunction::Reduce => reduce(cx, c, prims, chunk),
            _ => crate::arch::trap(),
        })
    }
}

/// Runs a collective that only moves data (AllGather, Broadcast) on this channel's
/// ring; `Op` is a copy operator of the element's size.
///
/// # Safety
/// As [`run_reduction`].
#[inline(never)]
pub unsafe fn run_movement<Op: RedOp>(cx: &CollCtx, c: &Coll) -> Result<(), (LoopError, u32)> {
    unsafe {
        with_prims::<Op>(cx, c, |prims, chunk| match c.function {
            CollFunction::AllGather => all_gather(cx, c, prims, chunk),
            CollFunction::Broadcast => broadcast(cx, c, prims, chunk),
            _ => crate::arch::trap(),
        })
    }
}

/// Sets up the channel's ring primitives, runs `body` with them and the chunk size
/// (elements), and returns the group's outcome.
#[inline(always)]
unsafe fn with_prims<Op: RedOp>(
    cx: &CollCtx,
    c: &Coll,
    body: impl FnOnce(&mut RingPrims<Op>, i64),
) -> Result<(), (LoopError, u32)> {
    let conns = cx.channel;
    let recv: [*mut ConnInfo; 1] = [unsafe { &raw mut (*conns).recv }];
    let send: [*mut ConnInfo; 1] = [unsafe { &raw mut (*conns).send }];
    let mut prims = unsafe { RingPrims::<Op>::new(cx.group, &recv, &send, cx.step_bytes, c.input, c.output, c.red_arg) };
    body(&mut prims, RingPrims::<Op>::chunk_capacity(cx.step_bytes));
    prims.outcome()
}

/// NCCL's ring AllReduce: a reduce-scatter around the ring, then an all-gather of the
/// reduced chunks. Chunk `k` of a round is reduced in ring order starting after the
/// rank at ring position `k`, so every rank ends with bit-identical results.
unsafe fn all_reduce<Op: RedOp>(cx: &CollCtx, c: &Coll, prims: &mut RingPrims<Op>, chunk: i64) {
    let (nranks, ring_ix) = (cx.nranks, cx.ring_index);
    let size = c.count as i64;
    let (nch, bid) = (i64::from(cx.nchannels), i64::from(cx.channel_index));
    let loop_size = nch * i64::from(nranks) * chunk;
    let mut grid_offset = 0;
    while grid_offset < size {
        let real = round_chunk::<Op::Elt>(size - grid_offset, nch * i64::from(nranks), chunk);
        let offset_of = |k: u32| grid_offset + (bid * i64::from(nranks) + i64::from(k)) * real;
        let nelem_at = |off: i64| real.min(size - off).max(0);
        unsafe {
            let k = mod_ranks(ring_ix + nranks - 1, nranks);
            let off = offset_of(k);
            prims.send(off, nelem_at(off));
            for j in 2..nranks {
                let off = offset_of(mod_ranks(ring_ix + nranks - j, nranks));
                prims.recv_reduce_send(off, nelem_at(off));
            }
            let off = offset_of(ring_ix);
            prims.recv_reduce_copy_send(off, off, nelem_at(off));
            for j in 1..nranks - 1 {
                let off = offset_of(mod_ranks(ring_ix + nranks - j, nranks));
                prims.recv_copy_send(off, nelem_at(off));
            }
            let off = offset_of(mod_ranks(ring_ix + 1, nranks));
            prims.recv(off, nelem_at(off));
        }
        grid_offset += loop_size;
    }
}

/// The channel's share of one round over `size` elements: (offset, elements).
fn channel_chunk<T>(cx: &CollCtx, size: i64, grid_offset: i64, chunk: i64) -> (i64, i64) {
    let nch = i64::from(cx.nchannels);
    let real = round_chunk::<T>(size - grid_offset, nch, chunk);
    let off = grid_offset + i64::from(cx.channel_index) * real;
    (off, real.min(size - off).max(0))
}

/// NCCL's ring ReduceScatter: block `r` of every input is reduced around the ring
/// ending at rank `r`, which stores it in its output.
unsafe fn reduce_scatter<Op: RedOp>(cx: &CollCtx, c: &Coll, prims: &mut RingPrims<Op>, chunk: i64) {
    let size = c.count as i64;
    let nranks = cx.nranks;
    let ring = |j: u32| i64::from(cx.ring_ranks[j as usize]);
    let mut grid_offset = 0;
    while grid_offset < size {
        let (off, n) = channel_chunk::<Op::Elt>(cx, size, grid_offset, chunk);
        unsafe {
            prims.send(off + ring(nranks - 1) * size, n);
            for j in 2..nranks {
                prims.recv_reduce_send(off + ring(nranks - j) * size, n);
            }
            prims.recv_reduce_copy(off + ring(0) * size, off, n);
        }
        grid_offset += i64::from(cx.nchannels) * chunk;
    }
}

/// NCCL's ring AllGather: each rank's block travels once around the ring.
unsafe fn all_gather<Op: RedOp>(cx: &CollCtx, c: &Coll, prims: &mut RingPrims<Op>, chunk: i64) {
    let size = c.count as i64;
    let nranks = cx.nranks;
    let ring = |j: u32| i64::from(cx.ring_ranks[j as usize]);
    let elt = size_of::<Op::Elt>() as u64;
    let mut grid_offset = 0;
    while grid_offset < size {
        let (off, n) = channel_chunk::<Op::Elt>(cx, size, grid_offset, chunk);
        unsafe {
            let own = off + ring(0) * size;
            if c.input.wrapping_add(off as u64 * elt) == c.output.wrapping_add(own as u64 * elt) {
                prims.send_from_output(own, n);
            } else {
                prims.copy_send(off, own, n);
            }
            for j in 1..nranks - 1 {
                prims.recv_copy_send(off + ring(nranks - j) * size, n);
            }
            prims.recv(off + ring(1) * size, n);
        }
        grid_offset += i64::from(cx.nchannels) * chunk;
    }
}

/// NCCL's ring Broadcast: a chain from the root along the ring.
unsafe fn broadcast<Op: RedOp>(cx: &CollCtx, c: &Coll, prims: &mut RingPrims<Op>, chunk: i64) {
    let size = c.count as i64;
    let (rank, next) = (cx.ring_ranks[0], cx.ring_ranks[1]);
    let mut grid_offset = 0;
    while grid_offset < size {
        let (off, n) = channel_chunk::<Op::Elt>(cx, size, grid_offset, chunk);
        unsafe {
            if rank == c.root {
                if c.input == c.output {
                    prims.send(off, n);
                } else {
                    prims.copy_send(off, off, n);
                }
            } else if next == c.root {
                prims.recv(off, n);
            } else {
                prims.recv_copy_send(off, n);
            }
        }
        grid_offset += i64::from(cx.nchannels) * chunk;
    }
}

/// NCCL's ring Reduce: a chain along the ring that ends at the root.
unsafe fn reduce<Op: RedOp>(cx: &CollCtx, c: &Coll, prims: &mut RingPrims<Op>, chunk: i64) {
    let size = c.count as i64;
    let (rank, prev) = (cx.ring_ranks[0], cx.ring_ranks[cx.nranks as usize - 1]);
    let mut grid_offset = 0;
    while grid_offset < size {
        let (off, n) = channel_chunk::<Op::Elt>(cx, size, grid_offset, chunk);
        unsafe {
            if prev == c.root {
                prims.send(off, n);
            } else if rank == c.root {
                prims.recv_reduce_copy(off, off, n);
            } else {
                prims.recv_reduce_send(off, n);
            }
        }
        grid_offset += i64::from(cx.nchannels) * chunk;
    }
}
