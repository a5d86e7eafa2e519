//! The crate's layering, checked on its source: every `crate::` path in a module names a
//! module below it (the order of `docs/architecture.md`'s Layers, with the ABI at the
//! bottom), and the files of one module never reach each other in a cycle through
//! `super::`. A new upward import or cycle fails here instead of being found in review.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The top-level modules from the bottom up; a module may use those on earlier rows only.
const LAYERS: &[&[&str]] = &[
    &["numbering", "abi", "conn", "dtype"],
    &["arch"],
    &["pack", "spin"],
    &["redop"],
    &["multicast"],
    &["copy"],
    &["block"],
    &["shmem"],
    &["cabi", "matmul"],
    &["prims"],
    &["algo"],
    &["work"],
    &["selftest"],
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

/// The identifiers that follow `prefix` in `code` (`crate::work::X` gives `work`).
fn after<'a>(code: &'a str, prefix: &str) -> impl Iterator<Item = &'a str> {
    code.match_indices(prefix).map(move |(at, _)| {
        let rest = &code[at + prefix.len()..];
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        &rest[..end]
    })
}

#[test]
fn every_import_points_down_and_no_module_files_form_a_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
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
        for used in after(&text, "crate::") {
            if used != top && rank(used) >= rank(top) {
                upward.push(format!("{}: crate::{used} (layer {}) from `{top}` (layer {})", relative.display(), rank(used), rank(top)));
            }
        }
        let dir = file.parent().unwrap().to_path_buf();
        let stem = file.file_stem().unwrap().to_str().unwrap().to_string();
        if dir != src && stem != "mod" {
            let named = after(&text, "super::").map(str::to_string).collect();
            siblings.entry(dir).or_default().insert(stem, named);
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
