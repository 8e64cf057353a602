//! Errors and exit codes: every failure is one line on stderr (an `error:`
//! line, or with `--json` one JSON object) and one of the exit codes of the
//! command line's contract (docs/CONTRACT.md, docs/CLI.md).
//!
//! | code | category | meaning |
//! | --- | --- | --- |
//! | 2 | `usage`, `invalid_input` | invalid input or usage |
//! | 3 | `not_found` | not found |
//! | 4 | `conflict`, `timeout` | conflict (and `wait` timing out) |
//! | 5 | `unavailable` | storage unavailable |
//! | 126, 127 | `attach` | `attach` could not run its command |
//!
//! `attach` (without `--print`) exits with the attached command's own code,
//! or 126 / 127 when it cannot be run, as `env(1)` does.

use std::fmt;
use std::io::Write;
use std::process::ExitCode;

use lf_handoff_adapters::{StoreError, UnavailableKind};
use serde::Serialize;

/// Invalid input or usage.
pub const USAGE: u8 = 2;
/// The id or parent does not exist.
pub const NOT_FOUND: u8 = 3;
/// The current state refuses the request, or `wait` timed out.
pub const CONFLICT: u8 = 4;
/// The store cannot be used.
pub const UNAVAILABLE: u8 = 5;
/// The attach command was found but could not be run.
pub const CANNOT_EXECUTE: u8 = 126;
/// The attach command was not found.
pub const COMMAND_NOT_FOUND: u8 = 127;

/// A failure of the command: an exit code, the kind a program branches on,
/// and a message for people.
#[derive(Debug)]
pub struct CliError {
    code: u8,
    category: &'static str,
    kind: &'static str,
    message: String,
}

/// Shorthand for results whose error is a [`CliError`].
pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    fn new(code: u8, category: &'static str, kind: &'static str, message: String) -> Self {
        Self {
            code,
            category,
            kind,
            message,
        }
    }

    /// A usage error of the command line itself (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, "usage", "usage", message.into())
    }

    /// Storage (or this machine) could not be used (exit 5).
    pub fn unavailable(kind: UnavailableKind, message: impl Into<String>) -> Self {
        Self::new(UNAVAILABLE, "unavailable", kind.as_str(), message.into())
    }

    /// `wait` timed out (exit 4).
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(CONFLICT, "timeout", "timeout", message.into())
    }

    /// The demo found the store breaking its contract (exit 4).
    pub fn contract_broken(message: impl Into<String>) -> Self {
        Self::new(CONFLICT, "conflict", "contract_broken", message.into())
    }

    /// `attach` found its command but could not run it (exit 126).
    pub fn cannot_execute(message: impl Into<String>) -> Self {
        Self::new(CANNOT_EXECUTE, "attach", "cannot_execute", message.into())
    }

    /// `attach` did not find its command (exit 127).
    pub fn command_not_found(message: impl Into<String>) -> Self {
        Self::new(
            COMMAND_NOT_FOUND,
            "attach",
            "command_not_found",
            message.into(),
        )
    }

    /// The exit code.
    #[cfg(test)]
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The specific kind, as `--json` prints it.
    #[cfg(test)]
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Appends advice on what to do.
    pub fn hint(mut self, hint: impl fmt::Display) -> Self {
        self.message = format!("{}; {hint}", self.message);
        self
    }

    /// Prints the error to stderr, as one `error:` line or (`json`) one
    /// line of JSON, and returns the exit code.
    pub fn report(&self, json: bool) -> ExitCode {
        let line = if json {
            self.json_line()
        } else {
            format!("error: {}", one_line(&self.message))
        };
        // Nothing is left to tell when stderr itself is closed.
        let _ = writeln!(std::io::stderr().lock(), "{line}");
        ExitCode::from(self.code)
    }

    /// `{"error": {"kind", "category", "code", "message"}}` on one line.
    fn json_line(&self) -> String {
        #[derive(Serialize)]
        struct Body<'a> {
            kind: &'a str,
            category: &'a str,
            code: u8,
            message: &'a str,
        }
        #[derive(Serialize)]
        struct Report<'a> {
            error: Body<'a>,
        }
        let message = one_line(&self.message);
        let report = Report {
            error: Body {
                kind: self.kind,
                category: self.category,
                code: self.code,
                message: &message,
            },
        };
        // Serialising strings and a number cannot fail; keep a valid
        // object all the same.
        serde_json::to_string(&report).unwrap_or_else(|_| {
            format!(
                r#"{{"error":{{"kind":"{}","category":"{}","code":{},"message":"unprintable"}}}}"#,
                self.kind, self.category, self.code
            )
        })
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<StoreError> for CliError {
    fn from(error: StoreError) -> Self {
        let kind = error.kind_name();
        let (code, category, message) = match &error {
            StoreError::InvalidInput(message) => (USAGE, "invalid_input", message.clone()),
            StoreError::NotFound(message) => (NOT_FOUND, "not_found", message.clone()),
            StoreError::Conflict { message, .. } => (CONFLICT, "conflict", message.clone()),
            StoreError::Unavailable { message, .. } => (
                UNAVAILABLE,
                "unavailable",
                format!("storage unavailable: {message}"),
            ),
            // StoreError is non_exhaustive; a future kind is reported as a
            // storage failure rather than lost.
            #[allow(unreachable_patterns)]
            other => (UNAVAILABLE, "unavailable", other.to_string()),
        };
        Self::new(code, category, kind, message)
    }
}

/// Folds `text` onto one line: newlines and other control characters
/// become spaces, runs of whitespace one space.
pub fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|word| !word.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lf_handoff_adapters::ConflictKind;

    #[test]
    fn store_errors_map_to_the_documented_exit_codes_and_kinds() {
        let cases = [
            (
                StoreError::InvalidInput("bad".into()),
                USAGE,
                "invalid_input",
            ),
            (StoreError::NotFound("gone".into()), NOT_FOUND, "not_found"),
            (
                StoreError::conflict(ConflictKind::StaleGeneration, "no"),
                CONFLICT,
                "stale_generation",
            ),
            (
                StoreError::conflict(ConflictKind::Expired, "too late"),
                CONFLICT,
                "expired",
            ),
            (
                StoreError::conflict(ConflictKind::NotEmpty, "holds records"),
                CONFLICT,
                "not_empty",
            ),
            (
                StoreError::unavailable(UnavailableKind::Locked, "down"),
                UNAVAILABLE,
                "locked",
            ),
        ];
        for (error, code, kind) in cases {
            let error = CliError::from(error);
            assert_eq!((error.code(), error.kind()), (code, kind));
        }
    }

    #[test]
    fn the_json_form_is_one_line_with_kind_category_code_and_message() {
        let error = CliError::from(StoreError::conflict(
            ConflictKind::OtherOutcome,
            "handoff ih_1 is already completed;\nthe first \"outcome\" stays",
        ));
        let line = error.json_line();
        assert!(!line.contains('\n'), "{line}");
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["error"]["kind"], "other_outcome");
        assert_eq!(value["error"]["category"], "conflict");
        assert_eq!(value["error"]["code"], 4);
        assert_eq!(
            value["error"]["message"],
            "handoff ih_1 is already completed; the first \"outcome\" stays"
        );
    }

    #[test]
    fn messages_are_folded_onto_one_line() {
        assert_eq!(one_line("a\nb\t c\r\n\x1b[31md"), "a b c [31md");
        assert_eq!(one_line("  lead  "), "lead");
    }
}
