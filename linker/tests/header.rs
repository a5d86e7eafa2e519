//! The committed C header against the Rust definitions it comes from: regenerated, it is
//! the same text; what it declares is what the runtime's module exports, parameter by
//! parameter; a C and a C++ compiler agree with Rust on every size, offset and value.

use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use ferroccl_linker::header;
use ferroccl_linker::signature::{header_functions, ptx_functions};
use host_shim::device_rt::abi::{ShmemHandle, Status};
use host_shim::device_rt::dtype::{Bf16, F16};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn committed() -> String {
    std::fs::read_to_string(root().join("include/ferroccl_device.h")).unwrap()
}

#[test]
fn the_committed_header_is_what_the_rust_definitions_generate() {
    let fresh = header::generate(&root().join("../device-rt")).unwrap();
    assert!(fresh == committed(), "linker/include/ferroccl_device.h is stale: run `cargo run -p ferroccl-linker -- header --out linker/include/ferroccl_device.h`");
}

#[test]
fn the_header_declares_what_the_module_exports() {
    let mut declared = header_functions(&committed(), "FERROCCL_DEVICE").unwrap();
    let mut exported = ptx_functions(host_shim::module::PTX, "ferroccl_").unwrap();
    declared.sort();
    exported.sort();
    assert!(declared.len() >= 40, "{} functions declared", declared.len());
    assert_eq!(declared, exported);
}

/// The Rust kernel that takes the heap handle by value (the cuda-interop example's) gets
/// it as nvcc passes a `ferroccl_heap`: one parameter of its size, 8-byte aligned.
#[test]
fn a_rust_kernel_takes_the_handle_by_value_as_nvcc_lays_it_out() {
    let ptx = host_shim::module::PTX;
    let entry = ptx.find(".entry ferroccl_interop_scale_all_reduce_bias(").expect("the Rust kernel is in the module");
    let first = ptx[entry..].lines().nth(1).unwrap().trim();
    let want = format!(".param .align 8 .b8 ferroccl_interop_scale_all_reduce_bias_param_0[{}],", size_of::<ShmemHandle>());
    assert_eq!(first, want);
}

/// A translation unit that includes the header and asserts, at compile time, what Rust
/// says of every type the header defines.
fn layout_checks() -> String {
    let mut checks = vec![
        format!("sizeof(ferroccl_heap) == {}", size_of::<ShmemHandle>()),
        format!("sizeof(ferroccl_status) == {}", size_of::<Status>()),
        format!("sizeof(ferroccl_half) == {}", size_of::<F16>()),
        format!("sizeof(ferroccl_bfloat16) == {}", size_of::<Bf16>()),
    ];
    for (field, offset) in [
        ("bases", offset_of!(ShmemHandle, bases)),
        ("heap_bytes", offset_of!(ShmemHandle, heap_bytes)),
        ("abort", offset_of!(ShmemHandle, abort)),
        ("spin_budget_ns", offset_of!(ShmemHandle, spin_budget_ns)),
        ("my_pe", offset_of!(ShmemHandle, my_pe)),
        ("n_pes", offset_of!(ShmemHandle, n_pes)),
    ] {
        checks.push(format!("offsetof(ferroccl_heap, {field}) == {offset}"));
    }
    for (name, status) in [("SUCCESS", Status::Success), ("ABORTED", Status::Aborted), ("TIMED_OUT", Status::TimedOut), ("INVALID_ARGUMENT", Status::InvalidArgument)] {
        checks.push(format!("FERROCCL_STATUS_{name} == {}", status as u32));
    }
    let asserts: String = checks.iter().map(|c| format!("static_assert({c}, \"{c}\");\n")).collect();
    format!("#include <stddef.h>\n#include <assert.h>\n#include \"ferroccl_device.h\"\n{asserts}")
}

/// Compiles `source` (only its syntax and its static assertions) with `compiler` and the
/// language flags `flags`; `Err` with the compiler's output when it refuses.
fn compile(compiler: &str, flags: &[&str], source: &str, dir: &Path) -> Result<(), String> {
    let file = dir.join(if flags.contains(&"c++") { "layout.cc" } else { "layout.c" });
    std::fs::write(&file, source).unwrap();
    let out = Command::new(compiler)
        .args(flags)
        .arg("-fsyntax-only")
        .arg("-I")
        .arg(root().join("include"))
        .arg(&file)
        .output()
        .map_err(|e| format!("{compiler}: {e}"))?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn c_and_cpp_compilers_agree_with_rust_on_the_layout() {
    let dir = scratch("layout");
    let source = layout_checks();
    compile("cc", &["-std=c11", "-x", "c"], &source, &dir).unwrap();
    compile("c++", &["-std=c++17", "-x", "c++"], &source, &dir).unwrap();
}

/// The check can fail: a size Rust does not give is refused by the compiler.
#[test]
fn a_layout_the_header_does_not_have_is_refused() {
    let dir = scratch("layout-wrong");
    let wrong = layout_checks().replace(&format!("sizeof(ferroccl_heap) == {}", size_of::<ShmemHandle>()), &format!("sizeof(ferroccl_heap) == {}", size_of::<ShmemHandle>() + 8));
    let err = compile("cc", &["-std=c11", "-x", "c"], &wrong, &dir).unwrap_err();
    assert!(err.contains("sizeof(ferroccl_heap)"), "{err}");
}
