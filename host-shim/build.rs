//! Builds `ptx/kernels` into one `.ptx` (through `ferroccl-ptx-builder`) and leaves it in
//! `OUT_DIR` for `src/module.rs` to embed, with sm_90a SASS of it (cubins made by ptxas)
//! so that loading the module on a Hopper GPU needs no JIT. Without a ptxas the build
//! fails, saying how to install one (`bash tests/install-ptxas.sh`), unless
//! `FERROCCL_PTXAS=none` turns SASS off. Reruns only when the kernel crate or a crate it
//! depends on changes, when `$FERROCCL_PTXAS` changes, or when the ptxas it used changes.
//! With `$FERROCCL_PREBUILT_MODULE` naming a prebuilt module's directory (what
//! `ferroccl-link module` writes), it takes that instead and builds nothing: the route of a
//! crate built with a stable toolchain.

use std::path::{Path, PathBuf};
use std::time::Instant;

use ferroccl_ptx_builder::{BuildError, PtxBuild, PtxasLookup, PtxasSource, prebuilt, remove_if_present, sass};

/// Work loop widths whose register-capped module gets SASS in a release build: 512
/// threads, the widest loop a communicator is commonly given. The unpatched module, for
/// loops of up to 256 threads (the default communicator's; a unit test of `module.rs`
/// checks that it has SASS) and everything else, gets SASS in every build (CI's ptxas
/// checks read its report). Other widths, and every capped width in a debug build
/// (clippy's and the tests', which CI runs on CPUs: a capped module is a whole second
/// ptxas run there), JIT the PTX at load time.
const SASS_THREADS: &[u32] = &[512];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let workspace = manifest_dir.parent().expect("host-shim lies in the workspace");
    let kernel_dir = workspace.join("ptx/kernels");
    let build = PtxBuild::new(&kernel_dir, shared_dir(&out_dir, "ferroccl-kernels-target"));
    let ptx = out_dir.join("ferroccl.ptx");
    let embed = out_dir.join("sass.rs");
    println!("cargo::rerun-if-env-changed={}", sass::PTXAS_ENV);
    println!("cargo::rerun-if-env-changed={}", prebuilt::PREBUILT_ENV);
    if let Some(dir) = std::env::var_os(prebuilt::PREBUILT_ENV).filter(|d| !d.is_empty()) {
        if let Err(e) = take_prebuilt(Path::new(&dir), &ptx, &out_dir, &embed) {
            eprintln!("error: taking ferroccl's prebuilt device module: {e}");
            std::process::exit(1);
        }
        return;
    }
    // ptxas is looked for first, so that a build without one fails before the minutes
    // of the kernel crate's build.
    let result = remove_if_present(&embed).and_then(|()| sass::find_ptxas_from_env(workspace)).and_then(|ptxas| {
        let ptxas = match ptxas {
            PtxasLookup::Found { path, source } => Some((path, source)),
            PtxasLookup::Disabled => None,
            PtxasLookup::NotFound => return Err(BuildError::NoPtxas { workspace: workspace.into() }),
        };
        for path in build.watched_paths()? {
            println!("cargo::rerun-if-changed={}", path.display());
        }
        build.build(&ptx)?;
        build_sass(&ptx, &out_dir, &embed, ptxas)
    });
    if let Err(e) = result {
        eprintln!("error: building ferroccl's PTX module: {e}");
        std::process::exit(1);
    }
}

/// Folder `name` that the builds of this tree share, found from `OUT_DIR`
/// (`<target dir>/[<triple>/]<profile>/build/host-shim-<hash>/out`): `<target dir>/<name>`
/// where the target dir holds cargo's `CACHEDIR.TAG` (every profile shares it), else
/// `<profile dir>/<name>` (a fresh clone's target dir has no tag: clippy's and the tests'
/// builds, which get their own `OUT_DIR`s, still share it), else `OUT_DIR/<name>`. The
/// cubin cache (`build_cubins` says why sharing it is safe) and the nested nvptx build's
/// target dir (always a release build of the same crate, whatever this build's profile,
/// features or lints; `PtxBuild::build` holds a lock on it), so that clippy's build and
/// the tests' compile the kernel crate once between them, not once each.
fn shared_dir(out_dir: &Path, name: &str) -> PathBuf {
    let tagged = out_dir.ancestors().find(|dir| dir.join("CACHEDIR.TAG").is_file());
    let profile = || out_dir.ancestors().find(|dir| dir.file_name().is_some_and(|n| n == "build")).and_then(Path::parent);
    tagged.or_else(profile).unwrap_or(out_dir).join(name)
}

