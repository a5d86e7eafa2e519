//! `shift`: [NVSHMEM](https://docs.nvidia.com/nvshmem/api/)'s `simple_shift` example on
//! the symmetric heap. Every PE allocates one symmetric `i32`, a one-thread kernel puts
//! the PE's number into the next PE's copy (`p`), a barrier of every PE completes the
//! puts, and each PE prints `k: received message k-1` (PE 0 receives the last PE's
//! number).
//!
//! Started by `ferroccl run -n N shift` (or any launcher `host_shim::bootstrap::PeEnv`
//! reads), this process is one PE of N, on the device the launcher gives it, as NVSHMEM
//! runs the example (`nvshmrun -np N`). Otherwise `--pes N` runs N PEs in this process
//! (PE `i` on device `i mod` the device count, or on `--devices`). The barrier is a
//! one-CTA kernel per PE. `--check-api` then runs the device API's ring shift
//! (`ferroccl_shmem_ring_shift`: `put_signal` of a block of floats to the next PE,
//! `wait_until`, a block `sum_reduce`, atomics on PE 0, `barrier_all`) on every PE and
//! checks every local PE's results on the host, then the host's stream-ordered
//! `sum_reduce` and `barrier_all` (the heap's work loops, no kernel launch per call).

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cudarc::driver::{CudaContext, CudaStream, LaunchConfig, PushKernelArg, result};
use host_shim::bootstrap::{Bootstrap, PeEnv};
use host_shim::device;
use host_shim::module::Module;
use host_shim::shmem::Heap;
use host_shim::DeviceAlloc;

#[derive(Parser, Debug)]
#[command(about = "NVSHMEM's simple_shift example on ferroccl's symmetric heap")]
struct Args {
    /// PEs in this process.
    #[arg(long, default_value_t = 2)]
    pes: usize,
    /// Devices of the PEs (comma-separated ordinals; default: PE i on device i mod count).
    #[arg(long, value_delimiter = ',')]
    devices: Vec<usize>,
    /// Also run the device API's ring shift on every PE and check it.
    #[arg(long)]
    check_api: bool,
}

/// Floats each PE sends in `--check-api`.
const CHECK_FLOATS: usize = 4099;

/// What the example's steps return.
type Outcome = Result<(), Box<dyn Error>>;

/// How long `--check-api` waits for each stage of stream-ordered calls.
const STAGE_BUDGET: Duration = Duration::from_secs(20);

