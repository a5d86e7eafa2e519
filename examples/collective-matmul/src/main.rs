//! `ferroccl-matmul`: the collective matmuls of a tensor-parallel MLP on a communicator
//! (`Comm::matmul`, `docs/matmul.md`) on GPUs: `AllGather(A) × B` (one
//! way or both ways round the ring) or `ReduceScatter(A × B)`, every rank's result checked
//! at sampled entries against an f64 sum of the data, then timed.
//!
//! Started by `ferroccl run -n N ferroccl-matmul …` (or any launcher
//! `host_shim::bootstrap::PeEnv` reads), this process is one rank of N on the device the
//! launcher gives it: one process per GPU. Otherwise `--pes N` runs N ranks in this
//! process (rank `i` on device `i mod` the device count). The copy lanes use the copy
//! engines, or with `--sm-copies N` a kernel of N CTAs. `--gemm-alone` also times one
//! GEMM of the gathered shape on one rank alone (no communication: the floor). Prints one
//! JSON object per local rank.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits, sys};
use half::{bf16, f16};
use host_shim::bootstrap::{Bootstrap, PeEnv};
use host_shim::device;
use host_shim::comm::{Comm, CommConfig, CommId, CommMatmul, Element};
use host_shim::device_rt::matmul::{Collective, Shape};
use host_shim::matmul::{self, RingMatmul};
use host_shim::shmem::Heap;
use serde_json::json;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Which {
    /// `C = AllGather(A) × B`, one way round the ring.
    AllGather,
    /// `C = AllGather(A) × B`, half of each shard each way.
    AllGatherBoth,
    /// `C = ReduceScatter(A × B)`.
    ReduceScatter,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Dtype {
    F16,
    Bf16,
}

#[derive(Parser, Debug)]
#[command(about = "Collective matmuls (all-gather × matmul, matmul × reduce-scatter) on a ferroccl communicator, checked and timed")]
struct Args {
    #[arg(long, value_enum, default_value_t = Which::AllGather)]
    collective: Which,
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
    /// Rows of a shard (all-gather) or of an output block (reduce-scatter).
    #[arg(short, default_value_t = 1024)]
    m: u64,
    /// The inner dimension.
    #[arg(short, default_value_t = 4096)]
    k: u64,
    /// Columns of B and C.
    #[arg(short, default_value_t = 4096)]
    n: u64,
    /// Timed calls.
    #[arg(long, default_value_t = 20)]
    iters: u32,
    /// Untimed calls first: before the results are checked, and again, not waited for,
    /// before the clock starts.
    #[arg(long, default_value_t = 5)]
    warmup: u32,
    /// Ranks in this process, when no launcher started it.
    #[arg(long, default_value_t = 2)]
    pes: usize,
    /// Copies by a kernel of this many CTAs instead of the copy engines.
    #[arg(long)]
    sm_copies: Option<u32>,
    /// The reduce-scatter's pieces a block is computed and sent in (1 to m); by default
    /// two from 1024 rows, else one.
    #[arg(long)]
    pieces: Option<u32>,
    /// Also time one GEMM of the gathered shape alone.
    #[arg(long)]
    gemm_alone: bool,
    /// Dense f16/bf16 tensor-core peak of one GPU in TFLOP/s, for `tc_util` (H100 and H200
    /// SXM: 989.4).
    #[arg(long, default_value_t = 989.4)]
    peak_tflops: f64,
}

/// What the example's steps return.
type Outcome<T> = Result<T, Box<dyn Error>>;

/// Entries of `C` checked per rank.
const SAMPLES: u64 = 256;
/// How long a wait of the GEMM alone's one-rank ring may spin.
const SPIN_BUDGET: Duration = Duration::from_secs(20);
/// How long the ranks of several processes wait for each other at a host call.
const BOOTSTRAP_BUDGET: Duration = Duration::from_secs(120);

/// An element type of the example.
trait Elem: Element + DeviceRepr + ValidAsZeroBits + Copy + Send + Sync + 'static {
    fn from_f32(v: f32) -> Self;
    fn to_f64(self) -> f64;
    /// The type's unit roundoff.
    const EPS: f64;
}

