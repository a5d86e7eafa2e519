//! The collective matmuls' schedules (`device_rt::matmul::plan`) run on a model of a ring:
//! every rank's lanes as queues of operations, run one operation at a time in random
//! orders that respect only the plan's waits, over several calls in a row. Buffers hold
//! what they were last given (which rank's shard of which call; which products, summed in
//! which order), so a GEMM that reads a slot before its data landed, or after the next
//! call overwrote it, reads the wrong thing and fails; a plan that can stop with work
//! left fails as a deadlock. Shapes are checked before anything runs.

use std::collections::HashMap;

use device_rt::dtype::DataType;
use device_rt::matmul::{Collective, Event, LANES, Lane, Matrix, Op, Peer, RingPlan, Rows, Shape, ShapeError, Word};

/// What a row of a buffer holds.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Content {
    /// Nothing written yet.
    Nothing,
    /// Row `row` of rank `shard`'s `A` of call `seq`.
    Shard { shard: u32, seq: u64, row: u64 },
    /// The all-gather's product of that row.
    Product { shard: u32, seq: u64, row: u64 },
    /// Row `row` of block `block`'s sum of products of call `seq`, over `ranks` in the
    /// order they were added.
    Sum { block: u32, seq: u64, row: u64, ranks: Vec<u32> },
}

const ALL: [Collective; 4] = [
    Collective::AllGatherMatmul { bidirectional: false },
    Collective::AllGatherMatmul { bidirectional: true },
    Collective::MatmulReduceScatter { pieces: 1 },
    Collective::MatmulReduceScatter { pieces: 2 },
];

fn shape(collective: Collective, nranks: u32, m: u64) -> Shape {
    Shape { collective, nranks, m, k: 8, n: 16, dtype: DataType::F16 }
}

/// Order `seed` of a ring of `nranks`: the odd ones uniform, each even one with one lane
/// (of a rank and lane the seed picks) lagging.
fn order(seed: u64, nranks: u32) -> (Rng, Option<(usize, usize)>) {
    let lagging = seed.is_multiple_of(2).then(|| ((seed / 2 % u64::from(nranks)) as usize, (seed / 2 / u64::from(nranks) % LANES.len() as u64) as usize));
    (Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)), lagging)
}

/// xorshift64*: the model's scheduler.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// Whether what `op` waits for has come, a rank's words and events read by `word` and
/// `event` (`None`: never set).
fn waits_met(op: &Op, word: impl Fn(Word) -> Option<u64>, event: impl Fn(Event) -> Option<u64>) -> bool {
    match *op {
        Op::Wait { word: w, at_least } => word(w).unwrap_or(0) >= at_least,
        Op::WaitEvent { event: e, at_least } => event(e).unwrap_or(0) >= at_least,
        _ => true,
    }
}

/// One queued operation, or a point where the caller's stream begins or ends a call.
#[derive(Clone, Debug)]
enum Step {
    /// The caller writes call `seq`'s `A` (its stream has finished the previous call).
    Begin(u64),
    Op(Op),
    /// The caller reads call `seq`'s `C`.
    End(u64),
}

struct Rank {
    lanes: [Vec<Step>; LANES.len()],
    next: [usize; LANES.len()],
    words: HashMap<Word, u64>,
    events: HashMap<u32, u64>,
    rows: HashMap<(MatrixKey, u64), Content>,
}

/// `Matrix` as a map key.
type MatrixKey = (u8, u32);

fn key(m: Matrix) -> MatrixKey {
    match m {
        Matrix::A => (0, 0),
        Matrix::C => (1, 0),
        Matrix::Gathered { shard } => (2, shard),
        Matrix::Partial { slot } => (3, slot),
        Matrix::Out { slot } => (4, slot),
    }
}

struct Ring {
    shape: Shape,
    ranks: Vec<Rank>,
}

