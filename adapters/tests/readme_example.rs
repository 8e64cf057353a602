//! The README's library example is `examples/library.rs`, word for word,
//! so the example a newcomer copies always compiles (`cargo test` builds
//! every example) and runs (this test runs it).

use std::process::Command;

fn readme_block() -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .unwrap_or_else(|e| panic!("cannot read README.md: {e}"));
    let section = readme
        .find("## Using the library")
        .unwrap_or_else(|| panic!("README.md has no \"Using the library\" section"));
    let rest = &readme[section..];
    let start = rest
        .find("```rust\n")
        .unwrap_or_else(|| panic!("the section has no rust block"))
        + "```rust\n".len();
    let end = rest[start..]
        .find("```\n")
        .unwrap_or_else(|| panic!("the rust block is not closed"));
    rest[start..start + end].to_string()
}

#[test]
fn the_readme_library_example_is_the_compiled_example() {
    let example = include_str!("../examples/library.rs");
    let code = example
        .split_once("\n\n")
        .map(|(_, code)| code)
        .unwrap_or(example);
    assert_eq!(
        readme_block(),
        code,
        "README.md's library example and adapters/examples/library.rs differ"
    );
}

#[test]
fn the_library_example_runs() {
    // Cargo builds examples before integration tests; run the built one.
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no test executable: {e}"));
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap_or_else(|| panic!("{} has no profile directory", exe.display()));
    let example = dir.join("examples").join("library");
    if !example.is_file() {
        eprintln!(
            "skipped: {} is not built (run `cargo test -p lf-handoff-adapters`, which builds it)",
            example.display()
        );
        return;
    }
    let status = Command::new(&example)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", example.display()));
    assert!(status.success(), "the README's example failed: {status}");
}
