//! Turns the nvptx kernel crate (`ptx/kernels`) into ONE self-contained `.ptx` file.
//!
//! Why not `ptx-builder` (the crate the design card names): its last version drives the
//! external `rust-ptx-linker` (crate `ptx-linker`, bound to an old `llvm-sys`), reported
//! broken with current rustc; the newer route, rustc's `llvm-bitcode-linker` component,
//! cannot be downloaded on our machines. Neither is needed: a `staticlib` built with fat
//! LTO and `--emit=asm` makes rustc's own LLVM link every crate the kernel uses into one
//! module and print it as PTX. This crate runs that nested `cargo rustc`, checks what it
//! needs first, and never leaves a stale file.
//!
//! The nested build:
//! `cargo rustc --release --target nvptx64-nvidia-cuda -Zbuild-std=core
//!  -- --emit=asm=<out> -C target-cpu=sm_90 -C target-feature=+ptx83`
//! in the kernel crate's own folder and target dir, with the parent build's flag and
//! target-dir variables removed from its environment.
//!
//! [`sass`] then compiles that PTX to sm_90a cubins with ptxas (unless `FERROCCL_PTXAS=none`
//! turns SASS off; no ptxas found is [`BuildError::NoPtxas`]).

pub mod prebuilt;
pub mod sass;

pub use sass::{
    INSTALL_PTXAS, PtxasLookup, PtxasSource, SASS_ARCH, WORK_LOOP_ENTRY, WORKSPACE_PTXAS, build_cubins, check_cubin,
    cubin_name, embed_source, find_ptxas, find_ptxas_from_env, with_maxnreg, work_loop_max_registers,
};

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target the kernels are compiled for.
pub const TARGET: &str = "nvptx64-nvidia-cuda";
/// The GPU architecture the PTX is generated for (Hopper).
pub const TARGET_CPU: &str = "sm_90";
/// The PTX ISA version the PTX declares (8.3, for `multimem` and `.acquire` forms).
pub const PTX_FEATURE: &str = "+ptx83";

/// Environment variables of a parent cargo build that must not leak into the nested one:
/// they would apply host flags or the host target dir to the nvptx build.
const SCRUBBED_ENV: &[&str] = &[
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_BUILD_RUSTFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_MAKEFLAGS",
    "MAKEFLAGS",
    "MFLAGS",
];

