//! ferroccl's device library in the forms consumers take, from the runtime's module (its
//! kernels and the C surface, `device_rt::cabi`): the PTX (for `ptxas`, the driver's JIT,
//! nvJitLink), a relocatable cubin of one architecture (for `nvlink`), and an archive of a
//! host object that embeds it (for `nvcc -rdc=true ... -lferroccl_device`), with the C
//! header beside them.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::error::{Error, io};
use crate::toolchain::Toolchain;

/// The file names the library's forms take in its directory.
pub const PTX: &str = "ferroccl_device.ptx";
pub const HEADER: &str = "ferroccl_device.h";
pub const ARCHIVE: &str = "libferroccl_device.a";

/// The library's files.
#[derive(Clone, Debug)]
pub struct Library {
    pub ptx: PathBuf,
    pub cubin: PathBuf,
    pub archive: PathBuf,
    pub header: PathBuf,
}

/// The relocatable cubin's name for `arch` (`sm_90a`).
pub fn cubin_name(arch: &str) -> String {
    format!("ferroccl_device.{arch}.cubin")
}

/// Writes every form of the library for `arch` into `dir` (created if missing).
pub fn build(tools: &Toolchain, dir: &Path, arch: &str) -> Result<Library, Error> {
    std::fs::create_dir_all(dir).map_err(io(dir.display().to_string()))?;
    let lib = Library { ptx: dir.join(PTX), cubin: dir.join(cubin_name(arch)), archive: dir.join(ARCHIVE), header: dir.join(HEADER) };
    std::fs::write(&lib.ptx, host_shim::module::PTX).map_err(io(lib.ptx.display().to_string()))?;
    std::fs::write(&lib.header, include_str!("../include/ferroccl_device.h")).map_err(io(lib.header.display().to_string()))?;
    let arch_flag = format!("-arch={arch}");
    tools.run("ptxas", &[arch_flag.as_ref(), "-c".as_ref(), lib.ptx.as_os_str(), "-o".as_ref(), lib.cubin.as_os_str()])?;
    // nvcc links archives of host objects only: the cubin goes in through `nvcc -dc`,
    // which wraps it in one (a raw cubin in an archive is skipped as incompatible).
    let object = dir.join("ferroccl_device.o");
    tools.run("nvcc", &[arch_flag.as_ref(), "-dc".as_ref(), lib.cubin.as_os_str(), "-o".as_ref(), object.as_os_str()])?;
    let _ = std::fs::remove_file(&lib.archive);
    tools.run("nvcc", &[OsStr::new("-lib"), object.as_os_str(), "-o".as_ref(), lib.archive.as_os_str()])?;
    Ok(lib)
}

/// Writes the module this build embeds into `dir` (created if missing) as a prebuilt
/// module: its PTX and its cubins under the names host-shim's build script takes with
/// `FERROCCL_PREBUILT_MODULE=dir` (how a crate built with a stable toolchain gets the
/// device module). Returns the files written.
pub fn write_module(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    use ferroccl_ptx_builder::{prebuilt, sass};
    std::fs::create_dir_all(dir).map_err(io(dir.display().to_string()))?;
    let mut files = vec![(dir.join(prebuilt::PTX_FILE), host_shim::module::PTX.as_bytes())];
    files.extend(host_shim::module::sass::IMAGES.iter().map(|&(cap, image)| (dir.join(sass::cubin_name(cap)), image)));
    for (path, bytes) in &files {
        std::fs::write(path, bytes).map_err(io(path.display().to_string()))?;
    }
    Ok(files.into_iter().map(|(path, _)| path).collect())
}
