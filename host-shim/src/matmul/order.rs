//! The order in which a process enqueues its ranks' operations of one call.
//!
//! A GPU runs the work of a process's streams through a few hardware queues, each first
//! in, first out across every stream mapped to it. An operation that waits (a spinning
//! wait kernel, and the stream-ordered work queued behind it) holds its queue; work of
//! another stream submitted later to the same queue waits behind it. So a rank's wait
//! for a signal must never be submitted before the work that leads to that signal: when
//! two ranks of one process were enqueued one after the other, rank 0's wait for rank 1's
//! copy came first, rank 1's copy could sit behind it in a shared queue, and the call
//! waited until the spin budget ran out (seen on an H100 and an H200, two ranks on one
//! GPU, reduce-scatter).
//!
//! [`Submitted::order`] runs every rank's plan of the call on a model of the ring (every
//! rank's, remote ones too: a remote rank's signal depends on what this process sends it)
//! and returns the operations in an order in which each comes after everything it waits
//! for: the operations before it on its lane, the record of an event it waits for, and
//! the signal or put that brings a word it waits for to its value. Submitted in that
//! order, what any wait needs was submitted before it, in every queue.

use std::collections::{HashMap, VecDeque};

use device_rt::matmul::{Event, LANES, Lane, Op, RingPlan, Shape, Word};

/// The model of the ring's signal words across calls: the largest value each rank's word
/// has been sent by the operations ordered so far (every call's, of every rank).
#[derive(Default)]
pub(crate) struct Submitted {
    words: HashMap<(u32, Word), u64>,
}

/// One operation of one rank, in submission order.
pub(crate) type Step = (u32, Lane, Op);

/// The ring's words, and this call's events, as the operations run so far have set them.
struct Model {
    words: HashMap<(u32, Word), u64>,
    events: HashMap<(u32, Event), u64>,
}

impl Model {
    /// Whether rank `rank`'s `op` can run: what it waits for has come.
    fn ready(&self, rank: u32, op: Op) -> bool {
        match op {
            Op::Wait { word, at_least } => at_least == 0 || self.words.get(&(rank, word)).is_some_and(|&v| v >= at_least),
            Op::WaitEvent { event, at_least } => self.events.get(&(rank, event)).is_some_and(|&v| v >= at_least),
            _ => true,
        }
    }

    /// What rank `rank`'s `op` sets, in a ring of `nranks`: a neighbour's word, or an event.
    fn run(&mut self, rank: u32, nranks: u32, op: Op) {
        let (at, value) = match op {
            Op::Signal { word, on: peer, value } | Op::Put { to: peer, word, value, .. } => (self.words.entry((peer.of(rank, nranks), word)).or_default(), value),
            Op::Record { event, value } => (self.events.entry((rank, event)).or_default(), value),
            _ => return,
        };
        *at = (*at).max(value);
    }
}