/// Why the PTX could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// The toolchain is not a nightly one (`-Zbuild-std` and the nvptx ABI need nightly).
    NotNightly { rustc: PathBuf, version: String },
    /// The toolchain lacks the `rust-src` component that `-Zbuild-std=core` compiles.
    MissingRustSrc { sysroot: PathBuf },
    /// The kernel crate's manifest is not where it was said to be.
    MissingKernelCrate { manifest: PathBuf },
    /// A tool could not be started.
    Spawn { program: PathBuf, source: std::io::Error },
    /// A tool ran and failed.
    ToolFailed { what: &'static str, status: std::process::ExitStatus, stderr: String },
    /// The nested build succeeded but left no usable PTX.
    NoPtx { path: PathBuf, reason: &'static str },
    /// Reading, removing or renaming a file failed.
    Io { path: PathBuf, source: std::io::Error },
    /// `$FERROCCL_PTXAS` names no file.
    PtxasMissing { path: PathBuf },
    /// No ptxas anywhere the lookup looks ([`sass::find_ptxas`]) for the workspace at
    /// `workspace`, and SASS not turned off.
    NoPtxas { workspace: PathBuf },
    /// ptxas ran and failed; `log` is what it printed.
    Ptxas { command: String, status: std::process::ExitStatus, log: String },
    /// ptxas succeeded but its output is not the cubin expected.
    BadCubin { path: PathBuf, reason: String },
    /// The PTX could not be given its register cap.
    Patch(String),
    /// The prebuilt module that `$FERROCCL_PREBUILT_MODULE` names is not usable.
    Prebuilt { dir: PathBuf, reason: String },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotNightly { rustc, version } => write!(
                f,
                "building ferroccl's device module needs a nightly Rust toolchain with rust-src, but {} is `{version}`.\n\
                 \x20 Either build with one: `rustup toolchain install nightly --component rust-src`, then \
                 `cargo +nightly build` (ferroccl's own repository selects it in rust-toolchain.toml);\n\
                 \x20 or take a prebuilt module: in a checkout of ferroccl, `cargo run --release -p ferroccl-linker -- module --out DIR`, \
                 then build with {env}=DIR (a directory holding {ptx} and its cubins)",
                rustc.display(),
                env = prebuilt::PREBUILT_ENV,
                ptx = prebuilt::PTX_FILE,
            ),
            Self::MissingRustSrc { sysroot } => write!(
                f,
                "the toolchain at {} has no rust-src component, which -Zbuild-std=core needs; \
                 run `rustup component add rust-src --toolchain nightly` \
                 (or ../shared/toolchain/install-rust-src.sh where rustup cannot download it), \
                 or build with {env}=DIR, a prebuilt module (see the error for a stable toolchain)",
                sysroot.display(),
                env = prebuilt::PREBUILT_ENV,
            ),
            Self::MissingKernelCrate { manifest } => {
                write!(f, "no kernel crate at {}", manifest.display())
            }
            Self::Spawn { program, source } => {
                write!(f, "could not run {}: {source}", program.display())
            }
            Self::ToolFailed { what, status, stderr } => {
                write!(f, "{what} failed ({status}):\n{stderr}")
            }
            Self::NoPtx { path, reason } => {
                write!(f, "the kernel build left no usable PTX at {}: {reason}", path.display())
            }
            Self::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Self::PtxasMissing { path } => write!(
                f,
                "{}={} is not a file; point it at ptxas, or set it to `none` to build no SASS",
                sass::PTXAS_ENV,
                path.display()
            ),
            Self::NoPtxas { workspace } => write!(
                f,
                "no ptxas found, so no {arch} SASS can be built (without it, every process that loads \
                 the module on a GPU JIT-compiles its PTX, about 40 s).\n\
                 \x20 Install ptxas 13.0 where the build looks for it, then build again:\n\
                 \x20     {install}    (in {root}; needs python3 with pip; puts ptxas at {installed})\n\
                 \x20 or name a ptxas 13.0 (the GPU machines' driver may refuse SASS of a newer one):\n\
                 \x20     {env}=/path/to/ptxas cargo build ...\n\
                 \x20 or build without SASS:\n\
                 \x20     {env}=none cargo build ...\n\
                 \x20 Looked in: ${env} (unset), {installed}, $PATH, python3's nvidia-cuda-nvcc wheel.",
                arch = sass::SASS_ARCH,
                install = sass::INSTALL_PTXAS,
                root = workspace.display(),
                installed = workspace.join(sass::WORKSPACE_PTXAS).display(),
                env = sass::PTXAS_ENV,
            ),
            Self::Ptxas { command, status, log } => write!(f, "ptxas failed ({status}): {command}\n{log}"),
            Self::BadCubin { path, reason } => write!(f, "ptxas left no usable cubin at {}: {reason}", path.display()),
            Self::Patch(why) => write!(f, "capping the work loop's registers: {why}"),
            Self::Prebuilt { dir, reason } => write!(f, "the prebuilt module in {} ({}): {reason}", dir.display(), prebuilt::PREBUILT_ENV),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Spawn { source, .. } | Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// A nested build of one kernel crate into one `.ptx`.
#[derive(Clone, Debug)]
pub struct PtxBuild {
    kernel_dir: PathBuf,
    target_dir: PathBuf,
    cargo: PathBuf,
    rustc: PathBuf,
}

impl PtxBuild {
    /// A build of the kernel crate in `kernel_dir`, with its own cargo target dir
    /// `target_dir`. Uses the `CARGO` and `RUSTC` that the calling build script was given
    /// (so the nested build runs the same toolchain), or `cargo`/`rustc` from `PATH`.
    pub fn new(kernel_dir: impl Into<PathBuf>, target_dir: impl Into<PathBuf>) -> Self {
        let tool = |var: &str, fallback: &str| {
            std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| fallback.into())
        };
        Self {
            kernel_dir: kernel_dir.into(),
            target_dir: target_dir.into(),
            cargo: tool("CARGO", "cargo"),
            rustc: tool("RUSTC", "rustc"),
        }
    }

    /// Source folders whose changes must trigger a rebuild: the kernel crate and every
    /// path dependency it names (one level, which is all the kernel crate has).
    pub fn watched_paths(&self) -> Result<Vec<PathBuf>, BuildError> {
        let manifest = self.kernel_dir.join("Cargo.toml");
        let text = read(&manifest)?;
        let mut paths = vec![self.kernel_dir.join("src"), manifest];
        for dep in path_dependencies(&text) {
            let dir = self.kernel_dir.join(dep);
            paths.push(dir.join("src"));
            paths.push(dir.join("Cargo.toml"));
        }
        Ok(paths)
    }

    /// Checks the toolchain, builds, and writes the PTX to `out`. `out` is removed first,
    /// so a failed build never leaves an older PTX in place; the new file appears only
    /// once it is complete. Builds that share the target dir (several host builds of one
    /// tree) take turns: each holds an exclusive lock on a file beside it
    /// (`<target dir>.lock`, outside it, as a rebuild from scratch removes the target dir)
    /// from the nested build until its PTX is written, so none reads a PTX that another is
    /// writing.
    pub fn build(&self, out: &Path) -> Result<(), BuildError> {
        remove_if_present(out)?;
        let manifest = self.kernel_dir.join("Cargo.toml");
        if !manifest.is_file() {
            return Err(BuildError::MissingKernelCrate { manifest });
        }
        self.check_toolchain()?;
        let mut lock_path = self.target_dir.clone().into_os_string();
        lock_path.push(".lock");
        let lock_path = PathBuf::from(lock_path);
        if let Some(parent) = lock_path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| BuildError::Io { path: parent.into(), source })?;
        }
        let lock = std::fs::File::create(&lock_path).map_err(|source| BuildError::Io { path: lock_path.clone(), source })?;
        lock.lock().map_err(|source| BuildError::Io { path: lock_path.clone(), source })?;
        // rustc writes the PTX only when cargo actually recompiles, so it goes to a
        // stable place in the nested target dir (current whenever cargo calls the crate
        // fresh) and is copied to `out` from there.
        let emitted = self.target_dir.join("ferroccl-kernels.ptx");
        self.nested_build(&manifest, &emitted)?;
        if !emitted.is_file() {
            // Fresh by cargo's fingerprints but the PTX is gone: rebuild from scratch.
            std::fs::remove_dir_all(&self.target_dir)
                .map_err(|source| BuildError::Io { path: self.target_dir.clone(), source })?;
            self.nested_build(&manifest, &emitted)?;
        }
        let ptx = read(&emitted)?;
        check_ptx(&ptx).map_err(|reason| BuildError::NoPtx { path: emitted.clone(), reason })?;
        let partial = out.with_extension("ptx.partial");
        std::fs::write(&partial, &ptx).map_err(|source| BuildError::Io { path: partial.clone(), source })?;
        std::fs::rename(&partial, out).map_err(|source| BuildError::Io { path: out.into(), source })
    }

    fn nested_build(&self, manifest: &Path, emitted: &Path) -> Result<(), BuildError> {
        let mut cmd = Command::new(&self.cargo);
        cmd.current_dir(&self.kernel_dir)
            .args(["rustc", "--release", "--target", TARGET, "-Zbuild-std=core"])
            .arg("--manifest-path")
            .arg(manifest)
            .arg("--target-dir")
            .arg(&self.target_dir)
            .arg("--")
            .arg(format!("--emit=asm={}", emitted.display()))
            .args(["-C", &format!("target-cpu={TARGET_CPU}")])
            .args(["-C", &format!("target-feature={PTX_FEATURE}")])
            .env("RUSTC", &self.rustc);
        for var in SCRUBBED_ENV {
            cmd.env_remove(var);
        }
        run(cmd, &self.cargo, "the nested nvptx build of the kernel crate").map(drop)
    }

    fn check_toolchain(&self) -> Result<(), BuildError> {
        let version = run(self.rustc_cmd(&["-vV"]), &self.rustc, "rustc -vV")?;
        let release = version.lines().find_map(|l| l.strip_prefix("release: ")).unwrap_or("").trim();
        if !is_nightly(release) {
            return Err(BuildError::NotNightly { rustc: self.rustc.clone(), version: release.into() });
        }
        let sysroot = run(self.rustc_cmd(&["--print", "sysroot"]), &self.rustc, "rustc --print sysroot")?;
        let sysroot = PathBuf::from(sysroot.trim());
        if !has_rust_src(&sysroot) {
            return Err(BuildError::MissingRustSrc { sysroot });
        }
        Ok(())
    }

    fn rustc_cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.rustc);
        cmd.args(args).current_dir(&self.kernel_dir);
        cmd
    }
}

