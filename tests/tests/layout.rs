//! The workspace's shape, checked: no product source file grows past 800
//! lines (its code before an inline `#[cfg(test)]` module; test files,
//! `tests.rs` and `*_tests.rs`, are not product code), and no module
//! imports one that imports it back. A file that needs more is split by
//! what it owns, as `docs/ARCHITECTURE.md` maps them. The command line
//! names no storage backend, and the server registers no route but those
//! of the route table.

// Test code: panicking on a failed expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The longest product source file, in lines.
const MAX_LINES: usize = 800;

/// The crates whose `src/` is product code.
const CRATES: &[&str] = &[
    "domain",
    "application",
    "adapters",
    "api",
    "mcp",
    "server",
    "agents",
    "cli",
    "harness",
    "bench",
];

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().unwrap().to_string_lossy();
    name == "tests.rs" || name.ends_with("_tests.rs")
}

#[test]
fn no_product_source_file_is_longer_than_800_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for krate in CRATES {
        sources(&root.join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 100, "found only {} files", files.len());
    let mut long = Vec::new();
    for file in files.iter().filter(|file| !is_test_file(file)) {
        let text = std::fs::read_to_string(file).unwrap();
        let lines = text
            .lines()
            .take_while(|line| *line != "#[cfg(test)]")
            .count();
        if lines > MAX_LINES {
            long.push(format!("{} ({lines} lines)", file.display()));
        }
    }
    assert!(
        long.is_empty(),
        "product files over {MAX_LINES} lines; split them by what they own: {long:#?}"
    );
}

/// The command line names no storage backend: it opens whatever the
/// store URL says through `open_store`, and waits and watches through the
/// library on every backend, so a backend's knowledge stays in
/// `adapters`. (The served registry, `StorageConfig::Http`, is not a
/// storage engine: the command line asks it for links and refuses to
/// serve it again.)
#[test]
fn the_command_line_names_no_storage_backend() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    sources(&root.join("cli").join("src"), &mut files);
    assert!(files.len() > 10, "found only {} files", files.len());
    let mut named = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            for variant in ["Sled", "Postgres", "Sqlite"] {
                if line.contains(&format!("StorageConfig::{variant}"))
                    || line.contains(&format!("{variant}Config"))
                    || line.contains(&format!("{variant}Hold"))
                {
                    named.push(format!("{}:{}: {line}", file.display(), number + 1));
                }
            }
        }
    }
    assert!(
        named.is_empty(),
        "the command line names a backend:\n{}",
        named.join("\n")
    );
}

/// The server's router is built in one place, by walking the route table:
/// a line of the server's source that adds routes to a router (`.route(`,
/// `.nest(`, `.merge(`, ...) registers `route.path` of the table, or
/// merges the table's pages. A route added by hand anywhere else fails
/// here (`server/tests/table.rs` checks that each route of the table is
/// served).
#[test]
fn the_server_registers_no_route_outside_the_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    sources(&root.join("server").join("src"), &mut files);
    assert!(files.len() > 10, "found only {} files", files.len());
    let adders = [
        ".route(",
        ".route_service(",
        ".nest(",
        ".nest_service(",
        ".merge(",
        ".fallback_service(",
    ];
    let mut registered = 0;
    let mut by_hand = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            if !adders.iter().any(|adder| line.contains(adder)) {
                continue;
            }
            if line.contains(".route(route.path, handler(route))") {
                registered += 1;
            } else if !line.contains(".merge(web::pages(browsers))") {
                by_hand.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(by_hand.is_empty(), "routes outside the table: {by_hand:#?}");
    assert_eq!(
        registered, 2,
        "the JSON routes and the pages, from the table"
    );
}

/// A file's module path in its crate: `src/a/b.rs` and `src/a/b/mod.rs`
/// are `a::b`; `lib.rs` and `main.rs` are the crate's root, `""`.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.pop();
    }
    parts.join("::")
}

/// Whether `ancestor` is `module` or one of the modules that contain it.
fn is_within(module: &str, ancestor: &str) -> bool {
    ancestor.is_empty()
        || module == ancestor
        || module
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with("::"))
}

/// The `use` items of a file's product code, each with its line and
/// without its `use` and `;`. Product code ends at a `#[cfg(test)]` module
/// with a body; an item under `#[cfg(test)]` alone is skipped.
fn use_items(text: &str) -> Vec<(usize, String)> {
    let mut items = Vec::new();
    let mut open: Option<(usize, String)> = None;
    let mut test_only = false;
    let mut in_attribute = false;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if open.is_none() {
            if line == "#[cfg(test)]" {
                test_only = true;
                continue;
            }
            if test_only {
                // The item's other attributes and comments come first.
                if in_attribute || line.starts_with("#[") {
                    in_attribute = !line.ends_with(']');
                    continue;
                }
                if line.is_empty() || line.starts_with("//") {
                    continue;
                }
                if line.ends_with('{') {
                    break;
                }
                test_only = false;
                continue;
            }
            let start = line.find("use ").filter(|at| {
                line[..*at]
                    .split_whitespace()
                    .all(|word| word.starts_with("pub"))
            });
            let Some(at) = start else { continue };
            open = Some((number + 1, String::new()));
            if let Some((_, item)) = &mut open {
                item.push_str(&line[at + 4..]);
            }
        } else if let Some((_, item)) = &mut open {
            item.push(' ');
            item.push_str(line);
        }
        if let Some(end) = open.as_ref().and_then(|(_, item)| item.find(';')) {
            let (number, item) = open.take().unwrap();
            items.push((number, item[..end].to_string()));
        }
    }
    items
}

