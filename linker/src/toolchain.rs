//! The CUDA tools the linker runs: nvcc, ptxas and nvlink of CUDA 13.0 (the GPU machines'
//! driver's version), from `FERROCCL_CUDA_BIN` or the workspace's `target/tools/cuda-13.0`
//! that `tests/install-cuda.sh` fills.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, io};

/// Where `tests/install-cuda.sh` puts the tools, relative to the workspace.
const WORKSPACE_BIN: &str = "target/tools/cuda-13.0/nvidia/cu13/bin";

/// A CUDA bin directory with nvcc, ptxas and nvlink.
#[derive(Clone, Debug)]
pub struct Toolchain {
    bin: PathBuf,
}

impl Toolchain {
    /// `FERROCCL_CUDA_BIN` if set, else the workspace's tools.
    pub fn find() -> Result<Self, Error> {
        let bin = match std::env::var_os("FERROCCL_CUDA_BIN") {
            Some(dir) => PathBuf::from(dir),
            None => Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(WORKSPACE_BIN),
        };
        Self::at(bin)
    }

    /// The tools of `bin`.
    pub fn at(bin: PathBuf) -> Result<Self, Error> {
        if ["nvcc", "ptxas", "nvlink"].iter().all(|tool| bin.join(tool).is_file()) {
            Ok(Self { bin })
        } else {
            Err(Error::NoToolchain { looked: bin })
        }
    }

    /// Runs `tool` with `args`; its standard error on success, [`Error::Tool`] otherwise.
    pub fn run(&self, tool: &str, args: &[&std::ffi::OsStr]) -> Result<String, Error> {
        let program = self.bin.join(tool);
        let command = std::iter::once(tool.to_string()).chain(args.iter().map(|a| a.to_string_lossy().into_owned())).collect::<Vec<_>>().join(" ");
        log::info!("{command}");
        let out = Command::new(&program).args(args).output().map_err(io(program.display().to_string()))?;
        let mut output = String::from_utf8_lossy(&out.stdout).into_owned();
        output.push_str(&String::from_utf8_lossy(&out.stderr));
        if out.status.success() { Ok(output) } else { Err(Error::Tool { command, output }) }
    }
}
