//! Collectives and point-to-point on the host twin: the real device code (primitives,
//! ring algorithms, work loop) on CPU threads, 1 to 8 ranks wired as on GPUs, the whole
//! correctness matrix checked bit for bit on every rank.

use std::time::Duration;

use host_shim::comm::check::{matrix, run_case};
use host_shim::comm::group::RankGroup;
use host_shim::comm::twin::TwinGroup;
use host_shim::comm::wiring::Shape;

const TIMEOUT: Duration = Duration::from_secs(120);

fn group(nranks: u32, nchannels: u32) -> TwinGroup {
    let shape = Shape { nranks, nchannels, ring_step_bytes: 4096, p2p_step_bytes: 4096 };
    TwinGroup::start(shape, 128, Duration::from_secs(60)).unwrap()
}

/// Runs the matrix on `nranks` ranks; every case must be exact on every rank.
fn run_matrix(nranks: u32, nchannels: u32, filter: impl Fn(&host_shim::comm::expect::CollCase) -> bool) {
    let mut g = group(nranks, nchannels);
    // Several chunks per channel: 2 slices × 2 steps of 4 KiB per chunk.
    let big = 3 * 4096 * 4 * nchannels as usize / 4 + 13;
    let cases: Vec<_> = matrix(nranks, big).into_iter().filter(|c| filter(c)).collect();
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        match run_case(&mut g, case, i as u64, TIMEOUT) {
            Ok(None) => {}
            Ok(Some(wrong)) => failures.push(wrong),
            Err(e) => panic!("{}: {e}", case.describe()),
        }
    }
    assert!(failures.is_empty(), "{} of {} cases wrong:\n{}", failures.len(), cases.len(), failures.join("\n"));
    g.shutdown(TIMEOUT).unwrap();
}

#[test]
fn matrix_one_rank() {
    run_matrix(1, 2, |_| true);
}

#[test]
fn matrix_two_ranks() {
    run_matrix(2, 2, |_| true);
}

#[test]
fn matrix_three_ranks() {
    run_matrix(3, 2, |_| true);
}

#[test]
fn matrix_four_ranks() {
    run_matrix(4, 1, |_| true);
}

#[test]
fn matrix_eight_ranks() {
    run_matrix(8, 1, |_| true);
}
