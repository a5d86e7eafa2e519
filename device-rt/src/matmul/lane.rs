//! The device code of a lane's operations: waits, signals, events and puts over the
//! symmetric heap ([`crate::shmem`]); the GEMM is the engine's (a callback here).

use super::{Addresses, Event, Op, Peer, RingPlan, Rows, Workspace};
use crate::arch::{self, AtomicWord, Site};
use crate::shmem::{Block, Cmp, Group, Shmem, Signal, SignalOp};
use crate::spin::Interrupted;

/// One rank's call: its plan, its workspace's layout and its addresses.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    /// The plan.
    pub plan: RingPlan,
    /// The workspace's layout.
    pub layout: Workspace,
    /// This rank's addresses.
    pub at: Addresses,
}

impl Call {
    /// The call of `plan` at `at`.
    pub fn new(plan: RingPlan, at: Addresses) -> Self {
        Self { plan, layout: Workspace::new(&plan.shape), at }
    }

    fn pe(&self, sh: Shmem, peer: Peer) -> u32 {
        peer.of(sh.my_pe(), sh.n_pes())
    }

    fn word(&self, word: super::Word) -> *mut u64 {
        (self.at.workspace + self.layout.word(&self.plan.shape, word)) as *mut u64
    }

    fn event(&self, event: Event) -> *mut u64 {
        (self.at.workspace + self.layout.event(&self.plan.shape, event)) as *mut u64
    }

    /// Runs `op` on this rank with the threads of `G`; a GEMM by `gemm(a, c, acc)`.
    /// Ordering, per operation: [`Op::Wait`] and [`Op::WaitEvent`] poll with acquire
    /// loads at system scope (what the writer published before its signal is then
    /// visible to the whole group, after the group's barrier); [`Op::Signal`] and
    /// [`Op::Record`] store after the group's barrier and a `fence.acq_rel.sys`, so every
    /// earlier read and write of the lane is ordered before the store; [`Op::Put`] is
    /// [`Shmem::put_signal`]. `Err` when a wait ends on the abort flag or the spin budget.
    ///
    /// # Safety
    /// Every thread of `G` calls it with the same arguments; `at`'s workspace is a
    /// symmetric allocation of at least [`Workspace::bytes`], every rank's heap mapped
    /// here; `at.a` and `at.c` hold the shape's `A` and `C`; the operations of one lane
    /// are run in the plan's order, lanes only as the plan's waits allow.
    pub unsafe fn run<G: Group>(&self, sh: Shmem, op: Op, gemm: impl FnOnce(Rows, Rows, Option<Rows>)) -> Result<(), Interrupted> {
        let shape = &self.plan.shape;
        match op {
            Op::Wait { word, at_least } => self.wait::<G>(sh, self.word(word), at_least)?,
            Op::WaitEvent { event, at_least } => self.wait::<G>(sh, self.event(event), at_least)?,
            Op::Signal { word, on, value } => self.set::<G>(sh, self.word(word), value, self.pe(sh, on)),
            Op::Record { event, value } => self.set::<G>(sh, self.event(event), value, sh.my_pe()),
            Op::Put { src, dst, to, word, value } => {
                let (src, bytes) = self.at.rows(shape, &self.layout, src);
                let (dst, _) = self.at.rows(shape, &self.layout, dst);
                let signal = Signal { sig: self.word(word), value, op: SignalOp::Set };
                // SAFETY: the caller's contract: `dst` lies in the workspace, `src` in `A`
                // or the workspace, both of `bytes` (16-byte rows, `Shape::check`).
                unsafe { sh.put_signal::<G, u64>(dst as *mut u64, src as *const u64, (bytes / 8) as usize, signal, self.pe(sh, to)) };
            }
            Op::Gemm { a, c, acc } => {
                G::sync();
                gemm(a, c, acc);
                G::sync();
            }
        }
        Ok(())
    }

    /// One thread of the group waits; the group's barrier passes the acquire on.
    fn wait<G: Group>(&self, sh: Shmem, word: *mut u64, at_least: u64) -> Result<(), Interrupted> {
        let seen = if G::rank() == 0 {
            // SAFETY: `word` is a workspace word, accessed only atomically (`run`'s contract).
            unsafe { sh.wait_until(word, Cmp::Ge, at_least) }.map(|_| ())
        } else {
            Ok(())
        };
        G::sync();
        seen
    }

    fn set<G: Group>(&self, sh: Shmem, word: *mut u64, value: u64, pe: u32) {
        G::sync();
        if G::rank() == 0 {
            arch::fence_acq_rel_sys();
            // SAFETY: `word` is a workspace word on every rank, accessed only atomically.
            unsafe { sh.signal_op(word, value, SignalOp::Set, pe) };
        }
    }
}

/// A put by every CTA of a grid: copies `bytes` (a multiple of 16) from `src` (this PE's
/// memory) to the symmetric `dst` on PE `pe`, each CTA a slice, then sets `pe`'s copy of
/// `signal.sig` to `signal.value` once every CTA's slice is delivered (what a copy lane's
/// [`Op::Put`] is when SMs copy instead of the copy engines). Ordering: each CTA's
/// barrier, then its thread 0's `fence.acq_rel.sys` and a relaxed add to `arrived`; the
/// CTA whose add completes the grid fences again and stores the signal, so every CTA's
/// data is ordered before it (fence to fence through the counter's read-modify-writes).
///
/// # Safety
/// Every thread of every CTA calls it with the same arguments; `dst` lies in the heap
/// (`bytes` of it, on `pe`, mapped here), `src` holds `bytes`; `arrived` is a `u64` of
/// this PE's memory used by no other grid at the same time, every grid that uses it of
/// the same size; `signal.sig` a symmetric word accessed only atomically.
pub unsafe fn put_by_grid(sh: Shmem, dst: u64, src: u64, bytes: u64, signal: Signal, pe: u32, arrived: *mut u64) {
    let grid = u64::from(arch::grid_dim());
    let slice = (bytes / 16).div_ceil(grid) * 16;
    let start = (u64::from(arch::block_idx()) * slice).min(bytes);
    let len = slice.min(bytes - start);
    // SAFETY: the slice lies inside both ranges (the caller's contract); the whole block
    // calls it alike.
    unsafe { sh.put::<Block, u64>((dst + start) as *mut u64, (src + start) as *const u64, (len / 8) as usize, pe) };
    if arch::thread_idx() == 0 {
        arch::site(Site::MatmulGridArrive);
        arch::fence_acq_rel_sys();
        // SAFETY: `arrived` is this PE's own word, used by this grid alone now.
        let before = unsafe { u64::atomic_add_relaxed_sys(arrived, 1) };
        if (before + 1) % grid == 0 {
            // The acquire half of the fence-to-fence synchronisation through the counter
            // (the twin's weak memory, whose read-modify-writes act on memory at once,
            // cannot show it missing).
            arch::fence_acq_rel_sys();
            // SAFETY: the caller's contract.
            unsafe { sh.signal_op(signal.sig, signal.value, SignalOp::Set, pe) };
        }
    }
}
