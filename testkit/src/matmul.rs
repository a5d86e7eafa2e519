//! Collective matmuls on the host twin: every rank a PE of a [`TwinHeap`], every lane of
//! its plan one thread of its launch running device-rt's lane code
//! (`device_rt::matmul::lane`), the GEMMs by the host reference [`gemm`]; and the
//! reference results every engine is checked against.

use std::sync::Mutex;
use std::time::Duration;

use device_rt::arch;
use device_rt::dtype::DataType;
use device_rt::matmul::lane::Call;
use device_rt::matmul::{Addresses, Collective, LANES, Lane, Op, RingPlan, Rows, Shape, Workspace};
use device_rt::shmem::{Shmem, Thread};
use device_rt::spin::Interrupted;
use half::{bf16, f16};
use host_shim::{Error, Result};

use crate::shmem::TwinHeap;

/// An element type of a collective matmul: 16 bits, summed in f32.
pub trait Half: Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    /// Its name in a shape.
    const DTYPE: DataType;
    /// The value in f32 (exact).
    fn to_f32(self) -> f32;
    /// `v` rounded to nearest even.
    fn from_f32(v: f32) -> Self;
    /// The bits.
    fn to_bits(self) -> u16;
    /// The value of `bits`.
    fn from_bits(bits: u16) -> Self;
}

macro_rules! half_type {
    ($t:ty, $dtype:ident) => {
        impl Half for $t {
            const DTYPE: DataType = DataType::$dtype;
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            fn to_bits(self) -> u16 {
                <$t>::to_bits(self)
            }
            fn from_bits(bits: u16) -> Self {
                <$t>::from_bits(bits)
            }
        }
    };
}

half_type!(f16, F16);
half_type!(bf16, Bf16);

/// The reference GEMM: `round(a × b + acc)` for row-major `a` (`rows × k`), `b`
/// (`k × n`) and `acc` (`rows × n`): each element's products summed in f32 in the order of
/// `k`, `acc` added in f32, one rounding.
pub fn gemm<T: Half>(a: &[T], b: &[T], acc: Option<&[T]>, k: usize, n: usize) -> Vec<T> {
    let rows = a.len() / k;
    let mut c = Vec::with_capacity(rows * n);
    for i in 0..rows {
        for j in 0..n {
            let mut sum = 0f32;
            for l in 0..k {
                sum += a[i * k + l].to_f32() * b[l * n + j].to_f32();
            }
            if let Some(acc) = acc {
                sum += acc[i * n + j].to_f32();
            }
            c.push(T::from_f32(sum));
        }
    }
    c
}

/// Every rank's `C` of `shape`'s collective from every rank's `A` and `B` (by rank), by
/// the definitions: the all-gather's rows in rank order; the reduce-scatter's block `r`
/// summed from rank `r + 1` round to rank `r`, each step one GEMM with the partial sum as
/// its accumulator (the order the ring fixes).
pub fn reference<T: Half>(shape: &Shape, a: &[Vec<T>], b: &[Vec<T>]) -> Vec<Vec<T>> {
    let (d, m, k, n) = (shape.nranks as usize, shape.m as usize, shape.k as usize, shape.n as usize);
    match shape.collective {
        Collective::AllGatherMatmul { .. } => {
            let gathered: Vec<T> = a.concat();
            b.iter().map(|b| gemm(&gathered, b, None, k, n)).collect()
        }
        Collective::MatmulReduceScatter { .. } => (0..d)
            .map(|r| {
                let block = |q: usize| &a[q][r * m * k..(r + 1) * m * k];
                let mut sum = gemm(block((r + 1) % d), &b[(r + 1) % d], None, k, n);
                for i in 2..=d {
                    let q = (r + i) % d;
                    sum = gemm(block(q), &b[q], Some(&sum), k, n);
                }
                sum
            })
            .collect(),
    }
}

/// How a twin run goes wrong on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Rank `rank`'s lanes stop after their first `ops` operations of the call (a rank
    /// that dies mid-ring).
    Stop { rank: u32, ops: usize },
}

/// What one lane of one rank reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneEnd {
    /// The rank.
    pub rank: u32,
    /// The lane.
    pub lane: Lane,
    /// How its wait ended, when one did.
    pub interrupted: Option<Interrupted>,
}

/// A call's end: every rank's `C` (by rank), or the lanes whose waits ended early.
pub type Outcome<T> = std::result::Result<Vec<Vec<T>>, Vec<LaneEnd>>;

/// A ring of twin ranks with its buffers: calls of one shape, one after the other.
pub struct TwinMatmul<T: Half> {
    heap: TwinHeap,
    shape: Shape,
    /// By local PE: `A`, `B`, `C`, workspace.
    addrs: Vec<Addresses>,
    seq: u64,
    elem: std::marker::PhantomData<T>,
}

