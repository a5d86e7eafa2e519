//! NVLS through hardware multicast: compiled and checked by ptxas (register use, spills,
//! the `multimem` instructions assembling for sm_90a) and launched by
//! `host_shim::nvls_hw::HardwareNvls`, which only a caller's opt-in on multicast-capable
//! devices reaches. ferroccl never creates a multicast object on shared machines
//! (docs/nvls.md), so this kernel has never run there; the work loop runs NVLS through the
//! software twin.

use device_rt::algo::CollFunction;
use device_rt::algo::nvls::run_hardware;
use device_rt::conn::CommDevice;
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;

/// One NVLS collective (`function`, `dtype` and `op` numbers) on `count` elements, each
/// CTA one channel of `comm`, through hardware multicast; writes the outcome of CTA
/// `blockIdx` to `status[blockIdx]` (0: done; else a loop status). One launch per call
/// and rank (`host_shim::nvls_hw`).
///
/// # Safety
/// As `device_rt::algo::nvls::run_hardware`, with known numbers and `status` holding a
/// `u64` per CTA.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "gpu-kernel" fn ferroccl_nvls_hardware(
    comm: *const CommDevice,
    function: u32,
    dtype: u8,
    op: u8,
    count: u64,
    input: u64,
    output: u64,
    red_arg: u64,
    abort: *const u64,
    spin_budget_ns: u64,
    status: *mut u64,
) {
    let (Some(function), Some(dtype), Some(op)) = (CollFunction::from_u32(function), DataType::from_u8(dtype), RedOpKind::from_u8(op)) else {
        device_rt::arch::trap()
    };
    // SAFETY: this kernel's contract is `run_hardware`'s.
    let outcome = unsafe { run_hardware(comm, function, dtype, op, count, (input, output), red_arg, abort, spin_budget_ns) };
    if device_rt::arch::thread_idx() == 0 {
        let word = match outcome {
            Ok(()) => 0,
            Err((error, detail)) => error.status(detail),
        };
        // SAFETY: `status` holds a `u64` per CTA (this kernel's contract); thread 0 of each CTA
        // alone writes its entry.
        unsafe { status.add(device_rt::arch::block_idx() as usize).write_volatile(word) };
    }
}
