//! Ring collectives (NCCL's `runRing` for AllReduce, ReduceScatter, AllGather,
//! Broadcast and Reduce): each channel (CTA) takes its share of every chunk round and
//! moves it around the ring through its own connections.

use super::function::CollFunction;
use super::coll::{Coll, CollCtx, for_each_chunk, round_chunk};
use crate::abi::LoopError;
use crate::conn::{CONN_DIRECT, ConnInfo};
use crate::multicast::SwMulticast;
use crate::prims::{DataOp, FanAsymmetric, FanSymmetric, Primitives, Simple};

/// The ring protocol: 2 slices of 2 steps per chunk (NCCL's ALLREDUCE_CHUNKSTEPS and
/// ALLREDUCE_SLICESTEPS for Simple).
pub type RingProto = Simple<2, 2>;

/// The ring primitives.
type RingPrims = Primitives<SwMulticast, RingProto, FanSymmetric<1>>;

/// `copy_send`, direct when the group is.
///
/// # Safety
/// As [`Primitives::send`].
unsafe fn copy_send(prims: &mut RingPrims, in_ix: i64, out_ix: i64, n: i64) {
    // SAFETY: this function's contract is the named operations' (every thread of the group
    // calls them with the same arguments, the buffers hold the elements, `n` at most a chunk),
    // which the caller keeps; the direct form runs only when `exchange_direct` turned direct
    // operations on.
    unsafe {
        if prims.is_direct() {
            prims.direct_copy_send(in_ix, out_ix, n)
        } else {
            prims.copy_send(in_ix, out_ix, n)
        }
    }
}

/// `recv_copy_send`, direct when the group is.
///
/// # Safety
/// As [`Primitives::send`].
unsafe fn recv_copy_send(prims: &mut RingPrims, out_ix: i64, n: i64) {
    // SAFETY: as in `copy_send`: the caller keeps the named operations' contract, and the
    // direct form runs only on a direct group.
    unsafe {
        if prims.is_direct() {
            prims.direct_recv_copy_send(out_ix, n)
        } else {
            prims.recv_copy_send(out_ix, n)
        }
    }
}

/// `recv`, direct when the group is.
///
/// # Safety
/// As [`Primitives::send`].
unsafe fn recv(prims: &mut RingPrims, out_ix: i64, n: i64) {
    // SAFETY: as in `copy_send`: the caller keeps the named operations' contract, and the
    // direct form runs only on a direct group.
    unsafe {
        if prims.is_direct() {
            prims.direct_recv(out_ix, n)
        } else {
            prims.recv(out_ix, n)
        }
    }
}

/// `a`, counted modulo `n`.
fn mod_ranks(a: u32, n: u32) -> u32 {
    if a >= n { a - n } else { a }
}

/// Runs a collective (not SendRecv) on this channel's ring. Returns the group's
/// outcome.
///
/// # Safety
/// Every thread of the CTA calls this with the same arguments; `cx` describes this
/// rank's communicator and channel; the buffers hold what `c` addresses.
#[inline(never)]
pub unsafe fn run(cx: &CollCtx, c: &Coll, data: DataOp) -> Result<(), (LoopError, u32)> {
    let conns = cx.channel;
    // SAFETY: `cx.channel` is this channel's `ChannelConns` (`CollCtx::new`'s contract); only
    // the field's address is taken.
    let recv: [*mut ConnInfo; 1] = [unsafe { &raw mut (*conns).recv }];
    // SAFETY: as above.
    let send: [*mut ConnInfo; 1] = [unsafe { &raw mut (*conns).send }];
    // SAFETY: every thread of the CTA calls this with the same arguments (this function's
    // contract); the channel's ring connections are valid and used only by this CTA's one
    // group, whose shared memory, abort flag and statistics `cx.group` holds for the whole call
    // (`CollCtx::new`'s contract).
    let mut prims = unsafe { RingPrims::new(cx.group, &recv, &send, cx.step_bytes, c.input, c.output, data) };
    let chunk = prims.chunk_capacity();
    let elt = data.elt() as i64;
    // NCCL's direct operations where the ring allows them: every rank runs the same
    // function over connections wired the same way, so both ends of each connection agree
    // to exchange; each rank publishes its output only where the host found it mapped for
    // the peers, and each side runs direct or through the FIFO as the exchange found.
    // An empty collective moves no step, so nothing would keep a receiver from publishing
    // its next operation's address before the sender took this one's: it exchanges none.
    // SAFETY: `cx.channel` is this channel's `ChannelConns`, which the host wrote before the
    // launch.
    let direct_capable = unsafe { (*conns).send.flags } & CONN_DIRECT != 0 && c.count > 0;
    if direct_capable && matches!(c.function, CollFunction::AllReduce | CollFunction::AllGather | CollFunction::Broadcast) {
        // SAFETY: every thread of the group calls this right after `new`, and `CONN_DIRECT` on
        // the send end (set by the host on both ends of the ring's connections alike) means
        // both connections carry a pointer-exchange word; a mapped output is mapped for the
        // previous rank (the host's `ITEM_OUTPUT_PEER_MAPPED`).
        unsafe { prims.exchange_direct(c.output_peer_mapped) };
    }
    // SAFETY: every thread of the CTA runs the same arm with the same arguments, and `c`'s
    // buffers hold what the function addresses (this function's contract), which is each
    // algorithm's contract.
    unsafe {
        match c.function {
            CollFunction::AllReduce => all_reduce(cx, c, &mut prims, elt, chunk),
            CollFunction::ReduceScatter => reduce_scatter(cx, c, &mut prims, elt, chunk),
            CollFunction::AllGather => all_gather(cx, c, &mut prims, elt, chunk),
            CollFunction::Broadcast => broadcast(cx, c, &mut prims, elt, chunk),
            CollFunction::Reduce => reduce(cx, c, &mut prims, elt, chunk),
            CollFunction::SendRecv => crate::arch::trap(),
        }
    }
    prims.outcome()
}