/// How long the PEs of several processes wait for each other at a host call.
const BOOTSTRAP_BUDGET: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn Error>> {
    env_logger::Builder::from_env(env_logger::Env::new().filter_or("FERROCCL_LOG", "warn")).init();
    let args = Args::parse();
    let count = device::list()?.len();
    // The streams of this process's PEs, the modules loaded (one per device), and the
    // module of each PE.
    let (mut heap, streams, loaded, module_of): (Heap, Vec<Arc<CudaStream>>, Vec<Module>, Vec<usize>) = match PeEnv::from_env()? {
        Some(env) => {
            if env.device >= count {
                return Err(format!("PE {}: device {} of the {count} here", env.pe, env.device).into());
            }
            let ctx = device::context(env.device)?;
            let module = Module::load(&ctx)?;
            let stream = ctx.new_stream()?;
            let bootstrap = Bootstrap::join_env(&env, BOOTSTRAP_BUDGET)?;
            (Heap::join(&stream, 1 << 20, Duration::from_secs(10), bootstrap)?, vec![stream], vec![module], vec![0])
        }
        None => {
            let devices: Vec<usize> = if args.devices.is_empty() { (0..args.pes).map(|pe| pe % count.max(1)).collect() } else { args.devices.clone() };
            if args.pes == 0 || devices.len() != args.pes || devices.iter().any(|&d| d >= count) {
                return Err(format!("--pes {} --devices {devices:?}: at least one PE, each on one of the {count} devices here", args.pes).into());
            }
            let mut loaded: Vec<(Arc<CudaContext>, Module)> = Vec::new();
            let (mut streams, mut module_of) = (Vec::new(), Vec::new());
            for &d in &devices {
                let at = match loaded.iter().position(|(c, _)| c.ordinal() == d) {
                    Some(at) => at,
                    None => {
                        let ctx = device::context(d)?;
                        let module = Module::load(&ctx)?;
                        loaded.push((ctx, module));
                        loaded.len() - 1
                    }
                };
                streams.push(loaded[at].0.new_stream()?);
                module_of.push(at);
            }
            let modules = loaded.into_iter().map(|(_, m)| m).collect();
            (Heap::new(&streams, 1 << 20, Duration::from_secs(10))?, streams, modules, module_of)
        }
    };
    let modules: Vec<&Module> = module_of.iter().map(|&at| &loaded[at]).collect();
    let pes = heap.local_pes().to_vec();
    let destination = heap.malloc(&vec![4; pes.len()])?;
    let mut statuses = Vec::new();
    for (i, (stream, module)) in streams.iter().zip(&modules).enumerate() {
        let shift = module.kernel("ferroccl_shmem_simple_shift")?;
        let handle = heap.handle(pes[i]);
        let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the kernel's contract: this PE's handle and its symmetric i32.
        unsafe { stream.launch_builder(&shift).arg(&handle).arg(&destination[i]).launch(one)? };
        statuses.push(DeviceAlloc::zeroed(stream.context(), 4)?);
    }
    for (i, (stream, module)) in streams.iter().zip(&modules).enumerate() {
        let barrier = module.kernel("ferroccl_shmem_barrier_all")?;
        let warp = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the kernel's contract: every PE launches it once as its next barrier, one
        // CTA of a whole warp, with its handle and a status word of its own.
        unsafe { stream.launch_builder(&barrier).arg(&heap.handle(pes[i])).arg(&statuses[i].ptr()).launch(warp)? };
    }
    for (i, stream) in streams.iter().enumerate() {
        stream.synchronize()?;
        let (mut msg, mut status) = ([0i32], [0u32]);
        // SAFETY: the PE's symmetric i32 and status word, written by the kernels its stream
        // just finished.
        unsafe {
            result::memcpy_dtoh_sync(&mut msg, destination[i])?;
            result::memcpy_dtoh_sync(&mut status, statuses[i].ptr())?;
        }
        if status[0] != 0 {
            return Err(format!("PE {}: the barrier timed out or was aborted", pes[i]).into());
        }
        println!("{}: received message {}", pes[i], msg[0]);
    }
    heap.free(&destination)?;
    if args.check_api {
        check_api(&mut heap, &streams, &modules)?;
        println!("device API ring shift on {} PE(s) of {}: put_signal, wait_until, sum_reduce, atomics, barrier_all all checked", pes.len(), heap.n_pes());
        check_stream_calls(&mut heap, &streams, &modules)?;
        println!("stream-ordered sum_reduce and barrier_all through the heap's work loops on {} PE(s) of {}: checked", pes.len(), heap.n_pes());
        heap.finalize(Duration::from_secs(10))?;
    }
    Ok(())
}

