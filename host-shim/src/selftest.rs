//! The GPU self-test harness behind `ferroccl test`.
//!
//! A test is a device function in `ptx/kernels/src/selftest.rs` plus a host check here.
//! [`run`] runs every test on one GPU, prints one line per test and a final
//! `N passed, N failed` line. Kernels bound every wait, and the host waits with a timeout,
//! so a broken primitive fails its test instead of hanging the run.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};
use device_rt::selftest::{self as abi, PublishMode, atomics, report};

use crate::memory::HostMapped;
use crate::reference::{self, Case, Layout, Rng, Scale};
use crate::module::{self, Module};
use crate::{Error, stream};

/// How long one test's kernels may run before the test fails with a timeout.
const KERNEL_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a test failed.
#[derive(Debug)]
pub struct Failure(String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure(e.to_string())
    }
}

type Outcome = Result<(), Failure>;

/// Fails with `msg` unless `cond` holds.
fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Outcome {
    if cond { Ok(()) } else { Err(Failure(msg())) }
}

/// Compares `got` with `want` element by element; reports the first few differences.
fn ensure_eq_slices<T: PartialEq + fmt::Debug>(what: &str, got: &[T], want: &[T]) -> Outcome {
    ensure(got.len() == want.len(), || format!("{what}: {} values, expected {}", got.len(), want.len()))?;
    let bad: Vec<String> = (0..got.len())
        .filter(|&i| got[i] != want[i])
        .take(4)
        .map(|i| format!("[{i}] = {:?}, expected {:?}", got[i], want[i]))
        .collect();
    ensure(bad.is_empty(), || format!("{what}: {}", bad.join("; ")))
}

/// One GPU with the module loaded: what every test runs on.
pub struct Fixture {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub module: Module,
}

impl Fixture {
    /// Loads the module on device `ordinal`.
    pub fn new(ordinal: usize) -> Result<Self, Error> {
        let ctx = crate::device::context(ordinal)?;
        let stream = ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
        let module = Module::load(&ctx)?;
        Ok(Self { ctx, stream, module })
    }

    fn kernel(&self, name: &str) -> Result<CudaFunction, Error> {
        self.module.kernel(name)
    }

    fn zeros<T: DeviceRepr + cudarc::driver::ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>, Error> {
        self.stream.alloc_zeros(len).map_err(Error::cuda("cuMemAlloc"))
    }

    fn upload<T: DeviceRepr>(&self, values: &[T]) -> Result<CudaSlice<T>, Error> {
        self.stream.clone_htod(values).map_err(Error::cuda("cuMemcpyHtoD"))
    }

    fn finish(&self, what: &str) -> Result<(), Error> {
        stream::wait(&self.stream, KERNEL_TIMEOUT, what)
    }

    fn download<T: DeviceRepr + Default + Clone>(&self, buf: &CudaSlice<T>) -> Result<Vec<T>, Error> {
        self.stream.clone_dtoh(buf).map_err(Error::cuda("cuMemcpyDtoH"))
    }
}

fn cfg(blocks: u32, threads: u32, smem: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: smem }
}

/// A named device test.
pub struct SelfTest {
    pub name: &'static str,
    run: fn(&Fixture) -> Outcome,
}

/// Every self-test, in the order `ferroccl test` runs them.
pub const ALL: &[SelfTest] = &[
    SelfTest { name: "thread_ids", run: thread_ids },
    SelfTest { name: "named_barriers", run: named_barriers },
    SelfTest { name: "dynamic_smem", run: dynamic_smem },
    SelfTest { name: "message_passing_device_memory", run: message_passing_device },
    SelfTest { name: "message_passing_host_mapped", run: message_passing_host_mapped },
    SelfTest { name: "atomics", run: atomics_test },
    SelfTest { name: "warp_ops", run: warp_ops },
    SelfTest { name: "clocks", run: clocks },
    SelfTest { name: "reduce_copy_matrix", run: reduce_copy_matrix },
    SelfTest { name: "reduce_copy_fixed_shapes", run: reduce_copy_fixed_shapes },
    SelfTest { name: "block_reduce", run: block_reduce },
    SelfTest { name: "work_loop_ordering", run: work_loop_ordering },
    SelfTest { name: "work_loop_backpressure", run: work_loop_backpressure },
    SelfTest { name: "work_loop_faults", run: work_loop_faults },
    SelfTest { name: "work_loop_stream_graph", run: work_loop_stream_graph },
    SelfTest { name: "work_loop_eight_ranks", run: work_loop_eight_ranks },
];

