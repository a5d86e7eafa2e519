//! The schedules of the two collective matmuls, as the ordered operations of each lane of
//! one rank: what a GPU enqueues on its streams and what the host twin runs on its
//! threads, from the same list.
//!
//! Lanes are streams of one rank: [`Lane::Compute`] (the caller's stream: the GEMMs), one
//! copy lane per ring direction, and [`Lane::Watch`], which waits for the data the GEMMs
//! read. Operations of one lane run in order, each finishing
//! before the next starts; lanes meet only through [`Op::Record`] / [`Op::WaitEvent`]
//! (this rank) and through signal words in the symmetric workspace (other ranks). Every
//! word is monotonic across calls (values carry the call's sequence number), so no word
//! is ever reset and a late reader never mistakes an old call's value for a new one.

use super::shape::{Collective, Shape};

/// A stream of one rank.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// The caller's stream: the GEMMs and waits for other lanes' events, nothing else:
    /// anything but an event between two GEMMs (a wait or a signal, a kernel or a stream
    /// memory operation alike) costs a stream 2 to 3 µs on an H100, a wait for an event
    /// that has happened nothing.
    Compute = 0,
    /// Copies to the next rank of the ring, and the signals that free this rank's
    /// buffers once the compute lane's GEMMs have read them. A shard it forwards is
    /// waited for through the watch lane's [`Event::Arrived`], not its word: one wait per
    /// rank stays resident beside the GEMMs, the watch lane's (a GPU's GEMMs leave SMs
    /// for one).
    ToNext = 1,
    /// Copies to the previous rank (the bidirectional all-gather only), and the signals
    /// that free the buffers that rank writes here; it forwards as [`Lane::ToNext`] does,
    /// after the watch lane's event.
    ToPrev = 2,
    /// Waits for the data the compute lane's GEMMs read (a shard, a partial sum) to land
    /// and records [`Event::Arrived`] for each: the compute lane waits for the event, and
    /// its GEMMs follow each other with nothing between them once the data is there.
    Watch = 3,
}

/// Every lane, in numbering order.
pub const LANES: [Lane; 4] = [Lane::Compute, Lane::ToNext, Lane::ToPrev, Lane::Watch];

/// A ring neighbour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// Rank `r + 1` (mod the ring).
    Next,
    /// Rank `r - 1` (mod the ring).
    Prev,
}

impl Peer {
    /// The neighbour's rank, for rank `rank` of a ring of `nranks`.
    pub const fn of(self, rank: u32, nranks: u32) -> u32 {
        match self {
            Peer::Next => (rank + 1) % nranks,
            Peer::Prev => (rank + nranks - 1) % nranks,
        }
    }
}

/// A matrix an operation reads or writes. The caller's `A` and `C` are the call's
/// arguments; the others live in the symmetric workspace ([`super::Workspace`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Matrix {
    /// The caller's `A` (row-major, `k` columns).
    A,
    /// The caller's `C` (row-major, `n` columns).
    C,
    /// The all-gather's copy of rank `shard`'s `A` (`m` rows of `k`).
    Gathered { shard: u32 },
    /// The reduce-scatter's receive slot `slot` (below [`receive_slots`]): a piece of a
    /// partial block from the previous rank (up to [`Shape::piece_rows`] rows of `n`).
    Partial { slot: u32 },
    /// The reduce-scatter's send slot `slot` (0 or 1): a piece of a partial block for the
    /// next rank.
    Out { slot: u32 },
}

/// Rows `row0 .. row0 + rows` of a matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Rows {
    /// The matrix.
    pub matrix: Matrix,
    /// The first row.
    pub row0: u64,
    /// How many rows.
    pub rows: u64,
}

