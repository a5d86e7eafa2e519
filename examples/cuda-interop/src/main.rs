//! `cuda-interop`: ferroccl's device functions called from other kernels, on GPUs. The
//! CUDA C++ kernels of `fused.cu`, linked with ferroccl's library offline
//! (`ferroccl-link link`, `--cubin`) or by the driver at run time (`--object`), and the
//! same fused kernel written in Rust (in the runtime's own module): scale, all-reduce
//! through the symmetric heap, add a bias, one CTA per PE; then the C++ two-shot kernel
//! with a warp's get. With `--object`, also `fused.cu`'s application function in a
//! communicator's persistent loops, between all-reduces on each rank's stream and in a CUDA
//! graph. Every result is checked against the host reference bit for bit; the program
//! fails on any difference or any status but success.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg, result};
use ferroccl_cuda_interop::{bias, input, reference};
use host_shim::device_rt::abi::{ShmemHandle, Status};
use host_shim::linking::LinkInput;
use host_shim::module::Module;
use host_shim::shmem::Heap;
use host_shim::{Error, device};

#[derive(Parser)]
#[command(about = "CUDA C++ and Rust kernels calling ferroccl's device functions, checked")]
struct Args {
    /// Devices, one PE each (a device named twice holds two PEs)
    #[arg(long, value_delimiter = ',', default_value = "0,1")]
    devices: Vec<usize>,
    /// fused.cu linked with ferroccl's library by `ferroccl-link link`
    #[arg(long, conflicts_with = "object")]
    cubin: Option<PathBuf>,
    /// fused.cu compiled by `nvcc -arch=sm_90a -dc`: linked by the driver at run time
    #[arg(long)]
    object: Option<PathBuf>,
    /// Elements per PE (a multiple of the PEs: the two-shot kernel splits them)
    #[arg(long, default_value_t = 1 << 16)]
    n: usize,
    /// Benchmark instead (needs --cubin or --object): the device functions in a user
    /// kernel against the host-called all_reduce, the fused kernel against the unfused
    /// sequence, 8 B to --max-bytes per PE
    #[arg(long)]
    bench: bool,
    /// The benchmark's largest size per PE
    #[arg(long, default_value_t = 64 << 20)]
    max_bytes: usize,
    /// Calls timed per size and route
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Also write the benchmark's rows here as JSON
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The heap handle as a kernel argument, by value (`ferroccl_heap` in C).
#[repr(transparent)]
#[derive(Clone, Copy)]
struct HeapArg(ShmemHandle);

// SAFETY: a `#[repr(C)]` struct of integers, what the kernels declare as their argument.
unsafe impl DeviceRepr for HeapArg {}

mod bench;

const SCALE: f32 = 0.5;
const THREADS: u32 = 256;

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuda-interop: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> host_shim::Result<()> {
    let streams: Vec<Arc<CudaStream>> = args.devices.iter().map(|&d| device::context(d)?.new_stream().map_err(Error::cuda("cuStreamCreate"))).collect::<Result<_, _>>()?;
    if args.bench {
        let cpp = cpp_modules(args, &streams)?.ok_or_else(|| Error::InvalidArgument("--bench needs fused.cu: --cubin or --object".into()))?;
        let rows = bench::run(&streams, &cpp, args.max_bytes, args.iters)?;
        println!("{:<40} {:>12} {:>12}", "route", "bytes/PE", "µs/call");
        for row in &rows {
            println!("{:<40} {:>12} {:>12.2}", row.route, row.bytes, row.us_per_call);
        }
        if let Some(path) = &args.json {
            let rows: Vec<_> = rows.iter().map(|r| serde_json::json!({"route": r.route, "bytes": r.bytes, "us_per_call": r.us_per_call})).collect();
            let command: Vec<String> = std::env::args().collect();
            let doc = serde_json::json!({"command": command.join(" "), "pes": streams.len(), "devices": args.devices, "iters": args.iters, "rows": rows});
            std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap_or_default()).map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
        }
        return Ok(());
    }
    let pes = streams.len();
    let n = args.n;
    let mut heap = Heap::new(&streams, (3 * n * 4 + (1 << 20)) as u64, Duration::from_secs(10))?;
    let x = heap.malloc(&vec![(n * 4) as u64; pes])?;
    let sum = heap.malloc(&vec![(n * 4) as u64; pes])?;
    let neighbour = heap.malloc(&vec![(n * 4) as u64; pes])?;
    let biases: Vec<f32> = (0..n).map(bias).collect();
    let bias_bufs = streams.iter().map(|s| s.clone_htod(&biases).map_err(Error::cuda("cuMemcpyHtoD"))).collect::<Result<Vec<_>, _>>()?;
    let mut statuses = streams.iter().map(|s| s.alloc_zeros::<i32>(1).map_err(Error::cuda("cuMemAlloc"))).collect::<Result<Vec<_>, _>>()?;

