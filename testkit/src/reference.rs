//! Host reference for reduce_copy: test cases, inputs, and the results the device must
//! produce, bit for bit.
//!
//! The arithmetic here is independent of device-rt's: integers with Rust's wrapping ops,
//! f16/bf16 through the `half` crate (computed in f32 and rounded once, which is what the
//! hardware's `add.rn`/`mul.rn` give). Both the GPU self-tests and the host-twin tests
//! check against it.

use device_rt::dtype::DataType;
use device_rt::multicast::SwMulticastTable;
use device_rt::redop::RedOpKind;
use device_rt::abi::{REDUCE_COPY_MAX_BUFFERS, ReduceCopyArgs};
pub use host_shim::comm::scalar_arg;
use half::{bf16, f16};
use zerocopy::IntoBytes;

/// One reduce_copy test case.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    pub dtype: DataType,
    pub op: RedOpKind,
    /// Elements per buffer.
    pub n: usize,
    /// Sources and destinations (1..=8 each).
    pub nsrcs: usize,
    pub ndsts: usize,
    /// Byte misalignment of each source and destination (a multiple of the element
    /// size, below 16) from a 256-byte aligned base.
    pub src_misalign: Vec<usize>,
    pub dst_misalign: Vec<usize>,
    /// Peers behind a software multicast source (`srcs[0]`), 0 for none.
    pub multicast_src_peers: usize,
    /// Peers behind a software multicast destination (`dsts[0]`), 0 for none.
    pub multicast_dst_peers: usize,
    /// Apply the operator's post-op.
    pub post_op: bool,
    /// PreMulSum's scalar per source, as operator-argument bits.
    pub pre_op_args: [u64; REDUCE_COPY_MAX_BUFFERS],
    /// SumPostDiv's divisor.
    pub red_arg: u64,
}

impl Case {
    /// `nsrcs` sources reduced into `ndsts` destinations, all aligned and unicast;
    /// PreMulSum scalars from a fixed list, SumPostDiv's divisor from `n`.
    pub fn new(dtype: DataType, op: RedOpKind, n: usize, nsrcs: usize, ndsts: usize) -> Self {
        let mut pre_op_args = [0u64; REDUCE_COPY_MAX_BUFFERS];
        for (s, a) in pre_op_args.iter_mut().enumerate() {
            *a = scalar_arg(dtype, [0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 1.0, -2.0][s]);
        }
        Case {
            dtype,
            op,
            n,
            nsrcs,
            ndsts,
            src_misalign: vec![0; nsrcs],
            dst_misalign: vec![0; ndsts],
            multicast_src_peers: 0,
            multicast_dst_peers: 0,
            post_op: op == RedOpKind::SumPostDiv,
            pre_op_args,
            red_arg: 1 + (n as u64 % 7),
        }
    }

    /// Bytes per buffer.
    pub fn bytes(&self) -> usize {
        self.n * self.dtype.size()
    }

    /// The input buffers the reduction reads, in reduction order: the multicast source's
    /// peers first, then the unicast sources.
    pub fn input_count(&self) -> usize {
        if self.multicast_src_peers > 0 { self.multicast_src_peers + self.nsrcs - 1 } else { self.nsrcs }
    }

    /// Whether input `i` (in [`Case::input_count`] order) gets the pre-op: unicast
    /// sources do, the peers of a multicast source do not.
    pub fn input_has_pre_op(&self, i: usize) -> bool {
        self.multicast_src_peers == 0 || i >= self.multicast_src_peers
    }

    /// The pre-op argument of input `i`.
    pub fn input_pre_op_arg(&self, i: usize) -> u64 {
        let src = if self.multicast_src_peers > 0 { (i + 1).saturating_sub(self.multicast_src_peers) } else { i };
        self.pre_op_args[src]
    }

    /// A one-line description for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "{} {} n={} srcs={} dsts={} src_misalign={:?} dst_misalign={:?} mc_src_peers={} mc_dst_peers={}",
            self.dtype.name(),
            self.op.name(),
            self.n,
            self.nsrcs,
            self.ndsts,
            self.src_misalign,
            self.dst_misalign,
            self.multicast_src_peers,
            self.multicast_dst_peers
        )
    }
}

