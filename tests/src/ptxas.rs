//! Finds `ptxas`, runs it on a PTX text with the build's options (`-arch=sm_90a -v`), and parses the
//! per-kernel resource report (registers, stack, spills).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The architecture the checks assemble for (`sm_90a`): the one the build's SASS is made
/// for, so the checks see the code that runs.
pub use ferroccl_ptx_builder::sass::SASS_ARCH as ARCH;
use ferroccl_ptx_builder::BuildError;
use ferroccl_ptx_builder::sass::{PTXAS_OPTIONS, PtxasLookup, find_ptxas_from_env};

/// What ptxas reported for one kernel entry point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelReport {
    pub registers: u32,
    pub stack_frame: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
}

/// Locates ptxas as host-shim's build does (`ferroccl_ptx_builder::sass::find_ptxas`):
/// `$FERROCCL_PTXAS`, then the copy `tests/install-ptxas.sh` installs in this workspace,
/// then `ptxas` on `PATH`, then python3's `nvidia-cuda-nvcc` wheel.
pub fn find() -> Result<PathBuf, String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("the tests crate lies in the workspace")?;
    match find_ptxas_from_env(workspace).map_err(|e| e.to_string())? {
        PtxasLookup::Found { path, .. } => Ok(path),
        PtxasLookup::Disabled => Err("FERROCCL_PTXAS=none: the ptxas checks need a ptxas".into()),
        PtxasLookup::NotFound => Err(BuildError::NoPtxas { workspace: workspace.into() }.to_string()),
    }
}

/// Assembles `ptx` with the build's ptxas options (`PTXAS_OPTIONS`: `-arch=sm_90a -v`,
/// `--split-compile=0`) and returns each kernel's report: every entry point, or with
/// `only` that entry and the functions it calls (`ptxas -e`).
pub fn assemble(ptxas: &Path, ptx: &str, only: Option<&str>, scratch: &Path) -> Result<BTreeMap<String, KernelReport>, String> {
    std::fs::create_dir_all(scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
    let input = scratch.join("ferroccl.ptx");
    std::fs::write(&input, ptx).map_err(|e| format!("{}: {e}", input.display()))?;
    let out = Command::new(ptxas)
        .args(PTXAS_OPTIONS)
        .args(only.map(|entry| format!("--entry={entry}")))
        .arg(&input)
        .arg("-o")
        .arg(scratch.join("ferroccl.cubin"))
        .output()
        .map_err(|e| format!("could not run {}: {e}", ptxas.display()))?;
    let log = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("ptxas -arch={ARCH} failed ({}):\n{log}", out.status));
    }
    parse_report(&log)
}

/// Parses ptxas's `-v` output into per-function reports: entry points (with their
/// register count) and the `.func`s they call (registers 0: ptxas reports registers per
/// entry only). Every line must be one ptxas is known to print (`info` lines: global
/// memory, an entry's start, a function's properties, its stack and spills, its
/// registers, the compile time); any other line, a warning included, is an error that
/// names it: a report that cannot be read must not pass for a clean one.
pub fn parse_report(log: &str) -> Result<BTreeMap<String, KernelReport>, String> {
    let mut reports = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let unreadable = || format!("ptxas printed a line the report parser cannot read: {line:?}");
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let name = rest.split('\'').next().unwrap_or_default().to_owned();
            reports.insert(name.clone(), KernelReport::default());
            current = Some(name);
        } else if let Some(rest) = line.split("Function properties for ").nth(1) {
            let name = rest.trim().to_owned();
            reports.entry(name.clone()).or_insert_with(KernelReport::default);
            current = Some(name);
        } else if line.contains("bytes stack frame") {
            let report = current.as_ref().and_then(|n| reports.get_mut(n)).ok_or_else(unreadable)?;
            report.stack_frame = number_before(line, "bytes stack frame").ok_or_else(unreadable)?;
            report.spill_stores = number_before(line, "bytes spill stores").ok_or_else(unreadable)?;
            report.spill_loads = number_before(line, "bytes spill loads").ok_or_else(unreadable)?;
        } else if line.contains("Used ") && line.contains(" registers") {
            let report = current.as_ref().and_then(|n| reports.get_mut(n)).ok_or_else(unreadable)?;
            report.registers = number_before(line, "registers").ok_or_else(unreadable)?;
            current = None;
        } else if !(line.starts_with("ptxas info") && (line.contains("bytes gmem") || line.contains("Compile time ="))) {
            return Err(unreadable());
        }
    }
    Ok(reports)
}

