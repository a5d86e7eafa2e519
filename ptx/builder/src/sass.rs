//! SASS for the PTX, made at build time with `ptxas`, so that loading the module on a
//! Hopper GPU needs no JIT (the driver's JIT of the whole PTX took 41 s on a fresh H200).
//!
//! One cubin per work-loop register cap: the unpatched module (`cap: None`, what
//! `Module::load` and work loops of up to 256 threads use) and the module whose
//! `ferroccl_work_loop` entry carries `.maxnreg cap` (what a wider work loop needs). The
//! patched PTX is made here by [`with_maxnreg`], the same function host-shim uses when it
//! has to JIT a cap with no cubin, so the SASS and the JIT always compile the same text.

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::BuildError;

/// The architecture the SASS is compiled for: the one CI's ptxas checks assemble for
/// (`tests/tests/ptxas.rs`, which reads this build's report of the unpatched module
/// instead of assembling it again), so the SASS that runs is the SASS that was checked.
/// sm_90a SASS runs on compute capability 9.0 only, which is every Hopper device (H100,
/// H200, H20, GH200); the PTX uses nothing of `sm_90a` beyond sm_90.
pub const SASS_ARCH: &str = "sm_90a";

/// The compute capability whose devices run [`SASS_ARCH`] SASS (arch-specific SASS runs
/// on that capability alone).
pub const SASS_CC: (i32, i32) = (9, 0);

/// The options every ptxas run of this tree takes besides its input, output and entry:
/// the build's (its cubins and their reports) and the checks' (`tests/src/ptxas.rs`), so
/// that what is checked is what is built. `--split-compile=0` runs ptxas's optimisations
/// on as many threads as the machine has CPUs: several times faster on 2 cores, with the
/// same SASS (`nvdisasm -c`) and `-v` report as without it (the cubins' other bytes
/// differ; see docs/tuning.md, `PTXAS_OPTIONS`).
pub const PTXAS_OPTIONS: [&str; 3] = ["-arch=sm_90a", "-v", "--split-compile=0"];

/// The environment variable that names ptxas (`none` builds no SASS).
pub const PTXAS_ENV: &str = "FERROCCL_PTXAS";

/// Where [`INSTALL_PTXAS`] puts ptxas, relative to the workspace root: PyPI's
/// `nvidia-cuda-nvcc==13.0.*` installed with `pip install --target target/tools/nvcc-13.0`.
/// 13.0 is the CUDA version of the GPU machines' driver, which must load the SASS the
/// build embeds (a newer ptxas may make SASS that driver refuses).
pub const WORKSPACE_PTXAS: &str = "target/tools/nvcc-13.0/nvidia/cu13/bin/ptxas";

/// The command, run from the workspace root, that installs ptxas at [`WORKSPACE_PTXAS`]
/// (and prints its path); `tests/run.sh` runs it too.
pub const INSTALL_PTXAS: &str = "bash tests/install-ptxas.sh";

/// The `.entry` of the persistent work loop kernel.
pub const WORK_LOOP_ENTRY: &str = "ferroccl_work_loop";

/// 32-bit registers in one SM's register file on sm_90, the most one CTA may use.
pub const REGISTERS_PER_SM: u32 = 65536;

/// Threads per CTA that fit at any register use (CUDA caps a thread at 255 registers).
pub const THREADS_AT_ANY_REGISTER_USE: u32 = REGISTERS_PER_SM / 256;

/// The `.maxnreg` that lets a work loop CTA of `threads` threads fit in one SM's register
/// file (`65536 / threads`, rounded down to a multiple of 8: 128 for 512 threads), or
/// `None` where any register use fits (256 threads or fewer).
pub fn work_loop_max_registers(threads: u32) -> Option<u32> {
    (threads > THREADS_AT_ANY_REGISTER_USE).then(|| REGISTERS_PER_SM / threads / 8 * 8)
}