/// A signal word of the symmetric workspace (each rank has its own copy; a word is
/// written by one rank only and waited for by its owner only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Word {
    /// Rows of a gathered shard (slot `2 × shard + half`) or a piece of a partial block
    /// (its receive slot) have landed here. Written by the neighbour that sent them.
    Landed { slot: u32 },
    /// The neighbour `from` has finished reading every buffer this rank writes into it
    /// for the call in the value (all-gather). Written by that neighbour.
    Freed { from: Peer },
    /// How many partial blocks the next rank has consumed (reduce-scatter). Written by
    /// the next rank.
    Consumed,
}

/// A point in one lane that another lane of the same rank waits for (a CUDA event on a
/// GPU; a word of this rank's workspace on the twin). Recorded values only grow.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// The call's inputs are ready on the compute lane.
    Start = 0,
    /// The compute lane's GEMMs have come so far: a partial block written into a send
    /// slot and a receive slot read (reduce-scatter), or every gathered shard read
    /// (all-gather).
    Computed = 1,
    /// The copy lane to the next rank has delivered a copy.
    SentNext = 2,
    /// The copy lane to the previous rank has delivered a copy.
    SentPrev = 3,
    /// The watch lane has seen data that a GEMM reads land.
    Arrived = 4,
}

/// Events, in numbering order.
pub const EVENTS: usize = 5;

/// One operation of a lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Until this rank's `word` is at least `at_least` (acquire: later operations of the
    /// lane see what the writer published before it). Bounded by the abort flag and the
    /// spin budget.
    Wait { word: Word, at_least: u64 },
    /// Sets `word` of rank `on` to `value`, after every earlier operation of the lane is
    /// complete and visible to that rank (release).
    Signal { word: Word, on: Peer, value: u64 },
    /// Copies `src` (this rank) to `dst` on rank `to`, then sets `to`'s `word` to
    /// `value`, after the data (a put with signal).
    Put { src: Rows, dst: Rows, to: Peer, word: Word, value: u64 },
    /// `c = round(a × B + acc)`: `B` the caller's whole `k × n` matrix, products summed
    /// in f32, `acc` (when given) added in f32, then one rounding to the element type.
    Gemm { a: Rows, c: Rows, acc: Option<Rows> },
    /// Marks this point of the lane as `event` reaching `value`.
    Record { event: Event, value: u64 },
    /// Until `event` has reached `at_least` (every operation before that record done).
    WaitEvent { event: Event, at_least: u64 },
}

/// The value of a word or event at point `i` (1-based, below 2^16) of call `seq`:
/// larger than every value of earlier calls.
pub const fn tag(seq: u64, i: u64) -> u64 {
    seq << 16 | i
}

/// A rank's view of its ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingPlan {
    /// What is computed, and its shape.
    pub shape: Shape,
    /// This rank.
    pub rank: u32,
    /// The call's sequence number: 1 for a communicator's first collective matmul, then
    /// one more per call (the same on every rank).
    pub seq: u64,
}

impl RingPlan {
    /// Calls `f` with every operation of the call in the order they are enqueued: every
    /// [`Op::Record`] comes before the [`Op::WaitEvent`] that waits for it.
    pub fn for_each(&self, mut f: impl FnMut(Lane, Op)) {
        match self.shape.collective {
            Collective::AllGatherMatmul { bidirectional: false } => self.all_gather(&mut f),
            Collective::AllGatherMatmul { bidirectional: true } => self.all_gather_both_ways(&mut f),
            Collective::MatmulReduceScatter { .. } => self.reduce_scatter(&mut f),
        }
    }

    fn nranks(&self) -> u32 {
        self.shape.nranks
    }

    /// The rank `steps` places before this one on the ring.
    fn behind(&self, steps: u32) -> u32 {
        (self.rank + self.nranks() - steps % self.nranks()) % self.nranks()
    }

    /// The rank `steps` places after this one on the ring.
    fn ahead(&self, steps: u32) -> u32 {
        (self.rank + steps) % self.nranks()
    }

