//! The primitives on the host twin, on hand-wired connections: scatter and gather over
//! an asymmetric fan, a connection whose slots are placed by an offsets FIFO, a receiver
//! that polls the smallest of several step counters (`NVLS_MIN_POLL`), and direct
//! operations; each also in a weak-memory world, with the negative controls of the step
//! FIFO. The ring collectives are tested through the work loop in `tests/tests/coll_host.rs`.
#![cfg(feature = "host-emu")]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use device_rt::arch::{self, Site, WeakMemory};
use device_rt::conn::{CONN_NVLS_MIN_POLL, ConnInfo, NCCL_STEPS};
use device_rt::dtype::DataType;
use device_rt::multicast::{SwMulticast, SwMulticastTable};
use device_rt::abi::{LoopError, PrimsShared, WaitSite};
use device_rt::prims::{DataOp, FanAsymmetric, GroupCtx, Primitives, Simple};
use device_rt::redop::RedOpKind;

const STEP_BYTES: u64 = 4096;
const THREADS: u32 = 128;
type P = Simple<1, 1>;

/// One connection's memory: its FIFO and its two step counters, plus each end's
/// `ConnInfo`.
struct Link {
    fifo: Vec<u128>,
    head: Box<u64>,
    tail: Box<u64>,
    send: ConnInfo,
    recv: ConnInfo,
}

impl Link {
    fn new() -> Box<Self> {
        let mut l = Box::new(Link {
            fifo: vec![0u128; (NCCL_STEPS * STEP_BYTES / 16) as usize],
            head: Box::new(0),
            tail: Box::new(0),
            send: ConnInfo::default(),
            recv: ConnInfo::default(),
        });
        let end = ConnInfo {
            buff: l.fifo.as_ptr() as u64,
            head: &raw mut *l.head as u64,
            tail: &raw mut *l.tail as u64,
            step_bytes: STEP_BYTES,
            ..ConnInfo::default()
        };
        (l.send, l.recv) = (end, end);
        l
    }
}

fn f32_data() -> DataOp {
    DataOp { dtype: DataType::F32, op: RedOpKind::Sum, arg: 0 }
}

/// This CTA's whole block as one primitives group, its shared memory the dynamic one.
fn group() -> GroupCtx {
    static NO_ABORT: u64 = 0;
    GroupCtx {
        tid: arch::thread_idx(),
        nthreads: arch::block_dim(),
        group: 0,
        shared: arch::dyn_smem().cast::<PrimsShared>(),
        abort: &raw const NO_ABORT,
        spin_budget_ns: 30_000_000_000,
        stats: std::ptr::null_mut(),
    }
}

fn smem() -> u32 {
    size_of::<PrimsShared>() as u32
}

#[test]
fn scatter_and_gather_over_three_peers() {
    scatter_and_gather(None);
}

