//! What every rank's output must hold after a collective: computed on the host from the
//! ranks' inputs with the reference arithmetic of [`crate::reference`], independently of
//! the device code.

use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::algo::CollFunction;

use crate::reference::{Rng, order_sensitive_elements, reduce_in_rank_order, scalar_arg, small_elements};

/// What the ranks' inputs to a case are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Inputs {
    /// Small integers (as floats too): exact whatever the order of reduction, so every
    /// algorithm must match the reference.
    #[default]
    Exact,
    /// Random floats whose sums depend on the order: only an algorithm that reduces in
    /// rank order (one-shot, two-shot) matches the reference bit for bit.
    OrderSensitive,
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
            if self.inputs == Inputs::OrderSensitive { " order-sensitive" } else { "" }
        )
    }

    /// `n` elements of one rank's input, from `rng`.
    pub fn input(&self, n: usize, rng: &mut Rng) -> Vec<u8> {
        match self.inputs {
            Inputs::Exact => small_elements(self.dtype, n, rng),
            Inputs::OrderSensitive => order_sensitive_elements(self.dtype, n, rng),
        }
    }

    /// The element-wise reduction of `inputs` (one per rank), in rank order.
    fn reduce(&self, nranks: u32, inputs: &[&[u8]], n: usize) -> Vec<u8> {
        reduce_in_rank_order(self.dtype, self.op, self.op_arg(nranks), inputs, n)
    }

    /// Each rank's expected output buffer (`outputs[r]` as it was before the call, for
    /// the parts the collective does not write), given each rank's input.
    pub fn expect(&self, inputs: &[Vec<u8>], outputs_before: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let nranks = inputs.len() as u32;
        let size = self.dtype.size();
        let block = self.count * size;
        let mut out: Vec<Vec<u8>> = outputs_before.to_vec();
        let all = |range: std::ops::Range<usize>| -> Vec<&[u8]> { inputs.iter().map(|i| &i[range.clone()]).collect() };
        match self.function {
            CollFunction::AllReduce => {
                let r = self.reduce(nranks, &all(0..block), self.count);
                out.iter_mut().for_each(|o| o[..block].copy_from_slice(&r));
            }
            CollFunction::ReduceScatter => {
                for (rank, o) in out.iter_mut().enumerate() {
                    let at = self.in_place_offset(rank as u32) * size * usize::from(self.in_place);
                    let r = self.reduce(nranks, &all(rank * block..(rank + 1) * block), self.count);
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
                let r = self.reduce(nranks, &all(0..block), self.count);
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
}
