//! The "other work" of `ferroccl bench footprint`: a compute-bound and a memory-bound
//! kernel that fill the GPU, timed with and without a communicator beside them. They use
//! nothing of the runtime but `arch`'s thread and block ids; they are what a user's kernel
//! might be, not part of ferroccl.

use device_rt::arch;

/// Independent accumulators per thread: enough chains to keep the FMA pipes full.
const CHAINS: usize = 8;

/// This thread's index in the grid.
fn global_thread_idx() -> usize {
    arch::block_idx() as usize * arch::block_dim() as usize + arch::thread_idx() as usize
}

/// Each thread runs `iters` rounds of `CHAINS` independent f32 FMAs and writes their sum
/// to `out[thread]` (so that nothing is optimised away).
///
/// # Safety
/// `out` holds one f32 per launched thread (grid × block).
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_bench_fma(out: *mut f32, iters: u32) {
    let tid = global_thread_idx();
    let seed = tid as f32 * 1.0e-7;
    let mut acc: [f32; CHAINS] = core::array::from_fn(|k| seed + k as f32);
    // Factors that keep every chain finite and inexact: nothing folds.
    let (a, b) = (0.999_999_9_f32, 1.0e-7_f32 * (1.0 + seed));
    for _ in 0..iters {
        for x in &mut acc {
            // One fused multiply-add (`fma.rn.f32`): `x * a + b` would be a separately rounded
            // multiply and add.
            *x = core::f32::math::mul_add(*x, a, b);
        }
    }
    let sum = acc.iter().sum::<f32>();
    // SAFETY: `out` holds one f32 per launched thread (this kernel's contract) and `tid` is
    // this thread's own slot, which no other thread writes.
    unsafe { out.add(tid).write(sum) };
}

/// Copies `n16` 16-byte packs from `src` to `dst`, grid-stride, four packs in flight per
/// thread.
///
/// # Safety
/// `src` and `dst` are 16-byte aligned device buffers of `n16` packs each that do not
/// overlap; nothing else writes them during the launch.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn ferroccl_bench_copy(dst: *mut u128, src: *const u128, n16: u64) {
    let n = n16 as usize;
    let stride = arch::grid_dim() as usize * arch::block_dim() as usize;
    let mut i = global_thread_idx();
    while i + 3 * stride < n {
        // SAFETY: `i + k * stride < n` for k = 0..4 (the loop's condition), so every pack read
        // is within `src` and every pack written within `dst`, this thread's own (grid-stride
        // indices never repeat across threads); the buffers do not overlap (this kernel's
        // contract).
        unsafe {
            let (p0, p1, p2, p3) = (src.add(i).read(), src.add(i + stride).read(), src.add(i + 2 * stride).read(), src.add(i + 3 * stride).read());
            dst.add(i).write(p0);
            dst.add(i + stride).write(p1);
            dst.add(i + 2 * stride).write(p2);
            dst.add(i + 3 * stride).write(p3);
        }
        i += 4 * stride;
    }
    while i < n {
        // SAFETY: `i < n`: within both buffers, this thread's own pack (as above).
        unsafe { dst.add(i).write(src.add(i).read()) };
        i += stride;
    }
}