/// The number just before `marker` in `line`, if `marker` is there with a number before it.
fn number_before(line: &str, marker: &str) -> Option<u32> {
    let (head, _) = line.split_once(marker)?;
    head.split([',', ' ', ':']).rfind(|w| !w.is_empty())?.parse().ok()
}

/// The entries of a hot-list file (one per line, `#` comments): a function name, or
/// `*text` for every function whose (mangled) name contains `text`.
pub fn hot_list(text: &str) -> Vec<&str> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .collect()
}

/// Checks that every hot-list entry names at least one function of `reports` and that
/// none of them spills; returns one line per violation.
pub fn hot_kernel_violations(hot: &[&str], reports: &BTreeMap<String, KernelReport>) -> Vec<String> {
    let mut violations = Vec::new();
    for &entry in hot {
        let matched: Vec<(&String, &KernelReport)> = match entry.strip_prefix('*') {
            Some(text) => reports.iter().filter(|(n, _)| n.contains(text)).collect(),
            None => reports.get_key_value(entry).into_iter().collect(),
        };
        if matched.is_empty() {
            violations.push(format!("{entry}: on the hot list but no function of the PTX matches"));
        }
        for (name, r) in matched {
            if r.spill_stores != 0 || r.spill_loads != 0 {
                violations.push(format!("{name}: {} bytes spill stores, {} bytes spill loads", r.spill_stores, r.spill_loads));
            }
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'hot_a' for 'sm_90a'
ptxas info    : Function properties for hot_a
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers
ptxas info    : Function properties for helper
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'cool_b' for 'sm_90a'
ptxas info    : Function properties for cool_b
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 23 registers, used 0 barriers
";

    #[test]
    fn report_is_parsed_per_function() {
        let r = parse_report(LOG).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r["hot_a"], KernelReport { registers: 255, stack_frame: 8, spill_stores: 4, spill_loads: 12 });
        assert_eq!(r["helper"], KernelReport::default());
        assert_eq!(r["cool_b"], KernelReport { registers: 23, ..Default::default() });
    }

    #[test]
    fn spills_and_missing_kernels_are_violations() {
        let r = parse_report(LOG).unwrap();
        assert!(hot_kernel_violations(&["cool_b"], &r).is_empty());
        assert!(hot_kernel_violations(&["*elp"], &r).is_empty());
        let v = hot_kernel_violations(&["hot_a", "gone", "*hot", "*nothing"], &r);
        assert_eq!(v.len(), 4, "{v:?}");
        assert!(v[0].contains("4 bytes spill stores, 12 bytes spill loads"), "{v:?}");
        assert!(v[1].contains("no function of the PTX matches"), "{v:?}");
        assert!(v[2].starts_with("hot_a"), "{v:?}");
        assert!(v[3].contains("nothing"), "{v:?}");
    }

    #[test]
    fn lines_the_parser_cannot_read_are_errors() {
        let with = |line: &str| parse_report(&format!("{LOG}{line}\n"));
        assert!(with("ptxas info    : Used 23 registers, used 0 barriers, 48 bytes cumulative stack size").is_err(), "registers with no function");
        for bad in [
            "ptxas warning : Registers are spilled to local memory in function 'x', 8 bytes spill stores",
            "ptxas fatal   : Unresolved extern function 'y'",
            "    lots of bytes stack frame, 4 bytes spill stores, 12 bytes spill loads",
            "something new",
        ] {
            let err = with(&format!("ptxas info    : Function properties for cool_b\n{bad}")).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
        assert!(with("ptxas info    : Compile time = 3.5 ms").is_ok());
    }

    #[test]
    fn hot_list_skips_comments_and_blanks() {
        assert_eq!(hot_list("# c\n\nk1 # why\n  k2\n"), vec!["k1", "k2"]);
    }
}