/// True for a rustc release string of a nightly or locally built compiler.
pub fn is_nightly(release: &str) -> bool {
    release.contains("-nightly") || release.contains("-dev")
}

/// True when `sysroot` holds the `rust-src` component's copy of `core`.
pub fn has_rust_src(sysroot: &Path) -> bool {
    sysroot.join("lib/rustlib/src/rust/library/core/Cargo.toml").is_file()
}

/// Checks that `text` is a complete PTX module with at least one kernel entry point.
pub fn check_ptx(text: &str) -> Result<(), &'static str> {
    if !text.contains(".version ") || !text.contains(".target ") {
        return Err("no .version/.target header");
    }
    if !text.contains(".entry ") {
        return Err("no kernel entry point");
    }
    Ok(())
}

/// The `path = "…"` values of a manifest's dependencies (what the kernel crate's
/// `Cargo.toml` uses to name `device-rt`).
pub fn path_dependencies(manifest: &str) -> Vec<String> {
    manifest
        .lines()
        .filter_map(|line| {
            let rest = &line[line.find("path")? + 4..];
            let rest = rest.trim_start().strip_prefix('=')?.trim_start().strip_prefix('"')?;
            Some(rest[..rest.find('"')?].to_owned())
        })
        .filter(|p| !p.ends_with(".rs"))
        .collect()
}