/// A small deterministic generator (SplitMix64), so failures reproduce from a seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// The bytes of `v` as one element of `dtype` (rounded for 16-bit floats, truncated
/// toward zero and wrapped for integers).
pub fn element_bytes(dtype: DataType, v: f64) -> Vec<u8> {
    match dtype {
        DataType::F16 => f16::from_f32(v as f32).to_le_bytes().to_vec(),
        DataType::Bf16 => bf16::from_f32(v as f32).to_le_bytes().to_vec(),
        DataType::F32 => (v as f32).to_le_bytes().to_vec(),
        DataType::F64 => v.to_le_bytes().to_vec(),
        _ => (v as i64).to_le_bytes()[..dtype.size()].to_vec(),
    }
}

/// `n` random elements of `dtype` as bytes: any bits for integers; for floats, multiples
/// of 1/16 in [-2, 2] (finite, and no sum or product of up to 16 of them overflows).
pub fn random_elements(dtype: DataType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    for _ in 0..n {
        let r = rng.next_u64();
        if dtype.is_float() {
            out.extend(element_bytes(dtype, (r % 65) as f64 / 16.0 - 2.0));
        } else {
            out.extend(&r.to_le_bytes()[..dtype.size()]);
        }
    }
    out
}

/// `n` random elements of `dtype` from {-1, 0, 1} (wrapped for unsigned types): sums of
/// thousands of them are exact in every type, whatever the order.
pub fn small_elements(dtype: DataType, n: usize, rng: &mut Rng) -> Vec<u8> {
    (0..n).flat_map(|_| element_bytes(dtype, rng.below(3) as f64 - 1.0)).collect()
}

/// `n` random elements of `dtype` whose sums and products depend on the order they are
/// formed in: for floats a random sign, magnitude in [0.5, 2) and every mantissa bit
/// random (products of 32 of them stay finite in every float type); any bits for
/// integers (whose operators do not depend on the order).
pub fn order_sensitive_elements(dtype: DataType, n: usize, rng: &mut Rng) -> Vec<u8> {
    // A float of `bits` bits with `mantissa` mantissa bits whose biased exponent of 0.5 is
    // `half`: sign from bit 63, 0.5 or 1.0 from bit 62, the mantissa from the low bits.
    let float = |bits: u32, mantissa: u32, half: u64, r: u64| -> u64 {
        (r >> 63) << (bits - 1) | (half + (r >> 62 & 1)) << mantissa | r & ((1 << mantissa) - 1)
    };
    let mut out = Vec::with_capacity(n * dtype.size());
    for _ in 0..n {
        let r = rng.next_u64();
        match dtype {
            DataType::F64 => out.extend(float(64, 52, 1022, r).to_le_bytes()),
            DataType::F32 => out.extend((float(32, 23, 126, r) as u32).to_le_bytes()),
            DataType::F16 => out.extend((float(16, 10, 14, r) as u16).to_le_bytes()),
            DataType::Bf16 => out.extend((float(16, 7, 126, r) as u16).to_le_bytes()),
            _ => out.extend(&r.to_le_bytes()[..dtype.size()]),
        }
    }
    out
}

