//! The device code of a lane's operations: waits, signals, events and puts over the
//! symmetric heap ([`crate::shmem`]); the GEMM is the engine's (a callback here).

use super::{Addresses, Event, Op, Peer, RingPlan, Rows, Workspace};
use crate::arch;
use crate::shmem::{Cmp, Group, Shmem, Signal, SignalOp};
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
        let n = sh.n_pes();
        match peer {
            Peer::Next => (sh.my_pe() + 1) % n,
            Peer::Prev => (sh.my_pe() + n - 1) % n,
        }
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
