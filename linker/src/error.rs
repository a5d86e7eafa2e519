//! The linker's one error type.

use std::fmt;
use std::path::PathBuf;

use host_shim::linking::LinkFailure;

/// What went wrong making the library or linking with it.
#[derive(Debug)]
pub enum Error {
    /// The CUDA toolchain is not where it was looked for.
    NoToolchain { looked: PathBuf },
    /// A tool could not be started, or a file not read or written.
    Io { what: String, source: std::io::Error },
    /// nvlink refused the inputs for a reason its log names.
    Link(LinkFailure),
    /// A tool failed for another reason: its command and what it printed.
    Tool { command: String, output: String },
    /// The header could not be generated.
    Header(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoToolchain { looked } => write!(
                f,
                "no CUDA toolchain at {} (run tests/install-cuda.sh, or set FERROCCL_CUDA_BIN to a CUDA 13.0 bin directory with nvcc, ptxas and nvlink)",
                looked.display()
            ),
            Self::Io { what, source } => write!(f, "{what}: {source}"),
            Self::Link(failure) => failure.fmt(f),
            Self::Tool { command, output } => write!(f, "`{command}` failed:\n{output}"),
            Self::Header(why) => write!(f, "the header: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An [`Error::Io`] of `what`.
pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}
