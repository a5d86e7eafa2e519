//! How the programs that run as a PE or a rank in a process of their own (`twin-pe`,
//! `twin-rank`) end, which their tests read: 0 all checked; 2 a host call failed (the
//! error is printed: a PE gone, a mismatch); 3 the process left on purpose (the program
//! exits itself); 4 a wrong result.

use std::process::ExitCode;

/// Why a program failed.
pub enum Fail {
    /// A host call failed.
    Host(String),
    /// A result is wrong.
    Wrong(String),
}

impl From<host_shim::Error> for Fail {
    fn from(e: host_shim::Error) -> Self {
        Self::Host(e.to_string())
    }
}

/// The exit status of `outcome`, its failure printed after `program`'s name.
pub fn exit(program: &str, outcome: Result<(), Fail>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail::Host(why)) => {
            eprintln!("{program}: {why}");
            ExitCode::from(2)
        }
        Err(Fail::Wrong(why)) => {
            eprintln!("{program}: wrong result: {why}");
            ExitCode::from(4)
        }
    }
}
