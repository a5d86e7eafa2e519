//! NCCL's collectives made of sends and receives alone (`ncclGather`, `ncclScatter`,
//! `ncclAlltoAll`): each rank's part becomes point-to-point calls of one group, which the
//! group's rounds order so that no exchange can deadlock.

use crate::calls::Side;

/// Which exchange, and its root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// Every rank's `count` elements to the root, rank `i`'s at `recv + i × count`.
    Gather { root: i32 },
    /// The root's `send + i × count` to rank `i`, into its `recv`.
    Scatter { root: i32 },
    /// `send + j × count` to rank `j`; rank `i`'s into `recv + i × count`.
    AllToAll,
}

/// One call's buffers: slices of `count` elements of type `dtype` (NCCL's code).
#[derive(Clone, Copy, Debug)]
pub struct Buffers {
    pub send: u64,
    pub recv: u64,
    pub count: usize,
    pub dtype: i32,
}

/// The bytes every rank's slices of a call span in each buffer (`nranks` slices), if they
/// fit the address space from both buffers.
pub fn extent(nranks: usize, b: Buffers, size: usize) -> Option<u64> {
    let extent = b.count.checked_mul(size).and_then(|bytes| bytes.checked_mul(nranks)).and_then(|e| u64::try_from(e).ok())?;
    (b.send.checked_add(extent).is_some() && b.recv.checked_add(extent).is_some()).then_some(extent)
}

/// Whether `a_bytes` bytes at `a` and `b_bytes` bytes at `b` overlap.
fn overlap(a: u64, a_bytes: u64, b: u64, b_bytes: u64) -> bool {
    a < b + b_bytes && b < a + a_bytes
}

/// Whether an all-to-all's buffers overlap (in place, or partly): its send buffer must
/// then be copied aside first, since a slice would be overwritten before it is sent.
pub fn overlaps(nranks: usize, b: Buffers, size: usize) -> bool {
    extent(nranks, b, size).is_some_and(|e| overlap(b.send, e, b.recv, e))
}