/// `ptx` with the performance directive `.maxnreg max_registers` on its `.entry` named
/// `entry`, which must appear exactly once and carry no `.maxnreg` yet.
pub fn with_maxnreg(ptx: &str, entry: &str, max_registers: u32) -> Result<String, String> {
    if max_registers == 0 {
        return Err(format!("`.maxnreg 0` on PTX entry `{entry}`"));
    }
    // Each `.entry entry` followed by its parameter list: where that list's `(` is.
    let opens: Vec<usize> = ptx
        .match_indices(".entry ")
        .filter_map(|(at, directive)| {
            let after_name = ptx[at + directive.len()..].strip_prefix(entry)?;
            let params = after_name.trim_start();
            params.starts_with('(').then(|| ptx.len() - params.len())
        })
        .collect();
    let [open] = opens[..] else {
        return Err(format!("PTX entry `{entry}` appears {} times, not once", opens.len()));
    };
    let Some(close) = ptx[open..].find(')').map(|at| open + at + 1) else {
        return Err(format!("PTX entry `{entry}` has no end to its parameter list"));
    };
    let directives = ptx[close..].split('{').next().unwrap_or_default();
    if directives.contains(".maxnreg") {
        return Err(format!("PTX entry `{entry}` already has a `.maxnreg`"));
    }
    Ok(format!("{} .maxnreg {max_registers}{}", &ptx[..close], &ptx[close..]))
}

/// The PTX text an image is compiled from: `ptx` itself, or with the work loop capped.
pub fn ptx_for_cap(ptx: &str, cap: Option<u32>) -> Result<std::borrow::Cow<'_, str>, String> {
    match cap {
        None => Ok(ptx.into()),
        Some(registers) => with_maxnreg(ptx, WORK_LOOP_ENTRY, registers).map(Into::into),
    }
}

/// The file name of the cubin for a work-loop register cap.
pub fn cubin_name(cap: Option<u32>) -> String {
    match cap {
        None => format!("ferroccl.{SASS_ARCH}.cubin"),
        Some(registers) => format!("ferroccl.{SASS_ARCH}.maxnreg{registers}.cubin"),
    }
}

/// Where a ptxas was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxasSource {
    /// `$FERROCCL_PTXAS`.
    Env,
    /// [`WORKSPACE_PTXAS`] of the workspace being built (put there by [`INSTALL_PTXAS`]).
    Workspace,
    /// `ptxas` in a folder of `$PATH`.
    Path,
    /// The PyPI wheel `nvidia-cuda-nvcc` of python3 (`site-packages/nvidia/cu13/bin/ptxas`).
    Wheel,
}

/// What the ptxas lookup gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PtxasLookup {
    Found { path: PathBuf, source: PtxasSource },
    /// `FERROCCL_PTXAS=none`: no SASS wanted.
    Disabled,
    /// Nowhere: the build fails with [`BuildError::NoPtxas`].
    NotFound,
}

/// Finds ptxas: `ferroccl_ptxas` (the value of `$FERROCCL_PTXAS`; `none` turns SASS off;
/// a path that is not a file is an error, since it was asked for), then
/// [`WORKSPACE_PTXAS`] under `workspace` (the pinned 13.0 installed for this tree, ahead
/// of whatever version `$PATH` holds), then `ptxas` in a folder of `path_var` (`$PATH`),
/// then `cu13/bin/ptxas` under the `nvidia` package folders that `wheel_roots` gives
/// (called only if nothing before finds one).
pub fn find_ptxas(
    ferroccl_ptxas: Option<&OsStr>,
    workspace: &Path,
    path_var: Option<&OsStr>,
    wheel_roots: impl FnOnce() -> Vec<PathBuf>,
) -> Result<PtxasLookup, BuildError> {
    match ferroccl_ptxas.filter(|v| !v.is_empty()) {
        Some(v) if v == "none" => return Ok(PtxasLookup::Disabled),
        Some(v) if Path::new(v).is_file() => return Ok(PtxasLookup::Found { path: v.into(), source: PtxasSource::Env }),
        Some(v) => return Err(BuildError::PtxasMissing { path: v.into() }),
        None => {}
    }
    let installed = workspace.join(WORKSPACE_PTXAS);
    if installed.is_file() {
        return Ok(PtxasLookup::Found { path: installed, source: PtxasSource::Workspace });
    }
    let on_path = path_var.into_iter().flat_map(std::env::split_paths).map(|dir| dir.join("ptxas")).find(|p| p.is_file());
    if let Some(path) = on_path {
        return Ok(PtxasLookup::Found { path, source: PtxasSource::Path });
    }
    let in_wheel = wheel_roots().into_iter().map(|root| root.join("cu13/bin/ptxas")).find(|p| p.is_file());
    Ok(in_wheel.map_or(PtxasLookup::NotFound, |path| PtxasLookup::Found { path, source: PtxasSource::Wheel }))
}

