//! reduce_copy run on CPU threads through the host twin of `arch`, over the reduce_copy
//! matrix (every type × operator, sizes from 0 to several MB, odd and prime counts,
//! misalignments, 1..8 sources and destinations, software multicast sources and
//! destinations), each output compared bit for bit with the host reference.

use std::alloc::{Layout as AllocLayout, alloc_zeroed, dealloc};

use device_rt::arch;
use device_rt::copy::reduce_copy_args;
use device_rt::dtype::{Bf16, DataType, F16};
use device_rt::selftest::ReduceCopyArgs;
use host_shim::reference::{self, Case, Layout, Rng, Scale};

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
    let case = Case::new(DataType::F32, device_rt::redop::RedOpKind::Sum, 1000, 2, 1);
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