/// Starts the heap's work loops and, on every local PE's stream with no kernel launch,
/// runs `sum_reduce_on_stream` of the blocks `check_api` sends, twice (the second into a
/// buffer the first's result is copied from, so a stale first result cannot pass), with a
/// `barrier_all_on_stream` between and after; checks each PE got the PE-order sum.
fn check_stream_calls(heap: &mut Heap, streams: &[Arc<CudaStream>], modules: &[&Module]) -> Result<(), Box<dyn Error>> {
    heap.start_loops(modules)?;
    let (local, n) = (heap.local_pes().to_vec(), heap.n_pes());
    let each = vec![4 * CHECK_FLOATS as u64; local.len()];
    let (src, first, second) = (heap.malloc(&each)?, heap.malloc(&each)?, heap.malloc(&each)?);
    let sent = |pe: usize| -> Vec<f32> { (0..CHECK_FLOATS).map(|i| (pe * CHECK_FLOATS + i) as f32 * 0.25).collect() };
    for (i, stream) in streams.iter().enumerate() {
        stream.context().bind_to_thread()?;
        let block = sent(local[i]);
        // SAFETY: the PE's symmetric buffers, which no kernel uses; `block` outlives the
        // copy, which the stream is synchronized for.
        unsafe {
            result::memcpy_htod_async(src[i], &block, stream.cu_stream())?;
            result::memset_d8_async(first[i], 0xff, 4 * CHECK_FLOATS, stream.cu_stream())?;
            result::memset_d8_async(second[i], 0xff, 4 * CHECK_FLOATS, stream.cu_stream())?;
        }
        stream.synchronize()?;
    }
    // Each stage is waited for with a deadline: a stage that does not finish names itself
    // and the loop's error instead of hanging.
    let stage = |what: &str, submit: &dyn Fn(usize, &CudaStream) -> Outcome| -> Outcome {
        for (i, stream) in streams.iter().enumerate() {
            submit(i, stream)?;
        }
        for (i, stream) in streams.iter().enumerate() {
            if let Err(e) = host_shim::stream::wait(stream, STAGE_BUDGET, what) {
                return Err(format!("PE {}: {what}: {e} (its loop: {:?})", local[i], heap.async_error(local[i])).into());
            }
            if let Some(e) = heap.async_error(local[i]) {
                return Err(format!("PE {}: {what}: the heap's loop stopped: {e}", local[i]).into());
            }
        }
        Ok(())
    };
    stage("barrier_all_on_stream", &|i, stream| Ok(heap.barrier_all_on_stream(local[i], stream)?))?;
    stage("sum_reduce_on_stream", &|i, stream| Ok(heap.sum_reduce_on_stream::<f32>(local[i], stream, first[i], src[i], CHECK_FLOATS)?))?;
    stage("a second sum_reduce_on_stream between barriers", &|i, stream| {
        // SAFETY: two of the PE's symmetric buffers of `CHECK_FLOATS` floats; every PE's
        // first sum has finished reading `src` (its stage was waited for).
        unsafe { result::memcpy_dtod_async(src[i], first[i], 4 * CHECK_FLOATS, stream.cu_stream())? };
        heap.barrier_all_on_stream(local[i], stream)?;
        heap.sum_reduce_on_stream::<f32>(local[i], stream, second[i], src[i], CHECK_FLOATS)?;
        Ok(heap.barrier_all_on_stream(local[i], stream)?)
    })?;
    let once: Vec<f32> = (0..CHECK_FLOATS).map(|f| (1..n).fold(sent(0)[f], |a, pe| a + sent(pe)[f])).collect();
    let twice: Vec<f32> = once.iter().map(|&v| (1..n).fold(v, |a, _| a + v)).collect();
    for (i, stream) in streams.iter().enumerate() {
        let pe = local[i];
        stream.context().bind_to_thread()?;
        let (mut got_first, mut got_second) = (vec![0f32; CHECK_FLOATS], vec![0f32; CHECK_FLOATS]);
        // SAFETY: the PE's buffers, written by the calls its stream has finished.
        unsafe {
            result::memcpy_dtoh_sync(&mut got_first, first[i])?;
            result::memcpy_dtoh_sync(&mut got_second, second[i])?;
        }
        let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
        if !same(&got_first, &once) || !same(&got_second, &twice) {
            return Err(format!("PE {pe}: sum_reduce_on_stream differs from the PE-order sum").into());
        }
    }
    for b in [src, first, second] {
        heap.free(&b)?;
    }
    Ok(())
}

