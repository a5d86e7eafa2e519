//! Layouts shared by the device self-tests (`ptx/kernels/src/selftest.rs`) and their host
//! checks (`testkit/src/selftest/`): one place for every index and code both read.
//!
//! Only the self-tests' own numbers live here; the runtime's layers never import this
//! module. The argument block of the standalone `reduce_copy` kernels, which `copy` reads,
//! is part of the runtime's ABI ([`crate::abi`]).

/// Words each thread writes in `selftest_thread_ids`.
pub const THREAD_ID_WORDS: usize = 6;

/// Words each thread writes in `selftest_warp_ops`.
pub const WARP_OP_WORDS: usize = 5;

/// How `selftest_message_passing` publishes and observes its flags.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishMode {
    /// `st.release.sys` / `ld.acquire.sys`.
    ReleaseAcquire = 0,
    /// `fence.acq_rel.sys` + `st.relaxed.sys` / `ld.volatile` + `fence.acq_rel.sys`
    /// (NCCL's postPeer/waitPeer).
    FenceSys = 1,
    /// `fence.acq_rel.gpu` + `st.volatile` / `ld.volatile` + `fence.acq_rel.gpu`.
    FenceGpu = 2,
    /// `st.volatile` / `ld.volatile`, no fence and no release or acquire: the negative
    /// control (`ferroccl test --remove-fence`), which nothing orders; a GPU may show the
    /// consumer stale data.
    Unfenced = 3,
}

numbering!(PublishMode, u32, from_u32, [ReleaseAcquire, FenceSys, FenceGpu, Unfenced]);

impl PublishMode {
    /// The modes that order the data before the flag (what the runtime's protocols use).
    pub const ORDERED: [PublishMode; 3] = [PublishMode::ReleaseAcquire, PublishMode::FenceSys, PublishMode::FenceGpu];
}

/// `selftest_message_passing`'s report words.
pub mod report {
    /// Data words the consumer read with the wrong value.
    pub const MISMATCHES: usize = 0;
    /// Set to 1 when a wait ran past its time budget.
    pub const TIMED_OUT: usize = 1;
    /// Rounds the consumer completed.
    pub const ROUNDS_SEEN: usize = 2;
    /// Set to 1 when the mode argument named no mode.
    pub const BAD_MODE: usize = 3;
    /// Words in the report.
    pub const WORDS: usize = 4;
}

/// The value `selftest_message_passing` writes to data word `i` in round `round`: differs
/// between neighbouring words and between rounds.
#[inline(always)]
pub fn message_word(i: u32, round: u32) -> u32 {
    (i.wrapping_mul(0x9E37_79B9) ^ round.wrapping_mul(0x85EB_CA6B)).rotate_left(round & 31)
}

/// Counter slots in `selftest_atomics`; the host sets them to [`atomics::initial`] first.
pub mod atomics {
    /// `atomic_add_relaxed_gpu(+1)` per thread.
    pub const ADD_GPU: usize = 0;
    /// `atomic_add_relaxed_sys(+gtid)` per thread.
    pub const ADD_SYS: usize = 1;
    /// `atomic_max_relaxed_gpu(gtid)` per thread.
    pub const MAX: usize = 2;
    /// `atomic_min_relaxed_gpu(gtid + MIN_OFFSET)` per thread.
    pub const MIN: usize = 3;
    /// +1 through an `atomic_cas_acq_rel_sys` loop per thread.
    pub const CAS: usize = 4;
    /// `atomic_exch_acq_rel_sys(gtid)` per thread; old values go to the exch log.
    pub const EXCH: usize = 5;
    /// `atomic_add_acq_rel_sys(+2)` per thread.
    pub const ADD_ACQ_REL: usize = 6;
    /// Slots.
    pub const SLOTS: usize = 7;
    /// Added to the thread index before `atomic_min`.
    pub const MIN_OFFSET: u64 = 7;
    /// The value the exchange slot starts with (no thread index can equal it).
    pub const EXCH_INITIAL: u64 = 0xFFFF_FFF0;

    /// The slots' starting values.
    pub const fn initial() -> [u64; SLOTS] {
        [0, 0, 0, u64::MAX, 0, EXCH_INITIAL, 0]
    }
}

/// Rounds each half of the CTA runs in `selftest_named_barriers`: the halves use different
/// barrier ids and counts, so they proceed independently.
pub const NAMED_BARRIER_ROUNDS: [u32; 2] = [3, 5];

/// The value thread `tid` stores in shared memory in round `round` of
/// `selftest_named_barriers`.
#[inline(always)]
pub fn barrier_word(tid: u32, round: u32) -> u32 {
    tid * 1000 + round
}