impl Ring {
    fn new(shape: Shape, calls: u64) -> Self {
        let ranks = (0..shape.nranks)
            .map(|rank| {
                let mut lanes: [Vec<Step>; LANES.len()] = Default::default();
                let mut recorded: HashMap<u32, Vec<u64>> = HashMap::new();
                for seq in 1..=calls {
                    lanes[0].push(Step::Begin(seq));
                    RingPlan { shape, rank, seq }.for_each(|lane, op| {
                        match op {
                            Op::Record { event, value } => recorded.entry(event as u32).or_default().push(value),
                            // A GPU waits for one recorded event: the record of this value
                            // must already be enqueued.
                            Op::WaitEvent { event, at_least } => {
                                assert!(recorded.get(&(event as u32)).is_some_and(|v| v.contains(&at_least)), "rank {rank} call {seq}: {op:?} before its record")
                            }
                            _ => {}
                        }
                        lanes[lane as usize].push(Step::Op(op));
                    });
                    lanes[0].push(Step::End(seq));
                }
                Rank { lanes, next: [0; LANES.len()], words: HashMap::new(), events: HashMap::new(), rows: HashMap::new() }
            })
            .collect();
        Self { shape, ranks }
    }

    fn peer(&self, rank: u32, peer: Peer) -> u32 {
        peer.of(rank, self.shape.nranks)
    }

    fn ready(&self, rank: usize, lane: usize) -> bool {
        let r = &self.ranks[rank];
        match r.lanes[lane].get(r.next[lane]) {
            None => false,
            Some(Step::Op(op)) => waits_met(op, |word| r.words.get(&word).copied(), |event| r.events.get(&(event as u32)).copied()),
            Some(_) => true,
        }
    }

    fn read(&self, rank: u32, rows: Rows, row: u64) -> Content {
        self.ranks[rank as usize].rows.get(&(key(rows.matrix), rows.row0 + row)).cloned().unwrap_or(Content::Nothing)
    }

    fn write(&mut self, rank: u32, rows: Rows, row: u64, c: Content) {
        self.ranks[rank as usize].rows.insert((key(rows.matrix), rows.row0 + row), c);
    }

