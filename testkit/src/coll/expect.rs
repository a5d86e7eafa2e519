//! What every rank's output must hold after a collective: computed on the host from the
//! ranks' inputs with the reference arithmetic of [`crate::reference`], independently of
//! the device code, in the order the algorithm the case must take reduces in
//! ([`ReduceOrder`]; the algorithm from the documented choice rules,
//! [`super::choice::stated_algorithm`], not from the device's planner); for random normal
//! floats also an f64 reference and a stated error bound ([`CollCase::check_f64_bound`]).

use device_rt::algo::{Algorithm, CHUNK_ALIGN_BYTES, CollFunction, RingProto};
use device_rt::dtype::DataType;
use device_rt::prims::Proto;
use device_rt::redop::RedOpKind;
use half::{bf16, f16};
use host_shim::comm::wiring::Shape;

use crate::reference::{Rng, normal_elements, order_sensitive_elements, reduce_around_ring, reduce_in_rank_order, scalar_arg, small_elements};

/// What the ranks' inputs to a case are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Inputs {
    /// Small integers (as floats too): exact whatever the order of reduction, so every
    /// algorithm must match the reference.
    #[default]
    Exact,
    /// Random floats in ±[0.5, 2) whose sums depend on the order: the reference must
    /// reduce in the algorithm's order ([`ReduceOrder`]) to match bit for bit.
    OrderSensitive,
    /// Random floats from the standard normal distribution (any bits for integers):
    /// order-sensitive as above, and also checked against an f64 reference with a stated
    /// bound ([`CollCase::check_f64_bound`]).
    Normal,
}

/// The order in which an algorithm reduces the ranks' inputs, element by element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOrder {
    /// Rank 0, 1, …, n−1 for every element (one-shot, two-shot).
    Ranks,
    /// The ring's, on `channels` channels whose FIFO steps hold `step_bytes`: around the
    /// ring `0 → 1 → … → n−1` (host-shim's wiring), each element's chain beginning after
    /// the rank that ends it. all_reduce ends chunk `k` of each round's channel block at
    /// rank `k`; reduce_scatter ends block `r` at rank `r`; reduce ends at the root.
    Ring { channels: u32, step_bytes: u64 },
}

impl ReduceOrder {
    /// The order of `algorithm` (the one a case must take,
    /// [`super::choice::stated_algorithm`]; `None`: none, as for point-to-point) on a
    /// communicator of `shape` when the call spreads over `channels` of its collective
    /// channels.
    pub fn of(algorithm: Option<Algorithm>, shape: &Shape, channels: u32) -> Self {
        match algorithm {
            Some(Algorithm::Ring) => Self::Ring { channels, step_bytes: shape.ring_step_bytes },
            _ => Self::Ranks,
        }
    }

    /// For `count` elements of `elt` bytes on `nranks` ranks, the rank at which the ring
    /// all_reduce's chain of each element ends: every round gives each channel `nranks`
    /// chunks of `real` elements (a FIFO chunk, or less in the last round, rounded up to
    /// whole [`CHUNK_ALIGN_BYTES`]), chunk `k` of a channel's block ending at rank `k`.
    fn ring_all_reduce_ends(channels: u32, step_bytes: u64, elt: usize, count: usize, nranks: u32) -> Vec<u32> {
        let chunk = (step_bytes as usize / elt) * (RingProto::SLICE_PER_CHUNK * RingProto::STEP_PER_SLICE) as usize;
        let align = (CHUNK_ALIGN_BYTES as usize / elt).max(1);
        let parts = channels as usize * nranks as usize;
        let mut ends = vec![0u32; count];
        let mut round = 0;
        while round < count {
            let real = (count - round).div_ceil(parts).next_multiple_of(align).min(chunk);
            for (part, block) in ends[round..].chunks_mut(real).take(parts).enumerate() {
                block.fill((part % nranks as usize) as u32);
            }
            round += parts * chunk;
        }
        ends
    }
}

/// One collective call across the communicator.
#[derive(Clone, Debug, PartialEq)]
pub struct CollCase {
    pub function: CollFunction,
    pub dtype: DataType,
    pub op: RedOpKind,
    /// NCCL's count (elements per rank; see `CollFunction`).
    pub count: usize,
    /// Broadcast and Reduce: the root. SendRecv: the shift (rank `r` sends to `r + root`).
    pub root: u32,
    /// The output is the input buffer (at the offset NCCL's in-place rule gives).
    pub in_place: bool,
    pub inputs: Inputs,
}