/// CTA 0 scatters blocks of its input to CTAs 1..=3, which then send their own inputs
/// back for CTA 0 to gather: every block lands where it belongs. In `memory`'s
/// weak-memory world when given.
fn scatter_and_gather(memory: Option<&WeakMemory>) {
    const PEERS: usize = 3;
    const N: usize = 1000;
    let down: Vec<Box<Link>> = (0..PEERS).map(|_| Link::new()).collect();
    let up: Vec<Box<Link>> = (0..PEERS).map(|_| Link::new()).collect();
    let root_in: Vec<f32> = (0..PEERS * N).map(|i| i as f32).collect();
    let mut root_out = vec![0f32; PEERS * N];
    let mut peer_out = vec![vec![0f32; N]; PEERS];
    let peer_in: Vec<Vec<f32>> = (0..PEERS).map(|p| (0..N).map(|i| (1000 * (p + 1) + i) as f32).collect()).collect();
    let addr = |p: *const ConnInfo| p as usize;
    let down_send: Vec<usize> = down.iter().map(|l| addr(&l.send)).collect();
    let down_recv: Vec<usize> = down.iter().map(|l| addr(&l.recv)).collect();
    let up_send: Vec<usize> = up.iter().map(|l| addr(&l.send)).collect();
    let up_recv: Vec<usize> = up.iter().map(|l| addr(&l.recv)).collect();
    let (root_in_a, root_out_a) = (root_in.as_ptr() as u64, root_out.as_mut_ptr() as u64);
    let peer_out_a: Vec<u64> = peer_out.iter_mut().map(|v| v.as_mut_ptr() as u64).collect();
    let peer_in_a: Vec<u64> = peer_in.iter().map(|v| v.as_ptr() as u64).collect();
    // SAFETY: each CTA's threads (`THREADS`, a multiple of 32) all make the same calls; each
    // connection end is a live `ConnInfo` of a boxed `Link` (FIFO, head and tail alive until
    // the test ends) used by one CTA's group at a time; `group()` gives the CTA's dynamic
    // shared memory (one `PrimsShared`), a static abort flag and no statistics; the root's
    // buffers hold `PEERS × N` floats and each peer's `N`; `launch` returns only after every
    // thread has ended, so all of it outlives the kernel.
    arch::launch_in(memory, 1 + PEERS as u32, THREADS, smem(), || unsafe {
        let g = group();
        let me = arch::block_idx() as usize;
        if me == 0 {
            let sends: Vec<*mut ConnInfo> = down_send.iter().map(|&a| a as *mut ConnInfo).collect();
            let mut p = Primitives::<SwMulticast, P, FanAsymmetric<0, PEERS>>::new(g, &[], &sends, STEP_BYTES, root_in_a, 0, f32_data());
            p.scatter(0, (PEERS * N) as i64, N as i64, N as i64, -1, 0);
            assert!(p.outcome().is_ok());
            drop(p);
            let recvs: Vec<*mut ConnInfo> = up_recv.iter().map(|&a| a as *mut ConnInfo).collect();
            let mut p = Primitives::<SwMulticast, P, FanAsymmetric<PEERS, 0>>::new(g, &recvs, &[], STEP_BYTES, 0, root_out_a, f32_data());
            p.gather(0, (PEERS * N) as i64, N as i64, N as i64, -1, 0);
            assert!(p.outcome().is_ok());
        } else {
            let i = me - 1;
            let recv = [down_recv[i] as *mut ConnInfo];
            let mut p = Primitives::<SwMulticast, P, FanAsymmetric<1, 0>>::new(g, &recv, &[], STEP_BYTES, 0, peer_out_a[i], f32_data());
            p.recv(0, N as i64);
            assert!(p.outcome().is_ok());
            drop(p);
            let send = [up_send[i] as *mut ConnInfo];
            let mut p = Primitives::<SwMulticast, P, FanAsymmetric<0, 1>>::new(g, &[], &send, STEP_BYTES, peer_in_a[i], 0, f32_data());
            p.send(0, N as i64);
            assert!(p.outcome().is_ok());
        }
    });
    for (p, out) in peer_out.iter().enumerate() {
        assert_eq!(&out[..], &root_in[p * N..(p + 1) * N], "peer {p} got the wrong block");
    }
    let gathered: Vec<f32> = peer_in.concat();
    assert_eq!(root_out, gathered);
}

/// Runs a sender (CTA 0) and a receiver (CTA 1) over `link` for `n` floats, one step per
/// call (in `memory`'s weak-memory world when given), and checks what arrived.
fn send_and_receive(memory: Option<&WeakMemory>, link: &mut Link, n: usize) {
    let input: Vec<f32> = (0..n).map(|i| (i * 3 % 1001) as f32).collect();
    let mut output = vec![0f32; n];
    let (send, recv) = (&raw mut link.send as usize, &raw mut link.recv as usize);
    let (inp, out) = (input.as_ptr() as u64, output.as_mut_ptr() as u64);
    let per_call = (STEP_BYTES / 4) as i64;
    // SAFETY: CTA 0's and CTA 1's threads (`THREADS`, a multiple of 32) each make the same
    // calls; `send`/`recv` are the two ends of `link`, alive until `launch` returns, each used
    // by one CTA; `group()` gives the CTA's dynamic shared memory, a static abort flag and no
    // statistics; `input` and `output` hold `n` floats, and each call moves at most one chunk
    // (`per_call` = one step).
    arch::launch_in(memory, 2, THREADS, smem(), || unsafe {
        let g = group();
        if arch::block_idx() == 0 {
            let mut p = Primitives::<SwMulticast, P, FanAsymmetric<0, 1>>::new(g, &[], &[send as *mut ConnInfo], STEP_BYTES, inp, 0, f32_data());
            for off in (0..n as i64).step_by(per_call as usize) {
                p.send(off, per_call.min(n as i64 - off));
            }
            assert!(p.outcome().is_ok());
        } else {
            let mut p = Primitives::<SwMulticast, P, FanAsymmetric<1, 0>>::new(g, &[recv as *mut ConnInfo], &[], STEP_BYTES, 0, out, f32_data());
            for off in (0..n as i64).step_by(per_call as usize) {
                p.recv(off, per_call.min(n as i64 - off));
            }
            assert!(p.outcome().is_ok());
        }
    });
    if let Some(at) = output.iter().zip(&input).position(|(o, i)| o != i) {
        panic!("element {at} (step {}) arrived as {}, sent as {}", at / (STEP_BYTES / 4) as usize, output[at], input[at]);
    }
}