    /// Runs the next step of `rank`'s `lane`.
    fn step(&mut self, rank: u32, lane: usize) -> Result<(), String> {
        let (d, m) = (self.shape.nranks, self.shape.m);
        let r = &mut self.ranks[rank as usize];
        let step = r.lanes[lane][r.next[lane]].clone();
        r.next[lane] += 1;
        match step {
            Step::Begin(seq) => {
                let rows = Rows { matrix: Matrix::A, row0: 0, rows: self.shape.dims()[0].0 };
                for row in 0..rows.rows {
                    let c = match self.shape.collective {
                        Collective::AllGatherMatmul { .. } => Content::Shard { shard: rank, seq, row },
                        Collective::MatmulReduceScatter { .. } => Content::Sum { block: (row / m) as u32, seq, row: row % m, ranks: vec![rank] },
                    };
                    self.write(rank, rows, row, c);
                }
            }
            Step::End(seq) => {
                let rows = Rows { matrix: Matrix::C, row0: 0, rows: self.shape.dims()[2].0 };
                for row in 0..rows.rows {
                    let want = match self.shape.collective {
                        Collective::AllGatherMatmul { .. } => Content::Product { shard: (row / m) as u32, seq, row: row % m },
                        Collective::MatmulReduceScatter { .. } => Content::Sum { block: rank, seq, row, ranks: (1..=d).map(|i| (rank + i) % d).collect() },
                    };
                    let got = self.read(rank, rows, row);
                    if got != want {
                        return Err(format!("rank {rank} after call {seq}: C row {row} holds {got:?}, not {want:?}"));
                    }
                }
            }
            Step::Op(op) => match op {
                Op::Wait { .. } | Op::WaitEvent { .. } => {}
                Op::Signal { word, on, value } => {
                    let at = self.peer(rank, on) as usize;
                    let old = self.ranks[at].words.insert(word, value).unwrap_or(0);
                    if old > value {
                        return Err(format!("rank {rank}: {op:?} lowers a word from {old}"));
                    }
                }
                Op::Record { event, value } => {
                    let old = self.ranks[rank as usize].events.insert(event as u32, value).unwrap_or(0);
                    if old > value {
                        return Err(format!("rank {rank}: {op:?} lowers an event from {old}"));
                    }
                }
                Op::Put { src, dst, to, word, value } => {
                    if src.rows != dst.rows {
                        return Err(format!("rank {rank}: {op:?} copies between different row counts"));
                    }
                    let at = self.peer(rank, to);
                    for row in 0..src.rows {
                        let c = self.read(rank, src, row);
                        if c == Content::Nothing {
                            return Err(format!("rank {rank}: {op:?} sends a row never written"));
                        }
                        self.write(at, dst, row, c);
                    }
                    let old = self.ranks[at as usize].words.insert(word, value).unwrap_or(0);
                    if old > value {
                        return Err(format!("rank {rank}: {op:?} lowers a word from {old}"));
                    }
                }
                Op::Gemm { a, c, acc } => {
                    for row in 0..a.rows {
                        let result = match (self.read(rank, a, row), acc.map(|acc| self.read(rank, acc, row))) {
                            (Content::Shard { shard, seq, row: i }, None) if c.matrix == Matrix::C && c.row0 + row == u64::from(shard) * m + i => Content::Product { shard, seq, row: i },
                            (Content::Sum { block, seq, row: i, ranks }, None) if ranks == [rank] => Content::Sum { block, seq, row: i, ranks },
                            (Content::Sum { block, seq, row: i, .. }, Some(Content::Sum { block: b2, seq: s2, row: i2, ranks: mut summed })) if (block, seq, i) == (b2, s2, i2) => {
                                summed.push(rank);
                                Content::Sum { block, seq, row: i, ranks: summed }
                            }
                            (x, y) => return Err(format!("rank {rank}: {op:?} row {row} multiplies {x:?} with accumulator {y:?}")),
                        };
                        self.write(rank, c, row, result);
                    }
                }
            },
        }
        Ok(())
    }

    /// Runs every lane to its end in an order `rng` picks among the runnable steps; the
    /// lane `lagging` (rank, lane), when given, only when no other is runnable: a stream
    /// held back as long as the others allow, the orders where a hazard needs one lane
    /// far behind the rest (uniform picks almost never make them).
    fn run(&mut self, rng: &mut Rng, lagging: Option<(usize, usize)>) -> Result<(), String> {
        loop {
            let runnable: Vec<(usize, usize)> = (0..self.ranks.len()).flat_map(|r| (0..LANES.len()).map(move |l| (r, l))).filter(|&(r, l)| self.ready(r, l)).collect();
            let others: Vec<(usize, usize)> = runnable.iter().copied().filter(|&lane| Some(lane) != lagging).collect();
            let ready = if others.is_empty() { runnable } else { others };
            if ready.is_empty() {
                let left: Vec<String> = self
                    .ranks
                    .iter()
                    .enumerate()
                    .flat_map(|(r, rank)| (0..LANES.len()).filter_map(move |l| rank.lanes[l].get(rank.next[l]).map(|s| format!("rank {r} lane {l} at {s:?}"))))
                    .collect();
                return if left.is_empty() { Ok(()) } else { Err(format!("deadlock: {}", left.join("; "))) };
            }
            let (r, l) = ready[rng.below(ready.len())];
            self.step(r as u32, l)?;
        }
    }
}

#[test]
fn every_schedule_computes_the_right_rows_in_any_order_the_waits_allow() {
    for collective in ALL {
        for nranks in 1..=8 {
            for m in [2, 3] {
                for seed in 1..=40u64 {
                    let shape = shape(collective, nranks, m);
                    shape.check().unwrap();
                    let mut ring = Ring::new(shape, 3);
                    let (mut rng, lagging) = order(seed, nranks);
                    if let Err(e) = ring.run(&mut rng, lagging) {
                        panic!("{collective:?} on {nranks} ranks, m = {m}, order {seed} (lagging {lagging:?}): {e}");
                    }
                }
            }
        }
    }
}

