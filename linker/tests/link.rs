//! The library's forms and the offline link, with the CUDA 13.0 toolchain from PyPI's
//! wheels (`tests/install-cuda.sh`; `FERROCCL_CUDA_BIN` names another): the cuda-interop
//! example's kernels, compiled as relocatable device code, link with ferroccl's cubin and
//! through its archive; every call they make is resolved in the linked cubin; a missing
//! library, a library given twice and an object of another architecture are each their
//! own error.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ferroccl_linker::Error;
use ferroccl_linker::library::{self, Library};
use ferroccl_linker::link::{functions, link};
use ferroccl_linker::toolchain::Toolchain;
use host_shim::linking::LinkFailure;

const ARCH: &str = "sm_90a";

fn scratch_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("link")
}

fn scratch(name: &str) -> PathBuf {
    scratch_dir().join(name)
}

fn tools() -> Toolchain {
    Toolchain::find().unwrap()
}

/// The library, built once for every test here (its `ptxas -c` takes most of a CPU minute).
fn lib() -> &'static Library {
    static LIB: OnceLock<Library> = OnceLock::new();
    LIB.get_or_init(|| library::build(&tools(), &scratch_dir().join("lib"), ARCH).unwrap())
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cuda-interop/fused.cu")
}

/// What nvcc makes of the example: relocatable device code in a host object (`-dc`, what
/// `nvcc -rdc=true` users link), a relocatable cubin, or relocatable PTX.
#[derive(Clone, Copy)]
enum Form {
    Object,
    Cubin,
    Ptx,
}

/// The example compiled by nvcc for `arch` in `form`, once for every test here (they run
/// on parallel threads: one compile under the lock, then the file).
fn compile(arch: &str, form: Form) -> PathBuf {
    static COMPILED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut compiled = COMPILED.lock().unwrap();
    let (flags, ext): (&[&str], _) = match form {
        Form::Object => (&["-dc"], "o"),
        Form::Cubin => (&["-cubin", "-rdc=true"], "cubin"),
        Form::Ptx => (&["-ptx", "-rdc=true"], "ptx"),
    };
    let out = scratch(&format!("fused.{arch}.{ext}"));
    if compiled.contains(&out) {
        return out;
    }
    std::fs::create_dir_all(scratch_dir()).unwrap();
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let (arch_flag, source) = (format!("-arch={arch}"), example());
    let mut args: Vec<&OsStr> = vec![arch_flag.as_ref(), "-I".as_ref(), include.as_os_str()];
    args.extend(flags.iter().map(OsStr::new));
    args.extend([source.as_os_str(), "-o".as_ref(), out.as_os_str()]);
    tools().run("nvcc", &args).unwrap();
    compiled.push(out.clone());
    out
}

/// The ferroccl functions a relocatable cubin calls (its undefined function symbols).
fn called_ferroccl_functions(cubin: &Path) -> Vec<String> {
    functions(cubin).unwrap().into_iter().filter(|f| !f.defined && f.name.starts_with("ferroccl_")).map(|f| f.name).collect()
}

#[test]
fn the_example_links_with_the_cubin_and_every_call_resolves() {
    let called = called_ferroccl_functions(&compile(ARCH, Form::Cubin));
    let user = compile(ARCH, Form::Object);
    assert!(called.contains(&"ferroccl_all_reduce_sum_f32_block".to_string()) && called.len() >= 5, "the example calls ferroccl: {called:?}");
    let out = scratch("fused.linked.cubin");
    link(&tools(), ARCH, &[user, lib().cubin.clone()], &out).unwrap();
    let linked = functions(&out).unwrap();
    let defined = |name: &str| linked.iter().any(|f| f.name == name && f.defined);
    for name in called.iter().map(String::as_str).chain(["scale_all_reduce_bias", "two_shot_then_get"]) {
        assert!(defined(name), "{name} is not defined in the linked cubin");
    }
    assert!(linked.iter().all(|f| f.defined), "undefined in the linked cubin: {:?}", linked.iter().filter(|f| !f.defined).collect::<Vec<_>>());
}

/// The application's function the example defines replaces the library's weak default:
/// the link takes it without a duplicate, and the linked cubin holds the example's code
/// for it, not the library's.
#[test]
fn the_applications_function_replaces_the_librarys_weak_default() {
    let symbol = |cubin: &Path| functions(cubin).unwrap().into_iter().find(|f| f.name == "ferroccl_app_work" && f.defined).expect("ferroccl_app_work defined");
    let (user, library) = (symbol(&compile(ARCH, Form::Cubin)), symbol(&lib().cubin));
    assert!(library.weak && !user.weak, "the library's is weak, the example's strong: {library:?} {user:?}");
    assert_ne!(user.size, library.size, "the two definitions differ, so the linked one tells which was taken");
    let out = scratch("app.linked.cubin");
    link(&tools(), ARCH, &[compile(ARCH, Form::Object), lib().cubin.clone()], &out).unwrap();
    let linked = symbol(&out);
    assert_eq!((linked.size, linked.weak), (user.size, false), "{linked:?}");
}

#[test]
fn relocatable_ptx_links_too() {
    let user = compile(ARCH, Form::Ptx);
    let out = scratch("fused-ptx.linked.cubin");
    link(&tools(), ARCH, &[user, lib().cubin.clone()], &out).unwrap();
    assert!(functions(&out).unwrap().iter().any(|f| f.name == "scale_all_reduce_bias" && f.defined));
}

#[test]
fn the_archive_links_with_nvcc_and_is_what_resolves_the_calls() {
    let user = compile(ARCH, Form::Object);
    let dir = lib().archive.parent().unwrap();
    let out = scratch("fused.dlink.o");
    let arch_flag = format!("-arch={ARCH}");
    let base: Vec<&OsStr> = vec![arch_flag.as_ref(), "-dlink".as_ref(), user.as_os_str(), "-o".as_ref(), out.as_os_str()];
    let mut with_lib = base.clone();
    with_lib.extend(["-L".as_ref(), dir.as_os_str(), "-lferroccl_device".as_ref()]);
    tools().run("nvcc", &with_lib).unwrap();
    let without = tools().run("nvcc", &base).unwrap_err().to_string();
    assert!(without.contains("Undefined reference to 'ferroccl_"), "{without}");
}

#[test]
fn a_link_without_the_library_names_the_missing_function() {
    let user = compile(ARCH, Form::Object);
    match link(&tools(), ARCH, &[user], &scratch("unresolved.cubin")) {
        Err(Error::Link(LinkFailure::Unresolved { symbol, referenced_in })) => {
            assert!(symbol.starts_with("ferroccl_") && referenced_in.contains("fused"), "{symbol} in {referenced_in}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_library_given_twice_is_a_duplicate_definition() {
    let user = compile(ARCH, Form::Object);
    let cubin = lib().cubin.clone();
    match link(&tools(), ARCH, &[user, cubin.clone(), cubin], &scratch("duplicate.cubin")) {
        Err(Error::Link(LinkFailure::Duplicate { symbol, .. })) => assert!(!symbol.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_object_of_another_architecture_is_refused() {
    let user = compile("sm_80", Form::Cubin);
    match link(&tools(), ARCH, &[lib().cubin.clone(), user], &scratch("arch.cubin")) {
        Err(Error::Link(LinkFailure::ArchMismatch { input })) => assert!(input.contains("sm_80"), "{input}"),
        other => panic!("{other:?}"),
    }
}
