//! This program run again as a child process: the phases that must not
//! share this process's heap or store handles (the fill of the latency
//! phase's stores, the memory phase's lifecycle loops) run in one.

use std::process::{Command, Stdio};

use crate::error::{fail, BenchResult, Context};

/// Runs this program with `args` (the first names the child, e.g.
/// [`FILL_ARG`](crate::latency::FILL_ARG)), its stderr passed through,
/// and returns the last line it printed. `what` names the child in errors.
///
/// # Errors
/// A failure when the child does not start, exits with an error (its
/// output quoted) or prints nothing.
pub fn run_self(what: &str, args: &[String]) -> BenchResult<String> {
    let exe = std::env::current_exe().context("this program's path")?;
    let output = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context(format!("start the {what}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return fail(format!(
            "the {what} exited with {}: {}",
            output.status,
            stdout.trim()
        ));
    }
    match stdout.lines().last() {
        Some(line) => Ok(line.to_string()),
        None => fail(format!("the {what} printed nothing")),
    }
}
