//! The example's Rust kernel (`ferroccl-cuda-interop-device`) on the host twin: a user's
//! kernel that calls the device runtime, unit-tested without a GPU. 3 PEs on CPU
//! threads, one CTA each of fewer threads than elements; every PE's result equals the
//! host reference bit for bit; a PE that never comes makes the others' waits time out.

use std::time::Duration;

use device_rt::spin::Interrupted;
use ferroccl_cuda_interop::{bias, input, reference};
use ferroccl_cuda_interop_device::scale_all_reduce_bias;
use ferroccl_testkit::shmem::TwinHeap;

const PES: usize = 3;
const N: usize = 200;
const SCALE: f32 = 0.5;

#[test]
fn the_fused_kernel_matches_the_reference_on_every_pe() {
    let mut heap = TwinHeap::new(PES, 1 << 16, Duration::from_secs(60), None).unwrap();
    let x = heap.malloc(&[(N * 4) as u64; PES]).unwrap();
    let sum = heap.malloc(&[(N * 4) as u64; PES]).unwrap();
    let biases: Vec<f32> = (0..N).map(bias).collect();
    for (pe, &at) in x.iter().enumerate() {
        let values: Vec<f32> = (0..N).map(|i| input(pe, i)).collect();
        heap.write(pe, at, &values);
    }
    let outcomes = std::sync::Mutex::new(Vec::new());
    heap.run(64, |sh| {
        let pe = sh.my_pe() as usize;
        // SAFETY: symmetric buffers of N floats apart from each other, the bias N floats;
        // one CTA per PE, every PE calling it as its next barrier.
        let outcome = unsafe { scale_all_reduce_bias(sh, x[pe] as *mut f32, sum[pe] as *mut f32, biases.as_ptr(), SCALE, N) };
        outcomes.lock().unwrap().push(outcome);
    })
    .unwrap();
    assert!(outcomes.into_inner().unwrap().iter().all(Result::is_ok));
    let want: Vec<u32> = reference(PES, N, SCALE).iter().map(|v| v.to_bits()).collect();
    for (pe, &at) in sum.iter().enumerate() {
        assert_eq!(heap.read::<u32>(pe, at, N), want, "PE {pe}");
    }
}

#[test]
fn a_pe_that_never_comes_times_the_others_out() {
    let mut heap = TwinHeap::new(PES, 1 << 16, Duration::from_millis(100), None).unwrap();
    let x = heap.malloc(&[(N * 4) as u64; PES]).unwrap();
    let sum = heap.malloc(&[(N * 4) as u64; PES]).unwrap();
    let biases = vec![0f32; N];
    let outcomes = std::sync::Mutex::new(Vec::new());
    heap.run(32, |sh| {
        let pe = sh.my_pe() as usize;
        if pe == PES - 1 {
            return;
        }
        // SAFETY: as above; the last PE never calls it.
        let outcome = unsafe { scale_all_reduce_bias(sh, x[pe] as *mut f32, sum[pe] as *mut f32, biases.as_ptr(), SCALE, N) };
        outcomes.lock().unwrap().push(outcome);
    })
    .unwrap();
    let outcomes = outcomes.into_inner().unwrap();
    assert_eq!(outcomes.len(), (PES - 1) * 32);
    assert!(outcomes.iter().all(|o| *o == Err(Interrupted::TimedOut)), "{outcomes:?}");
}