/// The result of one test.
pub struct TestResult {
    pub name: &'static str,
    pub outcome: Outcome,
    pub elapsed: Duration,
}

/// Runs every test whose name contains `filter` (all when `None`) on `fixture`, printing
/// one line per test through `print`.
pub fn run(fixture: &Fixture, filter: Option<&str>, mut print: impl FnMut(&TestResult)) -> Vec<TestResult> {
    ALL.iter()
        .filter(|t| filter.is_none_or(|f| t.name.contains(f)))
        .map(|t| {
            let start = Instant::now();
            let outcome = (t.run)(fixture);
            let result = TestResult { name: t.name, outcome, elapsed: start.elapsed() };
            print(&result);
            result
        })
        .collect()
}

fn thread_ids(fx: &Fixture) -> Outcome {
    let (blocks, threads) = (3u32, 96u32);
    let words = (blocks * threads) as usize * abi::THREAD_ID_WORDS;
    let mut out = fx.zeros::<u32>(words)?;
    let k = fx.kernel("selftest_thread_ids")?;
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).launch(cfg(blocks, threads, 0)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_thread_ids")?;
    let want: Vec<u32> = (0..blocks)
        .flat_map(|b| (0..threads).flat_map(move |t| [b, t, threads, blocks, t % 32, t / 32]))
        .collect();
    ensure_eq_slices("ids", &fx.download(&out)?, &want)
}

fn named_barriers(fx: &Fixture) -> Outcome {
    const THREADS: u32 = 256;
    const HALF: u32 = 128;
    let mut out = fx.zeros::<u32>(THREADS as usize)?;
    let k = fx.kernel("selftest_named_barriers")?;
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).launch(cfg(1, THREADS, THREADS * 4)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_named_barriers")?;
    let ring_sum = |tid: u32| {
        let base = tid / HALF * HALF;
        let neighbour = base + (tid - base + 1) % HALF;
        (0..abi::NAMED_BARRIER_ROUNDS[(tid / HALF) as usize])
            .fold(0u32, |s, r| s.wrapping_add(abi::barrier_word(neighbour, r)))
    };
    let want: Vec<u32> = (0..THREADS)
        .map(|tid| if tid < 64 { ring_sum(tid).wrapping_add(ring_sum(63 - tid)) } else { ring_sum(tid) })
        .collect();
    ensure_eq_slices("sums", &fx.download(&out)?, &want)
}

fn dynamic_smem(fx: &Fixture) -> Outcome {
    const SMEM: u32 = 100 * 1024;
    let mut out = fx.zeros::<u32>(3)?;
    let k = fx.kernel("selftest_dynamic_smem")?;
    module::allow_dynamic_smem(&k, SMEM)?;
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).launch(cfg(1, 256, SMEM)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_dynamic_smem")?;
    let got = fx.download(&out)?;
    ensure_eq_slices("[size, mismatches, base % 16]", &got, &[SMEM, 0, 0])
}

/// Words and rounds of the message-passing tests.
const MESSAGE_WORDS: u32 = 64 * 1024;
const DEVICE_ROUNDS: u32 = 200;
const HOST_MAPPED_ROUNDS: u32 = 20;

/// Runs `selftest_message_passing` in every mode over `data`/`flags` (device addresses,
/// which `reset` zeroes before each mode) and checks the report.
fn message_passing(
    fx: &Fixture,
    data: u64,
    flags: u64,
    rounds: u32,
    mut reset: impl FnMut() -> Result<(), Error>,
) -> Outcome {
    let k = fx.kernel("selftest_message_passing")?;
    for mode in PublishMode::ALL {
        reset()?;
        let mut rep = fx.zeros::<u32>(report::WORDS)?;
        let mode_arg = mode as u32;
        unsafe {
            fx.stream
                .launch_builder(&k)
                .arg(&data)
                .arg(&flags)
                .arg(&mut rep)
                .arg(&MESSAGE_WORDS)
                .arg(&rounds)
                .arg(&mode_arg)
                .launch(cfg(2, 256, 16))
        }
        .map_err(Error::cuda("cuLaunchKernel"))?;
        fx.finish("selftest_message_passing")?;
        let got = fx.download(&rep)?;
        let mut want = [0u32; report::WORDS];
        want[report::ROUNDS_SEEN] = rounds;
        ensure_eq_slices(&format!("{mode:?} [mismatches, timed out, rounds, bad mode]"), &got, &want)?;
    }
    Ok(())
}