    let rust: Vec<Module> = streams.iter().map(|s| Module::load(s.context())).collect::<Result<_, _>>()?;
    let cpp = cpp_modules(args, &streams)?;

    let mut kernels = vec![("Rust", "ferroccl_interop_scale_all_reduce_bias", &rust)];
    if let Some(cpp) = &cpp {
        kernels.push(("CUDA C++", "scale_all_reduce_bias", cpp));
    }
    let want: Vec<u32> = reference(pes, n, SCALE).iter().map(|v| v.to_bits()).collect();
    for (language, name, modules) in kernels {
        write_inputs(&streams, &x, n)?;
        for (pe, stream) in streams.iter().enumerate() {
            let kernel = modules[pe].kernel(name)?;
            let (handle, status) = (HeapArg(heap.device_handle(pe)?), &mut statuses[pe]);
            let mut launch = stream.launch_builder(&kernel);
            launch.arg(&handle).arg(&x[pe]).arg(&sum[pe]).arg(&bias_bufs[pe]).arg(&SCALE).arg(&n).arg(status);
            // SAFETY: the arguments are what the kernel declares, in order; the buffers
            // hold `n` floats (the heap's symmetric, the bias its own), one CTA per PE.
            unsafe { launch.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }) }.map_err(Error::cuda("cuLaunchKernel"))?;
        }
        check(language, &streams, &statuses, &sum, n, &want)?;
    }
    if let Some(cpp) = &cpp {
        write_inputs(&streams, &x, n)?;
        for (pe, stream) in streams.iter().enumerate() {
            let kernel = cpp[pe].kernel("two_shot_then_get")?;
            let (handle, status) = (HeapArg(heap.device_handle(pe)?), &mut statuses[pe]);
            let mut launch = stream.launch_builder(&kernel);
            launch.arg(&handle).arg(&x[pe]).arg(&sum[pe]).arg(&neighbour[pe]).arg(&n).arg(status);
            // SAFETY: as above.
            unsafe { launch.launch(LaunchConfig { grid_dim: (1, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }) }.map_err(Error::cuda("cuLaunchKernel"))?;
        }
        let plain: Vec<u32> = (0..n).map(|i| (1..pes).fold(input(0, i), |s, pe| s + input(pe, i)).to_bits()).collect();
        check("CUDA C++ two-shot", &streams, &statuses, &sum, n, &plain)?;
        for pe in 0..pes {
            let got = read(&streams[pe], neighbour[pe], n)?;
            let next = (pe + 1) % pes;
            if got.iter().zip(0..n).any(|(v, i)| v.to_bits() != input(next, i).to_bits()) {
                return Err(Error::InvalidState("the warp's get brought another PE's data than its neighbour's"));
            }
        }
        println!("CUDA C++ get: every PE read its neighbour's {n} floats");
    }
    heap.free(&neighbour)?;
    heap.finalize(Duration::from_secs(10))?;
    if let Some(path) = &args.object {
        let object = std::fs::read(path).map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
        application_work(&streams, &object, n)?;
    }
    Ok(())
}

