//! The collective correctness matrix: cases, their expected results from the host
//! reference, and the rank groups it runs on.

pub mod abort;
pub mod check;
pub mod choice;
pub mod expect;
pub mod gpu;
pub mod group;
pub mod shot;
pub mod twin;
pub mod typed;

/// `FERROCCL_FULL_MATRIX=1`: the twin's matrices run whole, not the part CI runs.
pub fn full_matrix() -> bool {
    std::env::var_os("FERROCCL_FULL_MATRIX").is_some_and(|v| v == "1")
}
