//! Point-to-point synchronisation on this PE's own symmetric words: `wait_until` and
//! `test` with a comparison (`NVSHMEM_CMP_*`).

use super::amo::ShmemWord;
use super::pe::Shmem;
use crate::arch::{self, Site};
use crate::spin::Interrupted;

/// How a waited-for word is compared with the value (unsigned).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `word == value`.
    Eq = 0,
    /// `word != value`.
    Ne = 1,
    /// `word > value`.
    Gt = 2,
    /// `word >= value`.
    Ge = 3,
    /// `word < value`.
    Lt = 4,
    /// `word <= value`.
    Le = 5,
}

numbering!(Cmp, u32, from_u32, [Eq, Ne, Gt, Ge, Lt, Le]);

impl Cmp {
    /// True when `word` compares so with `value`.
    #[inline(always)]
    pub fn holds<W: PartialOrd>(self, word: W, value: W) -> bool {
        match self {
            Cmp::Eq => word == value,
            Cmp::Ne => word != value,
            Cmp::Gt => word > value,
            Cmp::Ge => word >= value,
            Cmp::Lt => word < value,
            Cmp::Le => word <= value,
        }
    }
}

impl Shmem {
    /// Waits until this PE's `ivar` compares with `value` by `cmp`, and returns the word
    /// seen (`nvshmem_wait_until`, `nvshmem_signal_wait_until`). Polls with acquire loads
    /// at system scope: the caller's later reads of its heap see what the PE that updated
    /// `ivar` published before the update (its fence, or `put_signal`). Ends early with
    /// `Err` when the abort flag is set or the spin budget runs out.
    ///
    /// # Safety
    /// `ivar` is an aligned symmetric address of a `W` accessed only atomically (AMOs,
    /// signal updates, waits).
    #[inline(always)]
    pub unsafe fn wait_until<W: ShmemWord>(self, ivar: *const W, cmp: Cmp, value: W) -> Result<W, Interrupted> {
        let at = self.remote(ivar as u64, self.my_pe()) as *const W;
        let mut guard = self.guard();
        loop {
            arch::site(Site::ShmemWaitPoll);
            // SAFETY: the caller's contract; `remote` traps unless the word is in this heap.
            let word = unsafe { arch::ld_acquire_sys_global(at) };
            if cmp.holds(word, value) {
                return Ok(word);
            }
            guard.tick()?;
        }
    }

    /// True when this PE's `ivar` compares with `value` by `cmp` now (`nvshmem_test`): one
    /// acquire load at system scope, ordering as a [`Shmem::wait_until`] that returned,
    /// when true.
    ///
    /// # Safety
    /// As [`Shmem::wait_until`].
    #[inline(always)]
    pub unsafe fn test<W: ShmemWord>(self, ivar: *const W, cmp: Cmp, value: W) -> bool {
        let at = self.remote(ivar as u64, self.my_pe()) as *const W;
        arch::site(Site::ShmemWaitPoll);
        // SAFETY: as in `wait_until`.
        cmp.holds(unsafe { arch::ld_acquire_sys_global(at) }, value)
    }
}
