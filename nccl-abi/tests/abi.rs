//! The library as C programs see it: `abi.c` compiled with the system's C compiler against
//! `include/nccl.h`, linked with this build's `libnccl.so` under its soname
//! (`libnccl.so.2`), and run. No GPU needed (with one, its one-rank init runs too).

use std::path::{Path, PathBuf};
use std::process::Command;

/// This build's `libnccl.so`: beside the test in `deps` (where `cargo test` leaves it),
/// or in the profile's folder above (where `cargo build` copies it), the newer of the two.
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let candidates = [deps.join("libnccl.so"), deps.parent().unwrap().join("libnccl.so")];
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    candidates.into_iter().filter(|p| p.is_file()).max_by_key(|p| modified(p)).expect("cargo built the cdylib (libnccl.so) with this test")
}

#[test]
fn a_c_program_sees_nccls_abi() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("ferroccl-nccl-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["libnccl.so", "libnccl.so.2"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(library(), &link).unwrap();
    }
    let program = dir.join("abi");
    let compiled = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(here.join("include"))
        .arg(here.join("tests/abi.c"))
        .arg("-L")
        .arg(&dir)
        .arg("-lnccl")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .arg("-o")
        .arg(&program)
        .output()
        .expect("a C compiler (cc, or $CC)");
    assert!(compiled.status.success(), "compiling abi.c: {}", String::from_utf8_lossy(&compiled.stderr));
    let needed = Command::new("readelf").arg("-d").arg(&program).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    assert!(needed.contains("libnccl.so.2"), "the program does not need libnccl.so.2: {needed}");
    let ran = Command::new(&program).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ran.status.success(), "abi.c: {}{}", String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
    assert!(String::from_utf8_lossy(&ran.stdout).contains("every ABI check held"));
}