fn message_passing_device(fx: &Fixture) -> Outcome {
    let mut data = fx.zeros::<u32>(MESSAGE_WORDS as usize)?;
    let mut flags = fx.zeros::<u64>(2)?;
    let (data_ptr, flags_ptr) = (device_ptr(fx, &data), device_ptr(fx, &flags));
    let stream = fx.stream.clone();
    message_passing(fx, data_ptr, flags_ptr, DEVICE_ROUNDS, || {
        stream.memset_zeros(&mut data).map_err(Error::cuda("cuMemsetD8"))?;
        stream.memset_zeros(&mut flags).map_err(Error::cuda("cuMemsetD8"))
    })
}

fn message_passing_host_mapped(fx: &Fixture) -> Outcome {
    let data = HostMapped::<u32>::zeroed(&fx.ctx, MESSAGE_WORDS as usize)?;
    let mut flags = HostMapped::<u64>::zeroed(&fx.ctx, 2)?;
    let (data_ptr, flags_ptr) = (data.device_ptr(), flags.device_ptr());
    message_passing(fx, data_ptr, flags_ptr, HOST_MAPPED_ROUNDS, || {
        flags.write(0, 0);
        flags.write(1, 0);
        Ok(())
    })
}

fn device_ptr<T>(fx: &Fixture, buf: &CudaSlice<T>) -> u64 {
    use cudarc::driver::DevicePtr;
    let (ptr, _sync) = buf.device_ptr(&fx.stream);
    ptr
}

fn atomics_test(fx: &Fixture) -> Outcome {
    let (blocks, threads) = (8u32, 256u32);
    let n = (blocks * threads) as u64;
    let init = atomics::initial();
    let mut c64 = fx.upload(&init)?;
    let mut c32 = fx.upload(&init.map(|v| v as u32))?;
    let mut exch64 = fx.zeros::<u64>(n as usize)?;
    let mut exch32 = fx.zeros::<u32>(n as usize)?;
    let k = fx.kernel("selftest_atomics")?;
    unsafe {
        fx.stream
            .launch_builder(&k)
            .arg(&mut c64)
            .arg(&mut c32)
            .arg(&mut exch64)
            .arg(&mut exch32)
            .launch(cfg(blocks, threads, 0))
    }
    .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_atomics")?;
    let mut want = [0u64; atomics::SLOTS];
    want[atomics::ADD_GPU] = n;
    want[atomics::ADD_SYS] = n * (n - 1) / 2;
    want[atomics::MAX] = n - 1;
    want[atomics::MIN] = atomics::MIN_OFFSET;
    want[atomics::CAS] = n;
    want[atomics::ADD_ACQ_REL] = 2 * n;
    let check = |width: &str, got: Vec<u64>, log: Vec<u64>| -> Outcome {
        let mut want = want;
        want[atomics::EXCH] = got[atomics::EXCH];
        ensure_eq_slices(&format!("u{width} counters"), &got, &want)?;
        // Every exchange returned what the previous one stored: the old values plus the
        // final value are the initial value and every thread index, each exactly once.
        let mut seen: BTreeMap<u64, u32> = BTreeMap::new();
        for v in log.into_iter().chain([got[atomics::EXCH]]) {
            *seen.entry(v).or_default() += 1;
        }
        let expected: BTreeMap<u64, u32> = (0..n).chain([atomics::EXCH_INITIAL]).map(|v| (v, 1)).collect();
        ensure(seen == expected, || format!("u{width} exchange chain is not a permutation of the thread indices"))
    };
    check("64", fx.download(&c64)?, fx.download(&exch64)?)?;
    let widen = |v: Vec<u32>| v.into_iter().map(u64::from).collect::<Vec<_>>();
    check("32", widen(fx.download(&c32)?), widen(fx.download(&exch32)?))
}

