//! The workspace's shape, checked: no product source file grows past 800
//! lines (its code before an inline `#[cfg(test)]` module; test files,
//! `tests.rs` and `*_tests.rs`, are not product code). A file that needs
//! more is split by what it owns, as `docs/ARCHITECTURE.md` maps them.
//! The command line names no storage backend, and the server registers no
//! route but those of the route table.

// Test code: panicking on a failed expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// The longest product source file, in lines.
const MAX_LINES: usize = 800;

/// The crates whose `src/` is product code.
const CRATES: &[&str] = &[
    "domain",
    "application",
    "adapters",
    "api",
    "server",
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