/// [`find_ptxas`] for the workspace at `workspace`, with this process's `$FERROCCL_PTXAS`
/// and `$PATH`, and the `nvidia` package folders of `python3` (none where python3 or the
/// package is missing).
pub fn find_ptxas_from_env(workspace: &Path) -> Result<PtxasLookup, BuildError> {
    find_ptxas(std::env::var_os(PTXAS_ENV).as_deref(), workspace, std::env::var_os("PATH").as_deref(), nvidia_wheel_roots)
}

/// The folders of python3's `nvidia` namespace package (where PyPI's CUDA wheels go).
pub fn nvidia_wheel_roots() -> Vec<PathBuf> {
    let out = Command::new("python3").args(["-c", "import nvidia; print('\\n'.join(nvidia.__path__))"]).output();
    match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from).collect(),
        _ => Vec::new(),
    }
}

/// One cubin ptxas made.
#[derive(Clone, Debug)]
pub struct BuiltCubin {
    /// The work loop's register cap, `None` for the unpatched module.
    pub cap: Option<u32>,
    pub path: PathBuf,
    pub bytes: u64,
    /// How long its ptxas ran (they run at once, so these overlap); zero where cached.
    pub time: Duration,
    /// Whether it was copied from an earlier build of the same PTX with the same ptxas.
    pub cached: bool,
    /// ptxas's `-v` report of it (`<cubin>.log`, kept in the cache beside the cubin), where
    /// there is one.
    pub report: Option<PathBuf>,
}

/// Compiles `ptx` to one [`SASS_ARCH`] cubin per entry of `caps` (see [`ptx_for_cap`]) in
/// `out_dir`, running the ptxas processes at once. The cubins are removed first and each
/// appears only once complete and checked, so a failed build leaves none; ptxas's `-v`
/// report of each goes beside it (`<cubin>.log`, from the cache too), and its PTX input in
/// `scratch`.
///
/// `cache` keeps each cubin under a name made from a hash of its PTX text and of the
/// ptxas (path, size, mtime): a build whose PTX did not change (an edit to host-only code
/// of `device-rt` or to `build.rs`, or another build of the same tree with other features
/// or with clippy, which get their own `OUT_DIR`) copies it instead of running ptxas. The
/// files are written whole and renamed into place, so concurrent builds can share the
/// folder; the [`CACHE_KEEP`] most recently used are kept.
pub fn build_cubins(
    ptxas: &Path,
    ptx: &str,
    caps: &[Option<u32>],
    scratch: &Path,
    cache: &Path,
    out_dir: &Path,
) -> Result<Vec<BuiltCubin>, BuildError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| BuildError::Io { path, source }
    };
    let partial = |cap: Option<u32>| out_dir.join(format!("{}.partial", cubin_name(cap)));
    let report = |cap: Option<u32>| out_dir.join(format!("{}.log", cubin_name(cap)));
    for &cap in caps {
        crate::remove_if_present(&out_dir.join(cubin_name(cap)))?;
        crate::remove_if_present(&partial(cap))?;
        crate::remove_if_present(&report(cap))?;
    }
    std::fs::create_dir_all(scratch).map_err(io(scratch))?;
    std::fs::create_dir_all(cache).map_err(io(cache))?;
    let ptxas_id = std::fs::metadata(ptxas).map(|m| (m.len(), m.modified().ok())).ok();
    let mut jobs = Vec::new();
    for &cap in caps {
        let name = cubin_name(cap);
        let text = ptx_for_cap(ptx, cap).map_err(BuildError::Patch)?;
        let key = format!("{}\n{ptxas_id:?}\n{}\n{:016x}\n", ptxas.display(), PTXAS_OPTIONS.join(" "), fnv1a(text.as_bytes()));
        let cached = cache.join(format!("{}.{:016x}.cubin", name.trim_end_matches(".cubin"), fnv1a(key.as_bytes())));
        if std::fs::copy(&cached, partial(cap)).is_ok() {
            // Mark it used, for the pruning below. A cubin cached without its report
            // (older builds) keeps none.
            let _ = File::options().write(true).open(&cached).and_then(|f| f.set_modified(std::time::SystemTime::now()));
            let _ = std::fs::copy(cached.with_extension("log"), report(cap));
            jobs.push((cap, cached, None));
            continue;
        }
        let input = scratch.join(name.replace(".cubin", ".ptx"));
        std::fs::write(&input, &*text).map_err(io(&input))?;
        let log = report(cap);
        let mut cmd = Command::new(ptxas);
        cmd.args(PTXAS_OPTIONS).arg("-o").arg(partial(cap)).arg(&input);
        let log_file = File::create(&log).map_err(io(&log))?;
        cmd.stdin(Stdio::null()).stdout(log_file.try_clone().map_err(io(&log))?).stderr(log_file);
        let command = format!("{cmd:?}");
        let child = cmd.spawn().map_err(|source| BuildError::Spawn { program: ptxas.into(), source })?;
        jobs.push((cap, cached, Some((child, Instant::now(), log, command))));
    }
    // Wait for every ptxas before judging any, so none is left running.
    let results: Vec<Result<(BuiltCubin, PathBuf), BuildError>> = jobs
        .into_iter()
        .map(|(cap, cached, job)| {
            let (mut time, cached_now) = (Duration::ZERO, job.is_none());
            if let Some((mut child, start, log, command)) = job {
                let status = child.wait().map_err(|source| BuildError::Spawn { program: ptxas.into(), source })?;
                time = start.elapsed();
                if !status.success() {
                    return Err(BuildError::Ptxas { command, status, log: std::fs::read_to_string(&log).unwrap_or_default() });
                }
            }
            let bytes = std::fs::read(partial(cap)).map_err(io(&partial(cap)))?;
            check_cubin(&bytes).map_err(|reason| BuildError::BadCubin { path: partial(cap), reason })?;
            let path = out_dir.join(cubin_name(cap));
            let report = Some(report(cap)).filter(|log| log.is_file());
            Ok((BuiltCubin { cap, path, bytes: bytes.len() as u64, time, cached: cached_now, report }, cached))
        })
        .collect();
    if results.iter().any(Result::is_err) {
        for &cap in caps {
            crate::remove_if_present(&partial(cap))?;
        }
        return Err(results.into_iter().find_map(Result::err).expect("an error was seen"));
    }
    let mut built = Vec::new();
    for (cubin, cached) in results.into_iter().flatten() {
        std::fs::rename(partial(cubin.cap), &cubin.path).map_err(io(&cubin.path))?;
        if !cubin.cached {
            // The report first: a cubin in the cache always has its report beside it.
            let sources = cubin.report.iter().map(|log| (log, cached.with_extension("log"))).chain([(&cubin.path, cached.clone())]);
            for (source, target) in sources {
                let whole = target.with_extension(format!("partial-{}", std::process::id()));
                std::fs::copy(source, &whole).map_err(io(&whole))?;
                std::fs::rename(&whole, &target).map_err(io(&target))?;
            }
        }
        built.push(cubin);
    }
    prune(cache, CACHE_KEEP);
    Ok(built)
}

