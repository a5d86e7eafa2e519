//! Test support: running `ptxas` on ferroccl's PTX and reading its resource report; how
//! the programs that run as PEs or ranks end.

pub mod outcome;
pub mod ptxas;
