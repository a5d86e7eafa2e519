//! The GPU self-test harness behind `ferroccl test`.
//!
//! A test is a device function in `ptx/kernels/src/selftest.rs` plus a host check here.
//! [`run`] runs every test on one GPU, prints one line per test and a final
//! `N passed, N failed` line. Kernels bound every wait, and the host waits with a timeout,
//! so a broken primitive fails its test instead of hanging the run.

mod arch;
mod copy;
mod matmul;
mod multicast;
mod work;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig};

use host_shim::module::Module;
use host_shim::{Error, stream};

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
    /// The negative control (`ferroccl test --remove-fence`): the message-passing tests
    /// publish with no fence ([`device_rt::selftest::PublishMode::Unfenced`]) over many
    /// launches and fail where the GPU showed the consumer stale data.
    pub fence_removed: bool,
}

impl Fixture {
    /// Loads the module on device `ordinal`.
    pub fn new(ordinal: usize) -> Result<Self, Error> {
        let ctx = host_shim::device::context(ordinal)?;
        let stream = ctx.new_stream().map_err(Error::cuda("cuStreamCreate"))?;
        let module = Module::load(&ctx)?;
        Ok(Self { ctx, stream, module, fence_removed: false })
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
    SelfTest { name: "thread_ids", run: arch::thread_ids },
    SelfTest { name: "named_barriers", run: arch::named_barriers },
    SelfTest { name: "dynamic_smem", run: arch::dynamic_smem },
    SelfTest { name: "message_passing_device_memory", run: arch::message_passing_device },
    SelfTest { name: "message_passing_host_mapped", run: arch::message_passing_host_mapped },
    SelfTest { name: "atomics", run: arch::atomics_test },
    SelfTest { name: "warp_ops", run: arch::warp_ops },
    SelfTest { name: "clocks", run: arch::clocks },
    SelfTest { name: "multicast_granularity", run: multicast::multicast_granularity },
    SelfTest { name: "hardware_nvls_plan", run: multicast::hardware_nvls_plan },
    SelfTest { name: "reduce_copy_matrix", run: copy::reduce_copy_matrix },
    SelfTest { name: "reduce_copy_fixed_shapes", run: copy::reduce_copy_fixed_shapes },
    SelfTest { name: "block_reduce", run: copy::block_reduce },
    SelfTest { name: "work_loop_ordering", run: work::work_loop_ordering },
    SelfTest { name: "work_loop_backpressure", run: work::work_loop_backpressure },
    SelfTest { name: "work_loop_faults", run: work::work_loop_faults },
    SelfTest { name: "work_loop_stream_graph", run: work::work_loop_stream_graph },
    SelfTest { name: "work_loop_stream_ring_route", run: work::work_loop_stream_ring_route },
    SelfTest { name: "work_loop_eight_ranks", run: work::work_loop_eight_ranks },
    SelfTest { name: "comm_graph_replays", run: work::comm_graph_replays },
    SelfTest { name: "device_alloc_zeroed", run: work::device_alloc_zeroed },
    SelfTest { name: "buffer_info_says_what_peers_may_write", run: work::buffer_info_says_what_peers_may_write },
    SelfTest { name: "comm_on_heap_zero_copy", run: work::comm_on_heap_zero_copy },
    SelfTest { name: "comm_drop_frees_memory_promptly", run: work::comm_drop_frees_memory_promptly },
    SelfTest { name: "comm_refuses_buffers_past_their_allocation", run: work::comm_refuses_buffers_past_their_allocation },
    SelfTest { name: "comm_init_rank_on_threads", run: work::comm_init_rank_on_threads },
    SelfTest { name: "comm_matmul", run: matmul::comm_matmul },
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

/// The device address of `buf` (for kernel arguments and work items).
fn device_ptr<T>(fx: &Fixture, buf: &CudaSlice<T>) -> u64 {
    use cudarc::driver::DevicePtr;
    let (ptr, _sync) = buf.device_ptr(&fx.stream);
    ptr
}