impl<T: Half> TwinMatmul<T> {
    /// `shape.nranks` twin ranks (checked shape, its element type `T`'s), every wait
    /// bounded by `spin_budget`.
    pub fn new(collective: Collective, nranks: u32, m: u64, k: u64, n: u64, spin_budget: Duration) -> Result<Self> {
        let shape = Shape { collective, nranks, m, k, n, dtype: T::DTYPE };
        shape.check().map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let [a, b, c] = shape.lens().map(|l| l * 2);
        let ws = Workspace::new(&shape).bytes;
        let heap_bytes = (a + b + c + ws).next_multiple_of(4096) + 4 * 4096;
        let mut heap = TwinHeap::new(nranks as usize, heap_bytes, spin_budget, None)?;
        let d = nranks as usize;
        let [a, b, c, w] = [a, b, c, ws].map(|bytes| heap.malloc(&vec![bytes; d]));
        let (a, b, c, w) = (a?, b?, c?, w?);
        let addrs = (0..d).map(|pe| Addresses { a: a[pe], b: b[pe], c: c[pe], workspace: w[pe] }).collect();
        Ok(Self { heap, shape, addrs, seq: 0, elem: std::marker::PhantomData })
    }

    /// The shape of every call.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Sets the abort flag of every rank.
    pub fn abort(&self) {
        self.heap.abort();
    }

    /// One call: every rank's `A` and `B` (by rank) in, every rank's `C` out, or how each
    /// lane that did not finish ended (a lane that stopped by `fault` ends without a
    /// report). `Err` of a trap as a string.
    pub fn call(&mut self, a: &[Vec<T>], b: &[Vec<T>], fault: Option<Fault>) -> std::result::Result<Outcome<T>, String> {
        let shape = self.shape;
        let [la, lb, _] = shape.lens();
        assert!(a.iter().all(|a| a.len() as u64 == la) && b.iter().all(|b| b.len() as u64 == lb), "A and B of the shape's sizes");
        for pe in 0..shape.nranks as usize {
            let bits = |v: &[T]| v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>();
            self.heap.write(pe, self.addrs[pe].a, &bits(&a[pe]));
            self.heap.write(pe, self.addrs[pe].b, &bits(&b[pe]));
        }
        self.seq += 1;
        let (seq, addrs) = (self.seq, &self.addrs);
        let ends = Mutex::new(Vec::new());
        self.heap.run(LANES.len() as u32, |sh: Shmem| {
            let (rank, lane) = (sh.my_pe(), arch::thread_idx());
            let call = Call::new(RingPlan { shape, rank, seq }, addrs[rank as usize]);
            let ops = std::mem::take(&mut ops_by_lane(&call.plan)[lane as usize]);
            let stop = match fault {
                Some(Fault::Stop { rank: r, ops }) if r == rank => ops,
                _ => usize::MAX,
            };
            for op in ops.into_iter().take(stop) {
                // SAFETY: the workspace and matrices were allocated for this shape on every
                // rank; this thread runs its lane's operations in the plan's order.
                if let Err(e) = unsafe { call.run::<Thread>(sh, op, |a, c, acc| twin_gemm::<T>(&call, a, c, acc)) } {
                    let lane = LANES[lane as usize];
                    ends.lock().unwrap_or_else(|p| p.into_inner()).push(LaneEnd { rank, lane, interrupted: Some(e) });
                    return;
                }
            }
        })?;
        let ends = ends.into_inner().unwrap_or_else(|p| p.into_inner());
        if !ends.is_empty() || fault.is_some() {
            return Ok(Err(ends));
        }
        let lc = shape.lens()[2] as usize;
        Ok(Ok((0..shape.nranks as usize).map(|pe| self.heap.read::<u16>(pe, self.addrs[pe].c, lc).into_iter().map(T::from_bits).collect()).collect()))
    }
}

/// A lane's GEMM on the twin: reads the rows and `B` in place (the plan's waits ordered
/// them before this thread), computes with [`gemm`], writes `C`'s rows.
fn twin_gemm<T: Half>(call: &Call, a: Rows, c: Rows, acc: Option<Rows>) {
    let shape = &call.plan.shape;
    let (k, n) = (shape.k as usize, shape.n as usize);
    let read = |rows: Rows| {
        let (at, bytes) = call.at.rows(shape, &call.layout, rows);
        // SAFETY: the rows lie in this rank's matrices or workspace, written before the
        // lane's waits let it here and not written again until its signals say so.
        unsafe { std::slice::from_raw_parts(at as *const u16, bytes as usize / 2) }.iter().map(|&b| T::from_bits(b)).collect::<Vec<T>>()
    };
    // SAFETY: `B` is the rank's `k × n` matrix, written before the call.
    let b: Vec<T> = unsafe { std::slice::from_raw_parts(call.at.b as *const u16, k * n) }.iter().map(|&x| T::from_bits(x)).collect();
    let out = gemm(&read(a), &b, acc.map(read).as_deref(), k, n);
    let (at, _) = call.at.rows(shape, &call.layout, c);
    // SAFETY: the output rows belong to this lane now (the plan's waits).
    unsafe { std::ptr::copy_nonoverlapping(out.iter().map(|x| x.to_bits()).collect::<Vec<u16>>().as_ptr(), at as *mut u16, out.len()) };
}

/// A plan's operations, by lane, each in its lane's order.
pub fn ops_by_lane(plan: &RingPlan) -> [Vec<Op>; LANES.len()] {
    let mut lanes: [Vec<Op>; LANES.len()] = Default::default();
    plan.for_each(|lane, op| lanes[lane as usize].push(op));
    lanes
}