/// NCCL's ring AllReduce: a reduce-scatter around the ring, then an all-gather of the
/// reduced chunks. Chunk `k` of a round is reduced in ring order starting after the
/// rank at ring position `k`, so every rank ends with bit-identical results.
///
/// # Safety
/// As [`run`], with `prims` the group `run` built and `chunk` its chunk capacity.
unsafe fn all_reduce(cx: &CollCtx, c: &Coll, prims: &mut RingPrims, elt: i64, chunk: i64) {
    let (nranks, ring_ix) = (cx.nranks, cx.ring_index);
    let size = c.count as i64;
    let (nch, bid) = (i64::from(cx.nchannels), i64::from(cx.channel_index));
    let loop_size = nch * i64::from(nranks) * chunk;
    let mut grid_offset = 0;
    while grid_offset < size {
        let real = round_chunk(elt, size - grid_offset, nch * i64::from(nranks), chunk);
        let offset_of = |k: u32| grid_offset + (bid * i64::from(nranks) + i64::from(k)) * real;
        let nelem_at = |off: i64| real.min(size - off).max(0);
        // SAFETY: every thread of the group runs these operations with the same arguments;
        // `offset_of(k) + nelem_at(..)` stays within the `count` elements of input and output
        // (`nelem_at` clips at `size`), each call moves at most `real <= chunk` elements, and
        // the direct forms run only on a direct group.
        unsafe {
            let k = mod_ranks(ring_ix + nranks - 1, nranks);
            let off = offset_of(k);
            prims.send(off, nelem_at(off));
            for j in 2..nranks {
                let off = offset_of(mod_ranks(ring_ix + nranks - j, nranks));
                prims.recv_reduce_send(off, nelem_at(off));
            }
            let off = offset_of(ring_ix);
            if prims.is_direct() {
                prims.direct_recv_reduce_copy_send(off, off, nelem_at(off));
            } else {
                prims.recv_reduce_copy_send(off, off, nelem_at(off));
            }
            for j in 1..nranks - 1 {
                let off = offset_of(mod_ranks(ring_ix + nranks - j, nranks));
                recv_copy_send(prims, off, nelem_at(off));
            }
            let off = offset_of(mod_ranks(ring_ix + 1, nranks));
            recv(prims, off, nelem_at(off));
        }
        grid_offset += loop_size;
    }
}

/// NCCL's ring ReduceScatter: block `r` of every input is reduced around the ring
/// ending at rank `r`, which stores it in its output.
///
/// # Safety
/// As [`run`], with `prims` the group `run` built and `chunk` its chunk capacity.
unsafe fn reduce_scatter(cx: &CollCtx, c: &Coll, prims: &mut RingPrims, elt: i64, chunk: i64) {
    let size = c.count as i64;
    let nranks = cx.nranks;
    let ring = |j: u32| i64::from(cx.ring_rank(j));
    // SAFETY: every thread of the group runs this with the same arguments; each call moves `n
    // <= chunk` elements at `off` within a rank's block of `size` (`for_each_chunk`), and block
    // `ring(j)` (a rank, `< nranks`) of the input holds `nranks × size` elements as reduce-
    // scatter's input does.
    for_each_chunk(cx, elt, size, chunk, |off, n| unsafe {
            prims.send(off + ring(nranks - 1) * size, n);
            for j in 2..nranks {
                prims.recv_reduce_send(off + ring(nranks - j) * size, n);
            }
            prims.recv_reduce_copy(off + ring(0) * size, off, n);
    });
}

