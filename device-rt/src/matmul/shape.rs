//! What a collective matmul computes, and the checks that refuse a call before anything
//! is enqueued.

use core::fmt;

use crate::dtype::DataType;

/// The two halves of a tensor-parallel MLP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    /// `C = AllGather(A) × B`: each rank's `A` is `m × k`, `B` is `k × n` (the rank's
    /// own), `C` is `(nranks · m) × n`, rows in rank order. `bidirectional`: half of each
    /// shard goes each way round the ring.
    AllGatherMatmul { bidirectional: bool },
    /// `C = ReduceScatter(A × B)`: each rank's `A` is `(nranks · m) × k`, `B` is `k × n`,
    /// and rank `r`'s `C` (`m × n`) is the sum over ranks of their products' block `r`
    /// (rows `r·m ..`), summed in the same order on every call. `pieces` (1 to `m`): each
    /// block is computed and sent in that many row ranges, so that a range's partial sum
    /// travels while the next ones are computed ([`Collective::matmul_reduce_scatter`]
    /// chooses).
    MatmulReduceScatter { pieces: u32 },
}

/// Rows of a block from which [`Collective::matmul_reduce_scatter`] splits it in two.
///
/// On an H100 (f16, `k = n = 4096`, cuBLASLt): with one piece, each step after the first
/// waits for the previous rank's whole partial block to cross NVLink (1024 rows: 8 MiB,
/// 18 µs or more at NVLink 4's 450 GB/s a direction), and two pieces hide that behind the
/// second piece's GEMM for the price of smaller GEMMs: two of 512 rows took 51.7 µs
/// against 47.3 µs for one of 1024 (+4.4 µs a step), two of 2048 186.3 against 183.7 for
/// 4096. At 512 rows two pieces cost 13.3 µs a step (two GEMMs of 256 rows, 19.6 µs each,
/// against 25.9) against a transfer of 9 µs or more: one piece
/// (`bench/results/raw/matmul/gemm-algos-1gpu-2026-12-06.txt`).
pub const TWO_PIECES_FROM_ROWS: u64 = 1024;

impl Collective {
    /// The reduce-scatter for blocks of `m` rows, in the pieces that pay at that height:
    /// two from [`TWO_PIECES_FROM_ROWS`] rows, else one.
    pub const fn matmul_reduce_scatter(m: u64) -> Self {
        Self::MatmulReduceScatter { pieces: if m >= TWO_PIECES_FROM_ROWS { 2 } else { 1 } }
    }
}

/// A call's shape: every matrix row-major and dense.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Which collective.
    pub collective: Collective,
    /// Ranks of the ring.
    pub nranks: u32,
    /// Rows of one shard (all-gather) or of one output block (reduce-scatter).
    pub m: u64,
    /// The inner dimension.
    pub k: u64,
    /// Columns of `B` and `C`.
    pub n: u64,
    /// The element type of `A`, `B` and `C` (products are summed in f32).
    pub dtype: DataType,
}

/// Why a shape is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeError {
    /// An element type other than f16 and bf16.
    Dtype(DataType),
    /// A dimension of zero (named).
    Empty(&'static str),
    /// A row whose bytes are not a multiple of 16 (named matrix, its row length in
    /// elements): the GEMM's and the copies' vector accesses need 16-byte rows.
    RowAlignment(&'static str, u64),
    /// The bidirectional all-gather splits each shard in two: `m` below 2.
    ShardTooShort(u64),
    /// The reduce-scatter's pieces (`pieces`, `m`): 0, more than the block's rows, or
    /// more than a call's steps can number with the ranks.
    Pieces(u32, u64),
    /// More ranks than a call's steps can number.
    TooManyRanks(u32),
    /// A matrix (named) larger than the address space.
    TooLarge(&'static str),
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dtype(t) => write!(f, "collective matmuls take f16 or bf16, not {}", t.short_name()),
            Self::Empty(dim) => write!(f, "dimension {dim} is 0"),
            Self::RowAlignment(matrix, len) => write!(f, "a row of {matrix} ({len} elements) is not a multiple of 16 bytes"),
            Self::ShardTooShort(m) => write!(f, "the bidirectional all-gather splits each shard's rows in two halves: m = {m} is below 2"),
            Self::Pieces(p, m) => write!(f, "the reduce-scatter computes each block in {p} pieces: it takes 1 to m = {m}, and ranks × pieces at most {MAX_RANKS}"),
            Self::TooManyRanks(n) => write!(f, "{n} ranks: a collective matmul's ring takes 1 to {MAX_RANKS}"),
            Self::TooLarge(matrix) => write!(f, "{matrix} is larger than the address space"),
        }
    }
}

