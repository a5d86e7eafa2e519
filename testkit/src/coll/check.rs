//! The collective correctness matrix: every function × type × operator, counts 0, 1, odd,
//! prime and several chunks, in place and out of place, with inputs that are exact in
//! any order (small integers, also as floats), checked bit for bit on every rank. Runs on
//! any [`RankGroup`]: GPUs or the host twin.

use std::time::Duration;

use device_rt::dtype::DataType;
use device_rt::redop::RedOpKind;
use device_rt::algo::{CollFunction, NO_PEER};
use device_rt::work::WorkItem;

use super::expect::CollCase;
use super::group::{Buffer, RankGroup};
use host_shim::Result;
use crate::reference::{Rng, small_elements};

/// Bytes written into output buffers before a call, so parts a collective must not
/// write are checked too.
const SENTINEL: u8 = 0xA5;

/// The matrix for `nranks` ranks: counts 0, 1, 7, 1021 for every function × type ×
/// operator (operators only where the function reduces), and `big_count` (several chunks
/// on every channel) for every function × type with Sum. Roots, shifts and in-place vary
/// from case to case.
pub fn matrix(nranks: u32, big_count: usize) -> Vec<CollCase> {
    let functions =
        [CollFunction::AllReduce, CollFunction::ReduceScatter, CollFunction::AllGather, CollFunction::Broadcast, CollFunction::Reduce];
    let mut cases = Vec::new();
    let mut k = 0u32;
    let mut push = |function: CollFunction, dtype: DataType, op: RedOpKind, count: usize, cases: &mut Vec<CollCase>| {
        k += 1;
        let sendrecv = function == CollFunction::SendRecv;
        cases.push(CollCase {
            function,
            dtype,
            op,
            count,
            root: if sendrecv { 1 + k % (nranks - 1).max(1) } else { k % nranks },
            in_place: !sendrecv && k.is_multiple_of(2),
        });
    };
    for function in functions.into_iter().chain([CollFunction::SendRecv].into_iter().filter(|_| nranks > 1)) {
        for dtype in DataType::ALL {
            let ops: &[RedOpKind] = if function.reduces() { &RedOpKind::ALL } else { &[RedOpKind::Sum] };
            for &op in ops {
                for count in [0, 1, 7, 1021] {
                    push(function, dtype, op, count, &mut cases);
                }
            }
            push(function, dtype, RedOpKind::Sum, big_count, &mut cases);
        }
    }
    cases
}

/// Runs `case` once on every rank of `g` (through the group's path) and compares every
/// rank's output with the reference. `Ok(None)`: correct; `Ok(Some(what))`: wrong results; `Err`: the call
/// failed.
pub fn run_case(g: &mut dyn RankGroup, case: &CollCase, seed: u64, timeout: Duration) -> Result<Option<String>> {
    let mark = g.mark();
    let outcome = run_case_in(g, case, seed, timeout);
    g.release(mark);
    outcome
}

fn run_case_in(g: &mut dyn RankGroup, case: &CollCase, seed: u64, timeout: Duration) -> Result<Option<String>> {
    let nranks = g.nranks();
    let size = case.dtype.size();
    let (in_elems, out_elems) = case.extents(nranks);
    let mut rng = Rng::new(seed);
    let inputs: Vec<Vec<u8>> = (0..nranks).map(|_| small_elements(case.dtype, in_elems, &mut rng)).collect();
    let mut bufs: Vec<(Buffer, Buffer, u64)> = Vec::new();
    let mut before = Vec::new();
    for rank in 0..nranks {
        let (input, output, in_offset) = if case.in_place {
            let bytes = in_elems.max(out_elems) * size;
            let b = g.alloc(rank, bytes.max(1))?;
            let mut data = vec![SENTINEL; bytes];
            let at = if case.function == CollFunction::AllGather { case.in_place_offset(rank) * size } else { 0 };
            data[at..at + inputs[rank as usize].len()].copy_from_slice(&inputs[rank as usize]);
            g.write(b, &data)?;
            before.push(data);
            (b, b, at as u64)
        } else {
            let input = g.alloc(rank, (in_elems * size).max(1))?;
            let output = g.alloc(rank, (out_elems * size).max(1))?;
            g.write(input, &inputs[rank as usize])?;
            let data = vec![SENTINEL; out_elems * size];
            g.write(output, &data)?;
            before.push(data);
            (input, output, 0)
        };
        bufs.push((input, output, in_offset));
    }
    let op_arg = case.op_arg(nranks);
    let mut tickets = Vec::new();
    for rank in 0..nranks {
        let (input, output, in_offset) = bufs[rank as usize];
        let src = input.addr + in_offset;
        let mut dst = output.addr;
        if case.in_place && case.function == CollFunction::ReduceScatter {
            dst += (case.in_place_offset(rank) * size) as u64;
        }
        let (arg, op_arg) = match case.function {
            CollFunction::SendRecv => {
                let to = (rank + case.root) % nranks;
                let from = (rank + nranks - case.root % nranks) % nranks;
                (u64::from(to) | u64::from(from) << 32, case.count as u64)
            }
            _ => (u64::from(case.root), op_arg),
        };
        debug_assert!(case.function != CollFunction::SendRecv || arg as u32 != NO_PEER);
        let item = WorkItem::collective(case.function, case.dtype, case.op, op_arg, src, dst, case.count as u64, arg);
        tickets.push(g.submit(rank, item)?);
    }
    for (rank, submitted) in tickets.into_iter().enumerate() {
        g.wait_submitted(rank as u32, submitted, timeout)?;
    }
    let expected = case.expect(&inputs, &before);
    for rank in 0..nranks {
        let (_, output, _) = bufs[rank as usize];
        let got = g.read(output, expected[rank as usize].len())?;
        if let Some(at) = got.iter().zip(&expected[rank as usize]).position(|(a, b)| a != b) {
            let e = at / size.max(1);
            return Ok(Some(format!(
                "{}: rank {rank} of {nranks}: element {e} is {:02x?}, expected {:02x?}",
                case.describe(),
                &got[e * size..(e + 1) * size],
                &expected[rank as usize][e * size..(e + 1) * size]
            )));
        }
    }
    Ok(None)
}
