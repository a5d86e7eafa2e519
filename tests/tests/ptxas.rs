//! The PTX that host-shim embeds assembles with `ptxas -arch=sm_90a -v` in the launch
//! shapes the runtime can produce (the work loop uncapped, and capped by `.maxnreg` for
//! the thread counts above 256, as `Module::load_for_threads` patches it: by default the
//! loosest, a middle and the tightest cap, every one with `FERROCCL_PTXAS_EVERY_CAP=1`,
//! see `checked_shapes`), nothing on
//! `hot-kernels.txt` spills in any of them, nothing of the loop spills uncapped (the
//! default communicator's shape), and under a cap its protocol code spills at most the
//! bound of its function. A cap changes only the work loop and what it calls, so the
//! capped shapes assemble only that (`ptxas -e`, under half the time of the whole module)
//! and check the hot list's `*` entries (the movers the loop calls); the other kernels are
//! checked once, in the uncapped shape. The uncapped shape is host-shim's build's own
//! ptxas run (the same PTX, ptxas and architecture, with `-v`): its report is read from
//! the build (`host_shim::module::sass::REPORTS`) where the build kept one, instead of
//! assembling the whole module a second time.

use std::collections::BTreeMap;

use ferroccl_ptx_builder::sass::{WORK_LOOP_ENTRY, with_maxnreg, work_loop_max_registers};
use ferroccl_tests::ptxas::{self, KernelReport};

/// Under a register cap, the spill bytes (stores, and loads) of a protocol function that
/// [`CAPPED_SPILL_BOUNDS`] does not name. Uncapped (every loop of up to 256 threads, the
/// default communicator's included) nothing may spill: ptxas 13.0 reports none (see
/// docs/tuning.md, `PROTOCOL_SPILL_BOUND`).
const PROTOCOL_SPILL_BOUND: u32 = 64;

/// The same under a register cap, per function: the largest ptxas 13.0 reported for it
/// over every cap when its bound was last raised. Spills cost a GPU several µs per small
/// collective, so the default loop is 256 threads, uncapped, where nothing spills
/// (docs/tuning.md, `Tuning::loop_cfg`); wider loops stay possible, and bounded here.
/// The check fails if they grow. Each bound's history, and the change behind each growth:
/// docs/tuning.md, `CAPPED_SPILL_BOUNDS`.
const CAPPED_SPILL_BOUNDS: [(&str, u32, u32); 9] = [
    ("ferroccl_work_loop", 400, 560),
    ("4algo4ring3run", 628, 1576),
    ("4algo4ring21reduce_scatter_paired", 120, 184),
    ("4work8dispatch10collective", 76, 72),
    ("4algo8dispatch15plan_collective", 112, 56),
    ("4algo4nvls3run", 432, 488),
    ("23direct_recv_direct_send", 84, 252),
    ("5prims3ops", 24, 32),
    ("26all_reduce_two_shot_pushed", 52, 136),
];

/// The work loop's own files (`device-rt/src/work`: each channel's loop, its fetch, its
/// look for a stop, its dispatch and its completion, and the channel they share) as
/// mangled names spell them: their out-of-line functions are protocol code of the loop.
const WORK_LOOP_MODULES: [&str; 6] = ["4work12channel_loop", "4work5fetch", "4work5abort", "4work8dispatch", "4work8complete", "4work7channel"];

/// Every register cap the runtime can put on the work loop: `None` and each distinct
/// `.maxnreg` of a thread count (a multiple of 32 up to 512).
fn launch_shapes() -> Vec<Option<u32>> {
    let mut caps: Vec<Option<u32>> = (1..=16).map(|w| work_loop_max_registers(32 * w)).collect();
    caps.dedup();
    caps
}

/// The shapes the test assembles: uncapped, and the loosest, a middle and the tightest
/// cap (224, 152 and 128 registers: 288, 416 and 512 threads); every shape with
/// `FERROCCL_PTXAS_EVERY_CAP=1`. Spills need not grow monotonically as a cap tightens,
/// but a growth has so far shown at several caps at once. Each capped shape costs about a
/// CPU minute of ptxas: `cargo test` and CI (`tests/run.sh`) run these four, every one
/// by hand after a change to the loop (see docs/tuning.md, `checked_shapes`).
fn checked_shapes(every: &[Option<u32>]) -> Vec<Option<u32>> {
    if std::env::var_os("FERROCCL_PTXAS_EVERY_CAP").is_some_and(|v| v == "1") {
        return every.to_vec();
    }
    let capped: Vec<Option<u32>> = every.iter().copied().filter(Option::is_some).collect();
    let mut shapes = vec![None, capped[0], capped[capped.len() / 2], capped[capped.len() - 1]];
    shapes.dedup();
    shapes
}

