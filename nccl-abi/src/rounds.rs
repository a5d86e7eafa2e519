//! The order in which a group's point-to-point calls run: ferroccl runs one send and one
//! receive per item, so a rank's sends and receives of a group become a sequence of
//! items, each a send and a receive that may be missing. Items go by distance round the
//! ring, as NCCL schedules its own: at distance `d`, the `j`-th send to rank `r + d`
//! with the `j`-th receive from rank `r − d`. The receiver of that send puts the
//! matching receive in its item of the same distance and index, so every item's partners
//! are in their ranks' items of the same place in the order, which every rank runs in the
//! same order: no group can deadlock, whatever order its calls were made in. Sends and
//! receives between two ranks match in the order they were called (NCCL's rule).

/// One call of a group: its peer, and whether it sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub peer: usize,
    pub send: bool,
}

/// One item: the index in a group's calls of its send and of its receive, either missing.
pub type Item = (Option<usize>, Option<usize>);

/// The items of rank `rank` (of `nranks`) for its group's `calls`, in the order they run.
/// `Err` naming a peer outside the ranks.
pub fn rounds(rank: usize, nranks: usize, calls: &[Call]) -> Result<Vec<Item>, String> {
    if let Some(call) = calls.iter().find(|c| c.peer >= nranks) {
        return Err(format!("peer {} of {nranks} ranks", call.peer));
    }
    let mut items = Vec::new();
    for d in 0..nranks {
        let (to, from) = ((rank + d) % nranks, (rank + nranks - d) % nranks);
        let sends: Vec<usize> = (0..calls.len()).filter(|&i| calls[i].send && calls[i].peer == to).collect();
        let recvs: Vec<usize> = (0..calls.len()).filter(|&i| !calls[i].send && calls[i].peer == from).collect();
        for j in 0..sends.len().max(recvs.len()) {
            items.push((sends.get(j).copied(), recvs.get(j).copied()));
        }
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(peer: usize) -> Call {
        Call { peer, send: true }
    }

    fn recv(peer: usize) -> Call {
        Call { peer, send: false }
    }

    #[test]
    fn one_send_and_one_receive_are_one_item() {
        assert_eq!(rounds(1, 4, &[recv(0), send(2)]), Ok(vec![(Some(1), Some(0))]));
        assert_eq!(rounds(0, 1, &[send(0), recv(0)]), Ok(vec![(Some(0), Some(1))]));
        assert_eq!(rounds(0, 2, &[]), Ok(vec![]));
    }

    #[test]
    fn an_all_to_all_goes_by_distance_and_calls_to_one_peer_keep_their_order() {
        let calls = [send(2), recv(2), send(0), recv(0), send(1), recv(1), send(2)];
        let items = rounds(1, 3, &calls).unwrap();
        // Distance 0: to and from itself; 1: to 2, from 0; 2: to 0, from 2, then the
        // second send to 2 at distance 1 pairs with nothing.
        assert_eq!(items, vec![(Some(4), Some(5)), (Some(0), Some(3)), (Some(6), None), (Some(2), Some(1))]);
    }

    #[test]
    fn a_peer_outside_the_ranks_is_refused() {
        assert_eq!(rounds(0, 2, &[send(1), recv(2)]), Err("peer 2 of 2 ranks".to_string()));
    }

    /// xorshift64*.
    fn next(x: &mut u64) -> u64 {
        *x ^= *x >> 12;
        *x ^= *x << 25;
        *x ^= *x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11
    }

    /// Runs every rank's `items` (indices into its `calls`, each call tagged with its
    /// message) on the model of the test below; whether every rank finished.
    fn model_finishes(messages: &[(usize, usize)], calls: &[Vec<(Call, usize)>], items: &[Vec<Item>]) -> bool {
        let n = calls.len();
        let message = |r: usize, i: Option<usize>| i.map(|i| calls[r][i].1);
        // A message is delivered once its send and its receive are both in their
        // ranks' current items; an item ends once its messages are delivered.
        let mut delivered = vec![false; messages.len()];
        let mut at = vec![0usize; n];
        loop {
            let current = |r: usize, at: &[usize]| items[r].get(at[r]).map(|&(s, v)| (message(r, s), message(r, v)));
            let mut moved = false;
            for (m, &(src, dst)) in messages.iter().enumerate() {
                if !delivered[m] && current(src, &at).is_some_and(|(s, _)| s == Some(m)) && current(dst, &at).is_some_and(|(_, v)| v == Some(m)) {
                    delivered[m] = true;
                    moved = true;
                }
            }
            for r in 0..n {
                if current(r, &at).is_some_and(|(s, v)| s.is_none_or(|m| delivered[m]) && v.is_none_or(|m| delivered[m])) {
                    at[r] += 1;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        (0..n).all(|r| at[r] == items[r].len())
    }

    #[test]
    fn the_model_finds_the_deadlock_of_calls_run_in_call_order() {
        // Each rank receives from the other, then sends to it: in call order, one call per
        // item, both wait for a send that comes after their receive.
        let calls = vec![vec![(recv(1), 1), (send(1), 0)], vec![(recv(0), 0), (send(0), 1)]];
        let in_call_order: Vec<Vec<Item>> = calls.iter().map(|c| (0..c.len()).map(|i| if c[i].0.send { (Some(i), None) } else { (None, Some(i)) }).collect()).collect();
        assert!(!model_finishes(&[(0, 1), (1, 0)], &calls, &in_call_order));
        let by_rounds: Vec<_> = (0..2).map(|r| rounds(r, 2, &calls[r].iter().map(|c| c.0).collect::<Vec<_>>()).unwrap()).collect();
        assert!(model_finishes(&[(0, 1), (1, 0)], &calls, &by_rounds));
    }

    /// Random groups (messages between random ranks, each rank's calls shuffled) run on a
    /// model where a message moves only while its send and its receive are both in their
    /// ranks' current items (a rendezvous, stricter than ferroccl's buffered sends), and an
    /// item ends once its messages have moved: every rank finishes, and every send meets
    /// the receive of the same message (the same pair, in call order).
    #[test]
    fn random_groups_never_deadlock_and_match_in_call_order() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let n = 1 + (next(&mut x) % 6) as usize;
            let messages: Vec<(usize, usize)> = (0..next(&mut x) % 12).map(|_| ((next(&mut x) % n as u64) as usize, (next(&mut x) % n as u64) as usize)).collect();
            // Each rank's calls, tagged with the message; then shuffled, except that calls
            // between the same two ranks in the same direction keep the messages' order.
            let mut calls: Vec<Vec<(Call, usize)>> = vec![Vec::new(); n];
            for (m, &(src, dst)) in messages.iter().enumerate() {
                calls[src].push((send(dst), m));
                calls[dst].push((recv(src), m));
            }
            for rank in calls.iter_mut() {
                for i in (1..rank.len()).rev() {
                    rank.swap(i, (next(&mut x) % (i as u64 + 1)) as usize);
                }
                // Calls to one peer in one direction take their messages in order again.
                let classes: Vec<Call> = rank.iter().map(|c| c.0).collect();
                for class in &classes {
                    let at: Vec<usize> = (0..rank.len()).filter(|&i| rank[i].0 == *class).collect();
                    let mut ms: Vec<usize> = at.iter().map(|&i| rank[i].1).collect();
                    ms.sort_unstable();
                    for (&i, m) in at.iter().zip(ms) {
                        rank[i].1 = m;
                    }
                }
            }
            let items: Vec<Vec<Item>> = (0..n).map(|r| rounds(r, n, &calls[r].iter().map(|c| c.0).collect::<Vec<_>>()).unwrap()).collect();
            let finished = model_finishes(&messages, &calls, &items);
            assert!(finished, "deadlock: {n} ranks, messages {messages:?}");
        }
    }
}
