//! `shift`: seed 004's `simple_shift` on the symmetric heap. Every PE allocates one
//! symmetric `i32`, a one-thread kernel puts the PE's number into the next PE's copy
//! (`p`), a barrier of every PE completes the puts, and each PE prints
//! `k: received message k-1` (PE 0 receives the last PE's number).
//!
//! `--pes N` runs N PEs in this process (PE `i` on device `i mod` the device count, or on
//! `--devices`), the barrier a one-CTA kernel per PE. `--check-api` then runs the device
//! API's ring shift (`ferroccl_shmem_ring_shift`: `put_signal` of a block of floats to the
//! next PE, `wait_until`, a block `sum_reduce`, atomics on PE 0, `barrier_all`) on every PE
//! and checks every result on the host.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cudarc::driver::{CudaContext, CudaStream, LaunchConfig, PushKernelArg, result};
use host_shim::device;
use host_shim::module::Module;
use host_shim::shmem::Heap;
use host_shim::work::DeviceAlloc;

#[derive(Parser, Debug)]
#[command(about = "Seed 004's simple_shift on ferroccl's symmetric heap")]
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

fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let count = device::list()?.len();
    let devices: Vec<usize> = if args.devices.is_empty() { (0..args.pes).map(|pe| pe % count.max(1)).collect() } else { args.devices.clone() };
    if args.pes == 0 || devices.len() != args.pes || devices.iter().any(|&d| d >= count) {
        return Err(format!("--pes {} --devices {devices:?}: at least one PE, each on one of the {count} devices here", args.pes).into());
    }
    let mut loaded: Vec<(usize, Arc<CudaContext>, Module)> = Vec::new();
    let mut streams = Vec::new();
    for &d in &devices {
        if !loaded.iter().any(|(o, _, _)| *o == d) {
            let ctx = device::context(d)?;
            let module = Module::load(&ctx)?;
            loaded.push((d, ctx, module));
        }
        let (_, ctx, _) = loaded.iter().find(|(o, _, _)| *o == d).ok_or("a context per device")?;
        streams.push(ctx.new_stream()?);
    }
    let mut heap = Heap::new(&streams, 1 << 20, Duration::from_secs(10))?;
    let destination = heap.malloc(&vec![4; args.pes])?;
    let mut statuses = Vec::new();
    for (pe, (stream, d)) in streams.iter().zip(&devices).enumerate() {
        let (_, ctx, module) = loaded.iter().find(|(o, _, _)| o == d).ok_or("a context per device")?;
        let shift = module.kernel("ferroccl_shmem_simple_shift")?;
        let handle = heap.handle(pe);
        let one = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the kernel's contract: this PE's handle and its symmetric i32.
        unsafe { stream.launch_builder(&shift).arg(&handle).arg(&destination[pe]).launch(one)? };
        statuses.push(DeviceAlloc::zeroed(ctx, 4)?);
    }
    for (pe, (stream, d)) in streams.iter().zip(&devices).enumerate() {
        let (_, _, module) = loaded.iter().find(|(o, _, _)| o == d).ok_or("a context per device")?;
        let barrier = module.kernel("ferroccl_shmem_barrier_all")?;
        let warp = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (32, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the kernel's contract: every PE launches it once as its next barrier, one
        // CTA of a whole warp, with its handle and a status word of its own.
        unsafe { stream.launch_builder(&barrier).arg(&heap.handle(pe)).arg(&statuses[pe].ptr()).launch(warp)? };
    }
    for (pe, stream) in streams.iter().enumerate() {
        stream.synchronize()?;
        let (mut msg, mut status) = ([0i32], [0u32]);
        // SAFETY: PE `pe`'s symmetric i32 and status word, written by the kernels its stream
        // just finished.
        unsafe {
            result::memcpy_dtoh_sync(&mut msg, destination[pe])?;
            result::memcpy_dtoh_sync(&mut status, statuses[pe].ptr())?;
        }
        if status[0] != 0 {
            return Err(format!("PE {pe}: the barrier timed out or was aborted").into());
        }
        println!("{pe}: received message {}", msg[0]);
    }
    heap.free(&destination)?;
    if args.check_api {
        let modules: Vec<&Module> = devices.iter().map(|d| loaded.iter().find(|(o, _, _)| o == d).map(|(_, _, m)| m).ok_or("a context per device")).collect::<Result<_, _>>()?;
        check_api(&mut heap, &streams, &modules)?;
        println!("device API ring shift on {} PEs: put_signal, wait_until, sum_reduce, atomics, barrier_all all checked", args.pes);
    }
    Ok(())
}

