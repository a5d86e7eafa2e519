//! The prebuilt device module, for crates built where the module cannot be: what
//! `ferroccl-link module` writes is what host-shim's build script takes back, byte for
//! byte, and a build of host-shim given it builds no kernel crate and embeds it.

use std::path::PathBuf;
use std::process::Command;

use ferroccl_linker::library::write_module;
use ferroccl_ptx_builder::{prebuilt, sass};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_written_module_is_what_the_build_takes_back() {
    let (module, out) = (scratch("prebuilt-module"), scratch("prebuilt-out"));
    write_module(&module).unwrap();
    let caps: Vec<Option<u32>> = host_shim::module::sass::IMAGES.iter().map(|(cap, _)| *cap).collect();
    assert!(!caps.is_empty(), "this build embeds SASS (tests/run.sh installs ptxas)");
    let cubins = prebuilt::install(&module, &caps, &out.join("ferroccl.ptx"), &out).unwrap();
    assert_eq!(std::fs::read_to_string(out.join("ferroccl.ptx")).unwrap(), host_shim::module::PTX);
    for ((cap, image), cubin) in host_shim::module::sass::IMAGES.iter().zip(&cubins) {
        assert_eq!((cubin.cap, std::fs::read(&cubin.path).unwrap().as_slice()), (*cap, *image), "{}", sass::cubin_name(*cap));
    }
}

/// host-shim checked in a target directory of its own with the prebuilt module named: the
/// build script takes it (its output says so) and builds no kernel crate.
#[test]
fn host_shim_builds_from_a_prebuilt_module() {
    let module = scratch("prebuilt-for-build");
    write_module(&module).unwrap();
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("prebuilt-target");
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new(env!("CARGO"))
        .args(["check", "-p", "host-shim", "--message-format=short"])
        .current_dir(&workspace)
        .env("CARGO_TARGET_DIR", &target)
        .env(prebuilt::PREBUILT_ENV, &module)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!target.join("ferroccl-kernels-target").exists() && !target.join("debug/ferroccl-kernels-target").exists(), "the kernel crate was built");
    let embedded = std::fs::read_dir(target.join("debug/build"))
        .unwrap()
        .flatten()
        .filter(|d| d.file_name().to_string_lossy().starts_with("host-shim-"))
        .map(|d| d.path().join("out/ferroccl.ptx"))
        .filter(|p| p.is_file())
        // The newest: builds of other versions of host-shim may be left in the directory.
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .expect("the build script left the module's PTX");
    assert_eq!(std::fs::read_to_string(embedded).unwrap(), host_shim::module::PTX);
}
