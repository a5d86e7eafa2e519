//! The persistent work loop's entry point, and the empty kernel its latency is compared
//! with.

use device_rt::conn::CommDevice;
use device_rt::work::{CallArgs, LoopArgs, LoopState, QueueHeader, RingSlot, WorkItem, serve_call, serve_call_alone, shmem_work_loop, work_loop};

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

/// A symmetric heap's work loop (`ferroccl_work_loop` that also runs the heap's barrier and
/// reduction items): `host_shim::shmem::Heap::start_loops` launches one per local PE.
///
/// # Safety
/// As `device_rt::work::shmem_work_loop`.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_shmem_work_loop(
    header: *mut QueueHeader,
    ring: *const RingSlot,
    capacity: u64,
    state: *mut LoopState,
    spin_budget_ns: u64,
    comm: *const CommDevice,
) {
    // SAFETY: this kernel's contract is `shmem_work_loop`'s, for the same arguments, which
    // the host keeps when it launches it.
    unsafe { shmem_work_loop(LoopArgs { header, ring, capacity, state, spin_budget_ns, comm }) }
}

/// The stream-ordered path's call kernel, launched on the user's stream: CTA 0's thread 0
/// writes the item (its eight words `w0..w7`) into the loop's mailbox, publishes it, and
/// waits until the loop has run it, has left, the host aborts or the budget passes (see
/// `device_rt::work::submit_to_mailbox`); CTA `g ≥ 1` is the communicator's call channel
/// `resident + g - 1`, which runs its share of the item if the item takes part there
/// (see `device_rt::work::serve_call`). `counted`: 1 where the host counted the call's
/// submission, 0 for a call captured in a CUDA graph (`CallArgs::counted`).
///
/// # Safety
/// As `device_rt::work::serve_call`, for `state`, `header` and `comm` of one running loop
/// of `resident` channels.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_call_kernel(
    state: *mut LoopState,
    header: *mut QueueHeader,
    comm: *const CommDevice,
    resident: u32,
    w0: u64,
    w1: u64,
    w2: u64,
    w3: u64,
    w4: u64,
    w5: u64,
    w6: u64,
    w7: u64,
    spin_budget_ns: u64,
    counted: u32,
) {
    let item = WorkItem::from_words([w0, w1, w2, w3, w4, w5, w6, w7]);
    // SAFETY: this kernel's contract is `serve_call`'s, which the host keeps when it
    // launches it (one call kernel per mailbox at a time: the calls' order on the host).
    unsafe { serve_call(CallArgs { state, header, comm, item, spin_budget_ns, resident, counted: counted != 0 }) }
}

/// The call kernel of a loop without call channels, launched on the user's stream as one
/// CTA of 32 threads: thread 0 waits for the kernel before it on the stream (the host may
/// launch it with programmatic stream serialization: `after_previous_grid`), submits the
/// item (its eight words `w0..w7`) and waits, as CTA 0 of `ferroccl_call_kernel` does
/// for such a loop (with no call channels nothing of the
/// item runs in the call kernel). A kernel of its own keeps every collective's code, which
/// the call channels of `ferroccl_call_kernel` run, out of this launch.
///
/// # Safety
/// As `device_rt::work::serve_call_alone`.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_call_kernel_alone(
    state: *mut LoopState,
    header: *mut QueueHeader,
    w0: u64,
    w1: u64,
    w2: u64,
    w3: u64,
    w4: u64,
    w5: u64,
    w6: u64,
    w7: u64,
    spin_budget_ns: u64,
) {
    let item = WorkItem::from_words([w0, w1, w2, w3, w4, w5, w6, w7]);
    // SAFETY: this kernel's contract is `serve_call_alone`'s, which the host keeps when it
    // launches it.
    unsafe { serve_call_alone(state, header, item, spin_budget_ns) }
}

/// Does nothing: the baseline of the launch-latency benchmarks.
#[unsafe(no_mangle)]
pub extern "gpu-kernel" fn ferroccl_empty() {}