impl CollCase {
    /// PreMulSum's scalar (2: exact) and SumPostDiv's divisor (the rank count).
    pub fn op_arg(&self, nranks: u32) -> u64 {
        match self.op {
            RedOpKind::PreMulSum => scalar_arg(self.dtype, 2.0),
            RedOpKind::SumPostDiv => u64::from(nranks),
            _ => 0,
        }
    }

    /// Elements of each rank's input and output buffers.
    pub fn extents(&self, nranks: u32) -> (usize, usize) {
        let (i, o) = self.function.extents(self.count as u64, self.count as u64, u64::from(nranks)).unwrap_or((0, 0));
        (i as usize, o as usize)
    }

    /// Where, in elements of the output buffer, an in-place call's input starts (NCCL:
    /// all-gather's input is the rank's block of the output; reduce-scatter's output is
    /// the rank's block of the input).
    pub fn in_place_offset(&self, rank: u32) -> usize {
        match self.function {
            CollFunction::AllGather | CollFunction::ReduceScatter => rank as usize * self.count,
            _ => 0,
        }
    }

    /// A one-line description for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "{} {} {} count={} root={} {}{}",
            self.function.name(),
            self.dtype.name(),
            self.op.name(),
            self.count,
            self.root,
            if self.in_place { "in-place" } else { "out-of-place" },
            match self.inputs {
                Inputs::Exact => "",
                Inputs::OrderSensitive => " order-sensitive",
                Inputs::Normal => " random-normal",
            }
        )
    }

    /// `n` elements of one rank's input, from `rng`.
    pub fn input(&self, n: usize, rng: &mut Rng) -> Vec<u8> {
        match self.inputs {
            Inputs::Exact => small_elements(self.dtype, n, rng),
            Inputs::OrderSensitive => order_sensitive_elements(self.dtype, n, rng),
            Inputs::Normal => normal_elements(self.dtype, n, rng),
        }
    }

    /// The element-wise reduction of `inputs` (one per rank, `n` elements each) in
    /// `order`, each element's chain ending at rank `end(e)` where the order is the ring's.
    fn reduce(&self, order: ReduceOrder, inputs: &[&[u8]], n: usize, end: impl Fn(usize) -> u32) -> Vec<u8> {
        let nranks = inputs.len() as u32;
        let arg = self.op_arg(nranks);
        match order {
            ReduceOrder::Ranks => reduce_in_rank_order(self.dtype, self.op, arg, inputs, n),
            ReduceOrder::Ring { .. } => reduce_around_ring(self.dtype, self.op, arg, inputs, n, |e| end(e) as usize + 1),
        }
    }

    /// Each rank's expected output buffer (`outputs[r]` as it was before the call, for
    /// the parts the collective does not write), given each rank's input, reduced in
    /// `order`.
    pub fn expect(&self, inputs: &[Vec<u8>], outputs_before: &[Vec<u8>], order: ReduceOrder) -> Vec<Vec<u8>> {
        let nranks = inputs.len() as u32;
        let size = self.dtype.size();
        let block = self.count * size;
        let mut out: Vec<Vec<u8>> = outputs_before.to_vec();
        let all = |range: std::ops::Range<usize>| -> Vec<&[u8]> { inputs.iter().map(|i| &i[range.clone()]).collect() };
        match self.function {
            CollFunction::AllReduce => {
                let ends = match order {
                    ReduceOrder::Ring { channels, step_bytes } => ReduceOrder::ring_all_reduce_ends(channels, step_bytes, size, self.count, nranks),
                    ReduceOrder::Ranks => Vec::new(),
                };
                let r = self.reduce(order, &all(0..block), self.count, |e| ends[e]);
                out.iter_mut().for_each(|o| o[..block].copy_from_slice(&r));
            }
            CollFunction::ReduceScatter => {
                for (rank, o) in out.iter_mut().enumerate() {
                    let at = self.in_place_offset(rank as u32) * size * usize::from(self.in_place);
                    let r = self.reduce(order, &all(rank * block..(rank + 1) * block), self.count, |_| rank as u32);
                    o[at..at + block].copy_from_slice(&r);
                }
            }
            CollFunction::AllGather => {
                for o in out.iter_mut() {
                    for (peer, input) in inputs.iter().enumerate() {
                        o[peer * block..(peer + 1) * block].copy_from_slice(&input[..block]);
                    }
                }
            }
            CollFunction::Broadcast => {
                let root = &inputs[self.root as usize][..block];
                out.iter_mut().for_each(|o| o[..block].copy_from_slice(root));
            }
            CollFunction::Reduce => {
                let r = self.reduce(order, &all(0..block), self.count, |_| self.root);
                out[self.root as usize][..block].copy_from_slice(&r);
            }
            CollFunction::SendRecv => {
                for (rank, o) in out.iter_mut().enumerate() {
                    let from = (rank + nranks as usize - self.root as usize % nranks as usize) % nranks as usize;
                    o[..block].copy_from_slice(&inputs[from][..block]);
                }
            }
        }
        out
    }

    /// Where random normal floats are reduced by a sum (Sum, PreMulSum, SumPostDiv), min
    /// or max: checks the reduced elements of rank `rank`'s `output` (its whole buffer
    /// after the call) against an f64 reference computed from `inputs` (one per rank). A
    /// sum `s` of the `n` ranks' pre-op'd values `a_i` must lie within
    /// `γ_k · Σ|a_i| / d + 2^-52 · Σ|a_i| / d + n · t` of their exact sum divided by `d`
    /// (the reference summed in f64 with Neumaier's compensation), where `u` is the type's
    /// unit roundoff (2^-11 f16, 2^-8 bf16, 2^-24 f32, 2^-53 f64), `γ_k = k·u / (1 − k·u)`,
    /// `k = n − 1` roundings (`n` and `d = n` for SumPostDiv's division; else `d = 1`),
    /// the second term covers the f64 reference's own error and `t` half the type's
    /// smallest subnormal (underflow). Min and max must equal the f64 reference exactly.
    /// Prod is checked bit for bit only. Other cases pass.
    pub fn check_f64_bound(&self, inputs: &[Vec<u8>], rank: u32, output: &[u8]) -> Result<(), String> {
        let reduced = matches!(self.function, CollFunction::AllReduce | CollFunction::ReduceScatter)
            || (self.function == CollFunction::Reduce && rank == self.root);
        if self.inputs != Inputs::Normal || !self.dtype.is_float() || self.op == RedOpKind::Prod || !reduced {
            return Ok(());
        }
        let (nranks, size) = (inputs.len(), self.dtype.size());
        let (at, block) = match self.function {
            CollFunction::ReduceScatter => (self.in_place_offset(rank) * usize::from(self.in_place), rank as usize * self.count),
            _ => (0, 0),
        };
        let widen = |b: &[u8]| widen(self.dtype, b);
        let scale = if self.op == RedOpKind::PreMulSum { widen(&self.op_arg(nranks as u32).to_le_bytes()[..size]) } else { 1.0 };
        let (unit, tiny) = match self.dtype {
            DataType::F16 => (2f64.powi(-11), 2f64.powi(-25)),
            DataType::Bf16 => (2f64.powi(-8), 2f64.powi(-134)),
            DataType::F32 => (2f64.powi(-24), 2f64.powi(-150)),
            _ => (2f64.powi(-53), 0.0),
        };
        let (roundings, divisor) = if self.op == RedOpKind::SumPostDiv { (nranks, nranks as f64) } else { (nranks - 1, 1.0) };
        let gamma = roundings as f64 * unit / (1.0 - roundings as f64 * unit);
        for e in 0..self.count {
            let values: Vec<f64> = inputs.iter().map(|i| widen(&i[(block + e) * size..(block + e + 1) * size]) * scale).collect();
            let got = widen(&output[(at + e) * size..(at + e + 1) * size]);
            let (exact, bound) = match self.op {
                RedOpKind::Min => (values.iter().copied().fold(f64::INFINITY, f64::min), 0.0),
                RedOpKind::Max => (values.iter().copied().fold(f64::NEG_INFINITY, f64::max), 0.0),
                _ => {
                    let magnitude: f64 = values.iter().map(|v| v.abs()).sum();
                    (compensated_sum(&values) / divisor, (gamma + 2f64.powi(-52)) * magnitude / divisor + nranks as f64 * tiny)
                }
            };
            if (got - exact).abs() > bound || got.is_nan() {
                return Err(format!(
                    "{}: rank {rank} of {nranks}: element {e} is {got:e}, the f64 reference {exact:e} (bound {bound:e})",
                    self.describe()
                ));
            }
        }
        Ok(())
    }
}