#[test]
fn lanes_are_used_as_their_names_say() {
    for collective in ALL {
        let mut lanes = [0; LANES.len()];
        RingPlan { shape: shape(collective, 4, 2), rank: 1, seq: 1 }.for_each(|lane, op| {
            lanes[lane as usize] += 1;
            match (lane, op) {
                // The compute lane: GEMMs, and events only (nothing that costs a stream
                // time between two GEMMs).
                (Lane::Compute, Op::Gemm { .. } | Op::Record { .. } | Op::WaitEvent { .. }) => {}
                // The watch lane: the call's start, then landed data and its events.
                (Lane::Watch, Op::WaitEvent { event: Event::Start, .. } | Op::Wait { word: Word::Landed { .. }, .. } | Op::Record { event: Event::Arrived, .. }) => {}
                (Lane::ToNext, Op::Put { to: Peer::Next, .. }) | (Lane::ToPrev, Op::Put { to: Peer::Prev, .. }) => {}
                (Lane::ToNext | Lane::ToPrev, Op::Wait { .. } | Op::Signal { .. } | Op::Record { .. } | Op::WaitEvent { .. }) => {}
                _ => panic!("{collective:?}: {op:?} on the {lane:?} lane"),
            }
            if matches!(op, Op::Record { event: Event::Arrived, .. }) {
                assert_eq!(lane, Lane::Watch, "{op:?}");
            }
            // Only the watch lane waits for landed data (a copy lane forwards a shard
            // after the watch lane's event): one wait per rank beside the GEMMs.
            if matches!(op, Op::Wait { word: Word::Landed { .. }, .. }) {
                assert_eq!(lane, Lane::Watch, "{collective:?}: {op:?}");
            }
        });
        let both_ways = collective == Collective::AllGatherMatmul { bidirectional: true };
        assert_eq!(lanes[Lane::ToPrev as usize] > 0, both_ways, "{collective:?}");
        assert!(lanes[Lane::Watch as usize] > 0, "{collective:?}");
    }
}

/// A block of 3 rows in 3 pieces (one row each), and in 2 (rows 0 and 1-2): on 1 to 5
/// ranks, in any order the waits allow.
#[test]
fn the_reduce_scatter_computes_uneven_and_single_row_pieces() {
    for pieces in [2, 3] {
        for nranks in 1..=5 {
            let shape = shape(Collective::MatmulReduceScatter { pieces }, nranks, 3);
            shape.check().unwrap();
            for seed in 1..=20u64 {
                let (mut rng, lagging) = order(seed, nranks);
                if let Err(e) = Ring::new(shape, 3).run(&mut rng, lagging) {
                    panic!("{pieces} pieces on {nranks} ranks, order {seed}: {e}");
                }
            }
        }
    }
    let s = shape(Collective::MatmulReduceScatter { pieces: 2 }, 2, 3);
    assert_eq!([s.piece(0), s.piece(1)], [(0, 1), (1, 2)]);
    assert_eq!(s.piece_rows(), 2);
    // Pieces tile the block in order, none empty and none above `piece_rows`, up to the
    // tallest blocks a shape may have.
    for (m, pieces) in [(3, 3), (7, 2), (1000, 7), (1 << 59, 3), ((1 << 59) + 5, 1 << 14)] {
        let s = Shape { collective: Collective::MatmulReduceScatter { pieces }, nranks: 2, m, k: 8, n: 8, dtype: DataType::F16 };
        let mut next = 0;
        for j in 0..pieces {
            let (row0, rows) = s.piece(j);
            assert!(row0 == next && rows > 0 && rows <= s.piece_rows(), "m = {m}, {pieces} pieces: piece {j} at {row0}, {rows} rows");
            next += rows;
        }
        assert_eq!(next, m);
    }
}

