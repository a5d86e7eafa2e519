//! Collective matmul (the two halves of a tensor-parallel MLP): `AllGather(A) × B` and
//! `ReduceScatter(A × B)` with the communication hidden behind the GEMMs, as a ring of
//! steps in which each rank multiplies the data it holds while passing data on.
//!
//! This module holds what every engine shares: the shapes and their checks ([`shape`]),
//! the schedule of one rank's lanes ([`plan`]), where the ring's buffers and signal words
//! lie in the symmetric workspace ([`Workspace`]), and the device code of every operation
//! but the GEMM ([`lane`]), which each engine brings (cuBLASLt on a GPU; the host
//! reference on the twin). `docs/matmul.md` says why the schedule is split this way.

pub mod plan;
pub mod shape;

#[cfg(any(target_arch = "nvptx64", feature = "host-emu"))]
pub mod lane;

pub use plan::{Event, LANES, Lane, Matrix, Op, Peer, RingPlan, Rows, Word};
pub use shape::{Collective, Shape, ShapeError, TWO_PIECES_FROM_ROWS};

/// Where a ring's buffers and words lie in its symmetric workspace (byte offsets from the
/// workspace's base, the same on every rank).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Workspace {
    /// The all-gather's copies of the other ranks' shards: `nranks` slots of `m × k`.
    pub gathered: u64,
    /// The reduce-scatter's receive slots ([`plan::receive_slots`]), each of a piece's
    /// rows ([`Shape::piece_rows`]) of `n`.
    pub partial: u64,
    /// The reduce-scatter's two send slots, each of a piece's rows of `n`.
    pub out: u64,
    /// The signal words: [`Word::Landed`] slots, then `Freed` (from the next rank, from
    /// the previous), `Consumed`, then one word per [`Event`] (the twin's events).
    pub words: u64,
    /// The workspace's size.
    pub bytes: u64,
}

impl Workspace {
    /// The layout for `shape` (checked by [`Shape::check`]).
    pub fn new(shape: &Shape) -> Self {
        let es = shape.dtype.size() as u64;
        let (d, m, k, n) = (u64::from(shape.nranks), shape.m, shape.k, shape.n);
        let (gathered_bytes, slot_bytes) = match shape.collective {
            Collective::AllGatherMatmul { .. } => (d * m * k * es, 0),
            Collective::MatmulReduceScatter { .. } => (0, shape.piece_rows() * n * es),
        };
        let partial = gathered_bytes;
        let out = partial + u64::from(plan::receive_slots(shape.pieces())) * slot_bytes;
        let words = (out + 2 * slot_bytes).next_multiple_of(16);
        let bytes = words + (landed_slots(shape) + 3 + plan::EVENTS as u64) * 8;
        Self { gathered: 0, partial, out, words, bytes }
    }

    /// The offset of `word`.
    pub fn word(&self, shape: &Shape, word: Word) -> u64 {
        let landed = landed_slots(shape);
        let index = match word {
            Word::Landed { slot } => u64::from(slot),
            Word::Freed { from: Peer::Next } => landed,
            Word::Freed { from: Peer::Prev } => landed + 1,
            Word::Consumed => landed + 2,
        };
        self.words + 8 * index
    }

    /// The offset of the twin's word for `event`.
    pub fn event(&self, shape: &Shape, event: Event) -> u64 {
        self.word(shape, Word::Consumed) + 8 * (1 + event as u64)
    }
}

/// [`Word::Landed`] slots: two per shard (its halves) for the all-gather, one per receive
/// slot for the reduce-scatter.
fn landed_slots(shape: &Shape) -> u64 {
    match shape.collective {
        Collective::AllGatherMatmul { .. } => 2 * u64::from(shape.nranks),
        Collective::MatmulReduceScatter { pieces } => u64::from(plan::receive_slots(pieces)),
    }
}

/// Where one rank's call finds its matrices: device addresses as this rank sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addresses {
    /// The caller's `A`.
    pub a: u64,
    /// The caller's `B`.
    pub b: u64,
    /// The caller's `C`.
    pub c: u64,
    /// The workspace's base (a symmetric address).
    pub workspace: u64,
}

impl Addresses {
    /// The address of `rows` and its length in bytes.
    pub fn rows(&self, shape: &Shape, layout: &Workspace, rows: Rows) -> (u64, u64) {
        let es = shape.dtype.size() as u64;
        let (base, width) = match rows.matrix {
            Matrix::A => (self.a, shape.k),
            Matrix::C => (self.c, shape.n),
            Matrix::Gathered { shard } => (self.workspace + layout.gathered + u64::from(shard) * shape.m * shape.k * es, shape.k),
            Matrix::Partial { slot } => (self.workspace + layout.partial + u64::from(slot) * shape.piece_rows() * shape.n * es, shape.n),
            Matrix::Out { slot } => (self.workspace + layout.out + u64::from(slot) * shape.piece_rows() * shape.n * es, shape.n),
        };
        (base + rows.row0 * width * es, rows.rows * width * es)
    }
}