/// A group gathering from `PEERS` peers that never send: its waiting threads poll at once
/// until their spin budget (20 ms) runs out, the first to stop the group writing `stopped`
/// while the others still read it, and every thread ends with the timeout at the data
/// wait, nothing stored. Under ThreadSanitizer (`tests/tsan.sh`) this is the primitives'
/// stop racing their polls: the word must be accessed atomically on the host twin.
#[test]
fn waits_whose_peers_never_send_stop_the_group_with_a_timeout() {
    const PEERS: usize = 8;
    const N: i64 = 1000;
    let mut links: Vec<Box<Link>> = (0..PEERS).map(|_| Link::new()).collect();
    let recvs: Vec<usize> = links.iter_mut().map(|l| &raw mut l.recv as usize).collect();
    let mut output = vec![0f32; PEERS * N as usize];
    let out = output.as_mut_ptr() as u64;
    let outcomes: Vec<std::sync::Mutex<Option<(LoopError, u32)>>> = (0..THREADS).map(|_| std::sync::Mutex::new(None)).collect();
    // SAFETY: the CTA's threads (`THREADS`, a multiple of 32) all make the same calls; the
    // receive ends are live `ConnInfo`s of boxed `Link`s (alive until `launch` returns) used
    // by this one group; `group()` gives the CTA's dynamic shared memory, a static abort flag
    // and no statistics; the output holds `PEERS × N` floats.
    arch::launch(1, THREADS, smem(), || unsafe {
        let g = GroupCtx { spin_budget_ns: 20_000_000, ..group() };
        let recv: Vec<*mut ConnInfo> = recvs.iter().map(|&a| a as *mut ConnInfo).collect();
        let mut p = Primitives::<SwMulticast, P, FanAsymmetric<PEERS, 0>>::new(g, &recv, &[], STEP_BYTES, 0, out, f32_data());
        p.gather(0, PEERS as i64 * N, N, N, -1, 0);
        *outcomes[arch::thread_idx() as usize].lock().unwrap() = p.outcome().err();
    });
    for (thread, outcome) in outcomes.iter().enumerate() {
        assert_eq!(*outcome.lock().unwrap(), Some((LoopError::Timeout, WaitSite::RecvData as u32)), "thread {thread}");
    }
    assert!(output.iter().all(|&x| x == 0.0), "a stopped group stored data no peer sent");
}

#[test]
fn an_offsets_fifo_places_the_slots() {
    offsets_fifo(None);
}

/// Slots placed by an offsets FIFO (here in reverse order) carry the data as the plain
/// layout does, over more steps than the FIFO has.
fn offsets_fifo(memory: Option<&WeakMemory>) {
    let mut link = Link::new();
    let offs: Vec<u64> = (0..NCCL_STEPS).map(|slot| (NCCL_STEPS - 1 - slot) * STEP_BYTES).collect();
    link.send.offs_fifo = offs.as_ptr() as u64;
    link.recv.offs_fifo = offs.as_ptr() as u64;
    send_and_receive(memory, &mut link, 10 * 1024 + 77);
    assert_eq!(link.send.step, 11, "the sender's step is written back");
    assert_eq!(link.recv.step, 11, "the receiver's step is written back");
}

#[test]
fn min_polling_waits_for_every_counter() {
    min_polling(None);
}