fn warp_ops(fx: &Fixture) -> Outcome {
    const THREADS: u32 = 64;
    let mut out = fx.zeros::<u32>(THREADS as usize * abi::WARP_OP_WORDS)?;
    let k = fx.kernel("selftest_warp_ops")?;
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).launch(cfg(1, THREADS, 0)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_warp_ops")?;
    let want: Vec<u32> = (0..THREADS)
        .flat_map(|t| {
            let lane = t % 32;
            [0xAAAA_AAAA, (31 - lane) * 3, lane ^ 1, 1, 1]
        })
        .collect();
    ensure_eq_slices("[ballot, shfl_idx, shfl_xor, all, any]", &fx.download(&out)?, &want)
}

fn clocks(fx: &Fixture) -> Outcome {
    const SLEEP_NS: u64 = 1_000_000;
    let mut out = fx.zeros::<u64>(4)?;
    let k = fx.kernel("selftest_clocks")?;
    unsafe { fx.stream.launch_builder(&k).arg(&mut out).arg(&SLEEP_NS).launch(cfg(1, 1, 0)) }
        .map_err(Error::cuda("cuLaunchKernel"))?;
    fx.finish("selftest_clocks")?;
    let v = fx.download(&out)?;
    let (c0, c1, t0, t1) = (v[0], v[1], v[2], v[3]);
    ensure(c1 > c0, || format!("clock64 did not advance: {c0} then {c1}"))?;
    let slept = t1.wrapping_sub(t0);
    ensure((SLEEP_NS..1_000_000_000).contains(&slept), || {
        format!("globaltimer advanced {slept} ns over a sleep of at least {SLEEP_NS} ns")
    })
}

/// Launch shapes the reduce_copy matrix cycles through: (CTAs, threads per CTA).
const REDUCE_COPY_SHAPES: [(u32, u32); 5] = [(1, 32), (3, 64), (16, 256), (132, 512), (7, 96)];

/// Runs every case of the reduce_copy matrix on the GPU and compares each output, bit for
/// bit, with the host reference.
fn reduce_copy_matrix(fx: &Fixture) -> Outcome {
    let cases = reference::matrix(Scale::Gpu, 0x5EED);
    let layouts: Vec<Layout> = cases.iter().map(Layout::new).collect();
    let arena_bytes = layouts.iter().map(|l| l.bytes).max().unwrap_or(0);
    let mut arena = fx.zeros::<u8>(arena_bytes)?;
    let base = device_ptr(fx, &arena);
    let mut host = vec![0u8; arena_bytes];
    let mut rng = Rng::new(0xC0FFEE);
    for (k, (case, layout)) in cases.iter().zip(&layouts).enumerate() {
        let inputs = layout.fill(case, &mut host[..layout.bytes], base, &mut rng);
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let want = reference::expected(case, &refs);
        fx.stream
            .memcpy_htod(&host[..layout.bytes], &mut arena.slice_mut(..layout.bytes))
            .map_err(Error::cuda("cuMemcpyHtoD"))?;
        let kernel = fx.kernel(&format!("reduce_copy_{}", case.dtype.short_name()))?;
        let (blocks, threads) = REDUCE_COPY_SHAPES[k % REDUCE_COPY_SHAPES.len()];
        let args = base + layout.args as u64;
        unsafe { fx.stream.launch_builder(&kernel).arg(&args).launch(cfg(blocks, threads, 0)) }
            .map_err(Error::cuda("cuLaunchKernel"))?;
        fx.finish("reduce_copy")?;
        let (begin, end) = layout.output_region;
        let region = fx.stream.clone_dtoh(&arena.slice(begin..end)).map_err(Error::cuda("cuMemcpyDtoH"))?;
        layout.check(case, &region, &want).map_err(Failure)?;
    }
    println!("  {} reduce_copy cases", cases.len());
    Ok(())
}

/// The fixed-shape Sum kernels the hot path uses: (kernel suffix, sources, destinations).
pub const FIXED_SHAPES: [(usize, usize); 4] = [(1, 1), (2, 1), (2, 2), (8, 1)];