/// The build's `ptxas -v` report of the unpatched module (the build assembles a capped
/// module whole, where the checks assemble the loop alone), where it kept one.
fn build_report(cap: Option<u32>) -> Option<BTreeMap<String, KernelReport>> {
    if cap.is_some() {
        return None;
    }
    let (_, file) = host_shim::module::sass::REPORTS.iter().find(|(c, _)| c.is_none())?;
    let log = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("the build's ptxas report {file}: {e}"));
    Some(ptxas::parse_report(&log).unwrap_or_else(|e| panic!("the build's ptxas report {file}: {e}")))
}

#[test]
fn every_launch_shape_assembles_and_hot_kernels_do_not_spill() {
    let ptxas_path = ptxas::find().unwrap_or_else(|e| panic!("{e}"));
    let hot_text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/hot-kernels.txt")).unwrap();
    let hot = ptxas::hot_list(&hot_text);
    assert!(hot.iter().any(|e| e.starts_with('*')), "hot-kernels.txt lists no function the capped shapes check");
    let every = launch_shapes();
    assert!(every.len() > 2 && every.contains(&None) && every.contains(&Some(128)), "{every:?}");
    let shapes = checked_shapes(&every);
    assert!(shapes.contains(&None) && shapes.contains(&Some(128)) && shapes.iter().all(|s| every.contains(s)), "{shapes:?}");
    let reports: Vec<(Option<u32>, BTreeMap<String, KernelReport>)> = std::thread::scope(|scope| {
        let jobs: Vec<_> = shapes
            .iter()
            .map(|&cap| {
                let ptxas_path = &ptxas_path;
                scope.spawn(move || {
                    if let Some(report) = build_report(cap) {
                        println!("cap {cap:?}: the build's ptxas report of the same PTX");
                        return (cap, report);
                    }
                    let ptx = match cap {
                        None => host_shim::module::PTX.to_owned(),
                        Some(registers) => with_maxnreg(host_shim::module::PTX, WORK_LOOP_ENTRY, registers).unwrap(),
                    };
                    let scratch = std::env::temp_dir().join(format!("ferroccl-ptxas-{}-{}", std::process::id(), cap.unwrap_or(0)));
                    let only = cap.map(|_| WORK_LOOP_ENTRY);
                    let r = ptxas::assemble(ptxas_path, &ptx, only, &scratch).unwrap_or_else(|e| panic!("cap {cap:?}: {e}"));
                    std::fs::remove_dir_all(&scratch).ok();
                    (cap, r)
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let mut over = Vec::new();
    for (cap, r) in &reports {
        let loop_report = &r[WORK_LOOP_ENTRY];
        println!("cap {cap:?}: work loop {} registers, {} B spill stores, {} B spill loads", loop_report.registers, loop_report.spill_stores, loop_report.spill_loads);
        if let Some(registers) = cap {
            assert!(loop_report.registers <= *registers, "cap {registers}: the work loop uses {}", loop_report.registers);
        }
        let hot_here: Vec<&str> = hot.iter().copied().filter(|entry| cap.is_none() || entry.starts_with('*')).collect();
        let violations = ptxas::hot_kernel_violations(&hot_here, r);
        assert!(violations.is_empty(), "cap {cap:?}: hot kernels fail the spill check:\n{}", violations.join("\n"));
        for (name, k) in r.iter().filter(|(n, _)| *n == WORK_LOOP_ENTRY || n.contains("5prims3ops") || n.contains("4algo") || WORK_LOOP_MODULES.iter().any(|m| n.contains(m))) {
            let (stores, loads) = match cap {
                None => (0, 0),
                Some(_) => CAPPED_SPILL_BOUNDS
                    .iter()
                    .find(|(part, _, _)| name == part || name.contains(part))
                    .map_or((PROTOCOL_SPILL_BOUND, PROTOCOL_SPILL_BOUND), |&(_, s, l)| (s, l)),
            };
            if k.spill_stores > stores || k.spill_loads > loads {
                over.push(format!("cap {cap:?}, {name}: {k:?} spills more than {stores} / {loads} bytes"));
            }
        }
    }
    assert!(over.is_empty(), "protocol code spills past its bounds:\n{}", over.join("\n"));
}