    /// Rows of the caller's `C` that hold the product of rank `shard`'s `A`.
    fn c_rows(&self, shard: u32, row0: u64, rows: u64) -> Rows {
        Rows { matrix: Matrix::C, row0: u64::from(shard) * self.shape.m + row0, rows }
    }

    /// Rows `row0 .. row0 + rows` of shard `shard`: the caller's `A` for its own shard.
    fn shard_rows(&self, shard: u32, row0: u64, rows: u64) -> Rows {
        let matrix = if shard == self.rank { Matrix::A } else { Matrix::Gathered { shard } };
        Rows { matrix, row0, rows }
    }

    /// The compute lane's wait for `word` to reach `at_least` (data its next GEMM reads):
    /// the watch lane waits for the word and records [`Event::Arrived`] at `value` (unique
    /// within the call, growing), and the compute lane waits for that event.
    fn arrival(&self, f: &mut impl FnMut(Lane, Op), word: Word, at_least: u64, value: u64) {
        f(Lane::Watch, Op::Wait { word, at_least });
        f(Lane::Watch, Op::Record { event: Event::Arrived, value });
        f(Lane::Compute, Op::WaitEvent { event: Event::Arrived, at_least: value });
    }

    /// The start of a call: the compute lane marks its inputs ready, and each copy lane in
    /// `copy_lanes`, and the watch lane where the ring has neighbours, waits for that before
    /// anything else (its waits are timed from the call's start on the caller's stream, not
    /// from when it was enqueued).
    fn start(&self, f: &mut impl FnMut(Lane, Op), copy_lanes: &[Lane]) {
        let value = tag(self.seq, 1);
        f(Lane::Compute, Op::Record { event: Event::Start, value });
        let watch: &[Lane] = if self.nranks() > 1 { &[Lane::Watch] } else { &[] };
        for &lane in copy_lanes.iter().chain(watch) {
            f(lane, Op::WaitEvent { event: Event::Start, at_least: value });
        }
    }

    /// `AllGather(A) × B`, one way round the ring: at step `s` this rank multiplies the
    /// shard of rank `r - s`, which it received at step `s - 1` and passes on.
    fn all_gather(&self, f: &mut impl FnMut(Lane, Op)) {
        let (d, m, seq) = (self.nranks(), self.shape.m, self.seq);
        self.start(f, &[Lane::ToNext]);
        if d > 1 {
            // The next rank's slots are free once it has finished the previous call.
            f(Lane::ToNext, Op::Wait { word: Word::Freed { from: Peer::Next }, at_least: seq - 1 });
        }
        for s in 0..d {
            let shard = self.behind(s);
            let landed = Word::Landed { slot: 2 * shard };
            let arrived = tag(seq, u64::from(s));
            if s > 0 {
                self.arrival(f, landed, tag(seq, 1), arrived);
            }
            f(Lane::Compute, Op::Gemm { a: self.shard_rows(shard, 0, m), c: self.c_rows(shard, 0, m), acc: None });
            if s + 1 < d {
                if s > 0 {
                    f(Lane::ToNext, Op::WaitEvent { event: Event::Arrived, at_least: arrived });
                }
                let dst = Rows { matrix: Matrix::Gathered { shard }, row0: 0, rows: m };
                f(Lane::ToNext, Op::Put { src: self.shard_rows(shard, 0, m), dst, to: Peer::Next, word: landed, value: tag(seq, 1) });
            }
        }
        f(Lane::ToNext, Op::Record { event: Event::SentNext, value: tag(seq, 1) });
        if d > 1 {
            // This rank's slots are written by the previous rank: free them for its next
            // call once the GEMMs and the forwarding copies have read them.
            self.free_slots(f, &[(Lane::ToNext, Event::SentNext, Peer::Next, Peer::Prev)]);
        }
    }

