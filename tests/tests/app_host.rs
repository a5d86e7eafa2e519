//! An application's own device function in the persistent loop, on the host twin: this
//! test binary defines `ferroccl_app_work` (strong, as an application's linked code does),
//! which replaces the module's weak default. Application items between all-reduces on the
//! stream-ordered path run in stream order on every rank (the second all-reduce sums what
//! the function wrote into the first's output); a function number the application
//! refuses, a timeout and an abort it reports each stop the loop with their own error.

use std::time::Duration;

use device_rt::abi::{Status, WaitSite};
use device_rt::algo::{AlgorithmChoice, CollFunction};
use device_rt::arch;
use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::work::{BadItem, WorkItem};
use ferroccl_testkit::coll::group::{RankGroup, SubmitPath};
use ferroccl_testkit::coll::twin::TwinGroup;
use host_shim::Error;
use host_shim::comm::wiring::Shape;

const TIMEOUT: Duration = Duration::from_secs(120);
const THREADS: u32 = 128;
const N: usize = 300;

/// The application's functions: 1 doubles `count` floats at `buf` (its argument block:
/// `[buf, count]`, two `u64`s); 2 reports a timeout; 3 an abort; anything else is refused.
///
/// # Safety
/// For function 1, `arg` is the address of the argument block, and `buf` holds `count`
/// floats that nothing else accesses while the item runs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferroccl_app_work(function: u32, arg: u64) -> Status {
    match function {
        1 => {
            let block = arg as *const u64;
            // SAFETY: the argument block's two words (this function's contract).
            let (buf, count) = unsafe { (arch::ld_volatile_global(block), arch::ld_volatile_global(block.add(1))) };
            let buf = buf as *mut u32;
            let mut i = u64::from(arch::thread_idx());
            while i < count {
                // SAFETY: element `i < count` of `buf`, this thread's alone.
                unsafe {
                    let at = buf.add(i as usize);
                    arch::st_volatile_global(at, (f32::from_bits(arch::ld_volatile_global(at)) * 2.0).to_bits());
                }
                i += u64::from(arch::block_dim());
            }
            Status::Success
        }
        2 => Status::TimedOut,
        3 => Status::Aborted,
        _ => Status::InvalidArgument,
    }
}

fn group(nranks: u32) -> TwinGroup {
    let shape = Shape { nranks, nchannels: 2, ring_step_bytes: 4096, p2p_step_bytes: 4096, direct: false, stats: false, paired: false, staging_bytes: 0, algorithm: AlgorithmChoice::Ring, nvls_multicast: false };
    let mut g = TwinGroup::start_with_call_channels(shape, 1, THREADS, Duration::from_secs(60), None).unwrap();
    g.set_path(SubmitPath::Stream).unwrap();
    g
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn application_work_runs_in_stream_order_between_collectives() {
    const RANKS: u32 = 2;
    let mut g = group(RANKS);
    let input = |rank: u32, i: usize| (rank as usize * 3 + i % 7) as f32;
    let mut bufs = Vec::new();
    for rank in 0..RANKS {
        let (x, y, z, args) = (g.alloc(rank, N * 4).unwrap(), g.alloc(rank, N * 4).unwrap(), g.alloc(rank, N * 4).unwrap(), g.alloc(rank, 16).unwrap());
        let data: Vec<u8> = (0..N).flat_map(|i| input(rank, i).to_le_bytes()).collect();
        g.write(x, &data).unwrap();
        let block: Vec<u8> = [y.addr, N as u64].iter().flat_map(|w| w.to_le_bytes()).collect();
        g.write(args, &block).unwrap();
        bufs.push((x, y, z, args));
    }
    let all_reduce = |src: u64, dst: u64| WorkItem::collective(CollFunction::AllReduce, DataType::F32, RedOpKind::Sum, 0, src, dst, N as u64, 0);
    let mut last = Vec::new();
    for (rank, &(x, y, z, args)) in bufs.iter().enumerate() {
        let rank = rank as u32;
        g.submit(rank, all_reduce(x.addr, y.addr)).unwrap();
        g.submit(rank, WorkItem::application(1, args.addr)).unwrap();
        last.push(g.submit(rank, all_reduce(y.addr, z.addr)).unwrap());
    }
    for (rank, submitted) in last.into_iter().enumerate() {
        g.wait_submitted(rank as u32, submitted, TIMEOUT).unwrap();
    }
    let sum = |i: usize| (0..RANKS).map(|r| input(r, i)).sum::<f32>();
    let want: Vec<f32> = (0..N).map(|i| RANKS as f32 * 2.0 * sum(i)).collect();
    for (rank, &(_, y, z, _)) in bufs.iter().enumerate() {
        assert_eq!(floats(&g.read(y, N * 4).unwrap()), (0..N).map(|i| 2.0 * sum(i)).collect::<Vec<_>>(), "rank {rank}: the function doubled the first all-reduce's output");
        assert_eq!(floats(&g.read(z, N * 4).unwrap()), want, "rank {rank}: the second all-reduce summed the doubled values");
    }
}

/// Rank 0 runs application function `function`; what its loop reports.
fn failing(function: u32) -> Error {
    let mut g = group(1);
    let args = g.alloc(0, 16).unwrap();
    let submitted = g.submit(0, WorkItem::application(function, args.addr)).unwrap();
    g.wait_submitted(0, submitted, TIMEOUT).unwrap_err()
}

#[test]
fn what_the_application_reports_stops_the_loop_with_its_error() {
    assert!(matches!(failing(7), Error::BadWorkItem { reason: BadItem::ApplicationRefused, .. }), "{:?}", failing(7));
    assert!(matches!(failing(2), Error::DeviceTimeout { site: Some(WaitSite::Application), .. }), "{:?}", failing(2));
    assert!(matches!(failing(3), Error::Aborted), "{:?}", failing(3));
}
