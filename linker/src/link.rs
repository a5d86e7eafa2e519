//! Joins ferroccl's library with a user's device code into one loadable cubin, offline
//! (`nvlink`, no GPU needed), and reads what a linked cubin defines.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use host_shim::linking::LinkFailure;

use crate::error::{Error, io};
use crate::toolchain::Toolchain;

/// Links `inputs` (relocatable cubins, objects of `nvcc -dc`, or PTX, assembled first as
/// relocatable code) for `arch` into the cubin `out`, which `host_shim::module::Module::load_image`
/// loads. A call no input defines, a function two inputs define, and an input of another
/// architecture are [`Error::Link`] with what nvlink said.
pub fn link(tools: &Toolchain, arch: &str, inputs: &[PathBuf], out: &Path) -> Result<(), Error> {
    let arch_flag = format!("-arch={arch}");
    let mut objects = Vec::new();
    for input in inputs {
        if input.extension() == Some(OsStr::new("ptx")) {
            let cubin = out.with_file_name(format!("{}.{arch}.cubin", input.file_stem().unwrap_or_default().to_string_lossy()));
            tools.run("ptxas", &[arch_flag.as_ref(), "-c".as_ref(), input.as_os_str(), "-o".as_ref(), cubin.as_os_str()])?;
            objects.push(cubin);
        } else {
            objects.push(input.clone());
        }
    }
    let mut args: Vec<&OsStr> = vec![arch_flag.as_ref()];
    args.extend(objects.iter().map(|o| o.as_os_str()));
    args.extend([OsStr::new("-o"), out.as_os_str()]);
    tools.run("nvlink", &args).map(|_| ()).map_err(|e| match &e {
        Error::Tool { output, .. } => LinkFailure::from_log(output).map_or(e, Error::Link),
        _ => e,
    })
}

/// A function symbol of a cubin: its name, whether the cubin defines it (else it only
/// refers to it), its code's bytes, and whether it is weak (a default another input's
/// definition replaces).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionSymbol {
    pub name: String,
    pub defined: bool,
    pub size: u64,
    pub weak: bool,
}

/// The function symbols of the ELF file `cubin` (read with binutils' `readelf`).
pub fn functions(cubin: &Path) -> Result<Vec<FunctionSymbol>, Error> {
    let out = Command::new("readelf").args(["-s", "-W"]).arg(cubin).output().map_err(io("readelf"))?;
    if !out.status.success() {
        return Err(Error::Tool { command: format!("readelf -s -W {}", cubin.display()), output: String::from_utf8_lossy(&out.stderr).into_owned() });
    }
    // Num: Value Size Type Bind Vis Ndx Name, where Vis may be two words (`[<other>: 10]`
    // for a kernel entry): the index and the name are the last two.
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            (cols.len() >= 8 && cols[3] == "FUNC").then(|| FunctionSymbol {
                name: cols[cols.len() - 1].to_string(),
                defined: cols[cols.len() - 2] != "UND",
                size: cols[2].parse().unwrap_or(0),
                weak: cols[4] == "WEAK",
            })
        })
        .collect())
}