fn run(mut cmd: Command, program: &Path, what: &'static str) -> Result<String, BuildError> {
    let output = cmd.output().map_err(|source| BuildError::Spawn { program: program.into(), source })?;
    if !output.status.success() {
        return Err(BuildError::ToolFailed {
            what,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

fn read(path: &Path) -> Result<String, BuildError> {
    std::fs::read_to_string(path).map_err(|source| BuildError::Io { path: path.into(), source })
}

/// Removes the file at `path` if there is one.
pub fn remove_if_present(path: &Path) -> Result<(), BuildError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(BuildError::Io { path: path.into(), source: e }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nightly_is_recognised_and_stable_is_not() {
        assert!(is_nightly("1.97.0-nightly"));
        assert!(is_nightly("1.98.0-dev"));
        assert!(!is_nightly("1.95.0"));
        assert!(!is_nightly("1.96.0-beta.3"));
    }

    #[test]
    fn rust_src_is_found_only_where_core_is() {
        let root = std::env::temp_dir().join(format!("ferroccl-rust-src-{}", std::process::id()));
        assert!(!has_rust_src(&root));
        let core = root.join("lib/rustlib/src/rust/library/core");
        std::fs::create_dir_all(&core).unwrap();
        assert!(!has_rust_src(&root));
        std::fs::write(core.join("Cargo.toml"), "[package]").unwrap();
        assert!(has_rust_src(&root));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn ptx_without_header_or_entry_is_refused() {
        assert_eq!(check_ptx(""), Err("no .version/.target header"));
        assert_eq!(check_ptx(".version 8.3\n.target sm_90\n"), Err("no kernel entry point"));
        assert_eq!(check_ptx(".version 8.3\n.target sm_90\n.visible .entry k()\n{}\n"), Ok(()));
    }

    #[test]
    fn path_dependencies_are_read_from_the_manifest() {
        let manifest = "[lib]\npath = \"src/lib.rs\"\n[dependencies]\ndevice-rt = { path = \"../../device-rt\" }\nlog = \"0.4\"\n";
        assert_eq!(path_dependencies(manifest), vec!["../../device-rt".to_owned()]);
    }

    #[test]
    fn failed_build_leaves_no_stale_ptx() {
        let dir = std::env::temp_dir().join(format!("ferroccl-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("old.ptx");
        std::fs::write(&out, ".version 8.3\n.target sm_90\n.entry k\n").unwrap();
        let err = PtxBuild::new(dir.join("no-such-crate"), dir.join("target")).build(&out).unwrap_err();
        assert!(matches!(err, BuildError::MissingKernelCrate { .. }), "{err}");
        assert!(!out.exists(), "the old PTX must be gone after a failed build");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