/// Runs the fixed-shape kernels (`reduce_copy_sum_<dtype>_s<S>d<D>`) over odd sizes and
/// misalignments and compares with the host reference.
fn reduce_copy_fixed_shapes(fx: &Fixture) -> Outcome {
    use device_rt::dtype::DataType;
    use device_rt::redop::RedOpKind;
    let mut rng = Rng::new(0xF1);
    let mut arena = fx.zeros::<u8>(64 << 20)?;
    let base = device_ptr(fx, &arena);
    let mut count = 0;
    for dtype in [DataType::F32, DataType::Bf16] {
        for (nsrcs, ndsts) in FIXED_SHAPES {
            let kernel = fx.kernel(&format!("reduce_copy_sum_{}_s{nsrcs}d{ndsts}", dtype.short_name()))?;
            for (k, n) in [0usize, 1, 2, 33, 1000, 4099, 65537, (1 << 20) + 13].into_iter().enumerate() {
                let mut case = Case::new(dtype, RedOpKind::Sum, n, nsrcs, ndsts);
                if k % 2 == 1 {
                    case.src_misalign = (0..nsrcs).map(|_| rng.below(16 / dtype.size()) * dtype.size()).collect();
                    case.dst_misalign = (0..ndsts).map(|_| rng.below(16 / dtype.size()) * dtype.size()).collect();
                }
                let layout = Layout::new(&case);
                let mut host = vec![0u8; layout.bytes];
                let inputs = layout.fill(&case, &mut host, base, &mut rng);
                let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
                let want = reference::expected(&case, &refs);
                fx.stream.memcpy_htod(&host, &mut arena.slice_mut(..layout.bytes)).map_err(Error::cuda("cuMemcpyHtoD"))?;
                let (blocks, threads) = REDUCE_COPY_SHAPES[k % REDUCE_COPY_SHAPES.len()];
                let args = base + layout.args as u64;
                unsafe { fx.stream.launch_builder(&kernel).arg(&args).launch(cfg(blocks, threads, 0)) }
                    .map_err(Error::cuda("cuLaunchKernel"))?;
                fx.finish("reduce_copy fixed shape")?;
                let (begin, end) = layout.output_region;
                let region = fx.stream.clone_dtoh(&arena.slice(begin..end)).map_err(Error::cuda("cuMemcpyDtoH"))?;
                layout.check(&case, &region, &want).map_err(Failure)?;
                count += 1;
            }
        }
    }
    println!("  {count} fixed-shape cases");
    Ok(())
}

/// Reduces every type with Sum, Min and Max across CTAs of 256 threads and compares with
/// the host reference (inputs in {-1, 0, 1} for floats, so any order is exact).
fn block_reduce(fx: &Fixture) -> Outcome {
    use device_rt::dtype::DataType;
    use device_rt::redop::RedOpKind;
    const BLOCKS: usize = 4;
    const THREADS: usize = 256;
    let mut rng = Rng::new(0xB10C);
    for dtype in DataType::ALL {
        let elt = dtype.size();
        let values = if dtype.is_float() {
            reference::small_elements(dtype, BLOCKS * THREADS, &mut rng)
        } else {
            reference::random_elements(dtype, BLOCKS * THREADS, &mut rng)
        };
        let input = fx.upload(&values)?;
        let kernel = fx.kernel(&format!("block_reduce_{}", dtype.short_name()))?;
        for op in [RedOpKind::Sum, RedOpKind::Min, RedOpKind::Max] {
            let mut out = fx.zeros::<u8>(BLOCKS * elt)?;
            let op_arg = op as u32;
            unsafe {
                fx.stream.launch_builder(&kernel).arg(&input).arg(&mut out).arg(&op_arg).launch(cfg(
                    BLOCKS as u32,
                    THREADS as u32,
                    (THREADS / 32 * 8) as u32,
                ))
            }
            .map_err(Error::cuda("cuLaunchKernel"))?;
            fx.finish("block_reduce")?;
            let got = fx.download(&out)?;
            for b in 0..BLOCKS {
                let block = &values[b * THREADS * elt..(b + 1) * THREADS * elt];
                let inputs: Vec<&[u8]> = block.chunks_exact(elt).collect();
                let case = Case::new(dtype, op, 1, THREADS, 1);
                let want = reference::expected(&case, &inputs);
                ensure(got[b * elt..(b + 1) * elt] == want[..], || {
                    format!("{} {} block {b}: {:02x?}, expected {:02x?}", dtype.name(), op.name(), &got[b * elt..(b + 1) * elt], want)
                })?;
            }
        }
    }
    Ok(())
}