/// NCCL's ring ReduceScatter on two ranks over paired channels
/// ([`crate::conn::CommDevice::pairs`]): channel `c` runs the first hop (sends to the next
/// rank) and channel `pairs + c` the last (receives from the previous rank and reduces
/// into the output), at the same time and on different SMs, through the send and receive
/// ends of channel `pairs + c`'s connections. Every rank pairs its channels the same way;
/// the operations, chunks and slices are [`reduce_scatter`]'s, so the results are the
/// same bits.
///
/// # Safety
/// As [`run`], on a communicator with `pairs` set and two ranks.
#[inline(never)]
pub unsafe fn reduce_scatter_paired(cx: &CollCtx, c: &Coll, data: DataOp) -> Result<(), (LoopError, u32)> {
    type SendSide = Primitives<SwMulticast, RingProto, FanAsymmetric<0, 1>>;
    type RecvSide = Primitives<SwMulticast, RingProto, FanAsymmetric<1, 0>>;
    let sends = cx.channel_index < cx.pairs;
    let pair = if sends { cx.channel_index } else { cx.channel_index - cx.pairs };
    let conns = if sends { cx.channel.wrapping_add(cx.pairs as usize) } else { cx.channel };
    // `cx.nchannels` is already `pairs`: each half spreads the data over the pairs.
    let half = CollCtx { channel_index: pair, ..*cx };
    let (size, elt) = (c.count as i64, data.elt() as i64);
    // SAFETY: on the two-rank paired path (this function's contract) each channel's CTA is one
    // group that calls one `new` with its own end of channel `pairs + c`'s connections (each
    // used by this channel only), and runs the same chunks with the same arguments; `next` and
    // `me` are ranks, so `off + rank × size` stays in the input's `2 × size` elements, and the
    // output holds `size`.
    unsafe {
        if sends {
            let next = i64::from(cx.ring_rank(1));
            let mut prims = SendSide::new(cx.group, &[], &[&raw mut (*conns).send], cx.step_bytes, c.input, 0, data);
            let chunk = prims.chunk_capacity();
            for_each_chunk(&half, elt, size, chunk, |off, n| prims.send(off + next * size, n));
            prims.outcome()
        } else {
            let me = i64::from(cx.ring_rank(0));
            let mut prims = RecvSide::new(cx.group, &[&raw mut (*conns).recv], &[], cx.step_bytes, c.input, c.output, data);
            let chunk = prims.chunk_capacity();
            for_each_chunk(&half, elt, size, chunk, |off, n| prims.recv_reduce_copy(off + me * size, off, n));
            prims.outcome()
        }
    }
}

/// NCCL's ring AllGather: each rank's block travels once around the ring.
///
/// # Safety
/// As [`run`], with `prims` the group `run` built and `chunk` its chunk capacity.
unsafe fn all_gather(cx: &CollCtx, c: &Coll, prims: &mut RingPrims, elt: i64, chunk: i64) {
    let size = c.count as i64;
    let nranks = cx.nranks;
    let ring = |j: u32| i64::from(cx.ring_rank(j));
    // SAFETY: every thread of the group runs this with the same arguments; each call moves `n
    // <= chunk` elements at `off` in the input's `size` or in block `ring(j)` (a rank) of the
    // output's `nranks × size`; the direct forms run only on a direct group.
    for_each_chunk(cx, elt, size, chunk, |off, n| unsafe {
            let own = off + ring(0) * size;
            let in_place = c.input.wrapping_add((off * elt) as u64) == c.output.wrapping_add((own * elt) as u64);
            match (in_place, prims.is_direct()) {
                (true, false) => prims.send_from_output(own, n),
                (true, true) => prims.direct_send_from_output(own, n),
                (false, _) => copy_send(prims, off, own, n),
            }
            for j in 1..nranks - 1 {
                recv_copy_send(prims, off + ring(nranks - j) * size, n);
            }
            recv(prims, off + ring(1) * size, n);
    });
}

/// NCCL's ring Broadcast: a chain from the root along the ring.
///
/// # Safety
/// As [`run`], with `prims` the group `run` built and `chunk` its chunk capacity.
unsafe fn broadcast(cx: &CollCtx, c: &Coll, prims: &mut RingPrims, elt: i64, chunk: i64) {
    let size = c.count as i64;
    let (rank, next) = (cx.ring_rank(0), cx.ring_rank(1));
    // SAFETY: every thread of the group runs this with the same arguments; each call moves `n
    // <= chunk` elements at `off` within the `size` elements of input and output; the direct
    // forms run only on a direct group.
    for_each_chunk(cx, elt, size, chunk, |off, n| unsafe {
            if rank == c.root {
                match (c.input == c.output, prims.is_direct()) {
                    (true, false) => prims.send(off, n),
                    (true, true) => prims.direct_send(off, off, n),
                    (false, _) => copy_send(prims, off, off, n),
                }
            } else if next == c.root {
                recv(prims, off, n);
            } else {
                recv_copy_send(prims, off, n);
            }
    });
}

/// NCCL's ring Reduce: a chain along the ring that ends at the root.
///
/// # Safety
/// As [`run`], with `prims` the group `run` built and `chunk` its chunk capacity.
unsafe fn reduce(cx: &CollCtx, c: &Coll, prims: &mut RingPrims, elt: i64, chunk: i64) {
    let size = c.count as i64;
    let (rank, prev) = (cx.ring_rank(0), cx.ring_rank(cx.nranks - 1));
    // SAFETY: every thread of the group runs this with the same arguments; each call moves `n
    // <= chunk` elements at `off` within the `size` elements of input and output.
    for_each_chunk(cx, elt, size, chunk, |off, n| unsafe {
            if prev == c.root {
                prims.send(off, n);
            } else if rank == c.root {
                prims.recv_reduce_copy(off, off, n);
            } else {
                prims.recv_reduce_send(off, n);
            }
    });
}
