//! The persistent work loop's entry point, and the empty kernel its latency is compared
//! with.

use device_rt::conn::CommDevice;
use device_rt::work::{LoopArgs, LoopState, QueueHeader, RingSlot, work_loop};

/// One rank's work loop: launched once, runs items until a Shutdown item, an abort or an
/// error (see `device_rt::work`).
///
/// # Safety
/// As `device_rt::work::work_loop`.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_work_loop(
    header: *mut QueueHeader,
    ring: *const RingSlot,
    capacity: u64,
    state: *mut LoopState,
    spin_budget_ns: u64,
    comm: *const CommDevice,
) {
    // SAFETY: this kernel's contract is `work_loop`'s, for the same arguments, which the host
    // keeps when it launches it.
    unsafe { work_loop(LoopArgs { header, ring, capacity, state, spin_budget_ns, comm }) }
}

/// Does nothing: the baseline of the launch-latency benchmarks.
#[unsafe(no_mangle)]
pub extern "gpu-kernel" fn ferroccl_empty() {}