#[test]
fn the_reduce_scatter_splits_tall_blocks_in_two() {
    let below = device_rt::matmul::TWO_PIECES_FROM_ROWS - 1;
    assert_eq!(Collective::matmul_reduce_scatter(below), Collective::MatmulReduceScatter { pieces: 1 });
    assert_eq!(Collective::matmul_reduce_scatter(below + 1), Collective::MatmulReduceScatter { pieces: 2 });
}

/// True when some order of the ring, without the steps `dropped` picks, fails.
fn caught_without(shape: Shape, dropped: impl Fn(Lane, &Step) -> bool) -> bool {
    (1..=200u64).any(|seed| {
        let mut ring = Ring::new(shape, 3);
        for rank in &mut ring.ranks {
            for (&lane, steps) in LANES.iter().zip(&mut rank.lanes) {
                steps.retain(|s| !dropped(lane, s));
            }
        }
        let (mut rng, lagging) = order(seed, shape.nranks);
        ring.run(&mut rng, lagging).is_err()
    })
}

#[test]
fn every_wait_of_the_schedules_is_needed() {
    // Negative controls of the model: without each kind of wait, some order of the ring
    // reads or overwrites a buffer at the wrong time.
    let gather = shape(Collective::AllGatherMatmul { bidirectional: false }, 3, 2);
    let both_ways = shape(Collective::AllGatherMatmul { bidirectional: true }, 3, 2);
    let scatter = shape(Collective::MatmulReduceScatter { pieces: 1 }, 4, 2);
    let in_pieces = shape(Collective::MatmulReduceScatter { pieces: 2 }, 4, 2);
    type Case = (&'static str, Shape, fn(Lane, &Step) -> bool);
    let cases: [Case; 15] = [
        ("the all-gather's free slots", gather, |_, s| matches!(s, Step::Op(Op::Wait { word: Word::Freed { .. }, .. }))),
        // The copy lanes signal that a call's slots are free only after the compute
        // lane's GEMMs (its `Computed` event, the all-gather's only use of it).
        ("the all-gather's GEMMs before its free-slot signal", gather, |_, s| matches!(s, Step::Op(Op::WaitEvent { event: Event::Computed, .. }))),
        ("the bidirectional all-gather's GEMMs before its free-slot signals", both_ways, |_, s| matches!(s, Step::Op(Op::WaitEvent { event: Event::Computed, .. }))),
        // The reduce-scatter's last GEMM (point 4 of 4 ranks' call) reads a receive slot
        // that its copy lane signals consumed only after the GEMM.
        ("the reduce-scatter's last GEMM before its consumed signal", scatter, |_, s| matches!(s, Step::Op(Op::WaitEvent { event: Event::Computed, at_least }) if at_least & 0xffff == 4)),
        ("the all-gather's landed shards", gather, |_, s| matches!(s, Step::Op(Op::Wait { word: Word::Landed { .. }, .. }))),
        // The compute lane learns of landed data only from the watch lane's events.
        ("the all-gather's arrivals", gather, |_, s| matches!(s, Step::Op(Op::WaitEvent { event: Event::Arrived, .. }))),
        // A copy lane forwards a shard only after the watch lane saw it land.
        ("the forwarded shards' arrivals", gather, |lane, s| lane == Lane::ToNext && matches!(s, Step::Op(Op::WaitEvent { event: Event::Arrived, .. }))),
        ("the bidirectional all-gather's arrivals", both_ways, |_, s| matches!(s, Step::Op(Op::WaitEvent { event: Event::Arrived, .. }))),
        ("the bidirectional all-gather's free slots", both_ways, |_, s| matches!(s, Step::Op(Op::Wait { word: Word::Freed { from: Peer::Prev }, .. }))),
        ("the reduce-scatter's landed partial sums", scatter, |_, s| matches!(s, Step::Op(Op::Wait { word: Word::Landed { .. }, .. }))),
        ("the reduce-scatter's arrivals", scatter, |_, s| matches!(s, Step::Op(Op::WaitEvent { event: Event::Arrived, .. }))),
        ("the reduce-scatter's consumed partial sums", scatter, |_, s| matches!(s, Step::Op(Op::Wait { word: Word::Consumed, .. }))),
        ("the reduce-scatter's sent slots", scatter, |_, s| matches!(s, Step::Op(Op::WaitEvent { event: Event::SentNext, .. }))),
        ("the pieces' consumed partial sums", in_pieces, |_, s| matches!(s, Step::Op(Op::Wait { word: Word::Consumed, .. }))),
        ("the pieces' arrivals", in_pieces, |_, s| matches!(s, Step::Op(Op::WaitEvent { event: Event::Arrived, .. }))),
    ];
    for (what, shape, dropped) in cases {
        assert!(caught_without(shape, dropped), "without the waits for {what} no order failed: the model cannot see the hazard");
    }
}

#[test]
fn bad_shapes_are_refused_with_what_is_wrong() {
    let good = shape(Collective::MatmulReduceScatter { pieces: 2 }, 2, 4);
    let cases = [
        (Shape { dtype: DataType::F32, ..good }, ShapeError::Dtype(DataType::F32)),
        (Shape { nranks: 0, ..good }, ShapeError::TooManyRanks(0)),
        (Shape { m: 0, ..good }, ShapeError::Empty("m")),
        (Shape { k: 0, ..good }, ShapeError::Empty("k")),
        (Shape { n: 12, ..good }, ShapeError::RowAlignment("B and C", 12)),
        (Shape { k: 4, ..good }, ShapeError::RowAlignment("A", 4)),
        (Shape { collective: Collective::AllGatherMatmul { bidirectional: true }, m: 1, ..good }, ShapeError::ShardTooShort(1)),
        (Shape { m: u64::MAX / 4, ..good }, ShapeError::TooLarge("A")),
        (Shape { collective: Collective::MatmulReduceScatter { pieces: 0 }, ..good }, ShapeError::Pieces(0, 4)),
        (Shape { collective: Collective::MatmulReduceScatter { pieces: 5 }, ..good }, ShapeError::Pieces(5, 4)),
        (Shape { collective: Collective::MatmulReduceScatter { pieces: 2 }, nranks: 1 << 15, m: 8, ..good }, ShapeError::Pieces(2, 8)),
    ];
    for (shape, want) in cases {
        assert_eq!(shape.check(), Err(want), "{shape:?}");
        assert!(!want.to_string().is_empty());
    }
    assert_eq!(good.check(), Ok(()));
}

/// A timing model of the ring: every rank's lanes run their operations in order, each
/// starting once its lane is free and what it waits for has happened; a GEMM takes
/// `gemm` per row, a put `copy` per row, everything else no time. Returns when each
/// rank's compute lane finished `calls` calls in a row.
fn timed(shape: Shape, calls: u64, gemm: u64, copy: u64) -> Vec<u64> {
    use std::collections::VecDeque;
    let d = shape.nranks;
    let mut lanes: Vec<[VecDeque<Op>; LANES.len()]> = (0..d).map(|_| Default::default()).collect();
    for (rank, queues) in (0..d).zip(lanes.iter_mut()) {
        for seq in 1..=calls {
            RingPlan { shape, rank, seq }.for_each(|lane, op| queues[lane as usize].push_back(op));
        }
    }
    let mut words: HashMap<(u32, Word), u64> = HashMap::new();
    let mut events: HashMap<(u32, u32), u64> = HashMap::new();
    let mut busy: Vec<[Option<(u64, Op)>; LANES.len()]> = vec![[None; LANES.len()]; d as usize];
    let mut finished = vec![0; d as usize];
    let mut now = 0;
    let complete = |rank: u32, op: Op, words: &mut HashMap<(u32, Word), u64>, events: &mut HashMap<(u32, u32), u64>| match op {
        Op::Signal { word, on: peer, value } | Op::Put { word, to: peer, value, .. } => {
            let at = words.entry((peer.of(rank, d), word)).or_default();
            *at = (*at).max(value);
        }
        Op::Record { event, value } => {
            let at = events.entry((rank, event as u32)).or_default();
            *at = (*at).max(value);
        }
        _ => {}
    };
    loop {
        // Start (and end, if they take no time) whatever can run now.
        let mut moved = true;
        while moved {
            moved = false;
            for rank in 0..d {
                for lane in 0..LANES.len() {
                    let r = rank as usize;
                    let Some(&op) = lanes[r][lane].front() else { continue };
                    if busy[r][lane].is_some() || !waits_met(&op, |word| words.get(&(rank, word)).copied(), |event| events.get(&(rank, event as u32)).copied()) {
                        continue;
                    }
                    lanes[r][lane].pop_front();
                    moved = true;
                    let takes = match op {
                        Op::Gemm { a, .. } => a.rows * gemm,
                        Op::Put { src, .. } => src.rows * copy,
                        _ => 0,
                    };
                    if takes == 0 {
                        complete(rank, op, &mut words, &mut events);
                        if lane == Lane::Compute as usize {
                            finished[r] = now;
                        }
                    } else {
                        busy[r][lane] = Some((now + takes, op));
                    }
                }
            }
        }
        let Some(next) = busy.iter().flatten().flatten().map(|&(end, _)| end).min() else {
            assert!(lanes.iter().all(|q| q.iter().all(VecDeque::is_empty)), "{shape:?}: the timing model stopped with work left");
            return finished;
        };
        now = next;
        for (rank, lanes) in (0..d).zip(busy.iter_mut()) {
            for (lane, slot) in lanes.iter_mut().enumerate() {
                if let Some((end, op)) = *slot
                    && end == now
                {
                    *slot = None;
                    complete(rank, op, &mut words, &mut events);
                    if lane == Lane::Compute as usize {
                        finished[rank as usize] = now;
                    }
                }
            }
        }
    }
}

/// Where a copy of a block's rows takes less than half their GEMM (the seed's shape on an
/// H100: 47 µs a 1024-row GEMM, about 21 µs for its 8 MiB over NVLink), the all-gathers
/// and the reduce-scatter in two pieces take the ranks' GEMMs' time and not a moment
/// more, call after call: every transfer hides behind a GEMM. The reduce-scatter in one
/// piece waits for each step's whole partial block to cross (the negative control), and
/// so does an all-gather whose copies are slower than its GEMMs.
#[test]
fn transfers_hide_behind_the_gemms_in_the_timing_model() {
    let (gemm, copy, calls) = (20, 9, 3);
    for nranks in 2..=8u32 {
        for m in [4, 6] {
            let gemms = calls * u64::from(nranks) * m * gemm;
            for collective in [Collective::AllGatherMatmul { bidirectional: false }, Collective::AllGatherMatmul { bidirectional: true }, Collective::MatmulReduceScatter { pieces: 2 }] {
                let ends = timed(shape(collective, nranks, m), calls, gemm, copy);
                assert!(ends.iter().all(|&t| t == gemms), "{collective:?} on {nranks} ranks, m = {m}: {ends:?}, the GEMMs alone {gemms}");
            }
            let whole = timed(shape(Collective::MatmulReduceScatter { pieces: 1 }, nranks, m), calls, gemm, copy);
            let waits = calls * u64::from(nranks - 1) * m * copy;
            assert!(whole.iter().all(|&t| t == gemms + waits), "one piece on {nranks} ranks, m = {m}: {whole:?}, the GEMMs {gemms} and a block's transfer a step {waits}");
            let slow = timed(shape(Collective::AllGatherMatmul { bidirectional: false }, nranks, m), calls, copy, gemm);
            assert!(slow.iter().all(|&t| t > calls * u64::from(nranks) * m * copy), "copies slower than the GEMMs: {slow:?}");
        }
    }
}
