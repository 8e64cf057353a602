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
//! | 6 | `unauthorized` | a service refused the credential: no token, or one it does not accept |
//! | 7 | `forbidden` | a service refused the token's scope (the message names the scope needed) |
//! | 126, 127 | `attach` | `attach` could not run its command, or would not (126) |
//!
//! `attach` (without `--print`) exits with the attached command's own code,
//! or 126 / 127 when it cannot be run, as `env(1)` does.

use std::fmt;
use std::io::Write;
use std::process::ExitCode;

use lf_handoff_adapters::{StoreError, UnavailableKind};
use lf_handoff_api::error::one_line;
use lf_handoff_api::{Category, ErrorResponse};

pub use lf_handoff_api::error::{CANNOT_EXECUTE, COMMAND_NOT_FOUND, CONFLICT, USAGE};

/// A failure of the command: the error object `--json` prints (the kind a
/// program branches on, its category, the exit code, a message for
/// people), which is the service's error object too.
#[derive(Debug)]
pub struct CliError(ErrorResponse);

/// Shorthand for results whose error is a [`CliError`].
pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    fn new(category: Category, kind: &str, code: u8, message: String) -> Self {
        Self(ErrorResponse::with_code(category, kind, code, message))
    }

    /// A usage error of the command line itself (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Category::Usage, "usage", USAGE, message.into())
    }

    /// Storage (or this machine) could not be used (exit 5).
    pub fn unavailable(kind: UnavailableKind, message: impl Into<String>) -> Self {
        Self(ErrorResponse::new(
            Category::Unavailable,
            kind.as_str(),
            message.into(),
        ))
    }

    /// The kind of an address `serve` cannot listen on because another
    /// process listens there.
    pub const ADDRESS_IN_USE: &'static str = "address_in_use";

    /// The kind of an address `serve` cannot listen on for another reason
    /// (not this machine's, not permitted).
    pub const CANNOT_LISTEN: &'static str = "cannot_listen";

    /// The address `serve` was given cannot be listened on (exit 5, as
    /// anything of this machine that cannot be used): `kind` is
    /// [`ADDRESS_IN_USE`](Self::ADDRESS_IN_USE) or
    /// [`CANNOT_LISTEN`](Self::CANNOT_LISTEN).
    pub fn cannot_listen(kind: &str, message: impl Into<String>) -> Self {
        Self::new(
            Category::Unavailable,
            kind,
            lf_handoff_api::error::UNAVAILABLE,
            message.into(),
        )
    }

    /// The async runtime did not start (exit 5): the process is out of
    /// threads or memory.
    pub fn no_runtime(error: &std::io::Error) -> Self {
        Self::unavailable(
            UnavailableKind::Other,
            format!("cannot start the async runtime: {error}"),
        )
    }

    /// `wait` timed out (exit 4).
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(Category::Timeout, "timeout", CONFLICT, message.into())
    }

    /// `claim-wake --require` did not get the wake: another generation
    /// holds it (exit 4, kind `not_claimed`).
    pub fn not_claimed(message: impl Into<String>) -> Self {
        Self::new(Category::Conflict, "not_claimed", CONFLICT, message.into())
    }

    /// The demo found the store breaking its contract (exit 4).
    pub fn contract_broken(message: impl Into<String>) -> Self {
        Self::new(
            Category::Conflict,
            "contract_broken",
            CONFLICT,
            message.into(),
        )
    }

    /// `attach` found its command but could not run it (exit 126).
    pub fn cannot_execute(message: impl Into<String>) -> Self {
        Self::new(
            Category::Attach,
            "cannot_execute",
            CANNOT_EXECUTE,
            message.into(),
        )
    }

    /// `attach` refused to run a program that is not on its allow-list
    /// (exit 126, as for a command found but not runnable; contract C29).
    pub fn not_allowed(message: impl Into<String>) -> Self {
        Self::new(
            Category::Attach,
            "program_not_allowed",
            CANNOT_EXECUTE,
            message.into(),
        )
    }

    /// `attach` did not find its command (exit 127).
    pub fn command_not_found(message: impl Into<String>) -> Self {
        Self::new(
            Category::Attach,
            "command_not_found",
            COMMAND_NOT_FOUND,
            message.into(),
        )
    }

    /// The exit code.
    #[cfg(test)]
    pub fn code(&self) -> u8 {
        self.0.error.code
    }

    /// The specific kind, as `--json` prints it.
    #[cfg(test)]
    pub fn kind(&self) -> &str {
        &self.0.error.kind
    }

    /// Appends advice on what to do.
    pub fn hint(mut self, hint: impl fmt::Display) -> Self {
        self.0.error.message = format!("{}; {hint}", self.0.error.message);
        self
    }

    /// Prints the error to stderr, as one `error:` line or (`json`) one
    /// line of JSON, and returns the exit code.
    pub fn report(&self, json: bool) -> ExitCode {
        let line = if json {
            self.json_line()
        } else {
            format!("error: {}", one_line(&self.0.error.message))
        };
        // Nothing is left to tell when stderr itself is closed.
        let _ = writeln!(std::io::stderr().lock(), "{line}");
        ExitCode::from(self.0.error.code)
    }

    /// `{"error": {"kind", "category", "code", "message"}}` on one line.
    fn json_line(&self) -> String {
        let mut object = self.0.clone();
        object.error.message = one_line(&object.error.message);
        // Serialising strings and a number cannot fail; keep a valid
        // object all the same.
        serde_json::to_string(&object).unwrap_or_else(|_| {
            format!(
                r#"{{"error":{{"kind":"{}","category":"{}","code":{},"message":"unprintable"}}}}"#,
                object.error.kind, object.error.category, object.error.code
            )
        })
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.error.message)
    }
}

impl From<StoreError> for CliError {
    fn from(error: StoreError) -> Self {
        Self(ErrorResponse::from_store(&error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lf_handoff_adapters::ConflictKind;
    use lf_handoff_api::error::{NOT_FOUND, UNAVAILABLE};

    #[test]
    fn store_errors_map_to_the_documented_exit_codes_and_kinds() {
        let mut cases = vec![
            (
                StoreError::InvalidInput("bad".into()),
                USAGE,
                "invalid_input",
            ),
            (StoreError::NotFound("gone".into()), NOT_FOUND, "not_found"),
            (
                StoreError::unavailable(UnavailableKind::Locked, "down"),
                UNAVAILABLE,
                "locked",
            ),
        ];
        for (conflict, kind) in [
            (ConflictKind::StaleGeneration, "stale_generation"),
            (ConflictKind::Expired, "expired"),
            (ConflictKind::NotEmpty, "not_empty"),
        ] {
            cases.push((StoreError::conflict(conflict, "no"), CONFLICT, kind));
        }
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
}