/// One element of a float type as f64 (exact).
fn widen(dtype: DataType, b: &[u8]) -> f64 {
    match dtype {
        DataType::F16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
        DataType::Bf16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        DataType::F32 => f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => f64::from_le_bytes(b[..8].try_into().expect("an f64 is 8 bytes")),
    }
}

/// Neumaier's compensated sum: within about one rounding of the exact sum.
fn compensated_sum(values: &[f64]) -> f64 {
    let (mut sum, mut correction) = (0.0f64, 0.0f64);
    for &v in values {
        let t = sum + v;
        correction += if sum.abs() >= v.abs() { (sum - t) + v } else { (v - t) + sum };
        sum = t;
    }
    sum + correction
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each round gives every channel `nranks` chunks of a FIFO chunk (4 steps of 4096
    /// bytes: 4096 f32) or, in the last round, of the remainder split evenly and rounded up
    /// to 4 KiB; chunk `k` of a channel's block ends at rank `k`.
    #[test]
    fn ring_all_reduce_chains_end_where_the_channel_blocks_say() {
        let count = 2 * 3 * 4096 + 5000;
        let ends = ReduceOrder::ring_all_reduce_ends(2, 4096, 4, count, 3);
        let at = |range: std::ops::Range<usize>| -> Vec<u32> {
            let mut v: Vec<u32> = ends[range].to_vec();
            v.dedup();
            v
        };
        // First round: channel 0's block, then channel 1's, 4096 elements a chunk.
        for (block, rank) in [0, 1, 2, 0, 1, 2].into_iter().enumerate() {
            assert_eq!(at(block * 4096..(block + 1) * 4096), [rank]);
        }
        // Last round: 5000 elements over 6 chunks, 834 rounded up to 1024.
        let last = 6 * 4096;
        for (block, rank) in [0, 1, 2, 0].into_iter().enumerate() {
            assert_eq!(at(last + block * 1024..last + (block + 1) * 1024), [rank]);
        }
        assert_eq!(at(last + 4096..count), [1]);
    }

    fn normal_inputs(dtype: DataType, nranks: usize, n: usize) -> Vec<Vec<u8>> {
        let mut rng = Rng::new(11);
        (0..nranks).map(|_| normal_elements(dtype, n, &mut rng)).collect()
    }

    /// On four ranks the ring's order and rank order give different bits, and the ring's
    /// is what it says: element 0 (chunk 0, ending at rank 0) is `((x1 + x2) + x3) + x0`.
    #[test]
    fn the_ring_order_is_not_rank_order_and_begins_after_the_chain_end() {
        let inputs = normal_inputs(DataType::F32, 4, 3000);
        let case = CollCase { function: CollFunction::AllReduce, dtype: DataType::F32, op: RedOpKind::Sum, count: 3000, root: 0, in_place: false, inputs: Inputs::Normal };
        let before = vec![vec![0u8; 3000 * 4]; 4];
        let ring = case.expect(&inputs, &before, ReduceOrder::Ring { channels: 1, step_bytes: 4096 });
        assert_ne!(ring, case.expect(&inputs, &before, ReduceOrder::Ranks));
        let x = |r: usize| f32::from_le_bytes(inputs[r][..4].try_into().unwrap());
        assert_eq!(ring[2][..4], (((x(1) + x(2)) + x(3)) + x(0)).to_le_bytes());
        let scatter = CollCase { function: CollFunction::ReduceScatter, count: 750, ..case };
        assert_ne!(scatter.expect(&inputs, &before, ReduceOrder::Ring { channels: 1, step_bytes: 4096 }), scatter.expect(&inputs, &before, ReduceOrder::Ranks));
    }

    /// The f64 bound holds for the reference in either order, every float type and
    /// summing operator, and refuses a result off by far more than the bound; min and
    /// max must be exact.
    #[test]
    fn the_f64_bound_holds_for_the_reference_and_refuses_a_wrong_result() {
        for dtype in [DataType::F16, DataType::Bf16, DataType::F32, DataType::F64] {
            let (size, n) = (dtype.size(), 1021);
            let inputs = normal_inputs(dtype, 8, n);
            for op in [RedOpKind::Sum, RedOpKind::PreMulSum, RedOpKind::SumPostDiv, RedOpKind::Min, RedOpKind::Max] {
                let case = CollCase { function: CollFunction::AllReduce, dtype, op, count: n, root: 0, in_place: false, inputs: Inputs::Normal };
                let before = vec![vec![0u8; n * size]; 8];
                for order in [ReduceOrder::Ranks, ReduceOrder::Ring { channels: 2, step_bytes: 4096 }] {
                    let out = case.expect(&inputs, &before, order);
                    assert_eq!(case.check_f64_bound(&inputs, 3, &out[3]), Ok(()), "{}", case.describe());
                }
                let mut wrong = case.expect(&inputs, &before, ReduceOrder::Ranks).swap_remove(0);
                // Flip the lowest mantissa bit of element 7 (Min and Max), or a bit worth a
                // sixteenth of the type's precision (sums).
                let bit = if matches!(op, RedOpKind::Min | RedOpKind::Max) { 0 } else { match dtype { DataType::Bf16 => 4, DataType::F16 => 7, DataType::F32 => 20, _ => 49 } };
                wrong[7 * size + bit / 8] ^= 1 << (bit % 8);
                assert!(case.check_f64_bound(&inputs, 0, &wrong).is_err(), "{}", case.describe());
            }
        }
    }
}
