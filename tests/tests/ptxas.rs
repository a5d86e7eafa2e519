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
/// default communicator's included) nothing may spill: ptxas 13.0 reported none on
/// 2026-11-23.
const PROTOCOL_SPILL_BOUND: u32 = 64;

/// The same under a register cap, per function (the largest of any cap): measured with
/// ptxas 13.0 on 2026-11-23 (cap 128: work loop 384 / 536, `ring::run` 628 / 1560,
/// `reduce_scatter_paired` 116 / 160, `exec::collective` 44 / 52, primitives ≤ 24 / 28;
/// issue 16 took `exec::collective` to 52 / 60 at caps 128 and 144 by handing the item's
/// plan to the algorithm, and the one-shot/two-shot algorithms spill at most 24 / 24, under
/// the default bound). On a GPU they cost 4-8 us per small collective (an H200, 24 x 512
/// against 24 x 256 in one run: bench/results/issue15-spills.md), so the default loop is
/// 256 threads, uncapped, where nothing spills. The check fails if they grow. Call
/// channels (2026-11-25) took the work loop to 400 / 556 at caps 152 to 128 (ptxas 13.0:
/// the mailbox item's participation, computed out of line, and its completion count);
/// one-shot/two-shot calls on the call kernel alone (the same day, eighth session) to 400 /
/// 560 (the collective's part, passed apart from its channel; every other function
/// unchanged). NVLS (2026-11-26, tenth session; forced only, so never the default loop's
/// path) spills under caps: `nvls::run` 432 / 488, all-reduce's `direct_recv_direct_send`
/// 68 / 212; the same merge (a third primitives group, the NVLS connections in `CollCtx`)
/// took `plan_collective` to 112 / 48, `exec::collective` to 56 / 64 and
/// `reduce_scatter_paired` to 120 / 164 (the largest over caps 224 to 128, ptxas 13.0).
/// `DataType::size` from a packed constant rather than a table in global memory
/// (2026-11-26, sixteenth session: 0.84-0.94 of the time of every small stream-ordered
/// call in CUDA graphs on two H200s, `bench/results/session16.md` §3) took, at caps 152
/// and 128, `plan_collective` to 112 / 56, `exec::collective` to 60 / 68,
/// `reduce_scatter_paired` to 104 / 180, all-reduce's `direct_recv_direct_send` to 76 /
/// 244 and the software-multicast `scatter` to 16 / 32 (cap 224 unchanged; caps 200, 184,
/// 168, 144 and 136 not assembled with it). Loops that sleep when idle (2026-11-27,
/// twenty-first session: the loop's sleep handshake, out of line, and every call kernel
/// counting itself for it) took, at cap 128, `ring::run` to 612 / 1576,
/// `reduce_scatter_paired` to 108 / 184 and `direct_recv_direct_send` to 84 / 252 (caps
/// 224 and 152 within the bounds before; uncapped, nothing spills). The one-shot/two-shot
/// collectives' push form on every rank count (2026-11-27, twenty-third session) took
/// `exec::collective` to 76 / 72 at caps 168 to 128, and its two-shot
/// (`all_reduce_two_shot_pushed`) spills 52 / 136 at cap 128 (within the default bound at
/// every other cap; uncapped, nothing spills). Its direct outputs (2026-11-28, twenty-eighth
/// session) first took it to 68 / 184 at cap 128; with the reduced block's sending and the
/// copy out apart (`send_reduced_block` 24 / 60, `copy_reduced_blocks_out` 0 / 24) it
/// spills 32 / 40 there and 8 / 0 at cap 152.
const CAPPED_SPILL_BOUNDS: [(&str, u32, u32); 9] = [
    ("ferroccl_work_loop", 400, 560),
    ("4algo4ring3run", 628, 1576),
    ("4algo4ring21reduce_scatter_paired", 120, 184),
    ("4work4exec10collective", 76, 72),
    ("4algo8dispatch15plan_collective", 112, 56),
    ("4algo4nvls3run", 432, 488),
    ("23direct_recv_direct_send", 84, 252),
    ("5prims3ops", 24, 32),
    ("26all_reduce_two_shot_pushed", 52, 136),
];

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
/// but a growth has so far shown at several caps at once (2026-11-26: `plan_collective`
/// and `exec::collective` past their bounds at 168, 152 and 128). Each capped shape costs
/// about a CPU minute of ptxas: a plain `cargo test` runs these four (111 s on 2 cores,
/// 2026-12-02), CI (`tests/run.sh`) every one (341 s).
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
        for (name, k) in r.iter().filter(|(n, _)| *n == WORK_LOOP_ENTRY || n.contains("5prims3ops") || n.contains("4algo") || n.contains("4work4exec")) {
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
