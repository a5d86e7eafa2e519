//! The linker's one error type.

use std::fmt;
use std::path::PathBuf;

/// What went wrong making the library or linking with it.
#[derive(Debug)]
pub enum Error {
    /// The CUDA toolchain is not where it was looked for.
    NoToolchain { looked: PathBuf },
    /// A tool could not be started, or a file not read or written.
    Io { what: String, source: std::io::Error },
    /// A call to a device function that no input defines.
    Unresolved { symbol: String, referenced_in: String },
    /// A device function defined by two inputs.
    Duplicate { symbol: String, defined_in: String, first_defined_in: String },
    /// An input built for another architecture than the link's.
    ArchMismatch { input: String, arch: String },
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
            Self::Unresolved { symbol, referenced_in } => write!(f, "`{symbol}`, called in {referenced_in}, is defined by no input (is ferroccl's library among them?)"),
            Self::Duplicate { symbol, defined_in, first_defined_in } => write!(f, "`{symbol}` is defined twice: in {defined_in} and first in {first_defined_in}"),
            Self::ArchMismatch { input, arch } => write!(f, "{input} was built for another architecture than the link's {arch}"),
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
