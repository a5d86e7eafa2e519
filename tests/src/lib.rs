//! Test support: running `ptxas` on ferroccl's PTX and reading its resource report.

pub mod ptxas;
