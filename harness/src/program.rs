//! What both harness binaries share: the async runtime, argument parsers,
//! acting as their own child process, and the exit status.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use lf_handoff_adapters::parse_duration;

use crate::target::parse_backends;

/// The exit status of a run whose checks failed.
pub const EXIT_FAILED: u8 = 1;
/// The exit status of bad arguments.
pub const EXIT_USAGE: u8 = 2;
/// The exit status of a run the time limit cut short (nothing failed).
pub const EXIT_INCOMPLETE: u8 = 3;

/// A multi-threaded runtime with two workers (the machines this runs on
/// in CI have two cores). Exits the process if it cannot start.
pub fn runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(i32::from(EXIT_FAILED));
        }
    }
}

/// Parses a duration argument such as `150ms` or `10m`.
///
/// # Errors
/// The message of [`parse_duration`].
pub fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|e| e.to_string())
}

/// When this process was started with `role` as its first argument, runs
/// `body` with the remaining arguments and returns its exit status;
/// otherwise returns `None` and the caller acts as the harness.
pub fn act_as<F, Fut>(role: &str, label: &str, body: F) -> Option<ExitCode>
where
    F: FnOnce(Vec<String>) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some(role) {
        return None;
    }
    args.remove(0);
    Some(match runtime().block_on(body(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{label}: {message}");
            ExitCode::FAILURE
        }
    })
}

/// The backends named by `list`, and this binary's own path (which the
/// children run), or the exit status to end with after printing why.
///
/// # Errors
/// The exit status for an unknown backend (usage) or an unknown binary.
pub fn backends_and_exe(list: &str) -> Result<(Vec<&'static str>, PathBuf), ExitCode> {
    let backends = parse_backends(list).map_err(|message| {
        eprintln!("error: {message}");
        ExitCode::from(EXIT_USAGE)
    })?;
    let exe = std::env::current_exe().map_err(|e| {
        eprintln!("error: cannot find this program's own binary: {e}");
        ExitCode::from(EXIT_FAILED)
    })?;
    Ok((backends, exe))
}

/// Prints the verdict line and returns the exit status: failed (1), cut
/// short by the time limit (3) or passed (0).
pub fn verdict(harness: &str, passed: bool, complete: bool, detail: &str) -> ExitCode {
    if !passed {
        println!("{harness}: FAILED ({detail})");
        ExitCode::from(EXIT_FAILED)
    } else if !complete {
        println!("{harness}: INCOMPLETE (the time limit stopped a run; {detail})");
        ExitCode::from(EXIT_INCOMPLETE)
    } else {
        println!("{harness}: PASSED ({detail})");
        ExitCode::SUCCESS
    }
}
