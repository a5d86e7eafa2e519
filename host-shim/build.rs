//! Builds `ptx/kernels` into one `.ptx` (through `ferroccl-ptx-builder`) and leaves it in
//! `OUT_DIR` for `src/module.rs` to embed. Reruns only when the kernel crate or a crate it
//! depends on changes.

use std::path::PathBuf;

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let kernel_dir = manifest_dir.join("../ptx/kernels");
    let build = ferroccl_ptx_builder::PtxBuild::new(&kernel_dir, out_dir.join("kernels-target"));
    let result = build.watched_paths().and_then(|paths| {
        for path in paths {
            println!("cargo::rerun-if-changed={}", path.display());
        }
        build.build(&out_dir.join("ferroccl.ptx"))
    });
    if let Err(e) = result {
        eprintln!("error: building ferroccl's PTX module: {e}");
        std::process::exit(1);
    }
}
