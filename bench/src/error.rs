//! The benchmark's one error type: a message saying what failed and why.

use std::fmt;

/// Why a benchmark step could not run.
#[derive(Debug)]
pub struct Failure(pub String);

/// A benchmark step's result.
pub type BenchResult<T> = Result<T, Failure>;

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<E: std::error::Error> From<E> for Failure {
    fn from(error: E) -> Self {
        Self(error.to_string())
    }
}

/// Adds what was being done to an error.
pub trait Context<T> {
    /// Prefixes the error with `what`.
    fn context(self, what: impl fmt::Display) -> BenchResult<T>;
}

impl<T, E: fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: impl fmt::Display) -> BenchResult<T> {
        self.map_err(|error| Failure(format!("{what}: {error}")))
    }
}

/// A failure with `message`.
pub fn fail<T>(message: impl Into<String>) -> BenchResult<T> {
    Err(Failure(message.into()))
}