/// `n` random elements of `dtype` drawn from the standard normal distribution (Box–Muller
/// from [`Rng`]), rounded to the type; any bits for integers. Sums of them depend on the
/// order they are formed in, and stay far from overflow in every float type.
pub fn normal_elements(dtype: DataType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dtype.size());
    // Uniform in (0, 1]: 53 random bits, never 0.
    let uniform = |rng: &mut Rng| ((rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64;
    for _ in 0..n {
        if dtype.is_float() {
            let (u1, u2) = (uniform(rng), uniform(rng));
            out.extend(element_bytes(dtype, (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()));
        } else {
            out.extend(&rng.next_u64().to_le_bytes()[..dtype.size()]);
        }
    }
    out
}

/// The element-wise reduction of `inputs` (`n` elements each) in their order, as the
/// one-shot/two-shot algorithms form it: `post(((pre(x0) ⊕ pre(x1)) ⊕ pre(x2)) ⊕ …)`,
/// rounded after every operation, with `op`'s pre-op (PreMulSum: times the scalar `arg`)
/// and post-op (SumPostDiv: divided by `arg`). Given the ranks' inputs in rank order, what
/// one-shot and two-shot produce bit for bit; for inputs exact in any order, what every
/// algorithm produces.
pub fn reduce_in_rank_order(dtype: DataType, op: RedOpKind, arg: u64, inputs: &[&[u8]], n: usize) -> Vec<u8> {
    let mut case = Case::new(dtype, op, n, inputs.len(), 1);
    case.pre_op_args = [arg; REDUCE_COPY_MAX_BUFFERS];
    case.red_arg = arg;
    case.post_op = op == RedOpKind::SumPostDiv;
    expected(&case, inputs)
}

/// The element-wise reduction of `inputs` (one per rank, `n` elements each) where element
/// `e` is reduced around the ring `0 → 1 → … → n−1 → 0` starting at rank `first(e)`:
/// `first(e), first(e) + 1, …` (modulo the rank count), each operation rounded, with
/// [`reduce_in_rank_order`]'s pre-op and post-op. What a ring algorithm produces bit for
/// bit, given where its chain of each element begins.
pub fn reduce_around_ring(dtype: DataType, op: RedOpKind, arg: u64, inputs: &[&[u8]], n: usize, first: impl Fn(usize) -> usize) -> Vec<u8> {
    let (size, nranks) = (dtype.size(), inputs.len());
    let mut out = Vec::with_capacity(n * size);
    let mut begin = 0;
    while begin < n {
        let start = first(begin) % nranks;
        let end = (begin + 1..n).find(|&e| first(e) % nranks != start).unwrap_or(n);
        let rotated: Vec<&[u8]> = (0..nranks).map(|j| &inputs[(start + j) % nranks][begin * size..end * size]).collect();
        out.extend(reduce_in_rank_order(dtype, op, arg, &rotated, end - begin));
        begin = end;
    }
    out
}

/// Element arithmetic of one type, as the reference defines it.
trait RefElem: Copy {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
    fn from_arg(arg: u64) -> Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
    fn max(self, o: Self) -> Self;
    fn div(self, n: u64) -> Self;
}

macro_rules! ref_int {
    ($t:ty, $wide:ty) => {
        impl RefElem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().unwrap())
            }
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes())
            }
            fn from_arg(arg: u64) -> Self {
                arg as $t
            }
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn min(self, o: Self) -> Self {
                Ord::min(self, o)
            }
            fn max(self, o: Self) -> Self {
                Ord::max(self, o)
            }
            fn div(self, n: u64) -> Self {
                (self as $wide).wrapping_div(n as $wide) as $t
            }
        }
    };
}

ref_int!(i8, i64);
ref_int!(u8, u64);
ref_int!(i32, i64);
ref_int!(u32, u64);
ref_int!(i64, i64);
ref_int!(u64, u64);

/// A float type whose arithmetic is done in `$wide` (rounded once back to `$t`: for
/// f16/bf16 computed in f32, which is what the hardware's single rounding gives).
macro_rules! ref_float {
    ($t:ty, $bits:ty, $wide:ty, $to:expr, $from:expr) => {
        impl RefElem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().unwrap())
            }
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes())
            }
            fn from_arg(arg: u64) -> Self {
                <$t>::from_bits(arg as $bits)
            }
            fn add(self, o: Self) -> Self {
                $from($to(self) + $to(o))
            }
            fn mul(self, o: Self) -> Self {
                $from($to(self) * $to(o))
            }
            fn min(self, o: Self) -> Self {
                $from(<$wide>::min($to(self), $to(o)))
            }
            fn max(self, o: Self) -> Self {
                $from(<$wide>::max($to(self), $to(o)))
            }
            fn div(self, n: u64) -> Self {
                $from($to(self) / n as $wide)
            }
        }
    };
}

