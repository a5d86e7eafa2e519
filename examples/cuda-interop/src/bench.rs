//! `cuda-interop --bench`: ferroccl's device functions called from a user kernel against
//! the runtime's host-called collectives, and the fused kernel against the unfused
//! sequence, on the same GPUs in one run.
//!
//! Per size (floats per PE, 8 B to the largest, ×4): `bench_all_reduce` (one CTA per PE,
//! `iters` one-shot or two-shot all-reduces inside one launch), µs per all-reduce from
//! events around the launch (the slowest PE); the default communicator's `all_reduce` on
//! cudarc buffers, `iters` calls back to back, µs per call from events around them; the
//! fused kernel (`scale_all_reduce_bias`, one launch a call) against `scale`, `all_reduce`,
//! `add_bias` (three calls). Each route's result at each size is checked against the
//! reference first (one call from the inputs).

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg, sys};
use ferroccl_cuda_interop::{bias, input, reference};
use host_shim::comm::{Comm, CommConfig, ReduceOp};
use host_shim::module::Module;
use host_shim::shmem::Heap;
use host_shim::{Error, Result};

use crate::HeapArg;

/// One measured row.
pub struct Row {
    pub route: &'static str,
    pub bytes: usize,
    pub us_per_call: f64,
}

const THREADS: u32 = 256;
const ELEMENTWISE: LaunchConfig = LaunchConfig { grid_dim: (132, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };

fn one_cta() -> LaunchConfig {
    LaunchConfig { grid_dim: (1, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

fn timed(streams: &[Arc<CudaStream>], mut work: impl FnMut() -> Result<()>) -> Result<f64> {
    let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
    let starts = streams.iter().map(|s| s.record_event(flags).map_err(Error::cuda("cuEventRecord"))).collect::<Result<Vec<_>>>()?;
    work()?;
    let ends = streams.iter().map(|s| s.record_event(flags).map_err(Error::cuda("cuEventRecord"))).collect::<Result<Vec<_>>>()?;
    let mut slowest = 0f64;
    for (start, end) in starts.iter().zip(&ends) {
        end.synchronize().map_err(Error::cuda("cuEventSynchronize"))?;
        slowest = slowest.max(f64::from(start.elapsed_ms(end).map_err(Error::cuda("cuEventElapsedTime"))?));
    }
    Ok(slowest * 1000.0)
}

/// The rows of every size from 8 B to `max_bytes` per PE (×4), `iters` calls each.
pub fn run(streams: &[Arc<CudaStream>], cpp: &[Module], max_bytes: usize, iters: usize) -> Result<Vec<Row>> {
    let pes = streams.len();
    let max_n = (max_bytes / 4).max(pes).next_multiple_of(pes);
    let mut heap = Heap::new(streams, (2 * max_n * 4 + (1 << 20)) as u64, Duration::from_secs(10))?;
    let x = heap.malloc(&vec![(max_n * 4) as u64; pes])?;
    let sum = heap.malloc(&vec![(max_n * 4) as u64; pes])?;
    let mut statuses = Vec::new();
    let mut plain: Vec<(CudaSlice<f32>, CudaSlice<f32>, CudaSlice<f32>)> = Vec::new();
    for (pe, s) in streams.iter().enumerate() {
        statuses.push(s.alloc_zeros::<i32>(1).map_err(Error::cuda("cuMemAlloc"))?);
        let values: Vec<f32> = (0..max_n).map(|i| input(pe, i)).collect();
        let biases: Vec<f32> = (0..max_n).map(bias).collect();
        plain.push((
            s.clone_htod(&values).map_err(Error::cuda("cuMemcpyHtoD"))?,
            s.alloc_zeros::<f32>(max_n).map_err(Error::cuda("cuMemAlloc"))?,
            s.clone_htod(&biases).map_err(Error::cuda("cuMemcpyHtoD"))?,
        ));
    }
    let kernels = |name: &str| cpp.iter().map(|m| m.kernel(name)).collect::<Result<Vec<_>>>();
    let (bench, fused, scale, add_bias) = (kernels("bench_all_reduce")?, kernels("scale_all_reduce_bias")?, kernels("scale")?, kernels("add_bias")?);
    // Every module is loaded before the communicator's loops start (a load beside a
    // running persistent kernel can wait for it forever).
    let comms = Comm::from_devices_with(streams.to_vec(), CommConfig::default(), &mut |_, _| Ok(()))?;
    let mut rows = Vec::new();
    let mut bytes = 8usize;
    while bytes <= max_bytes.max(8) {
        let n = (bytes / 4).max(pes).next_multiple_of(pes);
        let want: Vec<u32> = reference(pes, n, 1.0).iter().zip(0..n).map(|(v, i)| (v - bias(i)).to_bits()).collect();
        for (pe, s) in streams.iter().enumerate() {
            let mut view = heap.slice::<f32>(pe, x[pe], n, s)?;
            s.memcpy_htod(&(0..n).map(|i| input(pe, i)).collect::<Vec<f32>>(), &mut view).map_err(Error::cuda("cuMemcpyHtoD"))?;
        }
        for (route, two_shot) in [("device one-shot", 0i32), ("device two-shot", 1)] {
            let launch_all = |calls: i32, statuses: &mut Vec<CudaSlice<i32>>| -> Result<()> {
                for (pe, s) in streams.iter().enumerate() {
                    let handle = HeapArg(heap.device_handle(pe)?);
                    let mut l = s.launch_builder(&bench[pe]);
                    l.arg(&handle).arg(&x[pe]).arg(&sum[pe]).arg(&n).arg(&calls).arg(&two_shot).arg(&mut statuses[pe]);
                    // SAFETY: the kernel's arguments in order; `x` and `sum` symmetric
                    // buffers of `n` floats; one CTA per PE.
                    unsafe { l.launch(one_cta()) }.map_err(Error::cuda("cuLaunchKernel"))?;
                }
                Ok(())
            };
            launch_all(1, &mut statuses)?;
            check(route, streams, &heap, &sum, &statuses, n, &want)?;
            let us = timed(streams, || launch_all(iters as i32, &mut statuses))?;
            rows.push(Row { route, bytes: n * 4, us_per_call: us / iters as f64 });
        }
        let host_call = |plain: &mut Vec<(CudaSlice<f32>, CudaSlice<f32>, CudaSlice<f32>)>| -> Result<()> {
            for (comm, (xs, sums, _)) in comms.iter().zip(plain.iter_mut()) {
                comm.all_reduce(&xs.slice(..n), &mut sums.slice_mut(..n), ReduceOp::Sum)?;
            }
            Ok(())
        };
        host_call(&mut plain)?;
        for (pe, (s, (_, sums, _))) in streams.iter().zip(&plain).enumerate() {
            let got = s.clone_dtoh(&sums.slice(..n)).map_err(Error::cuda("cuMemcpyDtoH"))?;
            if got.iter().zip(&want).any(|(g, w)| g.to_bits() != *w) {
                return Err(Error::InvalidArgument(format!("host all_reduce of {} B: PE {pe} differs from the reference", n * 4)));
            }
        }
        let us = timed(streams, || (0..iters).try_for_each(|_| host_call(&mut plain)))?;
        rows.push(Row { route: "host all_reduce", bytes: n * 4, us_per_call: us / iters as f64 });
        let us = timed(streams, || {
            (0..iters).try_for_each(|_| {
                for (pe, s) in streams.iter().enumerate() {
                    let handle = HeapArg(heap.device_handle(pe)?);
                    let mut l = s.launch_builder(&fused[pe]);
                    let (scale_by, bias_buf) = (1.0f32, &plain[pe].2);
                    l.arg(&handle).arg(&x[pe]).arg(&sum[pe]).arg(bias_buf).arg(&scale_by).arg(&n).arg(&mut statuses[pe]);
                    // SAFETY: as above, the bias `n` floats of the PE's device.
                    unsafe { l.launch(one_cta()) }.map_err(Error::cuda("cuLaunchKernel"))?;
                }
                Ok(())
            })
        })?;
        rows.push(Row { route: "fused kernel", bytes: n * 4, us_per_call: us / iters as f64 });
        let us = timed(streams, || {
            (0..iters).try_for_each(|_| {
                for (pe, (s, comm)) in streams.iter().zip(&comms).enumerate() {
                    let (xs, sums, biases) = &mut plain[pe];
                    let mut l = s.launch_builder(&scale[pe]);
                    l.arg(&mut *xs).arg(&1.0f32).arg(&n);
                    // SAFETY: `xs` holds at least `n` floats.
                    unsafe { l.launch(ELEMENTWISE) }.map_err(Error::cuda("cuLaunchKernel"))?;
                    comm.all_reduce(&xs.slice(..n), &mut sums.slice_mut(..n), ReduceOp::Sum)?;
                    let mut l = s.launch_builder(&add_bias[pe]);
                    l.arg(&mut *sums).arg(&*biases).arg(&n);
                    // SAFETY: both hold at least `n` floats.
                    unsafe { l.launch(ELEMENTWISE) }.map_err(Error::cuda("cuLaunchKernel"))?;
                }
                Ok(())
            })
        })?;
        rows.push(Row { route: "unfused: scale, all_reduce, add_bias", bytes: n * 4, us_per_call: us / iters as f64 });
        for comm in &comms {
            if let Some(e) = comm.async_error() {
                return Err(e);
            }
        }
        // Sizes grow fourfold, and the last is --max-bytes itself.
        bytes = if bytes < max_bytes && bytes * 4 > max_bytes { max_bytes } else { bytes * 4 };
    }
    drop(comms);
    heap.finalize(Duration::from_secs(10))?;
    Ok(rows)
}

/// Every PE's status success and its `sum` the reference.
fn check(route: &str, streams: &[Arc<CudaStream>], heap: &Heap, sum: &[u64], statuses: &[CudaSlice<i32>], n: usize, want: &[u32]) -> Result<()> {
    for (pe, s) in streams.iter().enumerate() {
        let status = s.clone_dtoh(&statuses[pe]).map_err(Error::cuda("cuMemcpyDtoH"))?[0];
        let got = s.clone_dtoh(&heap.slice::<f32>(pe, sum[pe], n, s)?).map_err(Error::cuda("cuMemcpyDtoH"))?;
        if status != 0 || got.iter().zip(want).any(|(g, w)| g.to_bits() != *w) {
            return Err(Error::InvalidArgument(format!("{route} of {} B: PE {pe} status {status} or a value differs from the reference", n * 4)));
        }
    }
    Ok(())
}
