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