ref_float!(f16, u16, f32, f16::to_f32, f16::from_f32);
ref_float!(bf16, u16, f32, bf16::to_f32, bf16::from_f32);
ref_float!(f32, u32, f32, std::convert::identity, std::convert::identity);
ref_float!(f64, u64, f64, std::convert::identity, std::convert::identity);

fn reduce_typed<T: RefElem>(case: &Case, inputs: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![0u8; case.n * T::SIZE];
    let reduce = |a: T, b: T| match case.op {
        RedOpKind::Sum | RedOpKind::PreMulSum | RedOpKind::SumPostDiv => a.add(b),
        RedOpKind::Prod => a.mul(b),
        RedOpKind::Min => a.min(b),
        RedOpKind::Max => a.max(b),
    };
    let pre = |i: usize, v: T| {
        if case.op == RedOpKind::PreMulSum && case.input_has_pre_op(i) {
            v.mul(T::from_arg(case.input_pre_op_arg(i)))
        } else {
            v
        }
    };
    for (e, chunk) in out.chunks_exact_mut(T::SIZE).enumerate() {
        let at = |i: usize| T::load(&inputs[i][e * T::SIZE..(e + 1) * T::SIZE]);
        let mut acc = pre(0, at(0));
        for i in 1..inputs.len() {
            acc = reduce(acc, pre(i, at(i)));
        }
        if case.post_op && case.op == RedOpKind::SumPostDiv {
            acc = acc.div(case.red_arg);
        }
        acc.store(chunk);
    }
    out
}

/// What every destination must hold after the case ran on `inputs` (in
/// [`Case::input_count`] order).
pub fn expected(case: &Case, inputs: &[&[u8]]) -> Vec<u8> {
    assert_eq!(inputs.len(), case.input_count());
    match case.dtype {
        DataType::I8 => reduce_typed::<i8>(case, inputs),
        DataType::U8 => reduce_typed::<u8>(case, inputs),
        DataType::I32 => reduce_typed::<i32>(case, inputs),
        DataType::U32 => reduce_typed::<u32>(case, inputs),
        DataType::I64 => reduce_typed::<i64>(case, inputs),
        DataType::U64 => reduce_typed::<u64>(case, inputs),
        DataType::F16 => reduce_typed::<f16>(case, inputs),
        DataType::F32 => reduce_typed::<f32>(case, inputs),
        DataType::F64 => reduce_typed::<f64>(case, inputs),
        DataType::Bf16 => reduce_typed::<bf16>(case, inputs),
    }
}

/// How many cases [`matrix`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The GPU self-test: every type × operator, a spread of sizes.
    Gpu,
    /// The host twin in CI: the same shapes, and sizes up to several MB.
    HostTwin,
}

/// The reduce_copy test matrix: every type × operator over sizes from 0 to `max_bytes`
/// (odd and prime counts among them), random misalignments (0..15 bytes, in element
/// steps), 1..8 sources and destinations, and both multicast ends.
pub fn matrix(scale: Scale, seed: u64) -> Vec<Case> {
    let mut rng = Rng::new(seed);
    let counts: &[usize] = match scale {
        Scale::Gpu => &[0, 1, 2, 3, 7, 31, 32, 33, 127, 1000, 4099, 65537, 1 << 20, (1 << 20) + 13],
        Scale::HostTwin => &[0, 1, 3, 5, 17, 33, 255, 1021, 4096, 65599],
    };
    let big_bytes = match scale {
        Scale::Gpu => 24 << 20,
        Scale::HostTwin => 6 << 20,
    };
    let mut cases = Vec::new();
    for dtype in DataType::ALL {
        let elt = dtype.size();
        for op in RedOpKind::ALL {
            for (k, &n) in counts.iter().enumerate() {
                let nsrcs = 1 + (k + op as usize) % REDUCE_COPY_MAX_BUFFERS;
                let ndsts = 1 + (k * 3 + dtype as usize) % 3;
                cases.push(case(dtype, op, n, nsrcs, ndsts, k % 3 != 0, &mut rng));
            }
            // One large case per type and operator, aligned, 2 sources (the hot shape).
            let mut big = case(dtype, op, big_bytes / elt + 1, 2, 1, false, &mut rng);
            big.n -= 1;
            cases.push(big);
        }
        // Every source and destination count, with multicast ends (Sum only).
        for nsrcs in 1..=REDUCE_COPY_MAX_BUFFERS {
            let mut c = case(dtype, RedOpKind::Sum, 4099, nsrcs, 1 + nsrcs % 8, true, &mut rng);
            c.multicast_src_peers = 1 + nsrcs % 4;
            cases.push(c);
            let mut c = case(dtype, RedOpKind::Sum, 65537, nsrcs, 1 + (nsrcs + 3) % 8, nsrcs % 2 == 0, &mut rng);
            c.multicast_dst_peers = 2 + nsrcs % 3;
            cases.push(c);
        }
    }
    cases
}

