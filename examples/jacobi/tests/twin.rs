//! The Jacobi device code (`ferroccl-jacobi-device`) on the host twin: 3 PEs on CPU
//! threads, 64 points each, 40 steps with each step kernel. Every point of every PE
//! equals the host reference bit for bit after every step (halo values across PEs
//! included), the per-PE residuals sum to the reference's within rounding, and the
//! residual sum across PEs (`sum_reduce`) gives every PE the PE-order sum of the PEs'
//! residuals, bit for bit.

use std::time::Duration;

use device_rt::shmem::Block;
use ferroccl_jacobi::{T_LEFT, T_RIGHT, initial_domain, reference_step};
use ferroccl_jacobi_device as jacobi;
use ferroccl_testkit::shmem::TwinHeap;

const PES: usize = 3;
const POINTS: usize = 64;
/// Threads of each PE's one CTA: fewer than the points, so the grid-stride loops turn.
const THREADS: u32 = 32;

#[derive(Clone, Copy, Debug)]
enum Step {
    Atomic,
    BlockReduce,
}

fn solve_on_twin(step: Step) {
    let mut heap = TwinHeap::new(PES, 1 << 16, Duration::from_secs(60), None).unwrap();
    let each = |bytes: usize| vec![bytes as u64; PES];
    let (mut f_old, mut f) = (heap.malloc(&each(4 * POINTS)).unwrap(), heap.malloc(&each(4 * POINTS)).unwrap());
    let (l2, sum) = (heap.malloc(&each(4)).unwrap(), heap.malloc(&each(4)).unwrap());
    for buf in [&f_old, &f] {
        // SAFETY: every PE's `buf` holds POINTS floats of its heap.
        heap.run(THREADS, |sh| unsafe { jacobi::initialize(sh, buf[sh.my_pe() as usize] as *mut f32, T_LEFT, T_RIGHT, POINTS as u32) }).unwrap();
    }
    let mut reference = initial_domain(PES * POINTS);
    for pe in 0..PES {
        assert_eq!(heap.read::<f32>(pe, f_old[pe], POINTS), reference[pe * POINTS..(pe + 1) * POINTS], "initialize, PE {pe}");
    }
    for iteration in 0..40 {
        for (pe, &residual) in l2.iter().enumerate() {
            heap.write(pe, residual, &[0f32]);
        }
        let run = heap.run_shared(THREADS, THREADS / 32 * 4, |sh| {
            let pe = sh.my_pe() as usize;
            let (from, to, residual) = (f_old[pe] as *const f32, f[pe] as *mut f32, l2[pe] as *mut f32);
            // SAFETY: `from` and `to` are disjoint symmetric buffers of POINTS floats whose copies on
            // every PE were written before this launch; `residual` is touched only by float atomics;
            // the CTA is one warp with one float of dynamic shared memory.
            unsafe {
                match step {
                    Step::Atomic => jacobi::step_atomic(sh, from, to, residual, POINTS as u32),
                    Step::BlockReduce => jacobi::step_block_reduce(sh, from, to, residual, POINTS as u32, device_rt::arch::dyn_smem().cast()),
                }
            }
        });
        run.unwrap();
        // SAFETY: `sum` and `l2` are distinct symmetric floats; every PE runs this once, one CTA.
        heap.run(THREADS, |sh| unsafe { sh.sum_reduce::<Block, f32>(sum[sh.my_pe() as usize] as *mut f32, l2[sh.my_pe() as usize] as *const f32, 1).unwrap() }).unwrap();
        let (next, changes) = reference_step(&reference);
        reference = next;
        let residuals: Vec<f32> = (0..PES).map(|pe| heap.read::<f32>(pe, l2[pe], 1)[0]).collect();
        let in_pe_order = residuals.iter().skip(1).fold(residuals[0], |a, &b| a + b);
        let exact: f32 = changes.iter().sum();
        for pe in 0..PES {
            assert_eq!(heap.read::<f32>(pe, f[pe], POINTS), reference[pe * POINTS..(pe + 1) * POINTS], "{step:?} step {iteration}, PE {pe}");
            assert_eq!(heap.read::<f32>(pe, sum[pe], 1)[0].to_bits(), in_pe_order.to_bits(), "{step:?} step {iteration}: PE {pe}'s residual sum");
        }
        assert!((in_pe_order - exact).abs() <= 1e-5 * exact.abs(), "{step:?} step {iteration}: residual {in_pe_order} against {exact}");
        std::mem::swap(&mut f_old, &mut f);
    }
}

#[test]
fn jacobi_with_per_thread_atomics_matches_the_host_reference() {
    solve_on_twin(Step::Atomic);
}

#[test]
fn jacobi_with_a_block_reduction_matches_the_host_reference() {
    solve_on_twin(Step::BlockReduce);
}
