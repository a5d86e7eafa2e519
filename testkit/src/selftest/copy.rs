//! Self-tests of reduce_copy (the whole matrix, the fixed hot shapes) and block
//! reductions against the host reference.

use cudarc::driver::PushKernelArg;

use super::*;
use crate::reference::{self, Case, Layout, Rng, Scale};

/// Launch shapes the reduce_copy matrix cycles through: (CTAs, threads per CTA).
const REDUCE_COPY_SHAPES: [(u32, u32); 5] = [(1, 32), (3, 64), (16, 256), (132, 512), (7, 96)];

/// Runs every case of the reduce_copy matrix on the GPU and compares each output, bit for
/// bit, with the host reference.
pub(super) fn reduce_copy_matrix(fx: &Fixture) -> Outcome {
    let cases = reference::matrix(Scale::Gpu, 0x5EED);
    let layouts: Vec<Layout> = cases.iter().map(Layout::new).collect();
    let arena_bytes = layouts.iter().map(|l| l.bytes).max().unwrap_or(0);
    let mut arena = fx.zeros::<u8>(arena_bytes)?;
    let mut rng = Rng::new(0xC0FFEE);
    for (k, (case, layout)) in cases.iter().zip(&layouts).enumerate() {
        let kernel = fx.kernel(&format!("reduce_copy_{}", case.dtype.short_name()))?;
        run_case(fx, &kernel, case, layout, &mut arena, REDUCE_COPY_SHAPES[k % REDUCE_COPY_SHAPES.len()], &mut rng)?;
    }
    println!("  {} reduce_copy cases", cases.len());
    Ok(())
}

/// Runs one case with `kernel` (which takes the address of the case's argument block) in
/// `arena` with launch shape `(blocks, threads)`, and checks its outputs and guards.
fn run_case(
    fx: &Fixture,
    kernel: &CudaFunction,
    case: &Case,
    layout: &Layout,
    arena: &mut CudaSlice<u8>,
    (blocks, threads): (u32, u32),
    rng: &mut Rng,
) -> Outcome {
    let base = device_ptr(fx, arena);
    let mut host = vec![0u8; layout.bytes];
    let inputs = layout.fill(case, &mut host, base, rng);
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let want = reference::expected(case, &refs);
    fx.stream.memcpy_htod(&host, &mut arena.slice_mut(..layout.bytes)).map_err(Error::cuda("cuMemcpyHtoD"))?;
    let args = base + layout.args as u64;
    // SAFETY: the argument block and every buffer it names lie in `arena`, filled above.
    unsafe { fx.stream.launch_builder(kernel).arg(&args).launch(cfg(blocks, threads, 0)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("reduce_copy")?;
    let (begin, end) = layout.output_region;
    let region = fx.stream.clone_dtoh(&arena.slice(begin..end)).map_err(Error::cuda("cuMemcpyDtoH"))?;
    layout.check(case, &region, &want).map_err(Failure)
}

/// The fixed-shape Sum kernels the hot path uses: (kernel suffix, sources, destinations).
pub const FIXED_SHAPES: [(usize, usize); 4] = [(1, 1), (2, 1), (2, 2), (8, 1)];

/// Runs the fixed-shape kernels (`reduce_copy_sum_<dtype>_s<S>d<D>`) over odd sizes and
/// misalignments and compares with the host reference.
pub(super) fn reduce_copy_fixed_shapes(fx: &Fixture) -> Outcome {
    use device_rt::dtype::DataType;
    use device_rt::redop::RedOpKind;
    let mut rng = Rng::new(0xF1);
    let mut arena = fx.zeros::<u8>(64 << 20)?;
    let mut count = 0;
    for dtype in [DataType::F32, DataType::Bf16] {
        for (nsrcs, ndsts) in FIXED_SHAPES {
            let kernel = fx.kernel(&format!("reduce_copy_sum_{}_s{nsrcs}d{ndsts}", dtype.short_name()))?;
            for (k, n) in [0usize, 1, 2, 33, 1000, 4099, 65537, (1 << 20) + 13].into_iter().enumerate() {
                let mut case = Case::new(dtype, RedOpKind::Sum, n, nsrcs, ndsts);
                if k % 2 == 1 {
                    case.src_misalign = (0..nsrcs).map(|_| rng.below(16 / dtype.size()) * dtype.size()).collect();
                    case.dst_misalign = (0..ndsts).map(|_| rng.below(16 / dtype.size()) * dtype.size()).collect();
                }
                let layout = Layout::new(&case);
                run_case(fx, &kernel, &case, &layout, &mut arena, REDUCE_COPY_SHAPES[k % REDUCE_COPY_SHAPES.len()], &mut rng)?;
                count += 1;
            }
        }
    }
    println!("  {count} fixed-shape cases");
    Ok(())
}

/// Reduces every type with Sum, Min and Max across CTAs of 256 threads and compares with
/// the host reference (inputs in {-1, 0, 1} for floats, so any order is exact).
pub(super) fn block_reduce(fx: &Fixture) -> Outcome {
    use device_rt::dtype::DataType;
    use device_rt::redop::RedOpKind;
    const BLOCKS: usize = 4;
    const THREADS: usize = 256;
    let mut rng = Rng::new(0xB10C);
    for dtype in DataType::ALL {
        let elt = dtype.size();
        let values = if dtype.is_float() {
            reference::small_elements(dtype, BLOCKS * THREADS, &mut rng)
        } else {
            reference::random_elements(dtype, BLOCKS * THREADS, &mut rng)
        };
        let input = fx.upload(&values)?;
        let kernel = fx.kernel(&format!("block_reduce_{}", dtype.short_name()))?;
        for op in [RedOpKind::Sum, RedOpKind::Min, RedOpKind::Max] {
            let mut out = fx.zeros::<u8>(BLOCKS * elt)?;
            let op_arg = op as u32;
            // SAFETY: the kernel takes exactly these arguments, in this order, and touches no memory
            // beyond the buffers passed (each sized for this launch shape); they outlive the
            // launch, which `fx.finish` waits for.
            unsafe {
                fx.stream.launch_builder(&kernel).arg(&input).arg(&mut out).arg(&op_arg).launch(cfg(
                    BLOCKS as u32,
                    THREADS as u32,
                    (THREADS / 32 * 8) as u32,
                ))
            }
            .map_err(Error::cuda("cuLaunchKernel"))?;
            fx.finish("block_reduce")?;
            let got = fx.download(&out)?;
            for b in 0..BLOCKS {
                let block = &values[b * THREADS * elt..(b + 1) * THREADS * elt];
                let inputs: Vec<&[u8]> = block.chunks_exact(elt).collect();
                let case = Case::new(dtype, op, 1, THREADS, 1);
                let want = reference::expected(&case, &inputs);
                ensure(got[b * elt..(b + 1) * elt] == want[..], || {
                    format!("{} {} block {b}: {:02x?}, expected {:02x?}", dtype.name(), op.name(), &got[b * elt..(b + 1) * elt], want)
                })?;
            }
        }
    }
    Ok(())
}