/// The paths a `use` item names, its groups expanded and renames dropped:
/// `crate::{a, b::{c, D as E}}` is `crate::a`, `crate::b::c` and
/// `crate::b::D`.
fn expand(item: &str) -> Vec<String> {
    let item: String = item
        .replace(" as ", "@")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let Some(open) = item.find('{') else {
        let path = item.split('@').next().unwrap_or(&item);
        return vec![path.to_string()];
    };
    let prefix = &item[..open];
    let inner = &item[open + 1..item.rfind('}').unwrap_or(item.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (at, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|part| !part.is_empty())
        .flat_map(|part| expand(&format!("{prefix}{part}")))
        .collect()
}

/// The segments of the crate-absolute path a `use` path names from module
/// `from`: `crate::a::B` is `[a, B]`, `super::c::D` in `x::y` is
/// `[x, c, D]`; `None` for a path outside the crate.
fn absolute(from: &str, path: &str) -> Option<Vec<String>> {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<&str> = from.split("::").filter(|s| !s.is_empty()).collect();
    match segments.first() {
        Some(&"crate") => base.clear(),
        Some(&"super") => {
            while segments.first() == Some(&"super") {
                base.pop()?;
                segments.remove(0);
            }
            segments.insert(0, "super");
        }
        _ => return None,
    }
    segments.remove(0);
    Some(base.into_iter().chain(segments).map(String::from).collect())
}

/// The module graph of one crate's product code: an edge from file module
/// `A` to file module `B`, with the line that makes it, when a `use` in `A`
/// names `crate::B...` (the deepest module of the path that is a file).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let product: Vec<&PathBuf> = files
        .iter()
        .filter(|file| !is_test_file(file) && !file.starts_with(src.join("bin")))
        .collect();
    let modules: BTreeSet<String> = product.iter().map(|file| module_of(src, file)).collect();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in product {
        let from = module_of(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        for (number, item) in use_items(&text) {
            for path in expand(&item) {
                let Some(segments) = absolute(&from, &path) else {
                    continue;
                };
                let to = (0..=segments.len())
                    .rev()
                    .map(|depth| segments[..depth].join("::"))
                    .find(|module| modules.contains(module));
                let Some(to) = to else { continue };
                if is_within(&from, &to) || is_within(&to, &from) {
                    continue;
                }
                graph
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| format!("{}:{number}", file.display()));
            }
        }
    }
    graph
}

/// The graph's strongly connected components of more than one module: each
/// is a set of modules that reach each other through their imports.
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut next = vec![from.clone()];
        while let Some(module) = next.pop() {
            for to in graph
                .get(&module)
                .into_iter()
                .flat_map(|edges| edges.keys())
            {
                if seen.insert(to.clone()) {
                    next.push(to.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|module| (module, reach(module))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for (module, reaches) in &reached {
        if !reaches.contains(*module) || found.iter().any(|cycle| cycle.contains(*module)) {
            continue;
        }
        let component = reaches
            .iter()
            .filter(|other| {
                reached
                    .get(other)
                    .is_some_and(|back| back.contains(*module))
            })
            .cloned()
            .collect();
        found.push(component);
    }
    found
}

/// No module imports one that imports it back, directly or in a loop: in
/// each crate's product code (as for the line limit), an edge goes from file
/// module `A` to file module `B` when a `use` in `A` (grouped forms
/// expanded) names `crate::B...`, `B` being the deepest module of the path
/// that is a file (`b.rs` or `b/mod.rs`). Parent and child are not an edge
/// either way: a child using its parent's items and a parent re-exporting
/// or calling its children are Rust's normal pattern, and the parent's
/// items are the child's context. `super::` paths are not followed (they
/// name the parent). Every other loop is reported with the lines that make
/// it, to be broken by moving what both sides use into a module below
/// both.
#[test]
fn no_module_imports_one_that_imports_it_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut report = Vec::new();
    for krate in CRATES {
        let graph = module_graph(&root.join(krate).join("src"));
        for cycle in cycles(&graph) {
            let mut lines = vec![format!("{krate}: {} modules in a loop", cycle.len())];
            for from in &cycle {
                for (to, at) in &graph[from] {
                    if cycle.contains(to) {
                        lines.push(format!("  {from} -> {to} ({at})"));
                    }
                }
            }
            report.push(lines.join("\n"));
        }
    }
    assert!(
        report.is_empty(),
        "modules that import each other, directly or in a loop; move what they \
         share into a module below them:\n{}",
        report.join("\n")
    );
}
