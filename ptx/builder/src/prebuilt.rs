//! A prebuilt device module, for builds that cannot compile the kernel crate (a crate that
//! depends on host-shim, built with a stable toolchain or without rust-src): a directory
//! holding the module's PTX ([`PTX_FILE`]) and its cubins ([`sass::cubin_name`]), as
//! `ferroccl-link module --out DIR` writes them from a build that could, named by
//! [`PREBUILT_ENV`]. host-shim's build script then takes it instead of building.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sass::{self, BuiltCubin};
use crate::{BuildError, check_ptx};

/// The environment variable that names a prebuilt module's directory.
pub const PREBUILT_ENV: &str = "FERROCCL_PREBUILT_MODULE";

/// The module's PTX in that directory.
pub const PTX_FILE: &str = "ferroccl.ptx";

/// The prebuilt module at `dir` put in place of a build's: its PTX (checked) copied to
/// `ptx_out`, and the cubin of each of `caps` that `dir` holds (checked) copied into
/// `out_dir`. A module without cubins is taken (loading it JIT-compiles the PTX); one
/// whose PTX is missing or not a module, or whose cubin is not one, is refused.
pub fn install(dir: &Path, caps: &[Option<u32>], ptx_out: &Path, out_dir: &Path) -> Result<Vec<BuiltCubin>, BuildError> {
    let bad = |reason: String| BuildError::Prebuilt { dir: dir.into(), reason };
    let ptx_in = dir.join(PTX_FILE);
    let text = std::fs::read_to_string(&ptx_in).map_err(|e| bad(format!("{}: {e}", ptx_in.display())))?;
    check_ptx(&text).map_err(|why| bad(format!("{}: {why}", ptx_in.display())))?;
    std::fs::write(ptx_out, &text).map_err(|source| BuildError::Io { path: ptx_out.into(), source })?;
    let mut cubins = Vec::new();
    for &cap in caps {
        let name = sass::cubin_name(cap);
        let Ok(bytes) = std::fs::read(dir.join(&name)) else { continue };
        sass::check_cubin(&bytes).map_err(|why| bad(format!("{name}: {why}")))?;
        let path: PathBuf = out_dir.join(&name);
        std::fs::write(&path, &bytes).map_err(|source| BuildError::Io { path: path.clone(), source })?;
        cubins.push(BuiltCubin { cap, path, bytes: bytes.len() as u64, time: Duration::ZERO, cached: true, report: None });
    }
    Ok(cubins)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = ".version 8.3\n.target sm_90\n.visible .entry ferroccl_work_loop()\n{\n\tret;\n}\n";

    /// The smallest file `check_cubin` takes: a CUDA ELF header for sm_90 and the loop's
    /// section name.
    fn cubin() -> Vec<u8> {
        let mut bytes = vec![0u8; 0x40];
        bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
        bytes[0x12..0x14].copy_from_slice(&190u16.to_le_bytes());
        bytes[0x31] = 90;
        bytes.extend_from_slice(format!(".text.{}\0", sass::WORK_LOOP_ENTRY).as_bytes());
        bytes
    }

    fn dirs(name: &str) -> (PathBuf, PathBuf) {
        let root = std::env::temp_dir().join(format!("ferroccl-prebuilt-{name}-{}", std::process::id()));
        let (src, out) = (root.join("module"), root.join("out"));
        for d in [&src, &out] {
            let _ = std::fs::remove_dir_all(d);
            std::fs::create_dir_all(d).unwrap();
        }
        (src, out)
    }

    #[test]
    fn a_module_with_its_cubins_is_copied_in() {
        let (src, out) = dirs("whole");
        std::fs::write(src.join(PTX_FILE), PTX).unwrap();
        std::fs::write(src.join(sass::cubin_name(None)), cubin()).unwrap();
        let cubins = install(&src, &[None, Some(128)], &out.join("ferroccl.ptx"), &out).unwrap();
        assert_eq!(std::fs::read_to_string(out.join("ferroccl.ptx")).unwrap(), PTX);
        assert_eq!(cubins.len(), 1, "only the cubin the directory holds");
        assert_eq!((cubins[0].cap, std::fs::read(&cubins[0].path).unwrap()), (None, cubin()));
    }

    #[test]
    fn a_missing_ptx_or_a_bad_cubin_is_refused() {
        let (src, out) = dirs("bad");
        assert!(matches!(install(&src, &[None], &out.join("ferroccl.ptx"), &out), Err(BuildError::Prebuilt { .. })));
        std::fs::write(src.join(PTX_FILE), "not a module").unwrap();
        assert!(matches!(install(&src, &[None], &out.join("ferroccl.ptx"), &out), Err(BuildError::Prebuilt { .. })));
        std::fs::write(src.join(PTX_FILE), PTX).unwrap();
        std::fs::write(src.join(sass::cubin_name(None)), b"\x7fELF but not one").unwrap();
        let err = install(&src, &[None], &out.join("ferroccl.ptx"), &out).unwrap_err();
        assert!(err.to_string().contains(&sass::cubin_name(None)), "{err}");
    }
}
