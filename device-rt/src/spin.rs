//! Bounded spinning: every wait on the device goes through [`SpinGuard`], which checks
//! the host's abort flag and a time budget, so no wait can hang a GPU.

use crate::arch;

/// How a bounded wait ended, when it did not end with its condition met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interrupted {
    /// The host set the abort flag.
    Aborted,
    /// The time budget ran out.
    TimedOut,
}

/// Spins between two looks at the clock (NCCL checks every 10 000).
const SPINS_PER_CHECK: u32 = 256;

/// Nanoseconds between two reads of the abort flag: it is in host memory, one PCIe
/// round trip away, and hundreds of waiting threads reading it all the time would load
/// the PCIe link the whole node's polling shares (measured: ring all-reduce lost a third
/// of its bandwidth with 64 channels reading it every 256 spins).
pub(crate) const ABORT_CHECK_NS: u64 = 20_000;

/// The abort flag and time budget of one wait.
pub struct SpinGuard {
    abort: *const u64,
    budget_ns: u64,
    start_ns: u64,
    abort_checked_ns: u64,
    spins: u32,
}

impl SpinGuard {
    /// A guard for a wait starting now: it ends when `*abort` becomes non-zero or after
    /// `budget_ns` nanoseconds (`u64::MAX`: never).
    ///
    /// # Safety
    /// `abort` must stay readable (volatile loads) for the guard's life.
    #[inline(always)]
    pub unsafe fn new(abort: *const u64, budget_ns: u64) -> Self {
        let now = arch::globaltimer_ns();
        Self { abort, budget_ns, start_ns: now, abort_checked_ns: now, spins: 0 }
    }

    /// Call once per iteration of a polling loop: pauses; every few hundred calls reads
    /// the clock, and at most every `ABORT_CHECK_NS` the abort flag (volatile load: sees
    /// the host's store eventually, orders nothing). `Err` ends the wait.
    #[inline(always)]
    pub fn tick(&mut self) -> Result<(), Interrupted> {
        arch::spin_pause();
        self.spins += 1;
        if !self.spins.is_multiple_of(SPINS_PER_CHECK) {
            return Ok(());
        }
        let now = arch::globaltimer_ns();
        if now.wrapping_sub(self.abort_checked_ns) >= ABORT_CHECK_NS {
            self.abort_checked_ns = now;
            // SAFETY: the constructor's contract.
            if unsafe { arch::ld_volatile_global(self.abort) } != 0 {
                return Err(Interrupted::Aborted);
            }
        }
        if now.wrapping_sub(self.start_ns) > self.budget_ns {
            return Err(Interrupted::TimedOut);
        }
        Ok(())
    }
}

/// Spins until `ready()` holds, the host aborts, or `budget_ns` passes.
///
/// # Safety
/// As [`SpinGuard::new`].
#[inline(always)]
pub unsafe fn spin_until(abort: *const u64, budget_ns: u64, mut ready: impl FnMut() -> bool) -> Result<(), Interrupted> {
    // SAFETY: the caller keeps `abort` readable for the whole wait (this function's contract,
    // the same as `SpinGuard::new`'s), and the guard does not outlive this call.
    let mut guard = unsafe { SpinGuard::new(abort, budget_ns) };
    while !ready() {
        guard.tick()?;
    }
    Ok(())
}
