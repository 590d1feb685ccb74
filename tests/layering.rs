//! The crate's layers (`docs/architecture.md`, "The map"): every
//! `crate::<module>` path in non-test code of a top-level module names a
//! module in its own row or a lower one, so no two top-level modules can
//! import each other, directly or round a longer loop.

use std::collections::BTreeMap;
use std::path::Path;

/// Bottom up, as in the map.
const LAYERS: &[&[&str]] = &[
    &["ids", "format", "clock", "entropy", "telemetry"],
    &["store", "batch", "auth"],
    &["meta", "wal"],
    &["api"],
    &["stream"],
    &["net"],
    &["route", "cluster"],
    &["config", "node", "http", "kafka"],
    &["server", "cli", "bench"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|row| row.contains(&module))
}

/// Non-test source of `path`: what precedes the first `#[cfg(test)]`, without comment lines.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// `module -> modules it names`, for every top-level module of `src/`.
fn imports() -> BTreeMap<String, std::collections::BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut edges: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel.components().next().unwrap().as_os_str().to_string_lossy();
        let top = top.trim_end_matches(".rs").to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let text = code(&file);
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                edges.entry(top.clone()).or_default().insert(name);
            }
        }
    }
    edges
}

#[test]
fn every_top_level_module_is_in_the_map() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).unwrap() {
        let name = entry
            .unwrap()
            .file_name()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if name == "lib" || name == "main" {
            continue;
        }
        assert!(layer_of(&name).is_some(), "src/{name} is in no layer of the map");
    }
}

#[test]
fn imports_go_down_the_map() {
    let edges = imports();
    assert!(edges.len() > 10, "the scan found too few modules: {edges:?}");
    assert!(edges["node"].contains("cluster"), "the scan misses known edges");
    let mut upward = Vec::new();
    for (from, tos) in &edges {
        let Some(f) = layer_of(from) else { continue };
        for to in tos {
            let Some(t) = layer_of(to) else { continue };
            // Sideways is allowed only where the map says so (the top two rows);
            // then no cycle: a sibling of those rows imports none of the others back.
            if t > f || (t == f && f < LAYERS.len() - 2) {
                upward.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(upward.is_empty(), "imports against the map: {upward:?}");
    for (from, tos) in &edges {
        for to in tos {
            assert!(
                !edges.get(to).is_some_and(|back| back.contains(from)),
                "{from} and {to} import each other"
            );
        }
    }
}
