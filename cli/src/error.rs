//! Errors and exit codes: every failure is one `error:` line on stderr and
//! one of the exit codes of DESIGN section 6.
//!
//! | code | meaning |
//! | --- | --- |
//! | 2 | invalid input or usage |
//! | 3 | not found |
//! | 4 | conflict (and `wait` timing out) |
//! | 5 | storage unavailable |
//!
//! `attach` (without `--print`) exits with the attached command's own code,
//! or 126 / 127 when it cannot be run, as `env(1)` does.

use std::fmt;
use std::process::ExitCode;

use lf_handoff_adapters::StoreError;

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

/// A failure of the command: an exit code and a message for people.
#[derive(Debug)]
pub struct CliError {
    code: u8,
    message: String,
}

/// Shorthand for results whose error is a [`CliError`].
pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    /// A failure with `code` and `message`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Invalid input or usage (exit 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(USAGE, message)
    }

    /// Storage unavailable (exit 5).
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(UNAVAILABLE, message)
    }

    /// The exit code.
    #[cfg(test)]
    pub fn code(&self) -> u8 {
        self.code
    }

    /// Appends advice on what to do.
    pub fn hint(mut self, hint: impl fmt::Display) -> Self {
        self.message = format!("{}; {hint}", self.message);
        self
    }

    /// Prints the one-line message to stderr and returns the exit code.
    pub fn report(&self) -> ExitCode {
        eprintln!("error: {}", one_line(&self.message));
        ExitCode::from(self.code)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<StoreError> for CliError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::InvalidInput(message) => Self::new(USAGE, message),
            StoreError::NotFound(message) => Self::new(NOT_FOUND, message),
            StoreError::Conflict(message) => Self::new(CONFLICT, message),
            StoreError::Unavailable { message, .. } => {
                Self::new(UNAVAILABLE, format!("storage unavailable: {message}"))
            }
            // StoreError is non_exhaustive; a future kind is reported as a
            // storage failure rather than lost.
            #[allow(unreachable_patterns)]
            other => Self::new(UNAVAILABLE, other.to_string()),
        }
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

    #[test]
    fn store_errors_map_to_the_documented_exit_codes() {
        let cases = [
            (StoreError::InvalidInput("bad".into()), USAGE),
            (StoreError::NotFound("gone".into()), NOT_FOUND),
            (StoreError::Conflict("no".into()), CONFLICT),
            (StoreError::unavailable("down"), UNAVAILABLE),
        ];
        for (error, code) in cases {
            assert_eq!(CliError::from(error).code(), code);
        }
    }

    #[test]
    fn messages_are_folded_onto_one_line() {
        assert_eq!(one_line("a\nb\t c\r\n\x1b[31md"), "a b c [31md");
        assert_eq!(one_line("  lead  "), "lead");
    }
}
