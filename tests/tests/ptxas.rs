//! The PTX that host-shim embeds assembles with `ptxas -arch=sm_90a -v`, nothing on
//! `hot-kernels.txt` spills, and the loop's protocol code spills at most a bound.

use ferroccl_tests::ptxas;

/// Spill bytes the work loop's entry and the protocol code may have (measured: 28).
const PROTOCOL_SPILL_BOUND: u32 = 64;

#[test]
fn embedded_ptx_assembles_and_hot_kernels_do_not_spill() {
    let ptxas_path = ptxas::find().unwrap_or_else(|e| panic!("{e}"));
    let scratch = std::env::temp_dir().join(format!("ferroccl-ptxas-{}", std::process::id()));
    let reports = ptxas::assemble(&ptxas_path, host_shim::module::PTX, &scratch).unwrap_or_else(|e| panic!("{e}"));
    for (name, r) in &reports {
        println!(
            "{name}: {} registers, {} B stack, {} B spill stores, {} B spill loads",
            r.registers, r.stack_frame, r.spill_stores, r.spill_loads
        );
    }
    let hot_text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/hot-kernels.txt")).unwrap();
    let hot = ptxas::hot_list(&hot_text);
    assert!(!hot.is_empty(), "hot-kernels.txt lists no kernel");
    let violations = ptxas::hot_kernel_violations(&hot, &reports);
    assert!(violations.is_empty(), "hot kernels fail the spill check:\n{}", violations.join("\n"));
    // The loop's entry and the protocol code: call-site saves around the movers, bounded.
    for (name, r) in reports.iter().filter(|(n, _)| *n == "ferroccl_work_loop" || n.contains("5prims3ops") || n.contains("4algo4ring3run")) {
        assert!(r.spill_stores <= PROTOCOL_SPILL_BOUND && r.spill_loads <= PROTOCOL_SPILL_BOUND, "{name}: {r:?} spills more than {PROTOCOL_SPILL_BOUND} bytes");
    }
    std::fs::remove_dir_all(&scratch).ok();
}