/// Long enough for anything the work-loop tests wait for.
const LOOP_WAIT: Duration = Duration::from_secs(20);

fn loop_config(channels: u32, capacity: u32, spin_budget: Duration) -> crate::work::LoopConfig {
    crate::work::LoopConfig { channels, threads: 256, capacity, spin_budget }
}

/// Thousands of items through the direct path, with barriers between channels: each
/// round sums, then shifts data across channel boundaries; the result is checked against
/// the same rounds on the host.
fn work_loop_ordering(fx: &Fixture) -> Outcome {
    use device_rt::dtype::DataType;
    use device_rt::work::{DeviceFunction, WorkItem};
    const N: usize = 100_000;
    const SHIFT: usize = 77;
    const ROUNDS: usize = 500;
    let initial: Vec<u32> = (0..N as u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let a = fx.upload(&initial)?;
    let b = fx.zeros::<u32>(N)?;
    let ones = fx.upload(&vec![1u32; N])?;
    let counter = fx.zeros::<u64>(1)?;
    fx.finish("uploads")?;
    let (pa, pb, p1, pc) = (device_ptr(fx, &a), device_ptr(fx, &b), device_ptr(fx, &ones), device_ptr(fx, &counter));
    let mut lp = crate::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(4, 16, LOOP_WAIT))?;
    let mut last = None;
    for _ in 0..ROUNDS {
        lp.enqueue(WorkItem::sum(DataType::U32, pa, p1, pb, N as u64), LOOP_WAIT)?;
        lp.enqueue(WorkItem::barrier(), LOOP_WAIT)?;
        lp.enqueue(WorkItem::copy(DataType::U32, pb + 4 * SHIFT as u64, pa, (N - SHIFT) as u64), LOOP_WAIT)?;
        lp.enqueue(WorkItem::barrier(), LOOP_WAIT)?;
        last = Some(lp.enqueue(WorkItem::call(DeviceFunction::Increment, pc, 0), LOOP_WAIT)?);
    }
    if let Some(t) = last {
        lp.wait(t, LOOP_WAIT)?;
    }
    lp.shutdown(LOOP_WAIT)?;
    let mut want = initial;
    for _ in 0..ROUNDS {
        let bb: Vec<u32> = want.iter().map(|x| x.wrapping_add(1)).collect();
        want[..N - SHIFT].copy_from_slice(&bb[SHIFT..]);
    }
    ensure_eq_slices("a after the rounds", &fx.download(&a)?, &want)?;
    ensure_eq_slices("increments", &fx.download(&counter)?, &[ROUNDS as u64])?;
    println!("  {} items in order over 4 channels", ROUNDS * 5 + 1);
    Ok(())
}

/// A full queue blocks the producer (and overwrites nothing) until the loop frees a slot.
fn work_loop_backpressure(fx: &Fixture) -> Outcome {
    use device_rt::work::{DeviceFunction, WorkItem};
    let mut flag = HostMapped::<u64>::zeroed(&fx.ctx, 1)?;
    let counter = fx.zeros::<u64>(1)?;
    fx.finish("uploads")?;
    let pc = device_ptr(fx, &counter);
    let mut lp = crate::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(2, 4, LOOP_WAIT))?;
    lp.enqueue(WorkItem::call(DeviceFunction::WaitAtLeast, flag.device_ptr(), 1), LOOP_WAIT)?;
    for _ in 0..3 {
        lp.enqueue(WorkItem::call(DeviceFunction::Increment, pc, 0), LOOP_WAIT)?;
    }
    let blocked = lp.enqueue(WorkItem::call(DeviceFunction::Increment, pc, 0), Duration::from_millis(100));
    ensure(matches!(blocked, Err(Error::Timeout { .. })), || format!("a full queue accepted an item: {blocked:?}"))?;
    ensure_eq_slices("increments while blocked", &fx.download(&counter)?, &[0u64])?;
    flag.write(0, 1);
    let t = lp.enqueue(WorkItem::call(DeviceFunction::Increment, pc, 0), LOOP_WAIT)?;
    lp.wait(t, LOOP_WAIT)?;
    lp.shutdown(LOOP_WAIT)?;
    ensure_eq_slices("increments", &fx.download(&counter)?, &[4u64])
}

