//! On GPUs only (ignored elsewhere; run with `--ignored` on a GPU machine): `abort()` in
//! the middle of a burst of 64 MiB all-reduces (issue 13, item 7h). The ranks' devices
//! come from `FERROCCL_ORDINALS` (default `0,1`; `0,0` puts two ranks on one GPU).

use ferroccl_testkit::coll::abort::abort_during_burst;

/// Every call after `abort()` is refused with `Aborted`, and every rank's stream drains
/// (the report's `drain_ms` is printed: speed is measured, not asserted).
#[test]
#[ignore = "needs two GPUs"]
fn abort_during_a_burst_refuses_every_later_call_and_drains() {
    let ordinals: Vec<usize> = std::env::var("FERROCCL_ORDINALS")
        .unwrap_or_else(|_| "0,1".into())
        .split(',')
        .map(|o| o.trim().parse().expect("FERROCCL_ORDINALS: ordinals separated by commas"))
        .collect();
    let report = abort_during_burst(&ordinals, 64 << 20, 256).unwrap();
    println!("{ordinals:?}: {report:?}");
    assert_eq!(report.accepted_after_abort, 0, "{report:?}");
    assert_eq!(report.refused_after_abort, ordinals.len() * (256 - report.calls_before_abort), "{report:?}");
    assert!(report.rank_errors.iter().all(|e| e.as_deref() == Some("the work loop was aborted")), "{report:?}");
}