fn case(dtype: DataType, op: RedOpKind, n: usize, nsrcs: usize, ndsts: usize, misalign: bool, rng: &mut Rng) -> Case {
    let elt = dtype.size();
    let mut offsets = |count: usize| -> Vec<usize> {
        (0..count).map(|_| if misalign { rng.below(16 / elt) * elt } else { 0 }).collect()
    };
    let (src_misalign, dst_misalign) = (offsets(nsrcs), offsets(ndsts));
    Case { src_misalign, dst_misalign, ..Case::new(dtype, op, n, nsrcs, ndsts) }
}

/// Byte written over every output (and its guard bytes) before a case runs.
pub const POISON: u8 = 0xA5;
/// Bytes after each output that must stay [`POISON`].
const GUARD: usize = 64;

/// Where a case's buffers lie in one arena of memory (device or host), each on its own
/// 256-byte boundary plus its misalignment, outputs followed by guard bytes.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Arena bytes needed.
    pub bytes: usize,
    /// Offset of each input, in [`Case::input_count`] order.
    pub inputs: Vec<usize>,
    /// Offset of each output: a multicast destination's peers first, then the unicast
    /// destinations.
    pub outputs: Vec<usize>,
    /// Offset of the multicast tables (source, destination) where the case has them.
    pub src_table: Option<usize>,
    pub dst_table: Option<usize>,
    /// Offset of the `ReduceCopyArgs` block.
    pub args: usize,
    /// `[begin, end)` of the region that holds the outputs and their guards.
    pub output_region: (usize, usize),
}

impl Layout {
    /// Lays out `case`'s buffers.
    pub fn new(case: &Case) -> Self {
        let mut at = 0usize;
        let place = |at: &mut usize, bytes: usize, misalign: usize| {
            let off = *at + misalign;
            *at = (off + bytes + GUARD).next_multiple_of(256);
            off
        };
        let bytes = case.bytes();
        let peer_misalign = |peers: usize, first: usize| vec![first; peers];
        let src_misalign: Vec<usize> = if case.multicast_src_peers > 0 {
            peer_misalign(case.multicast_src_peers, case.src_misalign[0]).into_iter().chain(case.src_misalign[1..].iter().copied()).collect()
        } else {
            case.src_misalign.clone()
        };
        let inputs = src_misalign.iter().map(|&m| place(&mut at, bytes, m)).collect();
        let src_table = (case.multicast_src_peers > 0).then(|| place(&mut at, size_of::<SwMulticastTable>(), 0));
        let dst_table = (case.multicast_dst_peers > 0).then(|| place(&mut at, size_of::<SwMulticastTable>(), 0));
        let args = place(&mut at, size_of::<ReduceCopyArgs>(), 0);
        let begin = at;
        let dst_misalign: Vec<usize> = if case.multicast_dst_peers > 0 {
            peer_misalign(case.multicast_dst_peers, case.dst_misalign[0]).into_iter().chain(case.dst_misalign[1..].iter().copied()).collect()
        } else {
            case.dst_misalign.clone()
        };
        let outputs = dst_misalign.iter().map(|&m| place(&mut at, bytes, m)).collect();
        Layout { bytes: at, inputs, outputs, src_table, dst_table, args, output_region: (begin, at) }
    }

