//! Standalone `reduce_copy` and block-reduction kernels: the device halves of the
//! reduce_copy self-tests and benchmark.

use device_rt::abi::ReduceCopyArgs;
use device_rt::arch;
use device_rt::block::block_reduce_args;
use device_rt::copy::{op_kind, reduce_copy_args, reduce_copy_fixed, reduce_copy_share};
use device_rt::dtype::{Bf16, F16};
use device_rt::multicast::HwMulticast;
use device_rt::redop::{Max, Min, RedOpKind, Sum};

macro_rules! reduce_copy_kernel {
    ($name:ident, $t:ty) => {
        /// `device_rt::copy::reduce_copy_args` over `*args`.
        ///
        /// # Safety
        /// `args` points to a valid `ReduceCopyArgs` (see `reduce_copy_share`) in device
        /// memory, unchanged during the launch, whose buffers hold `n_elts` elements aligned
        /// to the element type; the block is a multiple of 32 threads.
        #[unsafe(no_mangle)]
        pub unsafe extern "gpu-kernel" fn $name(args: *const ReduceCopyArgs) {
            // SAFETY: `args` points to a valid `ReduceCopyArgs` in device memory that the host
            // wrote before the launch and nothing writes during it, whose buffers hold `n_elts`
            // elements aligned to `$t`; every thread of the block (a multiple of 32) runs this:
            // `reduce_copy_args`' contract (this kernel's).
            unsafe { reduce_copy_args::<$t>(&*args) }
        }
    };
}

reduce_copy_kernel!(reduce_copy_i8, i8);
reduce_copy_kernel!(reduce_copy_u8, u8);
reduce_copy_kernel!(reduce_copy_i32, i32);
reduce_copy_kernel!(reduce_copy_u32, u32);
reduce_copy_kernel!(reduce_copy_i64, i64);
reduce_copy_kernel!(reduce_copy_u64, u64);
reduce_copy_kernel!(reduce_copy_f16, F16);
reduce_copy_kernel!(reduce_copy_f32, f32);
reduce_copy_kernel!(reduce_copy_f64, f64);
reduce_copy_kernel!(reduce_copy_bf16, Bf16);

macro_rules! reduce_copy_fixed_kernel {
    ($name:ident, $t:ty, $srcs:literal, $dsts:literal) => {
        /// `device_rt::copy::reduce_copy_fixed` (Sum) over `*args`: the hot shapes.
        ///
        /// # Safety
        /// `args` points to a valid `ReduceCopyArgs` in device memory, unchanged during the
        /// launch, whose first sources and destinations hold `n_elts` elements aligned to
        /// the element type; the block is a multiple of 32 threads.
        #[unsafe(no_mangle)]
        pub unsafe extern "gpu-kernel" fn $name(args: *const ReduceCopyArgs) {
            // SAFETY: as in `reduce_copy_kernel!`: `args` is a valid, unchanging `ReduceCopyArgs`
            // whose first `$srcs` sources and `$dsts` destinations hold `n_elts` elements aligned
            // to `$t`, and every thread of the block (a multiple of 32) runs this:
            // `reduce_copy_fixed`'s contract (this kernel's).
            unsafe { reduce_copy_fixed::<Sum<$t>, $srcs, $dsts>(&*args) }
        }
    };
}

reduce_copy_fixed_kernel!(reduce_copy_sum_f32_s1d1, f32, 1, 1);
reduce_copy_fixed_kernel!(reduce_copy_sum_f32_s2d1, f32, 2, 1);
reduce_copy_fixed_kernel!(reduce_copy_sum_f32_s2d2, f32, 2, 2);
reduce_copy_fixed_kernel!(reduce_copy_sum_f32_s8d1, f32, 8, 1);
reduce_copy_fixed_kernel!(reduce_copy_sum_bf16_s1d1, Bf16, 1, 1);
reduce_copy_fixed_kernel!(reduce_copy_sum_bf16_s2d1, Bf16, 2, 1);
reduce_copy_fixed_kernel!(reduce_copy_sum_bf16_s2d2, Bf16, 2, 2);
reduce_copy_fixed_kernel!(reduce_copy_sum_bf16_s8d1, Bf16, 8, 1);

