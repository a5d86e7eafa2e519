//! reduce_copy run on CPU threads through the host twin of `arch`, over the reduce_copy
//! matrix (every type × operator, sizes from 0 to several MB, odd and prime counts,
//! misalignments, 1..8 sources and destinations, software multicast sources and
//! destinations), each output compared bit for bit with the host reference.

use std::alloc::{Layout as AllocLayout, alloc_zeroed, dealloc};

use device_rt::arch;
use device_rt::copy::{reduce_copy_args, reduce_copy_fixed};
use device_rt::dtype::{Bf16, DataType, F16};
use device_rt::abi::ReduceCopyArgs;
use device_rt::redop::{RedOpKind, Sum};
use ferroccl_testkit::reference::{self, Case, Layout, Rng, Scale};

/// Launch shapes cycled through: (CTAs, threads per CTA).
const SHAPES: [(u32, u32); 4] = [(1, 32), (2, 64), (3, 96), (1, 128)];

/// A zeroed, 256-byte aligned host allocation (the cases' misalignments are relative to
/// a 256-byte boundary).
struct Arena {
    ptr: *mut u8,
    layout: AllocLayout,
}

impl Arena {
    fn new(bytes: usize) -> Self {
        let layout = AllocLayout::from_size_align(bytes.max(1), 256).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory for a {bytes}-byte arena");
        Arena { ptr, layout }
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the allocation is `layout.size()` bytes and no emulated thread runs now.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

fn run_on_twin(dtype: DataType, args: *const ReduceCopyArgs, (grid, block): (u32, u32)) {
    let args = args as usize;
    arch::launch(grid, block, 0, move || {
        // SAFETY: the arena outlives the launch and the layout made `args` valid.
        let a = unsafe { &*(args as *const ReduceCopyArgs) };
        // SAFETY: `a` names buffers of the arena, laid out for this case's counts and
        // alignment; the kernel runs once on this launch's threads.
        unsafe {
            match dtype {
                DataType::I8 => reduce_copy_args::<i8>(a),
                DataType::U8 => reduce_copy_args::<u8>(a),
                DataType::I32 => reduce_copy_args::<i32>(a),
                DataType::U32 => reduce_copy_args::<u32>(a),
                DataType::I64 => reduce_copy_args::<i64>(a),
                DataType::U64 => reduce_copy_args::<u64>(a),
                DataType::F16 => reduce_copy_args::<F16>(a),
                DataType::F32 => reduce_copy_args::<f32>(a),
                DataType::F64 => reduce_copy_args::<f64>(a),
                DataType::Bf16 => reduce_copy_args::<Bf16>(a),
            }
        }
    });
}

fn run_case(case: &Case, shape: (u32, u32), rng: &mut Rng) -> Result<(), String> {
    let layout = Layout::new(case);
    let mut arena = Arena::new(layout.bytes);
    let base = arena.ptr as u64;
    let inputs = layout.fill(case, &mut arena.bytes()[..layout.bytes], base, rng);
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let want = reference::expected(case, &refs);
    run_on_twin(case.dtype, (base + layout.args as u64) as *const ReduceCopyArgs, shape);
    let (begin, end) = layout.output_region;
    layout.check(case, &arena.bytes()[begin..end], &want)
}

#[test]
fn reduce_copy_matrix_matches_the_reference_bit_for_bit() {
    let cases = reference::matrix(Scale::HostTwin, 0x7715);
    let mut rng = Rng::new(42);
    let failures: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(k, case)| run_case(case, SHAPES[k % SHAPES.len()], &mut rng).err())
        .take(10)
        .collect();
    assert!(failures.is_empty(), "{} of {} cases failed, first ones:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn a_wrong_result_is_caught() {
    // The check itself must be able to fail: corrupt one output element after the run.
    let case = Case::new(DataType::F32, RedOpKind::Sum, 1000, 2, 1);
    let layout = Layout::new(&case);
    let mut arena = Arena::new(layout.bytes);
    let base = arena.ptr as u64;
    let mut rng = Rng::new(1);
    let inputs = layout.fill(&case, &mut arena.bytes()[..layout.bytes], base, &mut rng);
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let want = reference::expected(&case, &refs);
    run_on_twin(case.dtype, (base + layout.args as u64) as *const ReduceCopyArgs, (1, 64));
    let (begin, end) = layout.output_region;
    assert_eq!(layout.check(&case, &arena.bytes()[begin..end], &want), Ok(()));
    arena.bytes()[layout.outputs[0] + 4 * 777] ^= 1;
    let err = layout.check(&case, &arena.bytes()[begin..end], &want).unwrap_err();
    assert!(err.contains("element 777"), "{err}");
}

/// The fixed-shape kernels' body (`reduce_copy_fixed`, Sum) for every shape the hot list
/// has, over odd sizes and misalignments.
#[test]
fn fixed_shapes_match_the_reference() {
    fn run_fixed<T: device_rt::redop::Elem, const S: usize, const D: usize>(dtype: DataType, rng: &mut Rng) {
        for (k, n) in [0usize, 1, 2, 33, 1000, 4099, 65537].into_iter().enumerate() {
            let mut case = Case::new(dtype, RedOpKind::Sum, n, S, D);
            if k % 2 == 1 {
                case.src_misalign = (0..S).map(|_| rng.below(16 / dtype.size()) * dtype.size()).collect();
                case.dst_misalign = (0..D).map(|_| rng.below(16 / dtype.size()) * dtype.size()).collect();
            }
            let layout = Layout::new(&case);
            let mut arena = Arena::new(layout.bytes);
            let base = arena.ptr as u64;
            let inputs = layout.fill(&case, &mut arena.bytes()[..layout.bytes], base, rng);
            let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
            let want = reference::expected(&case, &refs);
            let args = (base + layout.args as u64) as usize;
            let (grid, block) = SHAPES[k % SHAPES.len()];
            // SAFETY: the arena outlives the launch and the layout made `args` valid, naming
            // buffers laid out for this case.
            arch::launch(grid, block, 0, move || unsafe {
                reduce_copy_fixed::<Sum<T>, S, D>(&*(args as *const ReduceCopyArgs))
            });
            let (begin, end) = layout.output_region;
            if let Err(e) = layout.check(&case, &arena.bytes()[begin..end], &want) {
                panic!("fixed shape s{S}d{D}: {e}");
            }
        }
    }
    let mut rng = Rng::new(9);
    run_fixed::<f32, 1, 1>(DataType::F32, &mut rng);
    run_fixed::<f32, 2, 1>(DataType::F32, &mut rng);
    run_fixed::<f32, 2, 2>(DataType::F32, &mut rng);
    run_fixed::<f32, 8, 1>(DataType::F32, &mut rng);
    run_fixed::<Bf16, 1, 1>(DataType::Bf16, &mut rng);
    run_fixed::<Bf16, 2, 1>(DataType::Bf16, &mut rng);
    run_fixed::<Bf16, 2, 2>(DataType::Bf16, &mut rng);
    run_fixed::<Bf16, 8, 1>(DataType::Bf16, &mut rng);
}

/// Block reduction (Sum, Min, Max) of every type on the host twin against the reference.
#[test]
fn block_reduce_matches_the_reference() {
    fn run<T: device_rt::redop::Elem>(rng: &mut Rng) {
        const BLOCKS: usize = 2;
        const THREADS: usize = 96;
        let dtype = T::DTYPE;
        let elt = dtype.size();
        let values = if dtype.is_float() {
            reference::small_elements(dtype, BLOCKS * THREADS, rng)
        } else {
            reference::random_elements(dtype, BLOCKS * THREADS, rng)
        };
        for op in [RedOpKind::Sum, RedOpKind::Min, RedOpKind::Max] {
            let mut out = vec![0u8; BLOCKS * elt + 16];
            let out_ptr = out.as_mut_ptr().align_offset(16);
            let (input, output) = (values.as_ptr() as usize, out.as_mut_ptr() as usize + out_ptr);
            // SAFETY: `input` holds BLOCKS × THREADS elements and `output` (16-byte aligned)
            // BLOCKS; both outlive the launch, whose shared memory is one slot per warp.
            arch::launch(BLOCKS as u32, THREADS as u32, (THREADS / 32 * 8) as u32, move || unsafe {
                device_rt::block::block_reduce_args::<T>(input as *const T, output as *mut T, op as u32)
            });
            for b in 0..BLOCKS {
                let inputs: Vec<&[u8]> = values[b * THREADS * elt..(b + 1) * THREADS * elt].chunks_exact(elt).collect();
                let want = reference::expected(&Case::new(dtype, op, 1, THREADS, 1), &inputs);
                let got = &out[out_ptr + b * elt..out_ptr + (b + 1) * elt];
                assert_eq!(got, &want[..], "{} {} block {b}", dtype.name(), op.name());
            }
        }
    }
    let mut rng = Rng::new(3);
    run::<i8>(&mut rng);
    run::<u8>(&mut rng);
    run::<i32>(&mut rng);
    run::<u32>(&mut rng);
    run::<i64>(&mut rng);
    run::<u64>(&mut rng);
    run::<F16>(&mut rng);
    run::<f32>(&mut rng);
    run::<f64>(&mut rng);
    run::<Bf16>(&mut rng);
}
