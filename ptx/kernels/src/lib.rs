//! The entry points of ferroccl's PTX module.
//!
//! Each `extern "gpu-kernel"` function here is a thin door into `device-rt`; the runtime's
//! logic lives there. ptx/builder compiles this crate (and everything it uses, through
//! fat LTO) into one self-contained `.ptx` that host-shim embeds.
#![no_std]
#![feature(abi_gpu_kernel, core_float_math)]

mod bench;
mod copy;
mod interop;
mod jacobi;
mod matmul;
mod nvls;
mod selftest;
mod shmem;
mod shmem_bench;
mod work;

/// A panic on the device is a broken invariant: stop the kernel so the host sees a launch
/// failure instead of wrong data.
#[panic_handler]
fn on_panic(_: &core::panic::PanicInfo) -> ! {
    device_rt::arch::trap()
}
