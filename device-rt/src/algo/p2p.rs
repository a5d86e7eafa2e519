//! Point-to-point: a SendRecv item sends to one peer and receives from another at the
//! same time (NCCL's grouped send and receive), each side on its own half of the CTA,
//! through the channel's point-to-point connection with that peer. The sizes FIFO tags
//! every step, so a sender and receiver that disagree on the count end with an error.

use super::function::NO_PEER;
use super::coll::{Coll, CollCtx, for_each_chunk};
use crate::abi::LoopError;
use crate::arch::{self, WARP_SIZE};
use crate::conn::ConnInfo;
use crate::multicast::SwMulticast;
use crate::prims::{DataOp, FanAsymmetric, GroupCtx, Primitives, Simple};

/// The point-to-point protocol: one slice of one step per chunk (NCCL's p2p Simple).
pub type P2pProto = Simple<1, 1>;

/// Runs a SendRecv on this channel: the receive side on the first half of the CTA's
/// warps (group 0), the send side on the second half (group 1); one side alone gets the
/// whole CTA.
///
/// # Safety
/// As `ring::run`; the peers are other ranks of the communicator (or
/// `NO_PEER`), and `cx.p2p` is this channel's `[ChannelConns; nranks]`.
#[inline(never)]
pub unsafe fn run(cx: &CollCtx, c: &Coll, data: DataOp) -> Result<(), (LoopError, u32)> {
    type RecvPrims = Primitives<SwMulticast, P2pProto, FanAsymmetric<1, 0>>;
    type SendPrims = Primitives<SwMulticast, P2pProto, FanAsymmetric<0, 1>>;
    let g = cx.group;
    let (sends, recvs) = (c.send_peer != NO_PEER, c.recv_peer != NO_PEER);
    let both = sends && recvs;
    let half = g.nthreads / WARP_SIZE / 2 * WARP_SIZE;
    let groups = [g.shared, cx.group_shared(1)];
    if g.tid == 0 {
        for shared in groups {
            // SAFETY: `g.shared` and `cx.group_shared(1)` are the two groups' `PrimsShared` in
            // this CTA's shared memory (`CollCtx::new`'s contract); thread 0 alone writes them,
            // before the CTA barrier below.
            unsafe { arch::st_volatile_shared_b64(&raw mut (*shared).stopped, 0) };
        }
    }
    arch::barrier_sync_all();
    if recvs && (!both || g.tid < half) {
        let side = GroupCtx { nthreads: if both { half } else { g.nthreads }, ..g };
        // SAFETY: `recv_peer` is a rank of the communicator (this function's contract), so
        // entry `recv_peer` of this channel's `[ChannelConns; nranks]` exists; only its address
        // is taken.
        let conn: *mut ConnInfo = unsafe { &raw mut (*cx.p2p.add(c.recv_peer as usize)).recv };
        // SAFETY: `conn` is that valid connection end, aligned, whose `step_bytes` the host
        // wrote before the launch.
        let step_bytes = unsafe { (*conn).step_bytes };
        // SAFETY: the receive side's threads (`side`, a multiple of 32) all call this with the
        // same arguments; `conn` is a valid end that only this group uses in this item, and
        // `side.shared` is group 0's shared memory; the output holds `recv_count` elements
        // (this function's contract).
        let mut prims = unsafe { RecvPrims::new(side, &[conn], &[], step_bytes, 0, c.output, data) };
        let chunk = prims.chunk_capacity();
        // SAFETY: every thread of the receive side runs the same chunks, each at most `chunk`
        // elements inside the output's `recv_count`.
        for_each_chunk(cx, data.elt() as i64, c.recv_count as i64, chunk, |off, n| unsafe { prims.recv(off, n) });
    } else if sends {
        let side = if both { GroupCtx { tid: g.tid - half, nthreads: g.nthreads - half, group: 1, shared: groups[1], ..g } } else { g };
        // SAFETY: `send_peer` is a rank of the communicator (this function's contract), so
        // entry `send_peer` of this channel's `[ChannelConns; nranks]` exists; only its address
        // is taken.
        let conn: *mut ConnInfo = unsafe { &raw mut (*cx.p2p.add(c.send_peer as usize)).send };
        // SAFETY: `conn` is that valid connection end, aligned, whose `step_bytes` the host
        // wrote before the launch.
        let step_bytes = unsafe { (*conn).step_bytes };
        // SAFETY: the send side's threads (`side`, a multiple of 32) all call this with the
        // same arguments; `conn` is a valid end that only this group uses in this item, and
        // `side.shared` is this side's group's shared memory; the input holds `count` elements
        // (this function's contract).
        let mut prims = unsafe { SendPrims::new(side, &[], &[conn], step_bytes, c.input, 0, data) };
        let chunk = prims.chunk_capacity();
        // SAFETY: every thread of the send side runs the same chunks, each at most `chunk`
        // elements inside the input's `count`.
        for_each_chunk(cx, data.elt() as i64, c.count as i64, chunk, |off, n| unsafe { prims.send(off, n) });
    }
    // Both sides meet here; the first side's error wins.
    arch::barrier_sync_all();
    // SAFETY: both groups' `stopped` words are in this CTA's shared memory (`CollCtx::new`'s
    // contract), and the CTA barrier above orders every write to them before these reads.
    let status = groups.iter().map(|&shared| unsafe { arch::ld_volatile_shared_b64(&raw const (*shared).stopped) }).find(|&s| s != 0);
    match status {
        None => Ok(()),
        Some(s) => Err(crate::prims::decode_stop(s)),
    }
}