/// With `NVLS_MIN_POLL` the receiver waits for the smallest of the step counters behind
/// its multicast handle: a second counter held at 0 holds the receiver back until the
/// host raises it. Its credits go through a multicast handle too (one device here).
fn min_polling(memory: Option<&WeakMemory>) {
    let mut link = Link::new();
    let gate = Box::new(0u64);
    let table = Box::new(SwMulticastTable {
        npeers: 2,
        reserved: 0,
        peers: [&raw const *link.tail as u64, &raw const *gate as u64, 0, 0, 0, 0, 0, 0],
    });
    let credits = Box::new(SwMulticastTable { npeers: 1, reserved: 0, peers: [&raw const *link.head as u64, 0, 0, 0, 0, 0, 0, 0] });
    link.recv.tail = &raw const *table as u64;
    link.recv.head = &raw const *credits as u64;
    link.recv.flags = CONN_NVLS_MIN_POLL;
    const HOLD: Duration = Duration::from_millis(200);
    let gate_addr = &raw const *gate as usize;
    let start = Instant::now();
    let opener = std::thread::spawn(move || {
        std::thread::sleep(HOLD);
        // SAFETY: `gate` is a live, aligned `u64` boxed until the test ends (the thread is
        // joined before), accessed by the kernel only through `arch`'s atomics.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(gate_addr as *mut u64) }.store(u64::MAX / 2, std::sync::atomic::Ordering::Release);
    });
    send_and_receive(memory, &mut link, 3000);
    assert!(start.elapsed() >= HOLD, "the receiver read data before every counter allowed it");
    opener.join().unwrap();
}

#[test]
fn direct_operations_bypass_the_fifo() {
    direct_operations(None, true);
}

#[test]
fn direct_operations_take_the_fifo_where_the_output_is_not_mapped() {
    direct_operations(None, false);
}

/// Direct operations: after the pointer exchange the sender writes straight into the
/// receiver's output (the FIFO stays untouched) and the receiver copies nothing; steps
/// still order the two. With `receiver_mapped` false the receiver publishes no address,
/// and the same direct operations move the data through the FIFO into its output.
fn direct_operations(memory: Option<&WeakMemory>, receiver_mapped: bool) {
    const N: usize = 5000;
    let mut link = Link::new();
    let exchange = Box::new(0u64);
    link.send.ptr_exchange = &raw const *exchange as u64;
    link.recv.ptr_exchange = &raw const *exchange as u64;
    let input: Vec<f32> = (0..N).map(|i| (i % 97) as f32).collect();
    let mut sender_copy = vec![0f32; N];
    let mut output = vec![0f32; N];
    let (send, recv) = (&raw mut link.send as usize, &raw mut link.recv as usize);
    let (inp, copy, out) = (input.as_ptr() as u64, sender_copy.as_mut_ptr() as u64, output.as_mut_ptr() as u64);
    let per_call = (STEP_BYTES / 4) as i64;
    // SAFETY: as in `send_and_receive`, and both ends carry the pointer-exchange word
    // `exchange`, boxed until the test ends; `sender_copy` and `output` hold `N` floats.
    arch::launch_in(memory, 2, THREADS, smem(), || unsafe {
        let g = group();
        if arch::block_idx() == 0 {
            let mut p = Primitives::<SwMulticast, P, FanAsymmetric<0, 1>>::new(g, &[], &[send as *mut ConnInfo], STEP_BYTES, inp, copy, f32_data());
            p.exchange_direct(true);
            assert!(p.is_direct());
            for off in (0..N as i64).step_by(per_call as usize) {
                p.direct_copy_send(off, off, per_call.min(N as i64 - off));
            }
            assert!(p.outcome().is_ok());
        } else {
            let mut p = Primitives::<SwMulticast, P, FanAsymmetric<1, 0>>::new(g, &[recv as *mut ConnInfo], &[], STEP_BYTES, 0, out, f32_data());
            p.exchange_direct(receiver_mapped);
            for off in (0..N as i64).step_by(per_call as usize) {
                p.direct_recv(off, per_call.min(N as i64 - off));
            }
            assert!(p.outcome().is_ok());
        }
    });
    assert_eq!(output, input, "the receiver's output holds the data");
    assert_eq!(sender_copy, input, "the sender's own output holds its copy");
    if receiver_mapped {
        assert!(link.fifo.iter().all(|&w| w == 0), "nothing went through the FIFO");
    } else {
        assert!(link.fifo.iter().any(|&w| w != 0), "the data went through the FIFO");
    }
    assert_eq!(*exchange, 0, "the sender cleared the exchange word");
    assert_eq!((link.send.step, link.recv.step), (5, 5));
}