    /// Fills `arena` (whose device address is `base`) for `case`: inputs from `rng`,
    /// outputs poisoned, multicast tables and the argument block written. Returns the
    /// inputs, for [`expected`].
    pub fn fill(&self, case: &Case, arena: &mut [u8], base: u64, rng: &mut Rng) -> Vec<Vec<u8>> {
        let bytes = case.bytes();
        let inputs: Vec<Vec<u8>> = self.inputs.iter().map(|_| random_elements(case.dtype, case.n, rng)).collect();
        for (&off, data) in self.inputs.iter().zip(&inputs) {
            arena[off..off + bytes].copy_from_slice(data);
        }
        arena[self.output_region.0..self.output_region.1].fill(POISON);
        let table = |offsets: &[usize]| {
            let mut t = SwMulticastTable { npeers: offsets.len() as u32, ..Default::default() };
            for (p, &off) in offsets.iter().enumerate() {
                t.peers[p] = base + off as u64;
            }
            t
        };
        let mut a = ReduceCopyArgs {
            n_elts: case.n as u64,
            red_arg: case.red_arg,
            nsrcs: case.nsrcs as u32,
            ndsts: case.ndsts as u32,
            op: case.op as u32,
            post_op: u32::from(case.post_op),
            pre_op_args: case.pre_op_args,
            ..Default::default()
        };
        let mut srcs: Vec<u64> = self.inputs.iter().map(|&o| base + o as u64).collect();
        if let Some(t) = self.src_table {
            let peers = case.multicast_src_peers;
            arena[t..t + size_of::<SwMulticastTable>()].copy_from_slice(table(&self.inputs[..peers]).as_bytes());
            srcs.splice(..peers, [base + t as u64]);
            a.multicast_src = 1;
        }
        let mut dsts: Vec<u64> = self.outputs.iter().map(|&o| base + o as u64).collect();
        if let Some(t) = self.dst_table {
            let peers = case.multicast_dst_peers;
            arena[t..t + size_of::<SwMulticastTable>()].copy_from_slice(table(&self.outputs[..peers]).as_bytes());
            dsts.splice(..peers, [base + t as u64]);
            a.multicast_dst = 1;
        }
        a.srcs[..srcs.len()].copy_from_slice(&srcs);
        a.dsts[..dsts.len()].copy_from_slice(&dsts);
        arena[self.args..self.args + size_of::<ReduceCopyArgs>()].copy_from_slice(a.as_bytes());
        inputs
    }

