//! One PE of a symmetric heap whose PEs are processes, on the host twin (the device code
//! on CPU threads, the heaps shared-memory files): start it with `ferroccl run -n N
//! twin-pe` (or `testkit::launch`). It runs NVSHMEM's simple_shift example (`p` of its
//! number to the next PE, `barrier_all`, prints `k: received message k-1`), then a ring
//! of `put_signal` blocks with `wait_until`, and checks both.
//!
//! Exit status: 0 all checked; 2 a host call failed (the error is printed: a PE gone, a
//! mismatch); 3 this PE left on purpose (`--leave`); 4 a wrong result.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use device_rt::shmem::{Block, Cmp, Shmem, Signal, SignalOp, Thread};
use ferroccl_testkit::shmem::TwinHeap;
use ferroccl_tests::outcome::{Fail, exit};
use host_shim::bootstrap::{Bootstrap, PeEnv};

#[derive(Parser, Debug)]
struct Args {
    /// This PE exits (status 3) right after the bootstrap, before the heap
    #[arg(long, value_name = "PE")]
    leave: Option<usize>,
    /// PE 1 asks malloc for another size than the others
    #[arg(long)]
    mismatch: bool,
    /// The bootstrap's budget per host call
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "60s")]
    budget: Duration,
}

/// Words each PE puts to the next in the ring.
const RING_WORDS: usize = 1000;

fn main() -> ExitCode {
    exit("twin-pe", run(&Args::parse()))
}

fn run(args: &Args) -> Result<(), Fail> {
    let env = PeEnv::from_env()?.ok_or_else(|| Fail::Host("no PE variables: start me with `ferroccl run -n N twin-pe`".into()))?;
    let bootstrap = Bootstrap::join_env(&env, args.budget)?;
    if args.leave == Some(env.pe) {
        std::process::exit(3);
    }
    let mut heap = TwinHeap::join(1 << 16, Duration::from_secs(60), bootstrap)?;
    let (me, n) = (env.pe, env.n_pes);
    let want = if args.mismatch && me == 1 { 8 } else { 4 };
    let dest = heap.malloc(&[want])?[0];
    let wrong = std::sync::Mutex::new(Vec::new());
    let trapped = heap.run(1, |sh: Shmem| {
        // SAFETY: `dest` is this PE's symmetric i32; every PE calls the barrier next.
        let barrier = unsafe {
            sh.p(dest as *mut i32, sh.my_pe() as i32, (sh.my_pe() + 1) % sh.n_pes());
            sh.barrier_all::<Thread>()
        };
        if let Err(why) = barrier {
            wrong.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(format!("barrier: {why:?}"));
        }
    });
    trapped.map_err(Fail::Wrong)?;
    let got = heap.read::<i32>(me, dest, 1)[0];
    println!("{me}: received message {got}");
    if got != ((me + n - 1) % n) as i32 {
        return Err(Fail::Wrong(format!("PE {me} received {got}")));
    }
    let data = heap.malloc(&[(RING_WORDS * 4) as u64])?[0];
    let source = heap.malloc(&[(RING_WORDS * 4) as u64])?[0];
    let sig = heap.malloc(&[8])?[0];
    let word = |pe: usize, i: usize| (pe << 20 | i) as u32;
    heap.write(me, source, &(0..RING_WORDS).map(|i| word(me, i)).collect::<Vec<u32>>());
    let trapped = heap.run(64, |sh: Shmem| {
        let signal = Signal { sig: sig as *mut u64, value: 1, op: SignalOp::Add };
        // SAFETY: symmetric buffers of `RING_WORDS` words and a zeroed u64 signal; every
        // thread of the block calls it, then thread 0 waits for this PE's own signal.
        unsafe { sh.put_signal::<Block, u32>(data as *mut u32, source as *const u32, RING_WORDS, signal, (sh.my_pe() + 1) % sh.n_pes()) };
        if <Block as device_rt::shmem::Group>::rank() == 0 {
            // SAFETY: the symmetric signal, updated only by signals.
            if let Err(why) = unsafe { sh.wait_until(sig as *mut u64, Cmp::Ge, 1) } {
                wrong.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(format!("wait_until: {why:?}"));
            }
        }
    });
    trapped.map_err(Fail::Wrong)?;
    if let Some(first) = wrong.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).first() {
        return Err(Fail::Wrong(format!("PE {me}: {first}")));
    }
    let from = (me + n - 1) % n;
    let arrived = heap.read::<u32>(me, data, RING_WORDS);
    if let Some(i) = (0..RING_WORDS).find(|&i| arrived[i] != word(from, i)) {
        return Err(Fail::Wrong(format!("PE {me} word {i}: {:#x}, want {:#x}", arrived[i], word(from, i))));
    }
    println!("{me}: put_signal ring of {RING_WORDS} words from PE {from} checked");
    for addr in [sig, source, data, dest] {
        heap.free(&[addr])?;
    }
    Ok(())
}