/// Two direct operations back to back on a connection that carries no step in them (a
/// broadcast's link into its root): the receiver finishes both at once, while the sender
/// comes late. The receiver's second address must wait for the sender to take its first,
/// not overwrite it; otherwise the sender takes one address for both and its second
/// exchange waits for one that never comes.
#[test]
fn a_direct_address_is_never_published_over_one_not_yet_taken() {
    let mut link = Link::new();
    let exchange = Box::new(0u64);
    link.send.ptr_exchange = &raw const *exchange as u64;
    link.recv.ptr_exchange = &raw const *exchange as u64;
    let receiver_done = AtomicBool::new(false);
    let (send, recv) = (&raw mut link.send as usize, &raw mut link.recv as usize);
    let outputs = [vec![0f32; 64], vec![0f32; 64]];
    let outs = outputs.each_ref().map(|o| o.as_ptr() as u64);
    // SAFETY: as in `direct_operations`; no data moves, only the addresses of `outputs`.
    arch::launch_in(None, 2, THREADS, smem(), || unsafe {
        let g = GroupCtx { spin_budget_ns: 5_000_000_000, ..group() };
        if arch::block_idx() == 0 {
            let start = Instant::now();
            while !receiver_done.load(Ordering::Acquire) && start.elapsed() < Duration::from_secs(1) {
                arch::spin_pause();
            }
            for _ in outs {
                let mut p = Primitives::<SwMulticast, P, FanAsymmetric<0, 1>>::new(g, &[], &[send as *mut ConnInfo], STEP_BYTES, 0, 0, f32_data());
                p.exchange_direct(true);
                assert!(p.outcome().is_ok(), "the sender's exchange found an address");
                drop(p);
                // The CTA barrier that ends an item in the work loop: the next operation's
                // threads read the connection this one's wrote back on drop.
                arch::barrier_sync_all();
            }
        } else {
            for out in outs {
                let mut p = Primitives::<SwMulticast, P, FanAsymmetric<1, 0>>::new(g, &[recv as *mut ConnInfo], &[], STEP_BYTES, 0, out, f32_data());
                p.exchange_direct(true);
                assert!(p.outcome().is_ok(), "the receiver published its address");
                drop(p);
                arch::barrier_sync_all();
            }
            if arch::thread_idx() == 0 {
                receiver_done.store(true, Ordering::Release);
            }
        }
    });
    assert_eq!(*exchange, 0, "the sender took every address");
}

/// The step FIFO's slots used five times over, in `memory`'s weak-memory world: every
/// element must arrive as sent (a panic otherwise).
fn fifo_round_trip(memory: &WeakMemory) -> Result<(), String> {
    send_and_receive(Some(memory), &mut Link::new(), 5 * NCCL_STEPS as usize * (STEP_BYTES / 4) as usize);
    Ok(())
}

/// Every test above, and the FIFO round trip of the controls below, in a weak-memory
/// world (`arch/weak/`): stores late and out of order, loads stale where PTX allows it;
/// every seed must pass.
#[test]
fn the_primitives_pass_in_weak_memory() {
    WeakMemory::every_seed_passes(0..3, |memory| {
        scatter_and_gather(Some(memory));
        offsets_fifo(Some(memory));
        min_polling(Some(memory));
        direct_operations(Some(memory), true);
        direct_operations(Some(memory), false);
        fifo_round_trip(memory)
    });
}

/// Negative control: without the fence before the tail store, the workers' stores of a
/// slice may reach memory after the tail that says they are there.
#[test]
fn the_step_fifo_without_the_send_fence_fails() {
    let (runs, why) = WeakMemory::first_failure(0..16, &[Site::PrimsSendFence], fifo_round_trip);
    eprintln!("the step FIFO without its send fence failed after {runs} run(s): {why}");
}

/// Negative control: with a relaxed poll of the tail, the receiver's workers may read a
/// slot's older data.
#[test]
fn the_step_fifo_with_a_relaxed_tail_poll_fails() {
    let (runs, why) = WeakMemory::first_failure(0..16, &[Site::PrimsRecvPoll], fifo_round_trip);
    eprintln!("the step FIFO with a relaxed tail poll failed after {runs} run(s): {why}");
}