impl Submitted {
    /// Every operation of call `seq` of `shape`'s ring, every rank's, in an order in which
    /// each comes after what it waits for (see the module's documentation); each lane's
    /// operations in their plan's order. An error where no such order exists (a schedule
    /// that could not finish; the model is then left as it was).
    pub(crate) fn order(&mut self, shape: Shape, seq: u64) -> Result<Vec<Step>, String> {
        let n = shape.nranks;
        let mut lanes: Vec<[VecDeque<Op>; LANES.len()]> = (0..n).map(|_| Default::default()).collect();
        for (rank, queues) in (0..n).zip(lanes.iter_mut()) {
            RingPlan { shape, rank, seq }.for_each(|lane, op| queues[lane as usize].push_back(op));
        }
        let mut model = Model { words: self.words.clone(), events: HashMap::new() };
        let mut order = Vec::new();
        loop {
            let mut moved = false;
            for (rank, queues) in (0..n).zip(lanes.iter_mut()) {
                for (lane, queue) in LANES.into_iter().zip(queues.iter_mut()) {
                    while let Some(&op) = queue.front().filter(|&&op| model.ready(rank, op)) {
                        model.run(rank, n, op);
                        queue.pop_front();
                        order.push((rank, lane, op));
                        moved = true;
                    }
                }
            }
            if lanes.iter().all(|queues| queues.iter().all(VecDeque::is_empty)) {
                self.words = model.words;
                return Ok(order);
            }
            if !moved {
                let stuck: Vec<String> = (0..n)
                    .zip(&lanes)
                    .flat_map(|(rank, queues)| queues.iter().filter_map(move |q| q.front().map(|op| format!("rank {rank}: {op:?}"))))
                    .collect();
                return Err(format!("collective matmul: call {seq}'s schedule cannot finish ({})", stuck.join("; ")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use device_rt::dtype::DataType;
    use device_rt::matmul::Collective;

    fn shapes() -> impl Iterator<Item = Shape> {
        let collectives = [
            Collective::AllGatherMatmul { bidirectional: false },
            Collective::AllGatherMatmul { bidirectional: true },
            Collective::MatmulReduceScatter { pieces: 1 },
            Collective::MatmulReduceScatter { pieces: 2 },
        ];
        (1..=8).flat_map(move |nranks| collectives.map(|collective| Shape { collective, nranks, m: 16, k: 16, n: 16, dtype: DataType::F16 }))
    }

    /// Whether every operation of `order` comes after what it waits for, given the words
    /// earlier calls sent (`words`, updated): the property the hardware queues need.
    fn waits_follow_their_causes(order: &[Step], nranks: u32, words: &mut HashMap<(u32, Word), u64>) -> Result<(), String> {
        let mut model = Model { words: std::mem::take(words), events: HashMap::new() };
        for (i, &(rank, _, op)) in order.iter().enumerate() {
            if !model.ready(rank, op) {
                return Err(format!("step {i}: rank {rank}'s {op:?} comes before what it waits for"));
            }
            model.run(rank, nranks, op);
        }
        *words = model.words;
        Ok(())
    }

    /// Runs `order` (every rank's submissions, each process's in this order) on hardware
    /// queues, each first in, first out, the stream of `(rank, lane)` on queue
    /// `queue_of(rank, lane)`: an operation at a queue's head that waits (for a word, or an
    /// event) holds the queue until what it waits for has run. Whether every operation
    /// ran; `words` carries the words from call to call.
    fn runs_on_queues(order: &[Step], nranks: u32, queue_of: impl Fn(u32, Lane) -> usize, words: &mut HashMap<(u32, Word), u64>) -> bool {
        let mut fifo: Vec<VecDeque<Step>> = Vec::new();
        for &step in order {
            let q = queue_of(step.0, step.1);
            if fifo.len() <= q {
                fifo.resize(q + 1, VecDeque::new());
            }
            fifo[q].push_back(step);
        }
        let mut model = Model { words: std::mem::take(words), events: HashMap::new() };
        let all_ran = loop {
            let mut ran = false;
            for queue in &mut fifo {
                while let Some(&(rank, _, op)) = queue.front().filter(|&&(rank, _, op)| model.ready(rank, op)) {
                    model.run(rank, nranks, op);
                    queue.pop_front();
                    ran = true;
                }
            }
            if fifo.iter().all(VecDeque::is_empty) {
                break true;
            }
            if !ran {
                break false;
            }
        };
        *words = model.words;
        all_ran
    }

    /// Every rank in one process, its streams on 1 to 4 shared first-in-first-out queues:
    /// submitted in this order, every call of every collective runs to its end; submitted
    /// rank after rank, with one queue, none of those on two or more ranks does.
    #[test]
    fn one_process_never_blocks_its_own_queues() {
        for shape in shapes().filter(|s| s.nranks <= 4) {
            for queues in 1..=4 {
                let mut model = Submitted::default();
                let mut words = HashMap::new();
                for seq in 1..=3 {
                    let order = model.order(shape, seq).unwrap();
                    assert!(runs_on_queues(&order, shape.nranks, shared(queues), &mut words), "{shape:?} call {seq} on {queues} queue(s): blocked");
                }
            }
            if shape.nranks >= 2 {
                assert!(!runs_on_queues(&plan_order(shape, 1), shape.nranks, shared(1), &mut HashMap::new()), "{shape:?}: rank after rank ran on one queue");
            }
        }
    }

    /// One process's streams on `queues` shared queues: `(rank, lane)`'s on queue
    /// `(lanes × rank + lane) mod queues`.
    fn shared(queues: usize) -> impl Fn(u32, Lane) -> usize {
        move |rank, lane| (LANES.len() * rank as usize + lane as usize) % queues
    }

    /// Each rank in a process (and on a GPU) of its own, its streams on `queues` queues of
    /// its own.
    fn per_process(queues: usize) -> impl Fn(u32, Lane) -> usize {
        move |rank, lane| rank as usize * queues + lane as usize % queues
    }

    /// Every rank's operations of call `seq`, rank after rank, each rank's in its plan's
    /// order.
    fn plan_order(shape: Shape, seq: u64) -> Vec<Step> {
        let mut order = Vec::new();
        for rank in 0..shape.nranks {
            RingPlan { shape, rank, seq }.for_each(|lane, op| order.push((rank, lane, op)));
        }
        order
    }

    /// Ranks with queues of their own (each on a GPU of its own), each rank's operations
    /// submitted in its plan's order, on 1 to 3 queues a rank: every call of every
    /// collective runs to its end, on 1 to 8 ranks, call after call. What lets a process
    /// whose ranks are on distinct devices skip the order.
    #[test]
    fn ranks_on_queues_of_their_own_run_in_plan_order() {
        for shape in shapes() {
            for queues in 1..=3 {
                let mut words = HashMap::new();
                for seq in 1..=3 {
                    assert!(runs_on_queues(&plan_order(shape, seq), shape.nranks, per_process(queues), &mut words), "{shape:?} call {seq}, {queues} queue(s) a rank: blocked");
                }
            }
        }
    }

    #[test]
    fn every_wait_is_submitted_after_its_cause_call_after_call() {
        for shape in shapes() {
            let mut model = Submitted::default();
            let mut words = HashMap::new();
            for seq in 1..=4 {
                let order = model.order(shape, seq).unwrap();
                let mut plan_ops = 0;
                for rank in 0..shape.nranks {
                    let mut lanes: [Vec<Op>; LANES.len()] = Default::default();
                    RingPlan { shape, rank, seq }.for_each(|lane, op| lanes[lane as usize].push(op));
                    plan_ops += lanes.iter().map(Vec::len).sum::<usize>();
                    for lane in LANES {
                        let got: Vec<Op> = order.iter().filter(|&&(r, l, _)| r == rank && l == lane).map(|&(_, _, op)| op).collect();
                        assert_eq!(got, lanes[lane as usize], "{shape:?} call {seq}: rank {rank}'s {lane:?} lane out of its order");
                    }
                }
                assert_eq!(order.len(), plan_ops, "{shape:?} call {seq}: an operation lost or repeated");
                waits_follow_their_causes(&order, shape.nranks, &mut words).unwrap_or_else(|e| panic!("{shape:?} call {seq}: {e}"));
            }
        }
    }

    /// The negative control: enqueued rank after rank in plan order (as before this
    /// order existed), some rank's wait comes before the put it waits for, for every
    /// collective on two or more ranks.
    #[test]
    fn rank_after_rank_puts_a_wait_before_its_cause() {
        for shape in shapes().filter(|s| s.nranks >= 2) {
            let mut words = HashMap::new();
            assert!(waits_follow_their_causes(&plan_order(shape, 1), shape.nranks, &mut words).is_err(), "{shape:?}: rank after rank never waited early");
        }
    }
}
