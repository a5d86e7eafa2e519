//! PEs as processes on the CPU: `testkit::launch` (what `ferroccl run` runs) starts
//! `twin-pe` (src/bin) as every PE; the PEs meet through the bootstrap's Unix socket,
//! pass their heaps (shared-memory files) to each other as descriptors, and run the
//! device code on the host twin against each other's heaps: NVSHMEM's simple_shift and a
//! put_signal ring, checked by each PE. A PE that leaves, and PEs that disagree at
//! malloc, make every PE fail with a reason, not hang.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use ferroccl_testkit::launch::{self, Launch, Outcome, PeExit};

fn launch(pes: usize, args: &[&str]) -> Outcome {
    let program = env!("CARGO_BIN_EXE_twin-pe").into();
    let launch = Launch { program, args: args.iter().map(|a| (*a).to_owned()).collect(), devices: vec![0; pes], grace: Duration::from_secs(60) };
    launch::run(&launch).unwrap()
}

fn codes(outcome: &Outcome) -> Vec<Option<i32>> {
    outcome.exits.iter().map(|e| if let PeExit::Status(s) = e { ExitStatus::code(s) } else { None }).collect()
}

#[test]
fn shift_and_put_signal_between_processes() {
    for pes in [2, 4] {
        let outcome = launch(pes, &[]);
        assert!(outcome.success(), "{pes} PEs: {outcome}");
    }
}

#[test]
fn a_pe_that_leaves_fails_every_other_pe_without_waiting_out_the_budget() {
    let start = Instant::now();
    let outcome = launch(3, &["--leave", "1", "--budget", "60s"]);
    assert_eq!(codes(&outcome), [Some(2), Some(3), Some(2)], "{outcome}");
    assert!(start.elapsed() < Duration::from_secs(30), "{:?}", start.elapsed());
}

#[test]
fn a_malloc_mismatch_is_every_pes_error() {
    let outcome = launch(3, &["--mismatch"]);
    assert_eq!(codes(&outcome), [Some(2); 3], "{outcome}");
}
