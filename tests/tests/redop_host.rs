//! Every reduction operator × element type, applied to whole packs (the path
//! reduce_copy takes: NCCL's Apply_Reduce / Apply_PreOp / Apply_PostOp), against the
//! scalar host reference, bit for bit, on random packs.

use device_rt::dtype::{Bf16, DataType, F16};
use device_rt::pack::BytePack;
use device_rt::redop::{Elem, Max, Min, PreMulSum, Prod, RedOp, RedOpKind, Sum, SumPostDiv};
use ferroccl_testkit::reference::{self, Case, Rng};

/// `a ⊕ b` over one 16-byte pack and one 4-byte pack, as reduce_copy does it: pre-op on
/// each input, reduce, post-op.
fn device_result<Op: RedOp, const N: usize>(case: &Case, a: &[u8], b: &[u8]) -> Vec<u8>
where
    device_rt::pack::Size<N>: device_rt::pack::PackSize,
{
    use zerocopy::FromBytes;
    let op = Op::new(case.red_arg);
    let pa = BytePack::<N>::read_from_bytes(a).unwrap();
    let pb = BytePack::<N>::read_from_bytes(b).unwrap();
    let pre = |i: usize, p: BytePack<N>| Op::new(case.pre_op_args[i]).pre_op_pack(p);
    let mut r = op.reduce_pack(pre(0, pa), pre(1, pb));
    if case.post_op {
        r = op.post_op_pack(r);
    }
    r.bytes.to_vec()
}

fn check_type<T: Elem>() {
    let dtype = T::DTYPE;
    let mut rng = Rng::new(dtype as u64 + 1);
    for op in RedOpKind::ALL {
        for n_bytes in [16usize, 4] {
            let n = n_bytes / dtype.size();
            if n == 0 {
                continue;
            }
            for _ in 0..200 {
                let case = Case::new(dtype, op, n, 2, 1);
                let a = reference::random_elements(dtype, n, &mut rng);
                let b = reference::random_elements(dtype, n, &mut rng);
                let want = reference::expected(&case, &[&a, &b]);
                let got = match (op, n_bytes) {
                    (RedOpKind::Sum, 16) => device_result::<Sum<T>, 16>(&case, &a, &b),
                    (RedOpKind::Prod, 16) => device_result::<Prod<T>, 16>(&case, &a, &b),
                    (RedOpKind::Min, 16) => device_result::<Min<T>, 16>(&case, &a, &b),
                    (RedOpKind::Max, 16) => device_result::<Max<T>, 16>(&case, &a, &b),
                    (RedOpKind::PreMulSum, 16) => device_result::<PreMulSum<T>, 16>(&case, &a, &b),
                    (RedOpKind::SumPostDiv, 16) => device_result::<SumPostDiv<T>, 16>(&case, &a, &b),
                    (RedOpKind::Sum, _) => device_result::<Sum<T>, 4>(&case, &a, &b),
                    (RedOpKind::Prod, _) => device_result::<Prod<T>, 4>(&case, &a, &b),
                    (RedOpKind::Min, _) => device_result::<Min<T>, 4>(&case, &a, &b),
                    (RedOpKind::Max, _) => device_result::<Max<T>, 4>(&case, &a, &b),
                    (RedOpKind::PreMulSum, _) => device_result::<PreMulSum<T>, 4>(&case, &a, &b),
                    (RedOpKind::SumPostDiv, _) => device_result::<SumPostDiv<T>, 4>(&case, &a, &b),
                };
                assert_eq!(got, want, "{} {} on {n_bytes}-byte packs: a={a:02x?} b={b:02x?}", dtype.name(), op.name());
            }
        }
    }
}

#[test]
fn every_operator_on_every_type_matches_the_reference() {
    check_type::<i8>();
    check_type::<u8>();
    check_type::<i32>();
    check_type::<u32>();
    check_type::<i64>();
    check_type::<u64>();
    check_type::<F16>();
    check_type::<f32>();
    check_type::<f64>();
    check_type::<Bf16>();
    assert_eq!(DataType::ALL.len(), 10);
}