/// Bad items (refused by the host, or by the device from a corrupted slot), abort while a
/// channel spins, a spin budget running out, and shutdown with work outstanding: each an
/// `Err`, none a hang.
fn work_loop_faults(fx: &Fixture) -> Outcome {
    use device_rt::work::{BadItem, DeviceFunction, WaitSite, WorkItem};
    let flag = HostMapped::<u64>::zeroed(&fx.ctx, 1)?;
    let wait_forever = WorkItem::call(DeviceFunction::WaitAtLeast, flag.device_ptr(), 1);
    let launch = |budget| crate::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(2, 8, budget));

    let mut lp = launch(LOOP_WAIT)?;
    let refused = lp.enqueue(WorkItem { kind: 99, ..WorkItem::noop() }, LOOP_WAIT);
    ensure(matches!(refused, Err(Error::BadWorkItem { reason: BadItem::UnknownKind, seq: 0 })), || format!("host refusal: {refused:?}"))?;
    lp.queue_mut().publish_unchecked(WorkItem { seq: 1, ..WorkItem::call(DeviceFunction::Increment, 0, 0) });
    let device = lp.wait(crate::queue::Ticket(1), LOOP_WAIT);
    ensure(matches!(device, Err(Error::BadWorkItem { reason: BadItem::NullPointer, seq: 1 })), || format!("device refusal: {device:?}"))?;
    lp.shutdown(LOOP_WAIT).or_else(|e| if matches!(e, Error::BadWorkItem { .. }) { Ok(()) } else { Err(e) })?;

    let mut lp = launch(Duration::from_secs(3600))?;
    let t = lp.enqueue(wait_forever, LOOP_WAIT)?;
    let abort = lp.abort_handle();
    let aborter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        abort.abort();
    });
    let aborted = lp.wait(t, LOOP_WAIT);
    aborter.join().map_err(|_| Failure("the aborting thread panicked".into()))?;
    ensure(matches!(aborted, Err(Error::Aborted)), || format!("abort: {aborted:?}"))?;
    stream::wait(&lp_stream(&lp), LOOP_WAIT, "the aborted loop")?;

    let mut lp = launch(Duration::from_millis(200))?;
    let t = lp.enqueue(wait_forever, LOOP_WAIT)?;
    let timed_out = lp.wait(t, LOOP_WAIT);
    ensure(matches!(timed_out, Err(Error::DeviceTimeout { site: Some(WaitSite::Flag), seq: 1 })), || format!("budget: {timed_out:?}"))?;

    let mut lp = launch(LOOP_WAIT)?;
    lp.enqueue(wait_forever, LOOP_WAIT)?;
    lp.enqueue(WorkItem::noop(), LOOP_WAIT)?;
    let incomplete = lp.shutdown(Duration::from_millis(200));
    ensure(matches!(incomplete, Err(Error::ShutdownIncomplete { outstanding: 3 })), || format!("shutdown: {incomplete:?}"))
}

fn lp_stream(lp: &crate::work::WorkLoop) -> Arc<CudaStream> {
    lp.stream().clone()
}