/// One rank's buffers of the application-work run: `x`, `y`, `z`, and the function's
/// argument block.
type RankBuffers = (CudaSlice<f32>, CudaSlice<f32>, CudaSlice<f32>, CudaSlice<u64>);

/// `fused.cu`'s application function (1: scale `count` floats by `factor`) in the ranks'
/// persistent loops, linked at run time: per rank, `all_reduce(x → y)`, the function
/// doubling `y`, `all_reduce(y → z)`, on the rank's stream; then the same three captured
/// in a CUDA graph and replayed. Every rank's `z` must be twice the ranks' count times the
/// sum of the inputs, each time.
fn application_work(streams: &[Arc<CudaStream>], object: &[u8], n: usize) -> host_shim::Result<()> {
    use cudarc::driver::sys;
    use host_shim::comm::{Comm, CommConfig, ReduceOp};
    let ranks = streams.len();
    let mut bufs = Vec::new();
    for (rank, stream) in streams.iter().enumerate() {
        let ctx = stream.context();
        // SAFETY: the slices allocated meanwhile are used on `stream` only (the calls and
        // the graph captured on it), and freed once it is idle.
        unsafe { ctx.disable_event_tracking() };
        let x = stream.clone_htod(&(0..n).map(|i| input(rank, i)).collect::<Vec<f32>>()).map_err(Error::cuda("cuMemcpyHtoD"))?;
        let (y, z) = (stream.alloc_zeros::<f32>(n).map_err(Error::cuda("cuMemAlloc"))?, stream.alloc_zeros::<f32>(n).map_err(Error::cuda("cuMemAlloc"))?);
        // fused.cu's `scale_args`: the buffer, the count, the factor (then padding).
        let y_addr = { let (p, _guard) = DevicePtr::device_ptr(&y, stream); p };
        let block = [y_addr, n as u64, u64::from(2.0f32.to_bits())];
        let args = stream.clone_htod(&block).map_err(Error::cuda("cuMemcpyHtoD"))?;
        // SAFETY: turns tracking back on for slices allocated from now on.
        unsafe { ctx.enable_event_tracking() };
        bufs.push((x, y, z, args));
    }
    let comms = Comm::from_devices_linked(streams.to_vec(), CommConfig::default(), &[("fused.o", LinkInput::Object(object))])?;
    let want: Vec<u32> = (0..n).map(|i| (2.0 * ranks as f32 * (1..ranks).fold(input(0, i), |s, r| s + input(r, i))).to_bits()).collect();
    let sequence = |comm: &Comm, (x, y, z, args): &mut RankBuffers| -> host_shim::Result<()> {
        comm.all_reduce(x, y, ReduceOp::Sum)?;
        let (at, _guard) = DevicePtr::device_ptr(&*args, comm.stream());
        // SAFETY: `at` is fused.cu's argument block for function 1, naming `y`'s `n`
        // floats on this rank's device, which only this stream uses.
        unsafe { comm.call_application(1, at) }?;
        comm.all_reduce(y, z, ReduceOp::Sum)
    };
    let verify = |what: &str, bufs: &[RankBuffers]| -> host_shim::Result<()> {
        for (rank, (comm, (_, _, z, _))) in comms.iter().zip(bufs).enumerate() {
            let got = comm.stream().clone_dtoh(z).map_err(Error::cuda("cuMemcpyDtoH"))?;
            if let Some(e) = comm.async_error() {
                return Err(e);
            }
            if let Some(i) = (0..n).find(|&i| got[i].to_bits() != want[i]) {
                return Err(Error::InvalidArgument(format!("{what}: rank {rank} element {i} is {}, not {}", got[i], f32::from_bits(want[i]))));
            }
        }
        println!("{what}: all_reduce, the application's function, all_reduce: {ranks} ranks × {n} floats exact");
        Ok(())
    };
    for (comm, b) in comms.iter().zip(bufs.iter_mut()) {
        sequence(comm, b)?;
    }
    verify("application work on the stream", &bufs)?;
    let mut graphs = Vec::new();
    for (comm, b) in comms.iter().zip(bufs.iter_mut()) {
        let stream = comm.stream();
        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(Error::cuda("cuStreamBeginCapture"))?;
        sequence(comm, b)?;
        graphs.push(stream.end_capture(sys::CUgraphInstantiate_flags(0)).map_err(Error::cuda("cuStreamEndCapture"))?);
    }
    for _ in 0..3 {
        for graph in graphs.iter().flatten() {
            graph.launch().map_err(Error::cuda("cuGraphLaunch"))?;
        }
    }
    verify("application work in a CUDA graph, replayed 3 times", &bufs)
}