/// The most ranks a ring may have (a call's steps are numbered below 2^16).
pub const MAX_RANKS: u32 = 1 << 15;

impl Shape {
    /// Rows and columns of `A`, `B` and `C` on each rank.
    pub fn dims(&self) -> [(u64, u64); 3] {
        let (d, m, k, n) = (u64::from(self.nranks), self.m, self.k, self.n);
        match self.collective {
            Collective::AllGatherMatmul { .. } => [(m, k), (k, n), (d * m, n)],
            Collective::MatmulReduceScatter { .. } => [(d * m, k), (k, n), (m, n)],
        }
    }

    /// The row ranges each step of the ring computes a block in: the reduce-scatter's
    /// pieces, 1 for the all-gather.
    pub fn pieces(&self) -> u32 {
        match self.collective {
            Collective::MatmulReduceScatter { pieces } => pieces,
            Collective::AllGatherMatmul { .. } => 1,
        }
    }

    /// Piece `j`'s first row within its block and its rows: `m` split as evenly as whole
    /// rows allow, none empty (a checked shape has at most `m` pieces).
    pub fn piece(&self, j: u32) -> (u64, u64) {
        let p = u64::from(self.pieces());
        // `j × m / p` without the product (`m` may be near 2^60, `j` up to 2^15).
        let at = |j: u32| u64::from(j) * (self.m / p) + u64::from(j) * (self.m % p) / p;
        (at(j), at(j + 1) - at(j))
    }

    /// The most rows of a piece.
    pub fn piece_rows(&self) -> u64 {
        self.m.div_ceil(u64::from(self.pieces()))
    }

    /// Elements of `A`, `B` and `C` on each rank.
    pub fn lens(&self) -> [u64; 3] {
        self.dims().map(|(rows, cols)| rows * cols)
    }

    /// `Ok` when the shape can be run: f16 or bf16, no dimension 0, 16-byte rows, every
    /// matrix and the workspace addressable.
    pub fn check(&self) -> Result<(), ShapeError> {
        if !matches!(self.dtype, DataType::F16 | DataType::Bf16) {
            return Err(ShapeError::Dtype(self.dtype));
        }
        if self.nranks == 0 || self.nranks > MAX_RANKS {
            return Err(ShapeError::TooManyRanks(self.nranks));
        }
        for (dim, v) in [("m", self.m), ("k", self.k), ("n", self.n)] {
            if v == 0 {
                return Err(ShapeError::Empty(dim));
            }
        }
        let size = self.dtype.size() as u64;
        for (matrix, cols) in [("A", self.k), ("B and C", self.n)] {
            if !cols.is_multiple_of(16 / size) {
                return Err(ShapeError::RowAlignment(matrix, cols));
            }
        }
        if self.collective == (Collective::AllGatherMatmul { bidirectional: true }) && self.m < 2 {
            return Err(ShapeError::ShardTooShort(self.m));
        }
        if let Collective::MatmulReduceScatter { pieces } = self.collective
            && (pieces == 0 || u64::from(pieces) > self.m || self.nranks.saturating_mul(pieces) > MAX_RANKS)
        {
            return Err(ShapeError::Pieces(pieces, self.m));
        }
        let d = u64::from(self.nranks);
        let sizes = [
            ("A", d.checked_mul(self.m).and_then(|r| r.checked_mul(self.k))),
            ("B", self.k.checked_mul(self.n)),
            ("C", d.checked_mul(self.m).and_then(|r| r.checked_mul(self.n))),
            ("the workspace", d.checked_mul(self.m).and_then(|r| r.checked_mul(self.k.max(self.n))).and_then(|e| e.checked_mul(4))),
        ];
        for (matrix, elems) in sizes {
            if elems.and_then(|e| e.checked_mul(size)).is_none_or(|b| b > isize::MAX as u64) {
                return Err(ShapeError::TooLarge(matrix));
            }
        }
        Ok(())
    }
}