    /// Checks the output region (`region`, read back from `output_region`) against
    /// `expected`: every output equal, every guard byte still poison.
    pub fn check(&self, case: &Case, region: &[u8], expected: &[u8]) -> Result<(), String> {
        let bytes = case.bytes();
        let base = self.output_region.0;
        for (k, &off) in self.outputs.iter().enumerate() {
            let got = &region[off - base..off - base + bytes];
            if let Some(i) = (0..bytes).find(|&i| got[i] != expected[i]) {
                let e = i / case.dtype.size();
                return Err(format!(
                    "{}: output {k} element {e} (byte {i}) is {:02x?}, expected {:02x?}",
                    case.describe(),
                    &got[e * case.dtype.size()..(e + 1) * case.dtype.size()],
                    &expected[e * case.dtype.size()..(e + 1) * case.dtype.size()]
                ));
            }
            let guard = &region[off - base + bytes..off - base + bytes + GUARD];
            if guard.iter().any(|&b| b != POISON) {
                return Err(format!("{}: output {k} was written past its end", case.describe()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sum_of_f16_rounds_once_like_the_hardware() {
        let case = Case::new(DataType::F16, RedOpKind::Sum, 1, 2, 1);
        let a = f16::from_f32(1.0).to_le_bytes();
        let b = f16::from_f32(0.000_488_281_25).to_le_bytes(); // 2^-11: half an ulp of 1.0
        let out = expected(&case, &[&a, &b]);
        // 1 + 2^-11 ties to even: 1.0.
        assert_eq!(f16::from_le_bytes([out[0], out[1]]), f16::from_f32(1.0));
    }

    #[test]
    fn integers_wrap_and_avg_truncates() {
        let sum = Case::new(DataType::U8, RedOpKind::Sum, 1, 2, 1);
        assert_eq!(expected(&sum, &[&[250], &[10]]), vec![4]);
        let avg = Case { red_arg: 2, ..Case::new(DataType::I8, RedOpKind::SumPostDiv, 1, 2, 1) };
        assert_eq!(expected(&avg, &[&[(-7i8) as u8], &[0]]), vec![(-3i8) as u8]);
    }

    #[test]
    fn premulsum_scales_each_input_by_its_own_scalar() {
        let mut c = Case::new(DataType::F32, RedOpKind::PreMulSum, 1, 2, 1);
        c.pre_op_args[0] = scalar_arg(DataType::F32, 2.0);
        c.pre_op_args[1] = scalar_arg(DataType::F32, -0.5);
        let out = expected(&c, &[&3.0f32.to_le_bytes(), &4.0f32.to_le_bytes()]);
        assert_eq!(f32::from_le_bytes(out.try_into().unwrap()), 4.0);
    }

    /// The order-sensitive inputs are what they claim: floats in ±[0.5, 2) whose sum in
    /// rank order differs from the sum in another order, for every float type.
    #[test]
    fn order_sensitive_inputs_make_the_order_of_summation_visible() {
        let mut rng = Rng::new(3);
        for dtype in [DataType::F16, DataType::Bf16, DataType::F32, DataType::F64] {
            let inputs: Vec<Vec<u8>> = (0..4).map(|_| order_sensitive_elements(dtype, 256, &mut rng)).collect();
            let widen = |b: &[u8]| match dtype {
                DataType::F16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
                DataType::Bf16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
                DataType::F32 => f64::from(f32::from_le_bytes(b.try_into().unwrap())),
                _ => f64::from_le_bytes(b.try_into().unwrap()),
            };
            assert!(inputs.iter().flat_map(|i| i.chunks_exact(dtype.size())).all(|e| (0.5..2.0).contains(&widen(e).abs())), "{dtype:?}");
            let in_order: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
            let reversed: Vec<&[u8]> = inputs.iter().rev().map(Vec::as_slice).collect();
            let a = reduce_in_rank_order(dtype, RedOpKind::Sum, 0, &in_order, 256);
            assert_ne!(a, reduce_in_rank_order(dtype, RedOpKind::Sum, 0, &reversed, 256), "{dtype:?}: the order shows in the bits");
        }
        let avg = reduce_in_rank_order(DataType::I32, RedOpKind::SumPostDiv, 2, &[&7i32.to_le_bytes(), &(-2i32).to_le_bytes()], 1);
        assert_eq!(avg, 2i32.to_le_bytes(), "SumPostDiv divides the sum by its argument");
        let scaled = reduce_in_rank_order(DataType::F32, RedOpKind::PreMulSum, scalar_arg(DataType::F32, 2.0), &[&1.5f32.to_le_bytes(), &0.25f32.to_le_bytes()], 1);
        assert_eq!(scaled, 3.5f32.to_le_bytes(), "PreMulSum scales every input");
    }

    #[test]
    fn matrix_covers_every_type_operator_and_buffer_count() {
        let m = matrix(Scale::Gpu, 7);
        for d in DataType::ALL {
            for op in RedOpKind::ALL {
                assert!(m.iter().any(|c| c.dtype == d && c.op == op && c.n == 0));
                assert!(m.iter().any(|c| c.dtype == d && c.op == op && c.n % 2 == 1 && c.src_misalign.iter().any(|&x| x != 0)));
            }
            for s in 1..=8 {
                assert!(m.iter().any(|c| c.dtype == d && c.nsrcs == s && c.multicast_src_peers > 0));
            }
        }
        assert!(m.iter().all(|c| c.src_misalign.iter().chain(&c.dst_misalign).all(|&x| x < 16 && x % c.dtype.size() == 0)));
    }
}
