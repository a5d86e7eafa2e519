//! `jacobi`: [NVSHMEM](https://docs.nvidia.com/nvshmem/api/)'s Jacobi example on the
//! symmetric heap. Every PE holds `NUM_POINTS / PEs` points; each iteration zeroes the
//! residual, runs one step kernel per PE (halo values through `g()`), sums the residuals
//! across PEs on the device (`sum_reduce`, which gives every PE the sum), reads its first
//! PE's copy and prints `Iteration = i error = e` every 10 iterations, then `Success!` or
//! `Failure!`, as the example does.
//!
//! Started by `ferroccl run -n N jacobi` (or any launcher `host_shim::bootstrap::PeEnv`
//! reads), this process is one PE of N, on the device the launcher gives it, as NVSHMEM
//! runs the example (`nvshmrun -np N`); PE 0 prints. Otherwise `--pes N` runs N PEs in
//! this process (PE `i` on device `i mod` the device count, or on `--devices`).
//! `--time-kernels K` also times K steps of each step kernel (per-thread atomics, block
//! reduction) on PE 0's stream with CUDA events and prints both.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg, result, sys};
use ferroccl_jacobi::{MAX_ITERS, NUM_POINTS, T_LEFT, T_RIGHT, TOLERANCE, error_of, format_g};
use host_shim::bootstrap::{Bootstrap, PeEnv};
use host_shim::device;
use host_shim::module::Module;
use host_shim::shmem::Heap;
use host_shim::DeviceAlloc;

/// Threads per block of the step kernels (the example's).
const THREADS: u32 = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StepKernel {
    /// One float atomic per point (the example's first kernel).
    Atomic,
    /// A block reduction, one atomic per block.
    BlockReduce,
}

#[derive(Parser, Debug)]
#[command(about = "NVSHMEM's Jacobi example on ferroccl's symmetric heap")]
struct Args {
    /// PEs in this process (under a launcher: one, the launcher's).
    #[arg(long, default_value_t = 1)]
    pes: usize,
    /// Devices of the PEs (comma-separated ordinals; default: PE i on device i mod count).
    #[arg(long, value_delimiter = ',')]
    devices: Vec<usize>,
    /// The step kernel of the solve.
    #[arg(long, value_enum, default_value_t = StepKernel::BlockReduce)]
    kernel: StepKernel,
    /// After the solve, time this many steps of each step kernel on PE 0.
    #[arg(long, default_value_t = 0)]
    time_kernels: u32,
}

/// One PE of this process: its stream, its module's kernels, its status word.
struct Pe {
    stream: Arc<CudaStream>,
    initialize: CudaFunction,
    step_atomic: CudaFunction,
    step_block_reduce: CudaFunction,
    residual_sum: CudaFunction,
    status: DeviceAlloc,
    handle: u64,
}

/// The symmetric buffers, every PE's address of each.
struct Buffers {
    f_old: Vec<u64>,
    f: Vec<u64>,
    l2: Vec<u64>,
    sum: Vec<u64>,
}