macro_rules! elem {
    ($t:ty, $eps:expr) => {
        impl Elem for $t {
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            fn to_f64(self) -> f64 {
                f64::from(self.to_f32())
            }
            const EPS: f64 = $eps;
        }
    };
}

elem!(f16, 1.0 / 2048.0);
elem!(bf16, 1.0 / 256.0);

/// Element `i` of matrix `which` (0 `A`, 1 `B`) of rank `rank`: normally distributed
/// (mean 0, deviation 1; Box-Muller from a hash, so any process can make any rank's data).
/// The GEMMs' speed depends on the data (on an H100 cuBLASLt's GEMMs of the seed's shapes
/// ran 10 to 13 % faster on eighths from -1 to 1 than on normal data): the seed's figures
/// and the baselines' `torch.randn` are normal.
fn value<T: Elem>(rank: u32, which: u64, i: u64) -> T {
    let mut x = (u64::from(rank) << 40 ^ which << 36 ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 32;
    let unit = |bits: u64| (bits as f64 + 0.5) / 4_294_967_296.0;
    let (u1, u2) = (unit(x >> 32), unit(x & 0xffff_ffff));
    T::from_f32(((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32)
}

fn main() -> Result<(), Box<dyn Error>> {
    env_logger::Builder::from_env(env_logger::Env::new().filter_or("FERROCCL_LOG", "warn")).init();
    let args = Args::parse();
    match args.dtype {
        Dtype::F16 => run::<f16>(&args),
        Dtype::Bf16 => run::<bf16>(&args),
    }
}

fn collective(args: &Args) -> Collective {
    match args.collective {
        Which::AllGather => Collective::AllGatherMatmul { bidirectional: false },
        Which::AllGatherBoth => Collective::AllGatherMatmul { bidirectional: true },
        Which::ReduceScatter => args.pieces.map_or(Collective::matmul_reduce_scatter(args.m), |pieces| Collective::MatmulReduceScatter { pieces }),
    }
}

/// This process's ranks of a communicator: one rank per process when a launcher started
/// it (its PEs; rank 0 makes the id the ranks meet at and hands it out through the
/// launcher's bootstrap), else `--pes` ranks of one communicator made here.
fn ranks(args: &Args) -> Outcome<Vec<Comm>> {
    Ok(match PeEnv::from_env()? {
        Some(env) => {
            let stream = device::context(env.device)?.new_stream()?;
            let mut bootstrap = Bootstrap::join_env(&env, BOOTSTRAP_BUDGET)?;
            let mine = if env.pe == 0 { CommId::new()?.as_bytes().to_vec() } else { Vec::new() };
            let parts = bootstrap.all_gather("the communicator's id", &mine, &[])?;
            let id = CommId::from_bytes(parts.first().map_or(&[][..], |p| p.bytes.as_slice()))?;
            vec![Comm::init_rank(&id, env.n_pes, env.pe, stream, CommConfig::from_env()?)?]
        }
        None => {
            let count = device::list()?.len();
            if args.pes == 0 || count == 0 {
                return Err(format!("--pes {}: at least one rank, and a device ({count} here)", args.pes).into());
            }
            let streams = (0..args.pes).map(|pe| Ok(device::context(pe % count)?.new_stream()?)).collect::<Result<Vec<_>, Box<dyn Error>>>()?;
            Comm::from_devices(streams)?
        }
    })
}

fn run<T: Elem>(args: &Args) -> Result<(), Box<dyn Error>> {
    if args.pieces.is_some() && !matches!(args.collective, Which::ReduceScatter) {
        return Err("--pieces is the reduce-scatter's: the all-gathers run one piece a shard".into());
    }
    let collective = collective(args);
    // The floor first, before any communicator's loop runs on the device.
    let nranks_here = PeEnv::from_env()?.map_or(args.pes, |e| e.n_pes) as u32;
    let alone = if args.gemm_alone { Some(gemm_alone::<T>(args, nranks_here)?) } else { None };
    let comms = ranks(args)?;
    let nranks = comms[0].world_size() as u32;
    let local: Vec<u32> = comms.iter().map(|c| c.rank() as u32).collect();
    let streams: Vec<Arc<CudaStream>> = comms.iter().map(|c| c.stream().clone()).collect();
    let mut ring = Comm::matmul::<T>(&comms.iter().collect::<Vec<_>>(), collective, args.m, args.k, args.n)?;
    ring.set_sm_copies(args.sm_copies)?;
    let shape = ring.shape();
    let [la, lb, lc] = shape.lens();
    let mut a = Vec::new();
    let mut b = Vec::new();
    let mut c = Vec::new();
    for (&rank, stream) in local.iter().zip(&streams) {
        a.push(stream.clone_htod(&(0..la).map(|i| value::<T>(rank, 0, i)).collect::<Vec<T>>())?);
        b.push(stream.clone_htod(&(0..lb).map(|i| value::<T>(rank, 1, i)).collect::<Vec<T>>())?);
        c.push(stream.alloc_zeros::<T>(lc as usize)?);
    }
    let call = |ring: &mut CommMatmul, c: &mut [CudaSlice<T>]| -> Result<(), Box<dyn Error>> {
        let mut calls: Vec<_> = a.iter().zip(&b).zip(c.iter_mut()).map(|((a, b), c)| (a, b, c)).collect();
        Ok(ring.call(&mut calls)?)
    };
    for _ in 0..args.warmup.max(1) {
        call(&mut ring, &mut c)?;
    }
    for s in &streams {
        s.synchronize()?;
    }
    if let Some(e) = ring.async_error() {
        return Err(e.into());
    }
    let errors: Vec<f64> = local.iter().zip(&streams).zip(&c).map(|((&rank, s), c)| check::<T>(&shape, rank, &s.clone_dtoh(c)?)).collect::<Result<_, _>>()?;
    let timed = time_calls(&streams, args, || call(&mut ring, &mut c))?;
    if let Some(e) = ring.async_error() {
        return Err(e.into());
    }
    let flops = 2.0 * (u64::from(nranks) * args.m) as f64 * args.k as f64 * args.n as f64;
    for (i, &rank) in local.iter().enumerate() {
        let us = timed.gpu_us[i];
        let row = json!({
            "collective": format!("{:?}", args.collective).to_lowercase(),
            "dtype": format!("{:?}", args.dtype).to_lowercase(),
            "copies": args.sm_copies.map_or("engines".to_string(), |n| format!("sms:{n}")),
            "pieces": shape.pieces(),
            "nranks": nranks, "rank": rank, "m": args.m, "k": args.k, "n": args.n,
            "iters": args.iters, "time_us": us, "host_us": timed.host_us,
            "tflops": flops / us / 1e6,
            "tc_util": flops / us / 1e6 / args.peak_tflops,
            "checked": SAMPLES, "max_error_in_eps": errors[i],
            "gemm_alone_us": alone,
            "vs_gemm_alone": alone.map(|g| us / g),
        });
        println!("{row}");
    }
    Ok(())
}

/// The largest error, in units of the type's roundoff times the sum of magnitudes (the
/// bound of a sum of rounded products), over sampled entries of `rank`'s `C` against an
/// f64 sum of the data. Fails past 8 units.
fn check<T: Elem>(shape: &Shape, rank: u32, c: &[T]) -> Result<f64, Box<dyn Error>> {
    let (d, m, k, n) = (u64::from(shape.nranks), shape.m, shape.k, shape.n);
    let rows = c.len() as u64 / n;
    let mut worst = 0f64;
    for s in 0..SAMPLES {
        let (i, j) = ((s * 7919 + 13) % rows, (s * 104_729 + 7) % n);
        let (mut exact, mut size) = (0f64, 0f64);
        let mut add = |owner: u32, a_row: u64, b_owner: u32| {
            for l in 0..k {
                let p = value::<T>(owner, 0, a_row * k + l).to_f64() * value::<T>(b_owner, 1, l * n + j).to_f64();
                exact += p;
                size += p.abs();
            }
        };
        match shape.collective {
            Collective::AllGatherMatmul { .. } => add((i / m) as u32, i % m, rank),
            Collective::MatmulReduceScatter { .. } => (0..d as u32).for_each(|q| add(q, u64::from(rank) * m + i, q)),
        }
        let err = (c[(i * n + j) as usize].to_f64() - exact).abs() / (T::EPS * size.max(1.0) * (d as f64).max(1.0));
        if err > 8.0 {
            return Err(format!("rank {rank}: C[{i}, {j}] = {} against {exact} (an error of {err:.1} units)", c[(i * n + j) as usize].to_f64()).into());
        }
        worst = worst.max(err);
    }
    Ok(worst)
}

/// Microseconds of one GEMM of the gathered shape (`(nranks · m) × k` by `k × n`) on this
/// process's (first) device, alone: a one-rank ring of that shape, which is one cuBLASLt
/// GEMM.
fn gemm_alone<T: Elem>(args: &Args, nranks: u32) -> Result<f64, Box<dyn Error>> {
    let rows = u64::from(nranks) * args.m;
    let single = Shape { collective: Collective::AllGatherMatmul { bidirectional: false }, nranks: 1, m: rows, k: args.k, n: args.n, dtype: T::DTYPE };
    let stream = device::context(PeEnv::from_env()?.map_or(0, |e| e.device))?.new_stream()?;
    let mut heap = Heap::new(std::slice::from_ref(&stream), matmul::heap_bytes(&single), SPIN_BUDGET)?;
    let mut ring = RingMatmul::new::<T>(&mut heap, single.collective, rows, args.k, args.n, vec![stream.clone()])?;
    let a = stream.clone_htod(&(0..rows * args.k).map(|i| value::<T>(0, 0, i)).collect::<Vec<T>>())?;
    let b = stream.clone_htod(&(0..args.k * args.n).map(|i| value::<T>(0, 1, i)).collect::<Vec<T>>())?;
    let mut c = stream.alloc_zeros::<T>((rows * args.n) as usize)?;
    let timed = time_calls(std::slice::from_ref(&stream), args, || Ok(ring.call(&mut [(&a, &b, &mut c)])?))?;
    Ok(timed.gpu_us[0])
}

/// What [`time_calls`] measured.
struct Timed {
    /// Microseconds a call took on each stream, back to back.
    gpu_us: Vec<f64>,
    /// Microseconds the host took to enqueue a call (if more than a call's GPU time, the
    /// host, not the GPUs, set the pace).
    host_us: f64,
}

/// Times `--iters` calls back to back on `streams`. `--warmup` calls are queued first,
/// and the start events recorded behind them without waiting, so the GPUs are busy when
/// the clock starts: the host's time to enqueue the first call (with nothing queued
/// before it, a whole call's host time) is not counted as GPU time, as in a program that
/// keeps its GPUs fed.
fn time_calls(streams: &[Arc<CudaStream>], args: &Args, mut call: impl FnMut() -> Result<(), Box<dyn Error>>) -> Result<Timed, Box<dyn Error>> {
    for _ in 0..args.warmup.max(1) {
        call()?;
    }
    let record = || streams.iter().map(|s| s.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))).collect::<Result<Vec<_>, _>>();
    let starts = record()?;
    let host = std::time::Instant::now();
    for _ in 0..args.iters {
        call()?;
    }
    let host_us = host.elapsed().as_secs_f64() * 1e6 / f64::from(args.iters.max(1));
    let ends = record()?;
    for s in streams {
        s.synchronize()?;
    }
    let gpu_us = starts.iter().zip(&ends).map(|(s, e)| Ok(f64::from(s.elapsed_ms(e)?) * 1e3 / f64::from(args.iters.max(1)))).collect::<Result<_, Box<dyn Error>>>()?;
    Ok(Timed { gpu_us, host_us })
}
