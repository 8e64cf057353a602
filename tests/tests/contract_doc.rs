//! docs/CONTRACT.md stays true to the code: every invariant and every built
//! clause names at least one check, and every check it names is a function
//! of that name in the file it links to.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or_else(|| panic!("the conformance crate has a parent directory"))
        .to_path_buf()
}

/// `(name, path)` of every link written [`name`](../path).
fn links(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        rest = &rest[start + 2..];
        let Some(end) = rest.find("`](") else { break };
        let name = &rest[..end];
        let after = &rest[end + 3..];
        let Some(close) = after.find(')') else { break };
        let target = &after[..close];
        if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && target.starts_with("../")
            && target.ends_with(".rs")
        {
            found.push((name.to_string(), target.to_string()));
        }
        rest = after;
    }
    found
}

#[test]
fn every_linked_check_exists() {
    let docs = root().join("docs");
    let text = std::fs::read_to_string(docs.join("CONTRACT.md"))
        .unwrap_or_else(|e| panic!("cannot read docs/CONTRACT.md: {e}"));
    let found = links(&text);
    assert!(found.len() > 50, "only {} links found", found.len());
    for (name, target) in found {
        let path = docs.join(&target);
        let source = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("CONTRACT.md links {target}, which cannot be read: {e}"));
        assert!(
            source.contains(&format!("fn {name}(")) || source.contains(&format!("fn {name}<")),
            "CONTRACT.md links {name} in {target}, which has no such function"
        );
    }
}

#[test]
fn every_invariant_and_built_clause_names_a_check() {
    let text = std::fs::read_to_string(root().join("docs/CONTRACT.md"))
        .unwrap_or_else(|e| panic!("cannot read docs/CONTRACT.md: {e}"));
    let sections: Vec<&str> = text.split("\n### ").skip(1).collect();
    let mut seen = Vec::new();
    for section in sections {
        let title = section.lines().next().unwrap_or_default();
        let Some(id) = title.split_whitespace().next() else {
            continue;
        };
        let numbered = id.len() >= 2
            && (id.starts_with('C') || id.starts_with('I'))
            && id[1..].chars().all(|c| c.is_ascii_digit());
        if !numbered {
            continue;
        }
        seen.push(id.to_string());
        let body = section.split("\n## ").next().unwrap_or(section);
        if body.contains("**Planned**") {
            continue;
        }
        assert!(
            body.contains("Checked by:") && !links(body).is_empty(),
            "{title}: no check is linked"
        );
    }
    for n in 1..=7 {
        assert!(seen.contains(&format!("I{n}")), "I{n} is missing");
    }
    for n in (1..=18).chain([25]) {
        assert!(seen.contains(&format!("C{n}")), "C{n} is missing");
    }
}
