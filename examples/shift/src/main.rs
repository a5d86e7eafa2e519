//! `shift`: seed 004's `simple_shift` on the symmetric heap. Every PE allocates one
//! symmetric `i32`, a one-thread kernel puts the PE's number into the next PE's copy
//! (`p`), a barrier of every PE completes the puts, and each PE prints
//! `k: received message k-1` (PE 0 receives the last PE's number).
//!
//! `--pes N` runs N PEs in this process (PE `i` on device `i mod` the device count, or on
//! `--devices`), the barrier a one-CTA kernel per PE.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg, result};
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
}

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
    Ok(())
}