/// Every `multimem` form `HwMulticast` emits, with a multicast source (`dtype`, `op` pick
/// one) or a multicast destination (`op` = Sum, f32). It exists so that ptxas checks the
/// NVLink SHARP path; ferroccl never launches it on machines where it may not create a
/// multicast object.
///
/// # Safety
/// `args` points to a valid `ReduceCopyArgs` in device memory, unchanged during the launch,
/// whose multicast buffer (`dsts[0]` when `multicast_dst`, else `srcs[0]`) is a multicast
/// address bound to a multicast object and whose other buffers hold `n_elts` elements of
/// `dtype`, all aligned to it; the block is a multiple of 32 threads.
#[unsafe(no_mangle)]
pub unsafe extern "gpu-kernel" fn reduce_copy_hw_multicast(args: *const ReduceCopyArgs, dtype: u32) {
    use device_rt::dtype::DataType as D;
    use RedOpKind as K;
    type Hw = HwMulticast;
    // SAFETY: `args` points to a valid `ReduceCopyArgs` in device memory, unchanged during the
    // launch (this kernel's contract).
    let a = unsafe { &*args };
    let dtype = u8::try_from(dtype).ok().and_then(D::from_u8);
    // SAFETY: each arm names the multicast flavour, counts and types of one `multimem` form, with
    // the multicast buffer (`dsts[0]` when `multicast_dst`, else `srcs[0]`) a multicast address
    // bound to a multicast object and the others holding `n_elts` elements (this kernel's
    // contract): `reduce_copy_share`'s contract with `HwMulticast`.
    unsafe {
        match (dtype, op_kind(a.op), a.multicast_dst) {
            (Some(D::F32), Some(K::Sum), 1) => reduce_copy_share::<Sum<f32>, Hw, 0, 1>(a),
            (Some(D::F32), Some(K::Sum), _) => reduce_copy_share::<Sum<f32>, Hw, 1, 0>(a),
            (Some(D::F16), Some(K::Sum), _) => reduce_copy_share::<Sum<F16>, Hw, 1, 0>(a),
            (Some(D::Bf16), Some(K::Sum), _) => reduce_copy_share::<Sum<Bf16>, Hw, 1, 0>(a),
            (Some(D::F64), Some(K::Sum), _) => reduce_copy_share::<Sum<f64>, Hw, 1, 0>(a),
            (Some(D::F16), Some(K::Min), _) => reduce_copy_share::<Min<F16>, Hw, 1, 0>(a),
            (Some(D::F16), Some(K::Max), _) => reduce_copy_share::<Max<F16>, Hw, 1, 0>(a),
            (Some(D::Bf16), Some(K::Min), _) => reduce_copy_share::<Min<Bf16>, Hw, 1, 0>(a),
            (Some(D::Bf16), Some(K::Max), _) => reduce_copy_share::<Max<Bf16>, Hw, 1, 0>(a),
            (Some(D::I32), Some(K::Sum), _) => reduce_copy_share::<Sum<i32>, Hw, 1, 0>(a),
            (Some(D::U32), Some(K::Min), _) => reduce_copy_share::<Min<u32>, Hw, 1, 0>(a),
            (Some(D::I32), Some(K::Max), _) => reduce_copy_share::<Max<i32>, Hw, 1, 0>(a),
            (Some(D::U64), Some(K::Sum), _) => reduce_copy_share::<Sum<u64>, Hw, 1, 0>(a),
            (Some(D::U64), Some(K::Max), _) => reduce_copy_share::<Max<u64>, Hw, 1, 0>(a),
            (Some(D::I64), Some(K::Min), _) => reduce_copy_share::<Min<i64>, Hw, 1, 0>(a),
            _ => arch::trap(),
        }
    }
}

macro_rules! block_reduce_kernel {
    ($name:ident, $t:ty) => {
        /// `device_rt::block::block_reduce_args` over `input`/`out`.
        ///
        /// # Safety
        /// As `device_rt::block::block_reduce_args`: `input` holds grid×block values,
        /// `out` grid values; the block is a multiple of 32 threads; dynamic shared memory
        /// holds `block_dim / 32` values.
        #[unsafe(no_mangle)]
        pub unsafe extern "gpu-kernel" fn $name(input: *const $t, out: *mut $t, op: u32) {
            // SAFETY: `input` holds grid×block values and `out` grid values, the block is a
            // multiple of 32 threads, all running this, with `block_dim / 32` values of dynamic
            // shared memory (this kernel's contract): `block_reduce_args`' contract.
            unsafe { block_reduce_args::<$t>(input, out, op) }
        }
    };
}

block_reduce_kernel!(block_reduce_i8, i8);
block_reduce_kernel!(block_reduce_u8, u8);
block_reduce_kernel!(block_reduce_i32, i32);
block_reduce_kernel!(block_reduce_u32, u32);
block_reduce_kernel!(block_reduce_i64, i64);
block_reduce_kernel!(block_reduce_u64, u64);
block_reduce_kernel!(block_reduce_f16, F16);
block_reduce_kernel!(block_reduce_f32, f32);
block_reduce_kernel!(block_reduce_f64, f64);
block_reduce_kernel!(block_reduce_bf16, Bf16);