/// How many cubins [`build_cubins`]'s cache keeps (two per build of the default caps).
pub const CACHE_KEEP: usize = 8;

/// Removes all but the `keep` most recently used `.cubin` files of `cache`, each with its
/// report (best effort).
fn prune(cache: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(cache) else { return };
    let mut cubins: Vec<_> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".cubin"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    cubins.sort();
    for (_, path) in cubins.iter().rev().skip(keep) {
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(path.with_extension("log"));
    }
}

/// The 64-bit FNV-1a hash of `bytes` (the cache key of a cubin's PTX input).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// ELF's `e_machine` for NVIDIA CUDA objects.
const EM_CUDA: u16 = 190;

/// Checks that `cubin` is a 64-bit little-endian CUDA ELF for [`SASS_ARCH`] holding the
/// work loop entry's code (`.text.ferroccl_work_loop`).
pub fn check_cubin(cubin: &[u8]) -> Result<(), String> {
    if cubin.get(..6) != Some(b"\x7fELF\x02\x01") {
        return Err("not a 64-bit little-endian ELF".into());
    }
    let u16_at = |at: usize| cubin.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    if u16_at(0x12) != Some(EM_CUDA) {
        return Err(format!("ELF machine {:?}, not CUDA ({EM_CUDA})", u16_at(0x12)));
    }
    // CUDA ELF flags carry the SM version in bits 8..16 (0x5a for sm_90).
    let sm = cubin.get(0x31).copied();
    let want: u8 = SASS_ARCH.trim_start_matches("sm_").trim_end_matches('a').parse().unwrap_or(0);
    if sm != Some(want) {
        return Err(format!("ELF flags name sm_{}, not {SASS_ARCH}", sm.unwrap_or(0)));
    }
    let section = format!(".text.{WORK_LOOP_ENTRY}\0");
    if !cubin.windows(section.len()).any(|w| w == section.as_bytes()) {
        return Err(format!("no section {}", section.trim_end_matches('\0')));
    }
    Ok(())
}