/// The work loop's register caps whose cubins this build embeds: the unpatched module, and
/// in a release build the caps of [`SASS_THREADS`].
fn sass_caps() -> Vec<Option<u32>> {
    let mut caps = vec![None];
    if std::env::var("PROFILE").is_ok_and(|profile| profile == "release") {
        caps.extend(SASS_THREADS.iter().map(|&threads| sass::work_loop_max_registers(threads)));
    }
    caps.dedup();
    caps
}

/// The prebuilt module at `dir` in place of a build: its PTX at `ptx`, its cubins in
/// `out_dir`, `embed` naming them.
fn take_prebuilt(dir: &Path, ptx: &Path, out_dir: &Path, embed: &Path) -> Result<(), BuildError> {
    println!("cargo::rerun-if-changed={}", dir.display());
    let caps = sass_caps();
    for cap in &caps {
        println!("cargo::rerun-if-changed={}", dir.join(sass::cubin_name(*cap)).display());
    }
    let cubins = prebuilt::install(dir, &caps, ptx, out_dir)?;
    let missing = cubins.is_empty().then(|| format!("the prebuilt module in {} has no cubin", dir.display()));
    std::fs::write(embed, sass::embed_source(&cubins, missing.as_deref(), false)).map_err(|source| BuildError::Io { path: embed.into(), source })
}

/// Compiles the PTX at `ptx` to cubins in `out_dir` with `ptxas` (its path and where it
/// was found) and writes `embed`, the source that `src/module.rs` includes to embed them;
/// without one (`FERROCCL_PTXAS=none`), an `embed` with none, and a warning.
fn build_sass(ptx: &Path, out_dir: &Path, embed: &Path, ptxas: Option<(PathBuf, PtxasSource)>) -> Result<(), BuildError> {
    let caps = sass_caps();
    for cap in &caps {
        remove_if_present(&out_dir.join(sass::cubin_name(*cap)))?;
    }
    let given = std::env::var_os(sass::PTXAS_ENV).is_some_and(|v| !v.is_empty() && v != "none");
    let (cubins, missing) = match ptxas {
        Some((path, source)) => {
            println!("cargo::rerun-if-changed={}", path.display());
            let text = std::fs::read_to_string(ptx).map_err(|source| BuildError::Io { path: ptx.into(), source })?;
            let start = Instant::now();
            let cubins = sass::build_cubins(&path, &text, &caps, &out_dir.join("sass-scratch"), &shared_dir(out_dir, "ferroccl-sass-cache"), out_dir)?;
            // Seen in the build script's `output` file (and with `cargo build -vv`).
            println!("ferroccl: ptxas {} (found through {source:?}): {} cubins in {:.1} s", path.display(), cubins.len(), start.elapsed().as_secs_f64());
            for cubin in &cubins {
                let how = if cubin.cached { "the same PTX's cubin of an earlier build".to_owned() } else { format!("ptxas ran {:.1} s, alongside the others", cubin.time.as_secs_f64()) };
                println!("ferroccl: {} ({} bytes; {how})", cubin.path.display(), cubin.bytes);
            }
            (cubins, None)
        }
        None => {
            let why = format!("{}=none", sass::PTXAS_ENV);
            println!(
                "cargo::warning=ferroccl: {why}: no {} SASS built, so loading the module JIT-compiles the PTX \
                 (about 40 s on a fresh H200)",
                sass::SASS_ARCH
            );
            (Vec::new(), Some(why))
        }
    };
    let partial = embed.with_extension("rs.partial");
    std::fs::write(&partial, sass::embed_source(&cubins, missing.as_deref(), given))
        .map_err(|source| BuildError::Io { path: partial.clone(), source })?;
    std::fs::rename(&partial, embed).map_err(|source| BuildError::Io { path: embed.into(), source })
}

