//! On GPUs only (ignored elsewhere; run with `--ignored` where two GPUs are): `abort()`
//! in the middle of a burst of 64 MiB all-reduces on two ranks (issue 13, item 7h).

use ferroccl_testkit::coll::abort::abort_during_burst;

/// Every call after `abort()` is refused with `Aborted`, and every rank's stream drains
/// (the report's `drain_ms` is printed: speed is measured, not asserted).
#[test]
#[ignore = "needs two GPUs"]
fn abort_during_a_burst_refuses_every_later_call_and_drains() {
    let report = abort_during_burst(&[0, 1], 64 << 20, 256).unwrap();
    println!("{report:?}");
    assert_eq!(report.accepted_after_abort, 0, "{report:?}");
    assert_eq!(report.refused_after_abort, 2 * (256 - report.calls_before_abort), "{report:?}");
    assert!(report.rank_errors.iter().all(|e| e.as_deref() == Some("the work loop was aborted")), "{report:?}");
}