/// The Rust source host-shim includes to embed the cubins: `IMAGES` (cap and bytes of
/// each cubin), `MISSING` (why there is no SASS, `None` when there is) and
/// `PTXAS_GIVEN` (whether `$FERROCCL_PTXAS` named a ptxas for this build).
pub fn embed_source(cubins: &[BuiltCubin], missing: Option<&str>, ptxas_given: bool) -> String {
    let mut src = String::from("// Generated by host-shim's build.rs (ferroccl_ptx_builder::embed_source).\n");
    src += &format!("/// The architecture of the embedded SASS.\npub const ARCH: &str = {SASS_ARCH:?};\n");
    src += "/// The cubins: the work loop's register cap (`None`: unpatched) and the image.\n";
    src += "pub const IMAGES: &[(Option<u32>, &[u8])] = &[\n";
    for cubin in cubins {
        src += &format!("    ({:?}, include_bytes!({:?})),\n", cubin.cap, cubin.path.display().to_string());
    }
    src += "];\n/// ptxas's `-v` report of each cubin that has one: its cap and the report's file.\n";
    src += "pub const REPORTS: &[(Option<u32>, &str)] = &[\n";
    for cubin in cubins {
        if let Some(report) = &cubin.report {
            src += &format!("    ({:?}, {:?}),\n", cubin.cap, report.display().to_string());
        }
    }
    src += "];\n/// Why no SASS was built (`None` when it was).\n";
    src += &format!("pub const MISSING: Option<&str> = {missing:?};\n");
    src += &format!("/// Whether `$FERROCCL_PTXAS` named a ptxas for this build.\npub const PTXAS_GIVEN: bool = {ptxas_given};\n");
    src
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = ".version 8.0\n.target sm_90\n.visible .entry loop_long()\n{\n\tret;\n}\n\
                        .visible .entry loop(\n\t.param .u64 loop_param_0\n)\n{\n\tret;\n}\n";

    #[test]
    fn ptxas_options_compile_for_the_sass_arch() {
        assert_eq!(PTXAS_OPTIONS[0], format!("-arch={SASS_ARCH}"));
    }

    /// A scratch folder of its own for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ferroccl-sass-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The start of a cubin as ptxas writes one for sm_90 (ELF header fields that
    /// [`check_cubin`] reads), then the work loop's section name.
    fn fake_cubin() -> Vec<u8> {
        let mut elf = vec![0u8; 0x40];
        elf[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x41");
        elf[0x12..0x14].copy_from_slice(&EM_CUDA.to_le_bytes());
        elf[0x30..0x34].copy_from_slice(&[0x04, 0x5a, 0x00, 0x06]);
        elf.extend_from_slice(b"\0.shstrtab\0.text.ferroccl_work_loop\0");
        elf
    }

    #[test]
    fn maxnreg_goes_after_the_named_entrys_parameters() {
        let patched = with_maxnreg(TINY, "loop", 128).unwrap();
        assert_eq!(patched, TINY.replace("loop_param_0\n)\n", "loop_param_0\n) .maxnreg 128\n"));
        let patched = with_maxnreg(TINY, "loop_long", 64).unwrap();
        assert_eq!(patched, TINY.replace("loop_long()", "loop_long() .maxnreg 64"));
    }

    #[test]
    fn maxnreg_needs_the_entry_exactly_once_and_uncapped() {
        for (ptx, entry, registers) in [
            (TINY, "lo", 128),
            (TINY, "loop", 0),
            (&*TINY.repeat(2), "loop", 128),
            (&*with_maxnreg(TINY, "loop", 128).unwrap(), "loop", 64),
        ] {
            assert!(with_maxnreg(ptx, entry, registers).is_err(), "{entry} {registers}");
        }
    }

    #[test]
    fn work_loop_registers_fill_one_register_file() {
        assert_eq!(work_loop_max_registers(128), None);
        assert_eq!(work_loop_max_registers(256), None);
        assert_eq!(work_loop_max_registers(288), Some(224));
        assert_eq!(work_loop_max_registers(384), Some(168));
        assert_eq!(work_loop_max_registers(512), Some(128));
        assert_eq!(work_loop_max_registers(1024), Some(64));
    }

    #[test]
    fn cubins_are_named_by_cap() {
        assert_eq!(cubin_name(None), "ferroccl.sm_90a.cubin");
        assert_eq!(cubin_name(Some(128)), "ferroccl.sm_90a.maxnreg128.cubin");
        let ptx = format!(".version 8.3\n.target sm_90\n.visible .entry {WORK_LOOP_ENTRY}(\n)\n{{\n}}\n");
        assert_eq!(ptx_for_cap(&ptx, None).unwrap(), ptx);
        assert!(ptx_for_cap(&ptx, Some(128)).unwrap().contains(") .maxnreg 128\n{"));
    }

    #[test]
    fn ptxas_is_looked_up_in_env_then_workspace_then_path_then_wheel() {
        let dir = scratch("lookup");
        let file = |rel: &str| {
            let path = dir.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "").unwrap();
            path
        };
        let (env, on_path, in_wheel) = (file("env/my-ptxas"), file("bin2/ptxas"), file("wheel/cu13/bin/ptxas"));
        let workspace = dir.join("tree");
        let installed = file(&format!("tree/{WORKSPACE_PTXAS}"));
        let bare = dir.join("fresh-clone");
        std::fs::create_dir_all(dir.join("bin1")).unwrap();
        let path_var = std::env::join_paths([dir.join("bin1"), dir.join("bin2")]).unwrap();
        let empty_path = std::env::join_paths([dir.join("bin1")]).unwrap();
        let wheel = || vec![dir.join("no-such-root"), dir.join("wheel")];
        let unused = || -> Vec<PathBuf> { panic!("the wheel is looked at only when nothing else has ptxas") };
        let found = |path: &Path, source| PtxasLookup::Found { path: path.into(), source };

        // $FERROCCL_PTXAS first, even over the workspace's own.
        assert_eq!(find_ptxas(Some(env.as_os_str()), &workspace, Some(&path_var), unused).unwrap(), found(&env, PtxasSource::Env));
        assert_eq!(find_ptxas(Some("none".as_ref()), &workspace, Some(&path_var), unused).unwrap(), PtxasLookup::Disabled);
        let missing = dir.join("env/nothing");
        assert!(matches!(find_ptxas(Some(missing.as_os_str()), &workspace, Some(&path_var), unused), Err(BuildError::PtxasMissing { .. })));
        // Unset and empty are the same.
        for var in [None, Some("".as_ref())] {
            // The workspace's installed ptxas before $PATH's.
            assert_eq!(find_ptxas(var, &workspace, Some(&path_var), unused).unwrap(), found(&installed, PtxasSource::Workspace));
            assert_eq!(find_ptxas(var, &workspace, None, unused).unwrap(), found(&installed, PtxasSource::Workspace));
            // A workspace without it: $PATH, then the wheel.
            assert_eq!(find_ptxas(var, &bare, Some(&path_var), unused).unwrap(), found(&on_path, PtxasSource::Path));
            assert_eq!(find_ptxas(var, &bare, Some(&empty_path), wheel).unwrap(), found(&in_wheel, PtxasSource::Wheel));
            assert_eq!(find_ptxas(var, &bare, None, wheel).unwrap(), found(&in_wheel, PtxasSource::Wheel));
            assert_eq!(find_ptxas(var, &bare, Some(&empty_path), Vec::new).unwrap(), PtxasLookup::NotFound);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The install script puts ptxas where the lookup looks, and the error of a build that
    /// finds none names the script and the ways around it.
    #[test]
    fn the_install_script_and_the_missing_ptxas_error_agree_with_the_lookup() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let script_path = INSTALL_PTXAS.strip_prefix("bash ").unwrap();
        let script = std::fs::read_to_string(root.join(script_path)).unwrap();
        let (tools, bin) = WORKSPACE_PTXAS.split_once("/nvidia/").unwrap();
        assert!(script.contains(&format!("\"$root/{tools}\"")), "{script_path} installs elsewhere than {tools}");
        assert!(script.contains(&format!("/nvidia/{bin}\"")), "{script_path} names another ptxas than nvidia/{bin}");
        assert!(script.contains("'nvidia-cuda-nvcc==13.0.*'"), "{script_path} installs another version");
        let error = BuildError::NoPtxas { workspace: PathBuf::from("/w") }.to_string();
        for needed in [INSTALL_PTXAS, "/w/target/tools/nvcc-13.0/nvidia/cu13/bin/ptxas", "FERROCCL_PTXAS=/path/to/ptxas", "FERROCCL_PTXAS=none", "JIT"] {
            assert!(error.contains(needed), "{needed:?} missing from: {error}");
        }
    }

    #[test]
    fn cubins_are_checked_for_elf_cuda_sm90_and_the_work_loop() {
        let good = fake_cubin();
        assert_eq!(check_cubin(&good), Ok(()));
        let broken = |at: usize, byte: u8| {
            let mut bad = good.clone();
            bad[at] = byte;
            check_cubin(&bad).unwrap_err()
        };
        assert!(broken(0, 0).contains("not a 64-bit"), "magic");
        assert!(broken(4, 1).contains("not a 64-bit"), "32-bit class");
        assert!(broken(0x12, 62).contains("not CUDA"), "x86-64 machine");
        assert!(broken(0x31, 80).contains("sm_80"), "sm_80 flags");
        assert!(broken(good.len() - 2, b'x').contains("no section .text.ferroccl_work_loop"));
        assert!(check_cubin(&good[..10]).is_err());
        assert!(check_cubin(b"").is_err());
    }

    /// Held by each test that writes a fake ptxas and runs it. A test that forks while
    /// another writes its script gives the child a copy of the script's open file until the
    /// child execs; running the script in that window fails with ETXTBSY ("Text file busy").
    static SCRIPTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Writes an executable shell script standing in for ptxas: it copies `template` to
    /// its `-o` argument, or fails like ptxas where its input has a `.maxnreg` and
    /// `fail_capped` is set.
    fn fake_ptxas(dir: &Path, template: &Path, fail_capped: bool) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join(if fail_capped { "ptxas-failing" } else { "ptxas" });
        let fail = if fail_capped { r#"grep -q maxnreg "$6" && { echo "ptxas fatal   : fake failure on $6" >&2; exit 255; }"# } else { "" };
        let count = dir.join("ptxas-runs");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n[ \"$1 $2 $3 $4\" = '-arch=sm_90a -v --split-compile=0 -o' ] || exit 9\necho run >> '{}'\n{fail}\necho \"info    : fake report of $6\"\ncp '{}' \"$5\"\n",
                count.display(),
                template.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        script
    }

    const CAPS: [Option<u32>; 2] = [None, Some(128)];

    fn tiny_work_loop() -> String {
        format!(".version 8.3\n.target sm_90\n.visible .entry {WORK_LOOP_ENTRY}(\n)\n{{\n\tret;\n}}\n")
    }

    /// How often the fake ptxas in `dir` ran.
    fn ptxas_runs(dir: &Path) -> usize {
        std::fs::read_to_string(dir.join("ptxas-runs")).map_or(0, |s| s.lines().count())
    }

    /// The cubins and partial cubins in `out`.
    fn cubins_in(out: &Path) -> Vec<String> {
        let names = std::fs::read_dir(out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
        names.filter(|n| n.ends_with(".cubin") || n.ends_with(".partial")).collect()
    }

    #[test]
    fn cubins_are_built_once_per_cap_checked_and_reused_while_the_ptx_is_the_same() {
        let _turn = SCRIPTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = scratch("build");
        let template = dir.join("template.cubin");
        std::fs::write(&template, fake_cubin()).unwrap();
        let (out, work) = (dir.join("out"), dir.join("scratch"));
        std::fs::create_dir_all(&out).unwrap();
        let ptxas = fake_ptxas(&dir, &template, false);
        let built = build_cubins(&ptxas, &tiny_work_loop(), &CAPS, &work, &work.join("cache"), &out).unwrap();
        assert_eq!(built.iter().map(|c| (c.cap, c.cached)).collect::<Vec<_>>(), [(None, false), (Some(128), false)]);
        for cubin in &built {
            assert_eq!(cubin.path, out.join(cubin_name(cubin.cap)));
            assert_eq!(std::fs::read(&cubin.path).unwrap(), fake_cubin());
            assert_eq!(cubin.bytes, fake_cubin().len() as u64);
        }
        assert!(std::fs::read_to_string(work.join("ferroccl.sm_90a.maxnreg128.ptx")).unwrap().contains(".maxnreg 128"));
        assert_eq!(ptxas_runs(&dir), 2);
        let reports: Vec<String> = built.iter().map(|c| std::fs::read_to_string(c.report.as_ref().expect("a report")).unwrap()).collect();
        assert!(reports.iter().all(|r| r.contains("info    : fake report of")), "{reports:?}");
        // The same PTX again: copied from the cache with its reports, no ptxas.
        let again = build_cubins(&ptxas, &tiny_work_loop(), &CAPS, &work, &work.join("cache"), &out).unwrap();
        assert!(again.iter().all(|c| c.cached && std::fs::read(&c.path).unwrap() == fake_cubin()));
        let again_reports: Vec<String> = again.iter().map(|c| std::fs::read_to_string(c.report.as_ref().expect("a cached report")).unwrap()).collect();
        assert_eq!(again_reports, reports);
        assert_eq!(ptxas_runs(&dir), 2);
        assert_eq!(std::fs::read_dir(work.join("cache")).unwrap().count(), 4, "two cubins and their reports");
        // Another PTX: ptxas again; this one writes no cubin, which fails the build and
        // leaves no cubin (not even the cached one of the old PTX).
        std::fs::write(&template, b"not an ELF").unwrap();
        let other = tiny_work_loop().replace("ret;", "ret;\n\tret;");
        let err = build_cubins(&ptxas, &other, &CAPS, &work, &work.join("cache"), &out).unwrap_err();
        assert!(matches!(err, BuildError::BadCubin { .. }), "{err}");
        assert_eq!(ptxas_runs(&dir), 4);
        assert_eq!(cubins_in(&out), Vec::<String>::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn failed_ptxas_fails_the_build_and_leaves_no_stale_cubin() {
        let _turn = SCRIPTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = scratch("fail");
        let template = dir.join("template.cubin");
        std::fs::write(&template, fake_cubin()).unwrap();
        let out = dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        for cap in CAPS {
            std::fs::write(out.join(cubin_name(cap)), b"stale").unwrap();
        }
        let err = build_cubins(&fake_ptxas(&dir, &template, true), &tiny_work_loop(), &CAPS, &dir.join("scratch"), &dir.join("cache"), &out).unwrap_err();
        assert!(matches!(err, BuildError::Ptxas { .. }), "{err}");
        assert!(err.to_string().contains("fake failure"), "ptxas's message must be in the error: {err}");
        assert_eq!(cubins_in(&out), Vec::<String>::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_cache_keeps_the_most_recently_used() {
        let dir = scratch("prune");
        for (i, name) in ["a.cubin", "b.cubin", "c.cubin", "d.cubin"].iter().enumerate() {
            let file = File::create(dir.join(name)).unwrap();
            file.set_modified(std::time::UNIX_EPOCH + Duration::from_secs(1000 * [3, 1, 4, 2][i])).unwrap();
            std::fs::write(dir.join(name).with_extension("log"), "").unwrap();
        }
        std::fs::write(dir.join("x.partial-1"), "").unwrap();
        prune(&dir, 2);
        let mut left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["a.cubin", "a.log", "c.cubin", "c.log", "x.partial-1"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn embed_source_lists_the_cubins_or_says_why_there_are_none() {
        let cubin = BuiltCubin {
            cap: Some(128),
            path: "/o/ferroccl.sm_90a.maxnreg128.cubin".into(),
            bytes: 1,
            time: Duration::ZERO,
            cached: false,
            report: Some("/o/ferroccl.sm_90a.maxnreg128.cubin.log".into()),
        };
        let unreported = BuiltCubin { cap: None, path: "/o/ferroccl.sm_90a.cubin".into(), report: None, ..cubin.clone() };
        let src = embed_source(&[cubin, unreported], None, true);
        assert!(src.contains("(Some(128), include_bytes!(\"/o/ferroccl.sm_90a.maxnreg128.cubin\")),"), "{src}");
        assert!(src.contains("REPORTS: &[(Option<u32>, &str)] = &[\n    (Some(128), \"/o/ferroccl.sm_90a.maxnreg128.cubin.log\"),\n];"), "{src}");
        assert!(src.contains("pub const MISSING: Option<&str> = None;") && src.contains("PTXAS_GIVEN: bool = true;"), "{src}");
        let src = embed_source(&[], Some("no \"ptxas\""), false);
        assert!(src.contains("IMAGES: &[(Option<u32>, &[u8])] = &[\n];"), "{src}");
        assert!(src.contains(r#"MISSING: Option<&str> = Some("no \"ptxas\"");"#), "{src}");
    }
}
