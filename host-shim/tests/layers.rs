//! The crate's layering, checked on its source: every `crate::` path in a module names a
//! module below it (or an item that `lib.rs` re-exports from one, such as `crate::Error`),
//! and the files of one module never reach each other in a cycle through `super::`. A new
//! upward import or cycle fails here instead of being found in review.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The top-level modules from the bottom up; a module may use those on earlier rows only.
/// `op` (element types and reduction operators) sits below both `shmem` and `comm`,
/// which take elements; `matmul` (the collective matmuls' ring, on a heap) uses `shmem`,
/// and `comm` uses it for the communicator's collective matmuls; `comm` and `multicast`
/// use `shmem` and not each other; `nvls_hw` puts the communicator's wiring on multicast
/// memory.
const LAYERS: &[&[&str]] = &[
    &["error"],
    &["driver", "op"],
    &["device", "memory", "stream", "queue", "bootstrap"],
    &["module"],
    &["work", "linking"],
    &["shmem"],
    &["matmul"],
    &["comm", "multicast"],
    &["nvls_hw"],
];

fn rank(module: &str) -> usize {
    LAYERS.iter().position(|row| row.contains(&module)).unwrap_or_else(|| panic!("module `{module}` is not on LAYERS: place it"))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of `text` without comments (line comments, doc comments, block comments).
fn code(text: &str) -> String {
    let no_blocks: String = text.split("/*").enumerate().map(|(i, part)| if i == 0 { part } else { part.split_once("*/").map_or("", |(_, rest)| rest) }).collect();
    no_blocks.lines().map(|line| line.split_once("//").map_or(line, |(code, _)| code)).collect::<Vec<_>>().join("\n")
}

/// The identifier at the start of `text`.
fn ident(text: &str) -> &str {
    let text = text.trim_start();
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The first identifier of each path that follows `prefix` in `code`: `crate::work::X`
/// gives `work`, `crate::{Error, device::list}` gives `Error` and `device`.
fn after(code: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let rest = &code[at + prefix.len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.push(ident(rest).to_string());
            continue;
        };
        // The group's top-level entries, up to its closing brace.
        let (mut depth, mut start) = (0usize, 0usize);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    out.push(ident(&group[start..i]).to_string());
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(ident(&group[start..i]).to_string());
                    start = i + 1;
                }
                _ => {}
            }
        }
    }
    out.retain(|name| !name.is_empty());
    out
}

/// The items `lib.rs` re-exports at the crate root (`pub use error::{Error, Result};`),
/// each with the module it comes from.
fn root_items(lib: &str) -> BTreeMap<String, String> {
    let mut items = BTreeMap::new();
    for line in code(lib).lines() {
        let Some(path) = line.trim().strip_prefix("pub use ").and_then(|rest| rest.strip_suffix(';')) else {
            continue;
        };
        // A whole dependency re-exported (`pub use cudarc;`) is no module of this crate.
        let Some((module, names)) = path.split_once("::") else { continue };
        let names = names.trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let exported = name.rsplit(" as ").next().unwrap_or(name).rsplit("::").next().unwrap_or(name);
            items.insert(exported.to_string(), module.to_string());
        }
    }
    items
}

#[test]
fn every_import_points_down_and_no_module_files_form_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let root = root_items(&fs::read_to_string(src.join("lib.rs")).unwrap());
    assert_eq!(root.get("Error").map(String::as_str), Some("error"), "{root:?}");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut upward = Vec::new();
    // Per directory module: file stem -> sibling stems it names through `super::`.
    let mut siblings: BTreeMap<PathBuf, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let mut parts = relative.iter().map(|p| p.to_str().unwrap().trim_end_matches(".rs"));
        let top = parts.next().unwrap();
        if top == "lib" {
            continue;
        }
        let text = code(&fs::read_to_string(file).unwrap());
        for named in after(&text, "crate::") {
            let used = root.get(&named).map_or(named.as_str(), String::as_str);
            if used != top && rank(used) >= rank(top) {
                upward.push(format!("{}: crate::{named} (`{used}`, layer {}) from `{top}` (layer {})", relative.display(), rank(used), rank(top)));
            }
        }
        let dir = file.parent().unwrap().to_path_buf();
        let stem = file.file_stem().unwrap().to_str().unwrap().to_string();
        if dir != src && stem != "mod" {
            siblings.entry(dir).or_default().insert(stem, after(&text, "super::"));
        }
    }
    assert!(upward.is_empty(), "imports from a layer that is not below:\n{}", upward.join("\n"));
    for (dir, graph) in &siblings {
        // Depth-first search for a cycle among the directory's files.
        fn visit(node: &str, graph: &BTreeMap<String, Vec<String>>, path: &mut Vec<String>, done: &mut Vec<String>) -> Option<Vec<String>> {
            if let Some(at) = path.iter().position(|n| n == node) {
                return Some(path[at..].iter().cloned().chain([node.to_string()]).collect());
            }
            if done.iter().any(|n| n == node) {
                return None;
            }
            path.push(node.to_string());
            for next in graph.get(node).into_iter().flatten().filter(|n| graph.contains_key(n.as_str())) {
                if let Some(cycle) = visit(next, graph, path, done) {
                    return Some(cycle);
                }
            }
            path.pop();
            done.push(node.to_string());
            None
        }
        let mut done = Vec::new();
        for node in graph.keys() {
            if let Some(cycle) = visit(node, graph, &mut Vec::new(), &mut done) {
                panic!("files of {} import each other in a cycle: {}", dir.display(), cycle.join(" -> "));
            }
        }
    }
}

/// The checker itself: paths in braces, root re-exports, and comments ignored.
#[test]
fn the_checker_reads_grouped_paths_and_root_items() {
    assert_eq!(after("use crate::{Error, Result, device};", "crate::"), ["Error", "Result", "device"]);
    assert_eq!(after("use crate::work::{A, B}; crate::stream::wait(x)", "crate::"), ["work", "stream"]);
    assert_eq!(after("use crate::{queue::{A, B}, memory::C};", "crate::"), ["queue", "memory"]);
    assert_eq!(after(&code("// crate::comm\n/* crate::work */ x"), "crate::"), Vec::<String>::new());
    let root = root_items("pub use driver::init;\npub use error::{Error, Result};\n// pub use comm::X;\n");
    assert_eq!(root.into_iter().collect::<Vec<_>>(), [("Error".into(), "error".into()), ("Result".into(), "error".into()), ("init".into(), "driver".into())]);
}