/// The stream-ordered path: work before it on the user's stream runs first, work after
/// it waits; captured in a CUDA graph and replayed, every replay runs every item.
fn work_loop_stream_graph(fx: &Fixture) -> Outcome {
    use cudarc::driver::sys;
    use device_rt::dtype::DataType;
    use device_rt::work::{DeviceFunction, WorkItem};
    const N: usize = 1 << 20;
    const ITEMS: u64 = 10;
    const REPLAYS: u64 = 5;
    let user = fx.ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
    let src = user.alloc_zeros::<u32>(N).map_err(Error::cuda("cuMemAlloc"))?;
    let dst = user.alloc_zeros::<u32>(N).map_err(Error::cuda("cuMemAlloc"))?;
    let counter = user.alloc_zeros::<u64>(1).map_err(Error::cuda("cuMemAlloc"))?;
    stream::wait(&user, LOOP_WAIT, "allocations")?;
    let mut lp = crate::work::WorkLoop::launch(&fx.ctx, &fx.module, loop_config(4, 64, LOOP_WAIT))?;
    let (ps, pd, pc) = (src.device_ptr(&user).0, dst.device_ptr(&user).0, counter.device_ptr(&user).0);
    // Ordering: a memset on the user stream, then the loop copies, then a copy back.
    unsafe { sys::cuMemsetD32Async(ps, 0xC0FFEE, N, user.cu_stream()) }.result().map_err(Error::cuda("cuMemsetD32Async"))?;
    lp.enqueue_on_stream(&user, WorkItem::copy(DataType::U32, ps, pd, N as u64))?;
    let got = user.clone_dtoh(&dst).map_err(Error::cuda("cuMemcpyDtoH"))?;
    ensure(got.iter().all(|&v| v == 0xC0FFEE), || "the loop's copy did not see the memset queued before it".into())?;
    // Capture ITEMS increments, replay the graph REPLAYS times.
    user.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(Error::cuda("cuStreamBeginCapture"))?;
    for _ in 0..ITEMS {
        lp.enqueue_on_stream(&user, WorkItem::call(DeviceFunction::Increment, pc, 0))?;
    }
    let graph = user
        .end_capture(sys::CUgraphInstantiate_flags(0))
        .map_err(Error::cuda("cuStreamEndCapture"))?
        .ok_or_else(|| Failure("the capture produced no graph".into()))?;
    for _ in 0..REPLAYS {
        graph.launch().map_err(Error::cuda("cuGraphLaunch"))?;
    }
    stream::wait(&user, LOOP_WAIT, "graph replays")?;
    let count = user.clone_dtoh(&counter).map_err(Error::cuda("cuMemcpyDtoH"))?;
    ensure_eq_slices("increments after replays", &count, &[ITEMS * REPLAYS])?;
    if let Some(e) = lp.async_error() {
        return Err(Failure(format!("loop error: {e}")));
    }
    lp.shutdown(LOOP_WAIT)?;
    Ok(())
}

/// Eight ranks' loops on one GPU, each on its own stream, all co-resident: items
/// enqueued to all of them in turn complete, with correct results.
fn work_loop_eight_ranks(fx: &Fixture) -> Outcome {
    use device_rt::dtype::DataType;
    use device_rt::work::WorkItem;
    const RANKS: usize = 8;
    const N: usize = 1 << 16;
    const ROUNDS: u32 = 200;
    // Every allocation first: CUDA may make an allocation wait for running kernels.
    let mut loops = (0..RANKS)
        .map(|_| crate::work::WorkLoop::new(&fx.ctx, &fx.module, loop_config(2, 32, LOOP_WAIT)))
        .collect::<Result<Vec<_>, Error>>()?;
    let bufs = (0..RANKS).map(|r| fx.upload(&vec![r as u32; N])).collect::<Result<Vec<_>, Error>>()?;
    let ones = fx.upload(&vec![1u32; N])?;
    fx.finish("uploads")?;
    for lp in loops.iter_mut() {
        lp.start()?;
    }
    let mut tickets = Vec::new();
    for _ in 0..ROUNDS {
        tickets.clear();
        for (lp, buf) in loops.iter_mut().zip(&bufs) {
            let p = device_ptr(fx, buf);
            tickets.push(lp.enqueue(WorkItem::sum(DataType::U32, p, device_ptr(fx, &ones), p, N as u64), LOOP_WAIT)?);
        }
    }
    for (lp, t) in loops.iter().zip(&tickets) {
        lp.wait(*t, LOOP_WAIT)?;
    }
    for lp in loops.iter_mut() {
        lp.shutdown(LOOP_WAIT)?;
    }
    for (r, buf) in bufs.iter().enumerate() {
        let got = fx.download(buf)?;
        ensure(got.iter().all(|&v| v == r as u32 + ROUNDS), || format!("rank {r}: {:?}…", &got[..4]))?;
    }
    println!("  {RANKS} loops × {ROUNDS} items");
    Ok(())
}