/// Rank `rank`'s point-to-point calls of `exchange` among `nranks` ranks, elements of
/// `size` bytes, in call order (`true`: a send). In place, in NCCL's layouts (a gather's
/// send buffer at the root's slice of its receive buffer; a scatter's receive buffer at
/// the root's slice of its send buffer), the root moves nothing to itself. Refused: a root
/// outside the ranks, slices whose extent overflows the address space, a root's buffers
/// that overlap otherwise (a slice could be overwritten before it is sent), an all-to-all
/// whose buffers overlap (the caller copies its send buffer aside first: [`overlaps`]).
pub fn plan(exchange: Exchange, rank: usize, nranks: usize, b: Buffers, size: usize) -> Result<Vec<(Side, bool)>, String> {
    let root = match exchange {
        Exchange::Gather { root } | Exchange::Scatter { root } => usize::try_from(root).ok().filter(|&r| r < nranks).ok_or_else(|| format!("root {root} of {nranks} ranks"))?,
        Exchange::AllToAll => 0,
    };
    extent(nranks, b, size).ok_or_else(|| format!("{} elements × {nranks} ranks overflow the address space", b.count))?;
    let slice = |base: u64, i: usize| base + (i * b.count * size) as u64;
    let side = |buf: u64, peer: usize| Side { buf, count: b.count, dtype: b.dtype, peer: peer as i32 };
    let mut calls = Vec::new();
    match exchange {
        Exchange::Gather { .. } => {
            let in_place = rank == root && b.send == slice(b.recv, root);
            if rank == root && !in_place && overlap(b.send, slice(0, 1), b.recv, slice(0, nranks)) {
                return Err("a gather's send buffer overlaps the root's receive buffer, other than at the root's own slice (in place)".to_string());
            }
            if !in_place {
                calls.push((side(b.send, root), true));
            }
            if rank == root {
                calls.extend((0..nranks).filter(|&i| !(in_place && i == root)).map(|i| (side(slice(b.recv, i), i), false)));
            }
        }
        Exchange::Scatter { .. } => {
            let in_place = rank == root && b.recv == slice(b.send, root);
            if rank == root && !in_place && overlap(b.recv, slice(0, 1), b.send, slice(0, nranks)) {
                return Err("a scatter's receive buffer overlaps the root's send buffer, other than at the root's own slice (in place)".to_string());
            }
            if rank == root {
                calls.extend((0..nranks).filter(|&i| !(in_place && i == root)).map(|i| (side(slice(b.send, i), i), true)));
            }
            if !in_place {
                calls.push((side(b.recv, root), false));
            }
        }
        Exchange::AllToAll => {
            if overlaps(nranks, b, size) {
                return Err("an all-to-all's send and receive buffers overlap".to_string());
            }
            for i in 0..nranks {
                calls.push((side(slice(b.send, i), i), true));
                calls.push((side(slice(b.recv, i), i), false));
            }
        }
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::rounds::{self, Call};

    const SIZE: usize = 4;

    /// Runs every rank's plan of `exchange` on memories of the ranks (rank `r`'s bytes from
    /// address 0): each rank's calls in the order the group's rounds give, each send
    /// matched with its peer's receive from it of the same order (NCCL's matching), the
    /// bytes of the shorter copied. Returns the memories.
    fn run(exchange: Exchange, nranks: usize, send: u64, recv: u64, count: usize, mut memory: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let b = Buffers { send, recv, count, dtype: 7 };
        // sent[(from, to)]: the bytes rank `from` sent `to`, in order.
        let mut sent: std::collections::HashMap<(usize, usize), VecDeque<Vec<u8>>> = Default::default();
        let plans: Vec<Vec<(Side, bool)>> = (0..nranks).map(|r| plan(exchange, r, nranks, b, SIZE).unwrap()).collect();
        for (r, calls) in plans.iter().enumerate() {
            let order = rounds::rounds(r, nranks, &calls.iter().map(|&(s, send)| Call { peer: s.peer as usize, send }).collect::<Vec<_>>()).unwrap();
            let sends = order.iter().filter_map(|&(s, _)| s).map(|i| calls[i].0);
            for s in sends {
                let at = s.buf as usize;
                sent.entry((r, s.peer as usize)).or_default().push_back(memory[r][at..at + s.count * SIZE].to_vec());
            }
        }
        for (r, calls) in plans.iter().enumerate() {
            for (s, _) in calls.iter().filter(|(_, send)| !send) {
                let bytes = sent.get_mut(&(s.peer as usize, r)).and_then(VecDeque::pop_front).expect("a receive no send matches");
                let at = s.buf as usize;
                memory[r][at..at + bytes.len()].copy_from_slice(&bytes);
            }
        }
        assert!(sent.values().all(VecDeque::is_empty), "a send no receive matched");
        memory
    }

    /// Memories of `nranks` ranks, `len` bytes each, every byte naming its rank and place.
    fn memories(nranks: usize, len: usize) -> Vec<Vec<u8>> {
        (0..nranks).map(|r| (0..len).map(|i| (r * 64 + i % 61) as u8).collect()).collect()
    }

    /// Every count of ranks from 1 to 5 with every root, each with its memories of `slices`
    /// slices of `count` elements a rank (`slices(nranks)`).
    fn every_root(count: usize, slices: impl Fn(usize) -> usize, check: impl Fn(usize, usize, Vec<Vec<u8>>)) {
        for nranks in 1..=5 {
            for root in 0..nranks {
                check(nranks, root, memories(nranks, count * SIZE * slices(nranks)));
            }
        }
    }

    #[test]
    fn a_gather_puts_each_ranks_slice_at_the_roots_place_for_it() {
        let (count, slice) = (3, 3 * SIZE);
        // send at 0, the gathered buffer after it.
        every_root(count, |nranks| nranks + 1, |nranks, root, before| {
            let after = run(Exchange::Gather { root: root as i32 }, nranks, 0, slice as u64, count, before.clone());
            for i in 0..nranks {
                assert_eq!(after[root][slice * (1 + i)..slice * (2 + i)], before[i][..slice], "{nranks} ranks, root {root}, slice {i}");
            }
            for r in (0..nranks).filter(|&r| r != root) {
                assert_eq!(after[r], before[r], "a rank that is not the root received");
            }
        });
    }

    #[test]
    fn a_gather_in_place_moves_nothing_on_the_root_to_itself() {
        let (nranks, root, count) = (3, 1usize, 2);
        let slice = count * SIZE;
        let before = memories(nranks, slice * nranks);
        // Every rank's send buffer is the root's slice of the gathered buffer at 0.
        let after = run(Exchange::Gather { root: root as i32 }, nranks, slice as u64, 0, count, before.clone());
        for i in 0..nranks {
            assert_eq!(after[root][slice * i..slice * (i + 1)], before[i][slice..2 * slice], "slice {i}");
        }
        let calls = plan(Exchange::Gather { root: root as i32 }, root, nranks, Buffers { send: slice as u64, recv: 0, count, dtype: 7 }, SIZE).unwrap();
        assert!(calls.iter().all(|(s, _)| s.peer as usize != root), "the root moved its own slice: {calls:?}");
    }

    #[test]
    fn a_scatter_gives_each_rank_the_roots_slice_for_it() {
        let (count, slice) = (2, 2 * SIZE);
        // The root's slices at 0, every rank's receive buffer after them.
        every_root(count, |nranks| nranks + 1, |nranks, root, before| {
            let after = run(Exchange::Scatter { root: root as i32 }, nranks, 0, (slice * nranks) as u64, count, before.clone());
            for i in 0..nranks {
                assert_eq!(after[i][slice * nranks..], before[root][slice * i..slice * (i + 1)], "{nranks} ranks, root {root}, rank {i}");
            }
        });
        let in_place = plan(Exchange::Scatter { root: 0 }, 0, 2, Buffers { send: 0, recv: 0, count: 1, dtype: 7 }, SIZE).unwrap();
        assert_eq!(in_place.len(), 1, "in place the root sends only to the other rank: {in_place:?}");
    }

    #[test]
    fn an_all_to_all_swaps_slice_i_of_rank_j_with_slice_j_of_rank_i() {
        for nranks in 1..=6 {
            let count = 3;
            let extent = count * SIZE * nranks;
            let before = memories(nranks, 2 * extent);
            let after = run(Exchange::AllToAll, nranks, 0, extent as u64, count, before.clone());
            let slice = count * SIZE;
            for i in 0..nranks {
                for j in 0..nranks {
                    assert_eq!(after[i][extent + slice * j..extent + slice * (j + 1)], before[j][slice * i..slice * (i + 1)], "{nranks} ranks: rank {i}'s slice from {j}");
                }
            }
        }
    }

    #[test]
    fn bad_exchanges_are_refused_with_what_is_wrong() {
        let b = Buffers { send: 0, recv: 32, count: 4, dtype: 7 };
        assert_eq!(plan(Exchange::Gather { root: 3 }, 0, 3, b, SIZE).unwrap_err(), "root 3 of 3 ranks");
        assert_eq!(plan(Exchange::Scatter { root: -1 }, 0, 2, b, SIZE).unwrap_err(), "root -1 of 2 ranks");
        assert!(plan(Exchange::AllToAll, 0, 4, b, SIZE).unwrap_err().contains("overlap"), "32 bytes apart, 4 × 16 bytes each");
        assert!(overlaps(4, b, SIZE) && overlaps(2, Buffers { recv: 0, ..b }, SIZE) && overlaps(2, Buffers { send: 40, ..b }, SIZE));
        assert!(plan(Exchange::AllToAll, 0, 2, b, SIZE).is_ok() && !overlaps(2, b, SIZE), "32 bytes apart, 2 × 16 bytes each");
        assert!(plan(Exchange::AllToAll, 0, 2, Buffers { count: usize::MAX / 2, ..b }, SIZE).unwrap_err().contains("overflow"));
        // 4 elements of 4 bytes a slice: the root's slice of 2 ranks' 32 bytes at 32 is at 48.
        let root_1 = |send, recv| Buffers { send, recv, ..b };
        assert!(plan(Exchange::Gather { root: 1 }, 1, 2, root_1(40, 32), SIZE).unwrap_err().contains("overlaps"));
        assert!(plan(Exchange::Gather { root: 1 }, 1, 2, root_1(48, 32), SIZE).is_ok(), "in place");
        assert!(plan(Exchange::Gather { root: 1 }, 0, 2, root_1(40, 32), SIZE).is_ok(), "not the root: its receive buffer is not used");
        assert!(plan(Exchange::Scatter { root: 1 }, 1, 2, root_1(32, 36), SIZE).unwrap_err().contains("overlaps"));
        assert!(plan(Exchange::Scatter { root: 1 }, 1, 2, root_1(32, 48), SIZE).is_ok(), "in place");
        assert!(plan(Exchange::Scatter { root: 1 }, 1, 2, root_1(0, 64), SIZE).is_ok(), "apart");
        assert!(plan(Exchange::Gather { root: 0 }, 0, 2, Buffers { recv: u64::MAX - 8, ..b }, SIZE).unwrap_err().contains("overflow"));
    }
}