/// Runs `ferroccl_shmem_ring_shift` on every PE (PE `k` sends `k·CHECK_FLOATS + i` as
/// float `i`) and checks: every PE received its predecessor's block, every PE's sum is
/// the PE-order sum of every PE's received block, PE 0 counted every PE once and one PE
/// claimed its slot, and no wait ended early.
fn check_api(heap: &mut Heap, streams: &[Arc<CudaStream>], modules: &[&Module]) -> Result<(), Box<dyn Error>> {
    let pes = streams.len();
    let each = |bytes: usize| vec![bytes as u64; pes];
    let (src, dst, sum) = (heap.malloc(&each(4 * CHECK_FLOATS))?, heap.malloc(&each(4 * CHECK_FLOATS))?, heap.malloc(&each(4 * CHECK_FLOATS))?);
    let (sig, counters) = (heap.malloc(&each(8))?, heap.malloc(&each(16))?);
    let sent = |pe: usize| -> Vec<f32> { (0..CHECK_FLOATS).map(|i| (pe * CHECK_FLOATS + i) as f32).collect() };
    let mut statuses = Vec::new();
    for (pe, stream) in streams.iter().enumerate() {
        stream.context().bind_to_thread()?;
        // SAFETY: PE `pe`'s symmetric buffers, not used by any kernel yet.
        unsafe {
            result::memcpy_htod_sync(src[pe], &sent(pe))?;
            result::memset_d8_sync(sig[pe], 0, 8)?;
            result::memset_d8_sync(counters[pe], 0, 16)?;
        }
        statuses.push(DeviceAlloc::zeroed(stream.context(), 4)?);
    }
    for (pe, stream) in streams.iter().enumerate() {
        let kernel = modules[pe].kernel("ferroccl_shmem_ring_shift")?;
        let block = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let (handle, n, status) = (heap.handle(pe), CHECK_FLOATS as u32, statuses[pe].ptr());
        // SAFETY: the kernel's contract: this PE's handle, symmetric buffers of `n` floats (`sum`
        // disjoint from `dst`), a zeroed signal, two zeroed counters, a status word; every PE
        // launches it once, one CTA of whole warps.
        unsafe {
            stream
                .launch_builder(&kernel)
                .arg(&handle)
                .arg(&src[pe])
                .arg(&dst[pe])
                .arg(&sum[pe])
                .arg(&sig[pe])
                .arg(&counters[pe])
                .arg(&n)
                .arg(&status)
                .launch(block)?
        };
    }
    let mut received = Vec::new();
    for (pe, stream) in streams.iter().enumerate() {
        stream.synchronize()?;
        let (mut got, mut status) = (vec![0f32; CHECK_FLOATS], [0u32]);
        // SAFETY: PE `pe`'s buffers, written by the kernel its stream just finished.
        unsafe {
            result::memcpy_dtoh_sync(&mut got, dst[pe])?;
            result::memcpy_dtoh_sync(&mut status, statuses[pe].ptr())?;
        }
        if status[0] != 0 {
            return Err(format!("PE {pe}: a wait of the ring shift ended early").into());
        }
        if got != sent((pe + pes - 1) % pes) {
            return Err(format!("PE {pe}: the block put by PE {} arrived wrong", (pe + pes - 1) % pes).into());
        }
        received.push(got);
    }
    let expected: Vec<f32> = (0..CHECK_FLOATS).map(|i| received.iter().skip(1).fold(received[0][i], |a, r| a + r[i])).collect();
    for (pe, &at) in sum.iter().enumerate() {
        let mut got = vec![0f32; CHECK_FLOATS];
        streams[pe].context().bind_to_thread()?;
        // SAFETY: PE `pe`'s sum, written by its finished kernel.
        unsafe { result::memcpy_dtoh_sync(&mut got, at)? };
        if got.iter().zip(&expected).any(|(a, b)| a.to_bits() != b.to_bits()) {
            return Err(format!("PE {pe}: sum_reduce differs from the PE-order sum").into());
        }
    }
    let mut count = [0u64; 2];
    streams[0].context().bind_to_thread()?;
    // SAFETY: PE 0's two counters, written by the finished kernels.
    unsafe { result::memcpy_dtoh_sync(&mut count, counters[0])? };
    if count[0] != pes as u64 || !(1..=pes as u64).contains(&count[1]) {
        return Err(format!("PE 0's counters {count:?}: expected {pes} arrivals and one claim").into());
    }
    for b in [src, dst, sum, sig, counters] {
        heap.free(&b)?;
    }
    Ok(())
}
