//! Shared checks for the strings a request carries.
//!
//! Every backend must store a string exactly or refuse it. PostgreSQL cannot
//! store NUL bytes, an environment key cannot contain `=`, and an argument
//! vector cannot carry NUL to `execve`, so these rules are enforced once, here,
//! for every backend alike.

use std::path::{Component, Path, PathBuf};

use crate::error::{DomainError, DomainResult};

/// The longest single string (in bytes) a handoff or parent field may hold.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;

/// The most arguments an attach command, or entries an environment, may hold.
pub const MAX_ITEMS: usize = 1024;

/// Checks that `value` holds no NUL byte and is at most [`MAX_TEXT_BYTES`].
pub fn check_text(field: &str, value: &str) -> DomainResult<()> {
    if value.contains('\0') {
        return Err(DomainError::invalid(format!(
            "{field} must not contain a NUL byte"
        )));
    }
    if value.len() > MAX_TEXT_BYTES {
        return Err(DomainError::invalid(format!(
            "{field} is {} bytes long; the limit is {MAX_TEXT_BYTES}",
            value.len()
        )));
    }
    Ok(())
}

/// Checks [`check_text`] and that `value` is not empty or only whitespace.
pub fn check_non_blank(field: &str, value: &str) -> DomainResult<()> {
    if value.trim().is_empty() {
        return Err(DomainError::invalid(format!("{field} must not be blank")));
    }
    check_text(field, value)
}

/// Checks that `path` is absolute, valid UTF-8 and free of NUL bytes.
pub fn check_absolute_path(field: &str, path: &Path) -> DomainResult<()> {
    let Some(text) = path.to_str() else {
        return Err(DomainError::invalid(format!(
            "{field} must be valid UTF-8, got {}",
            path.display()
        )));
    };
    check_non_blank(field, text)?;
    if !path.is_absolute() {
        return Err(DomainError::invalid(format!(
            "{field} must be an absolute path, got {text:?}"
        )));
    }
    Ok(())
}

/// Normalises a path lexically: drops `.` components and trailing slashes and
/// resolves `..` against the preceding component. Symlinks are not resolved.
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(component);
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_and_nul_text_is_refused() {
        assert!(check_non_blank("reason", "  \t").is_err());
        assert!(check_non_blank("reason", "a\0b").is_err());
        assert!(check_non_blank("reason", "ok").is_ok());
        assert!(check_text("x", &"a".repeat(MAX_TEXT_BYTES)).is_ok());
        assert!(check_text("x", &"a".repeat(MAX_TEXT_BYTES + 1)).is_err());
    }

    #[test]
    fn relative_paths_are_refused() {
        assert!(check_absolute_path("cwd", Path::new("src/x")).is_err());
        assert!(check_absolute_path("cwd", Path::new("/src/x")).is_ok());
    }

    #[test]
    fn lexical_normalisation_ignores_dots_and_trailing_slashes() {
        assert_eq!(normalize_lexically(Path::new("/a/b/")), Path::new("/a/b"));
        assert_eq!(
            normalize_lexically(Path::new("/a/./b/.")),
            Path::new("/a/b")
        );
        assert_eq!(
            normalize_lexically(Path::new("/a/c/../b")),
            Path::new("/a/b")
        );
        assert_ne!(normalize_lexically(Path::new("/a/b")), Path::new("/a/c"));
    }
}