    /// The end of an all-gather: each copy lane `(lane, sent, from, on)`, once the
    /// compute lane's GEMMs are done, sets `Freed { from }` on rank `on` (the slots that
    /// rank writes here are free for its next call); the compute lane waits for every
    /// copy (the caller's `A` is read by the first) but not for those signals, so it goes
    /// on to the caller's next work while they are sent.
    fn free_slots(&self, f: &mut impl FnMut(Lane, Op), lanes: &[(Lane, Event, Peer, Peer)]) {
        let seq = self.seq;
        f(Lane::Compute, Op::Record { event: Event::Computed, value: tag(seq, 1) });
        for &(lane, sent, from, on) in lanes {
            f(lane, Op::WaitEvent { event: Event::Computed, at_least: tag(seq, 1) });
            f(lane, Op::Signal { word: Word::Freed { from }, on, value: seq });
            f(Lane::Compute, Op::WaitEvent { event: sent, at_least: tag(seq, 1) });
        }
    }

    /// `AllGather(A) × B` both ways round the ring: the top half of each shard travels to
    /// the next rank, the bottom half to the previous one, each link carrying half a
    /// shard per step. At step `s` this rank multiplies the top half of rank `r - s`'s
    /// shard and the bottom half of rank `r + s`'s.
    fn all_gather_both_ways(&self, f: &mut impl FnMut(Lane, Op)) {
        let (d, m, seq) = (self.nranks(), self.shape.m, self.seq);
        let top = m.div_ceil(2);
        self.start(f, &[Lane::ToNext, Lane::ToPrev]);
        if d > 1 {
            for (lane, from) in [(Lane::ToNext, Peer::Next), (Lane::ToPrev, Peer::Prev)] {
                f(lane, Op::Wait { word: Word::Freed { from }, at_least: seq - 1 });
            }
        }
        for s in 0..d {
            let halves = [(self.behind(s), 0, 0, top, Lane::ToNext, Peer::Next), (self.ahead(s), 1, top, m - top, Lane::ToPrev, Peer::Prev)];
            for (shard, half, row0, rows, lane, to) in halves {
                let landed = Word::Landed { slot: 2 * shard + half };
                let arrived = tag(seq, u64::from(2 * s + half));
                if s > 0 {
                    self.arrival(f, landed, tag(seq, 1), arrived);
                }
                f(Lane::Compute, Op::Gemm { a: self.shard_rows(shard, row0, rows), c: self.c_rows(shard, row0, rows), acc: None });
                if s + 1 < d {
                    if s > 0 {
                        f(lane, Op::WaitEvent { event: Event::Arrived, at_least: arrived });
                    }
                    let dst = Rows { matrix: Matrix::Gathered { shard }, row0, rows };
                    f(lane, Op::Put { src: self.shard_rows(shard, row0, rows), dst, to, word: landed, value: tag(seq, 1) });
                }
            }
        }
        let lanes = [(Lane::ToNext, Event::SentNext, Peer::Next, Peer::Prev), (Lane::ToPrev, Event::SentPrev, Peer::Prev, Peer::Next)];
        for (lane, event, _, _) in lanes {
            f(lane, Op::Record { event, value: tag(seq, 1) });
        }
        if d > 1 {
            self.free_slots(f, &lanes);
        }
    }

