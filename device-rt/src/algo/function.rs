//! The collective and point-to-point functions a work item can name, with what each
//! reads and writes: the numbering the host and the device share, and the extents both
//! check buffers against.
//!
//! Always compiled (also without `arch`): host-shim names functions and validates items
//! with these. Nothing here runs a collective (that is `run_collective`'s job on
//! the device) or imports from above `algo`.

/// What a `Collective` work item does. `count` is NCCL's count: elements per rank
/// (all-gather's send count, reduce-scatter's receive count).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CollFunction {
    /// `dst = op(src of every rank)`, `count` elements.
    AllReduce = 0,
    /// `dst` (`count`) = block `rank` of `op(src of every rank)` (`nranks × count`).
    ReduceScatter = 1,
    /// Block `r` of `dst` (`nranks × count`) = `src` (`count`) of rank `r`.
    AllGather = 2,
    /// `dst = src of the root` (`arg`), `count` elements.
    Broadcast = 3,
    /// On the root (`arg`): `dst = op(src of every rank)`, `count` elements.
    Reduce = 4,
    /// Sends `count` elements of `src` to peer `arg & 0xFFFF_FFFF` and receives
    /// `op_arg` elements into `dst` from peer `arg >> 32`, at once ([`NO_PEER`]: no such
    /// side).
    SendRecv = 5,
}

numbering!(CollFunction, u32, from_u32, [AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, SendRecv]);

/// A SendRecv side that is not there.
pub const NO_PEER: u32 = u32::MAX;

impl CollFunction {
    /// True for the functions that apply the operator.
    pub const fn reduces(self) -> bool {
        matches!(self, Self::AllReduce | Self::ReduceScatter | Self::Reduce)
    }

    /// The name used on command lines and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::AllReduce => "all_reduce",
            Self::ReduceScatter => "reduce_scatter",
            Self::AllGather => "all_gather",
            Self::Broadcast => "broadcast",
            Self::Reduce => "reduce",
            Self::SendRecv => "sendrecv",
        }
    }

    /// Elements of the input and of the output of one rank for `count` and `nranks`
    /// (SendRecv: the send count and `recv_count`).
    pub const fn extents(self, count: u64, recv_count: u64, nranks: u64) -> Option<(u64, u64)> {
        match self {
            Self::AllReduce | Self::Broadcast | Self::Reduce => Some((count, count)),
            Self::ReduceScatter => match count.checked_mul(nranks) {
                Some(n) => Some((n, count)),
                None => None,
            },
            Self::AllGather => match count.checked_mul(nranks) {
                Some(n) => Some((count, n)),
                None => None,
            },
            Self::SendRecv => Some((count, recv_count)),
        }
    }
}