/// How long the PEs of several processes wait for each other at a host call.
const BOOTSTRAP_BUDGET: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let env = PeEnv::from_env()?;
    // Every PE of the job, and whether PE 0 (which prints) is one of this process's.
    let (n_pes, has_pe_0) = match &env {
        Some(env) => (env.n_pes, env.pe == 0),
        None => (args.pes, true),
    };
    if n_pes == 0 || !NUM_POINTS.is_multiple_of(n_pes) {
        return Err(format!("{n_pes} PEs: the {NUM_POINTS} points must split evenly over at least one PE").into());
    }
    let count = device::list()?.len();
    let devices: Vec<usize> = match &env {
        Some(env) => vec![env.device],
        None if args.devices.is_empty() => (0..args.pes).map(|pe| pe % count.max(1)).collect(),
        None => args.devices.clone(),
    };
    let local = devices.len();
    if (env.is_none() && local != args.pes) || devices.iter().any(|&d| d >= count) {
        return Err(format!("devices {devices:?}: one device of the {count} here per PE of this process ({})", args.pes).into());
    }
    let n = NUM_POINTS / n_pes;
    let mut contexts: Vec<(usize, Arc<CudaContext>, Arc<Module>)> = Vec::new();
    let mut streams = Vec::new();
    for &d in &devices {
        if !contexts.iter().any(|(o, _, _)| *o == d) {
            let ctx = device::context(d)?;
            let module = Arc::new(Module::load(&ctx)?);
            contexts.push((d, ctx, module));
        }
        let (_, ctx, _) = contexts.iter().find(|(o, _, _)| *o == d).ok_or("a context per device")?;
        streams.push(ctx.new_stream()?);
    }
    let heap_bytes = 4 * (2 * n as u64 + 1024);
    let mut heap = match &env {
        Some(env) => Heap::join(&streams[0], heap_bytes, Duration::from_secs(10), Bootstrap::join_env(env, BOOTSTRAP_BUDGET)?)?,
        None => Heap::new(&streams, heap_bytes, Duration::from_secs(10))?,
    };
    let bytes = |b: usize| vec![b as u64; local];
    let bufs = Buffers { f_old: heap.malloc(&bytes(4 * n))?, f: heap.malloc(&bytes(4 * n))?, l2: heap.malloc(&bytes(4))?, sum: heap.malloc(&bytes(4))? };
    let mut pes = Vec::new();
    for (&pe, (stream, &d)) in heap.local_pes().iter().zip(streams.iter().zip(&devices)) {
        let (_, ctx, module) = contexts.iter().find(|(o, _, _)| *o == d).ok_or("a context per device")?;
        pes.push(Pe {
            stream: stream.clone(),
            initialize: module.kernel("ferroccl_jacobi_initialize")?,
            step_atomic: module.kernel("ferroccl_jacobi_step_atomic")?,
            step_block_reduce: module.kernel("ferroccl_jacobi_step_block_reduce")?,
            residual_sum: module.kernel("ferroccl_jacobi_residual_sum")?,
            status: DeviceAlloc::zeroed(ctx, 4)?,
            handle: heap.handle(pe),
        });
    }
    solve(&pes, &bufs, n, args.kernel, has_pe_0)?;
    if args.time_kernels > 0 && has_pe_0 {
        let pe = &pes[0];
        let atomic = time_step(pe, &bufs, n, StepKernel::Atomic, args.time_kernels)?;
        let block = time_step(pe, &bufs, n, StepKernel::BlockReduce, args.time_kernels)?;
        println!("step kernel on PE 0 ({} points, {THREADS}-thread blocks, mean of {} steps): atomic {atomic:.4} ms, block_reduce {block:.4} ms, block_reduce_speedup {:.1}", n, args.time_kernels, atomic / block);
    }
    for pe in &pes {
        pe.stream.synchronize()?;
    }
    for b in [bufs.f_old, bufs.f, bufs.l2, bufs.sum] {
        heap.free(&b)?;
    }
    Ok(())
}