    /// `ReduceScatter(A × B)` round the ring: block `b` (rows `b·m ..`) starts at rank
    /// `b + 1` and collects one partial product per step, ending on rank `b`; at step
    /// `s` this rank adds its product of block `r - s - 1` to the partial sum that came
    /// from the previous rank. Each block is summed in the same order on every call.
    ///
    /// Each step runs in the shape's pieces (row ranges of the block, in order): the
    /// partial sum of piece `j` leaves as soon as its GEMM is done, and the next rank
    /// needs it only for its own piece `j` of the next step, so it travels while the
    /// pieces after `j` are computed (with one piece, the next rank's step waits for the
    /// whole block's transfer).
    fn reduce_scatter(&self, f: &mut impl FnMut(Lane, Op)) {
        let (d, m, seq) = (self.nranks(), self.shape.m, self.seq);
        let pieces = self.shape.pieces();
        let (p, slots) = (u64::from(pieces), u64::from(receive_slots(pieces)));
        // Transfer `t` (counted over the communicator's calls, one per piece of every step
        // but the last) is received into slot `t % slots` and signalled with `t + 1`.
        let transfer = |u: u64| (seq - 1) * u64::from(d - 1) * p + u;
        self.start(f, &[Lane::ToNext]);
        for s in 0..d {
            let block = u64::from(self.behind(s + 1));
            for j in 0..pieces {
                // This GEMM's place in the call.
                let u = u64::from(s) * p + u64::from(j);
                let (row0, rows) = self.shape.piece(j);
                let a = Rows { matrix: Matrix::A, row0: block * m + row0, rows };
                let acc = (s > 0).then(|| {
                    let t = transfer(u - p);
                    let slot = (t % slots) as u32;
                    self.arrival(f, Word::Landed { slot }, t + 1, tag(seq, u + 1));
                    (t, Rows { matrix: Matrix::Partial { slot }, row0: 0, rows })
                });
                if s + 1 == d {
                    f(Lane::Compute, Op::Gemm { a, c: Rows { matrix: Matrix::C, row0, rows }, acc: acc.map(|(_, rows)| rows) });
                    if let Some((t, _)) = acc {
                        f(Lane::Compute, Op::Record { event: Event::Computed, value: tag(seq, u + 1) });
                        f(Lane::ToNext, Op::WaitEvent { event: Event::Computed, at_least: tag(seq, u + 1) });
                        f(Lane::ToNext, Op::Signal { word: Word::Consumed, on: Peer::Prev, value: t + 1 });
                    }
                } else {
                    let out = Rows { matrix: Matrix::Out { slot: (u % 2) as u32 }, row0: 0, rows };
                    if u >= 2 {
                        // The copy that read this send slot two GEMMs ago is done.
                        f(Lane::Compute, Op::WaitEvent { event: Event::SentNext, at_least: tag(seq, u - 1) });
                    }
                    f(Lane::Compute, Op::Gemm { a, c: out, acc: acc.map(|(_, rows)| rows) });
                    f(Lane::Compute, Op::Record { event: Event::Computed, value: tag(seq, u + 1) });
                    let t = transfer(u);
                    f(Lane::ToNext, Op::WaitEvent { event: Event::Computed, at_least: tag(seq, u + 1) });
                    if let Some((consumed, _)) = acc {
                        // The GEMM has read the receive slot: the previous rank may refill it.
                        f(Lane::ToNext, Op::Signal { word: Word::Consumed, on: Peer::Prev, value: consumed + 1 });
                    }
                    // The next rank has consumed the transfer that used this receive slot last.
                    f(Lane::ToNext, Op::Wait { word: Word::Consumed, at_least: (t + 1).saturating_sub(slots) });
                    let slot = (t % slots) as u32;
                    let dst = Rows { matrix: Matrix::Partial { slot }, row0: 0, rows };
                    f(Lane::ToNext, Op::Put { src: out, dst, to: Peer::Next, word: Word::Landed { slot }, value: t + 1 });
                    f(Lane::ToNext, Op::Record { event: Event::SentNext, value: tag(seq, u + 1) });
                }
            }
        }
        if d > 1 {
            // Every copy of this call is done before the call is: the send slots are free
            // for the next call, and the caller's stream covers the whole call.
            f(Lane::Compute, Op::WaitEvent { event: Event::SentNext, at_least: tag(seq, u64::from(d - 1) * p) });
        }
    }
}

/// The reduce-scatter's receive slots for `pieces` pieces a step: a piece's partial sum
/// is read one step (`pieces` transfers) after it was sent, so `pieces + 1` keep the
/// sender from waiting when the ranks keep pace; twice `pieces` leaves room for drift
/// (two, as many as whole blocks, with one piece).
pub const fn receive_slots(pieces: u32) -> u32 {
    2 * pieces
}
