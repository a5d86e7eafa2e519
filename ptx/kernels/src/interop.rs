//! The cuda-interop example's Rust kernel (`ferroccl-cuda-interop-device`): the Rust route
//! to what `examples/cuda-interop/fused.cu` does through the C functions.

use device_rt::abi::{ShmemHandle, Status};
use device_rt::shmem::Shmem;
use ferroccl_cuda_interop_device as interop;

/// Scale, all-reduce through the heap, add a bias; the outcome into `*status` (a
/// `Status`, by thread 0). The handle comes by value, as `fused.cu`'s does.
///
/// # Safety
/// `heap` is this PE's handle; as `ferroccl_cuda_interop_device::scale_all_reduce_bias`
/// for the buffers; one CTA per PE; `status` a writable `i32`.
#[unsafe(no_mangle)]
#[allow(
    improper_gpu_kernel_arg,
    reason = "the handle is a #[repr(C)] struct of u64 and u32 fields; its PTX parameter, `.param .align 8 .b8 [288]`, is the one nvcc declares for `ferroccl_heap` (checked in linker/tests/header.rs)"
)]
pub unsafe extern "gpu-kernel" fn ferroccl_interop_scale_all_reduce_bias(heap: ShmemHandle, x: *mut f32, sum: *mut f32, bias: *const f32, scale: f32, n: usize, status: *mut i32) {
    // SAFETY: this kernel's contract; the handle lives in this launch's parameters.
    let outcome = unsafe { interop::scale_all_reduce_bias(Shmem::new(&raw const heap), x, sum, bias, scale, n) };
    if device_rt::arch::thread_idx() == 0 {
        // SAFETY: the kernel's contract.
        unsafe { status.write(Status::from(outcome) as i32) };
    }
}