/// Runs `ferroccl_shmem_ring_shift` on every local PE (PE `k` sends `k·CHECK_FLOATS + i`
/// as float `i`) and checks on each: it received its predecessor's block, its sum is the
/// PE-order sum of every PE's received block, PE 0 (where local) counted every PE once
/// and one PE claimed its slot, and no wait ended early.
fn check_api(heap: &mut Heap, streams: &[Arc<CudaStream>], modules: &[&Module]) -> Result<(), Box<dyn Error>> {
    let (local, n) = (heap.local_pes().to_vec(), heap.n_pes());
    let each = |bytes: usize| vec![bytes as u64; local.len()];
    let (src, dst, sum) = (heap.malloc(&each(4 * CHECK_FLOATS))?, heap.malloc(&each(4 * CHECK_FLOATS))?, heap.malloc(&each(4 * CHECK_FLOATS))?);
    let (sig, counters) = (heap.malloc(&each(8))?, heap.malloc(&each(16))?);
    let sent = |pe: usize| -> Vec<f32> { (0..CHECK_FLOATS).map(|i| (pe * CHECK_FLOATS + i) as f32).collect() };
    let received_by = |pe: usize| sent((pe + n - 1) % n);
    let mut statuses = Vec::new();
    for (i, stream) in streams.iter().enumerate() {
        stream.context().bind_to_thread()?;
        let block = sent(local[i]);
        // SAFETY: the PE's symmetric buffers, not used by any kernel yet; `block` outlives
        // the copy, which the stream is synchronized for below.
        unsafe {
            result::memcpy_htod_async(src[i], &block, stream.cu_stream())?;
            result::memset_d8_async(sig[i], 0, 8, stream.cu_stream())?;
            result::memset_d8_async(counters[i], 0, 16, stream.cu_stream())?;
        }
        stream.synchronize()?;
        statuses.push(DeviceAlloc::zeroed(stream.context(), 4)?);
    }
    // Every PE's buffers are set before any kernel starts: a PE's puts and signals land in
    // its peers' buffers, which must not be zeroed after them.
    for (i, stream) in streams.iter().enumerate() {
        let kernel = modules[i].kernel("ferroccl_shmem_ring_shift")?;
        let block = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let (handle, count, status) = (heap.handle(local[i]), CHECK_FLOATS as u32, statuses[i].ptr());
        // SAFETY: the kernel's contract: this PE's handle, symmetric buffers of `count` floats
        // (`sum` disjoint from `dst`), a zeroed signal, two zeroed counters, a status word;
        // every PE launches it once, one CTA of whole warps.
        unsafe {
            stream
                .launch_builder(&kernel)
                .arg(&handle)
                .arg(&src[i])
                .arg(&dst[i])
                .arg(&sum[i])
                .arg(&sig[i])
                .arg(&counters[i])
                .arg(&count)
                .arg(&status)
                .launch(block)?
        };
    }
    let expected: Vec<f32> = (0..CHECK_FLOATS).map(|f| (1..n).fold(received_by(0)[f], |a, pe| a + received_by(pe)[f])).collect();
    for (i, stream) in streams.iter().enumerate() {
        let pe = local[i];
        stream.synchronize()?;
        let (mut got, mut total, mut status) = (vec![0f32; CHECK_FLOATS], vec![0f32; CHECK_FLOATS], [0u32]);
        // SAFETY: the PE's buffers, written by the kernel its stream just finished.
        unsafe {
            result::memcpy_dtoh_sync(&mut got, dst[i])?;
            result::memcpy_dtoh_sync(&mut total, sum[i])?;
            result::memcpy_dtoh_sync(&mut status, statuses[i].ptr())?;
        }
        if status[0] != 0 {
            return Err(format!("PE {pe}: a wait of the ring shift ended early").into());
        }
        if got != received_by(pe) {
            return Err(format!("PE {pe}: the block put by PE {} arrived wrong", (pe + n - 1) % n).into());
        }
        if total.iter().zip(&expected).any(|(a, b)| a.to_bits() != b.to_bits()) {
            return Err(format!("PE {pe}: sum_reduce differs from the PE-order sum").into());
        }
        if pe == 0 {
            let mut count = [0u64; 2];
            // SAFETY: PE 0's two counters, written by the finished kernels.
            unsafe { result::memcpy_dtoh_sync(&mut count, counters[i])? };
            if count[0] != n as u64 || !(1..=n as u64).contains(&count[1]) {
                return Err(format!("PE 0's counters {count:?}: expected {n} arrivals and one claim").into());
            }
        }
    }
    for b in [src, dst, sum, sig, counters] {
        heap.free(&b)?;
    }
    Ok(())
}
