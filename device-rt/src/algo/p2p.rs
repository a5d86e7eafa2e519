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
use crate::prims::{DataOp, GroupCtx, Primitives, Simple};

/// The point-to-point protocol: one slice of one step per chunk (NCCL's p2p Simple).
pub type P2pProto = Simple<1, 1>;

/// Runs a SendRecv on this channel: the receive side on the first half of the CTA's
/// warps (group 0), the send side on the second half (group 1); one side alone gets the
/// whole CTA.
///
/// # Safety
/// As `ring::run_reduction`; the peers are other ranks of the communicator.
#[inline(never)]
pub unsafe fn run(cx: &CollCtx, c: &Coll, data: DataOp) -> Result<(), (LoopError, u32)> {
    type RecvPrims = Primitives<SwMulticast, P2pProto, 1, 0>;
    type SendPrims = Primitives<SwMulticast, P2pProto, 0, 1>;
    let g = cx.group;
    let (sends, recvs) = (c.send_peer != NO_PEER, c.recv_peer != NO_PEER);
    let both = sends && recvs;
    let half = g.nthreads / WARP_SIZE / 2 * WARP_SIZE;
    let groups = [g.shared, cx.second_shared];
    if g.tid == 0 {
        for shared in groups {
            unsafe { (&raw mut (*shared).stopped).write_volatile(0) };
        }
    }
    arch::barrier_sync_all();
    if recvs && (!both || g.tid < half) {
        let side = GroupCtx { nthreads: if both { half } else { g.nthreads }, ..g };
        let conn: *mut ConnInfo = unsafe { &raw mut (*cx.p2p.add(c.recv_peer as usize)).recv };
        let step_bytes = unsafe { (*conn).step_bytes };
        let mut prims = unsafe { RecvPrims::new(side, &[conn], &[], step_bytes, 0, c.output, data) };
        let chunk = prims.chunk_capacity();
        for_each_chunk(cx, data.elt() as i64, c.recv_count as i64, chunk, |off, n| unsafe { prims.recv(off, n) });
    } else if sends {
        let side = if both { GroupCtx { tid: g.tid - half, nthreads: g.nthreads - half, group: 1, shared: groups[1], ..g } } else { g };
        let conn: *mut ConnInfo = unsafe { &raw mut (*cx.p2p.add(c.send_peer as usize)).send };
        let step_bytes = unsafe { (*conn).step_bytes };
        let mut prims = unsafe { SendPrims::new(side, &[], &[conn], step_bytes, c.input, 0, data) };
        let chunk = prims.chunk_capacity();
        for_each_chunk(cx, data.elt() as i64, c.count as i64, chunk, |off, n| unsafe { prims.send(off, n) });
    }
    // Both sides meet here; the first side's error wins.
    arch::barrier_sync_all();
    let status = groups.iter().map(|&shared| unsafe { (&raw const (*shared).stopped).read_volatile() }).find(|&s| s != 0);
    match status {
        None => Ok(()),
        Some(s) => Err(crate::prims::decode_stop(s)),
    }
}

