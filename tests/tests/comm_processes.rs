//! A communicator whose ranks are processes, on the CPU: `testkit::launch` (what
//! `ferroccl run` runs) starts `twin-rank` (src/bin) as every rank with one id; the ranks
//! meet through the id's abstract socket, agree through `host_shim::comm::join` (what
//! `Comm::init_rank` runs on GPUs), map each other's connection blocks (shared-memory
//! files passed as descriptors) and run every collective and send/recv, each checked by
//! its rank, then split the ranks into two communicators and check an all_reduce on
//! each, and all_reduce inputs that lie in a symmetric heap of the processes (zero copy).
//! A rank that never arrives, a rank whose process dies inside a call or aborts, and
//! ranks configured otherwise make every other rank fail with a reason that names the
//! rank, never hang.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use ferroccl_testkit::launch::{self, Launch, Outcome, PeExit};
use host_shim::comm::CommId;

fn launch(ranks: usize, args: &[&str]) -> Outcome {
    let id: String = CommId::new().unwrap().as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    let program = env!("CARGO_BIN_EXE_twin-rank").into();
    let args = ["--id", &id].iter().chain(args).map(|a| (*a).to_owned()).collect();
    launch::run(&Launch { program, args, devices: vec![0; ranks], grace: Duration::from_secs(60) }).unwrap()
}

fn codes(outcome: &Outcome) -> Vec<Option<i32>> {
    outcome.exits.iter().map(|e| if let PeExit::Status(s) = e { ExitStatus::code(s) } else { None }).collect()
}

#[test]
fn every_collective_between_processes() {
    for ranks in [2, 4] {
        let outcome = launch(ranks, &["--split", "--heap"]);
        assert!(outcome.success(), "{ranks} ranks: {outcome}");
    }
}

#[test]
fn ranks_on_threads_of_several_processes() {
    // Two processes of two ranks each: ranks of one process meet those of the other.
    let outcome = launch(2, &["--ranks-here", "2", "--split"]);
    assert!(outcome.success(), "{outcome}");
}

#[test]
fn a_rank_that_never_arrives_fails_every_other_within_the_budget() {
    let start = Instant::now();
    let outcome = launch(3, &["--absent", "2", "--budget", "3s"]);
    assert_eq!(codes(&outcome), [Some(2), Some(2), Some(3)], "{outcome}");
    assert!(start.elapsed() < Duration::from_secs(30), "{:?}", start.elapsed());
}

#[test]
fn a_rank_that_dies_inside_a_call_fails_every_other_at_once() {
    // The budget is long: the others learn of the death from the watcher, not from a
    // wait that runs out.
    let start = Instant::now();
    let outcome = launch(3, &["--die-in", "1", "--budget", "600s"]);
    assert_eq!(codes(&outcome), [Some(2), Some(3), Some(2)], "{outcome}");
    assert!(start.elapsed() < Duration::from_secs(60), "{:?}", start.elapsed());
}

#[test]
fn a_rank_that_aborts_stops_every_other_naming_it() {
    let outcome = launch(3, &["--abort", "2", "--budget", "600s"]);
    assert_eq!(codes(&outcome), [Some(2), Some(2), Some(3)], "{outcome}");
}

#[test]
fn ranks_configured_otherwise_all_fail() {
    let outcome = launch(3, &["--odd", "1"]);
    assert_eq!(codes(&outcome), [Some(2); 3], "{outcome}");
}