/// Runs the solver to the tolerance or `MAX_ITERS` on this process's PEs, printing as the
/// example does when `prints` (PE 0 is here). Every process reads its first PE's copy of
/// the sum, which `sum_reduce` gives every PE alike, so all stop at the same iteration.
fn solve(pes: &[Pe], bufs: &Buffers, n: usize, kernel: StepKernel, prints: bool) -> Result<(), Box<dyn Error>> {
    let blocks = (n as u32).div_ceil(THREADS);
    for (pe, p) in pes.iter().enumerate() {
        for f in [bufs.f_old[pe], bufs.f[pe]] {
            // SAFETY: the kernel's contract: this PE's handle, `f` a symmetric buffer of `n` floats.
            unsafe { p.stream.launch_builder(&p.initialize).arg(&p.handle).arg(&f).arg(&T_LEFT).arg(&T_RIGHT).arg(&(n as u32)).launch(grid(blocks, THREADS, 0))? };
        }
    }
    let (mut f_old, mut f) = (bufs.f_old.clone(), bufs.f.clone());
    let (mut error, mut iteration) = (f32::MAX, 0u32);
    while error > TOLERANCE && iteration < MAX_ITERS {
        for (pe, p) in pes.iter().enumerate() {
            launch_step(p, kernel, f_old[pe], f[pe], bufs.l2[pe], n, true)?;
        }
        for (pe, p) in pes.iter().enumerate() {
            // SAFETY: the kernel's contract: every PE launches it once per iteration, one CTA of a
            // whole warp, `sum` and `l2` distinct symmetric floats, `status` this PE's word.
            unsafe { p.stream.launch_builder(&p.residual_sum).arg(&p.handle).arg(&bufs.sum[pe]).arg(&bufs.l2[pe]).arg(&p.status.ptr()).launch(grid(1, 32, 0))? };
        }
        std::mem::swap(&mut f_old, &mut f);
        let mut l2 = [0f32];
        pes[0].stream.synchronize()?;
        // SAFETY: PE 0's `sum` is one float, written by the kernel its stream just finished.
        unsafe { result::memcpy_dtoh_sync(&mut l2, bufs.sum[0]) }?;
        let mut status = [0u32];
        // SAFETY: PE 0's status word, written only by its finished kernels.
        unsafe { result::memcpy_dtoh_sync(&mut status, pes[0].status.ptr()) }?;
        if status[0] != 0 {
            return Err("a barrier of the residual sum timed out or was aborted".into());
        }
        error = error_of(l2[0], NUM_POINTS);
        if prints && iteration.is_multiple_of(10) {
            println!("Iteration = {iteration} error = {}", format_g(error));
        }
        iteration += 1;
    }
    if prints {
        println!("{}", if error <= TOLERANCE && iteration < MAX_ITERS { "Success!" } else { "Failure!" });
    }
    Ok(())
}

/// Launches one step of `kernel` on PE `p` (its residual `l2` zeroed first when `zero`).
fn launch_step(p: &Pe, kernel: StepKernel, f_old: u64, f: u64, l2: u64, n: usize, zero: bool) -> Result<(), Box<dyn Error>> {
    if zero {
        // SAFETY: `l2` is this PE's symmetric float, used on this stream only.
        unsafe { result::memset_d8_async(l2, 0, 4, p.stream.cu_stream()) }?;
    }
    let blocks = (n as u32).div_ceil(THREADS);
    let (function, smem) = match kernel {
        StepKernel::Atomic => (&p.step_atomic, 0),
        StepKernel::BlockReduce => (&p.step_block_reduce, THREADS / 32 * 4),
    };
    // SAFETY: the kernel's contract: this PE's handle, `f_old` and `f` disjoint symmetric
    // buffers of `n` floats whose neighbours' copies are complete (the previous iteration's
    // residual sum ended with a barrier of every PE), `l2` a float only atomics touch, whole
    // warps with one float of shared memory each.
    unsafe { p.stream.launch_builder(function).arg(&p.handle).arg(&f_old).arg(&f).arg(&l2).arg(&(n as u32)).launch(grid(blocks, THREADS, smem))? };
    Ok(())
}

/// The mean time in milliseconds of `steps` steps of `kernel` on PE `p` alone, between
/// CUDA events on its stream (the residual not zeroed: only the time counts). Needs one
/// PE per process or the other PEs' halos complete: it reads them but never waits.
fn time_step(p: &Pe, bufs: &Buffers, n: usize, kernel: StepKernel, steps: u32) -> Result<f32, Box<dyn Error>> {
    launch_step(p, kernel, bufs.f_old[0], bufs.f[0], bufs.l2[0], n, true)?;
    let start = p.stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
    for s in 0..steps {
        let (from, to) = if s % 2 == 0 { (bufs.f_old[0], bufs.f[0]) } else { (bufs.f[0], bufs.f_old[0]) };
        launch_step(p, kernel, from, to, bufs.l2[0], n, false)?;
    }
    let end = p.stream.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
    Ok(start.elapsed_ms(&end)? / steps as f32)
}

/// `blocks` blocks of `threads` threads with `smem` bytes of dynamic shared memory.
fn grid(blocks: u32, threads: u32, smem: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: smem }
}
