//! The application's own device function, which the persistent work loop runs between
//! collectives (`DeviceFunction::Application` items, stream-ordered like the collectives).

use crate::abi::Status;

/// The application's device function number `function` on `arg`, called by every thread
/// of the work loop's channel 0 CTA (a block-scope call: every thread gets the same
/// arguments and must return the same status) when a `DeviceFunction::Application` item
/// comes to the loop. The loop completes the item after the CTA's barrier, so what the
/// function wrote is performed before the next item on any channel (and stream work after
/// the item) runs. A status other than `Success` stops the loop with that error; a wait
/// of the function's own must be bounded (the heap's functions are) and return
/// `TimedOut` or `Aborted` rather than hang.
///
/// This definition is weak and refuses every function (`InvalidArgument`): an application
/// defines its own, strong, `extern "C"` (in CUDA C++: `extern "C" __device__
/// ferroccl_status ferroccl_app_work(uint32_t function, uint64_t arg)`), links it with the
/// module (`ferroccl-link link`, `Module::load_linked`), and the linker takes it instead.
///
/// # Safety
/// `arg` means what the application and the host that enqueued the item agree on.
#[unsafe(no_mangle)]
#[linkage = "weak"]
pub unsafe extern "C" fn ferroccl_app_work(function: u32, arg: u64) -> Status {
    let _ = (function, arg);
    Status::InvalidArgument
}