/// `fused.cu`'s kernels on every PE's device: the offline-linked cubin (`--cubin`), or the
/// object linked by the driver (`--object`); none without either.
fn cpp_modules(args: &Args, streams: &[Arc<CudaStream>]) -> host_shim::Result<Option<Vec<Module>>> {
    Ok(match (&args.cubin, &args.object) {
        (Some(path), _) => {
            let image = std::fs::read(path).map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
            Some(streams.iter().map(|s| Module::load_image(s.context(), image.clone())).collect::<Result<_, _>>()?)
        }
        (None, Some(path)) => {
            let object = std::fs::read(path).map_err(|e| Error::InvalidArgument(format!("{}: {e}", path.display())))?;
            let name = path.file_name().map_or("fused.o".into(), |n| n.to_string_lossy().into_owned());
            Some(streams.iter().map(|s| Module::load_linked(s.context(), &[(&name, LinkInput::Object(&object))])).collect::<Result<_, _>>()?)
        }
        (None, None) => None,
    })
}

/// Every PE's `x` set to its inputs.
fn write_inputs(streams: &[Arc<CudaStream>], x: &[u64], n: usize) -> host_shim::Result<()> {
    for (pe, stream) in streams.iter().enumerate() {
        stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))?;
        stream.context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
        let values: Vec<f32> = (0..n).map(|i| input(pe, i)).collect();
        // SAFETY: `x[pe]` holds `n` floats of PE `pe`'s heap, on the current context's device.
        unsafe { result::memcpy_htod_sync(x[pe], &values) }.map_err(Error::cuda("cuMemcpyHtoD"))?;
    }
    Ok(())
}

fn read(stream: &Arc<CudaStream>, at: u64, n: usize) -> host_shim::Result<Vec<f32>> {
    stream.synchronize().map_err(Error::cuda("cuStreamSynchronize"))?;
    stream.context().bind_to_thread().map_err(Error::cuda("cuCtxSetCurrent"))?;
    let mut out = vec![0f32; n];
    // SAFETY: `at` holds `n` floats on the current context's device, the stream idle.
    unsafe { result::memcpy_dtoh_sync(&mut out, at) }.map_err(Error::cuda("cuMemcpyDtoH"))?;
    Ok(out)
}

/// Every PE's status success and its `sum` the reference, bit for bit.
fn check(what: &str, streams: &[Arc<CudaStream>], statuses: &[CudaSlice<i32>], sum: &[u64], n: usize, want: &[u32]) -> host_shim::Result<()> {
    for (pe, stream) in streams.iter().enumerate() {
        let status = stream.clone_dtoh(&statuses[pe]).map_err(Error::cuda("cuMemcpyDtoH"))?[0];
        if status != Status::Success as i32 {
            return Err(Error::InvalidArgument(format!("{what}: PE {pe}'s kernel returned status {status}")));
        }
        let got = read(stream, sum[pe], n)?;
        if let Some(i) = (0..n).find(|&i| got[i].to_bits() != want[i]) {
            return Err(Error::InvalidArgument(format!("{what}: PE {pe} element {i} is {}, the reference {}", got[i], f32::from_bits(want[i]))));
        }
    }
    println!("{what}: {} PEs × {n} floats match the reference bit for bit", streams.len());
    Ok(())
}
