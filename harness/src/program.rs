//! What both harness binaries share: the async runtime, argument parsers,
//! acting as their own child process, a run over each backend, and the
//! exit status.

use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use lf_handoff_adapters::parse_duration;

use crate::rng::Rng;
use crate::target::{parse_backends, Placement};

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

/// Where a run makes its stores: the `--dir` and `--postgres-url`
/// arguments both harnesses take.
#[derive(Debug, clap::Args)]
pub struct PlacementArgs {
    /// Directory in which each run's temporary store is made.
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    pub dir: PathBuf,
    /// PostgreSQL server in which each run makes (and then drops) a fresh
    /// schema [default: $LF_HANDOFF_TEST_POSTGRES_URL, else
    /// postgres://postgres@127.0.0.1:5432/test].
    #[arg(long)]
    pub postgres_url: Option<String>,
}

impl PlacementArgs {
    /// The [`Placement`] these arguments name.
    pub fn placement(&self) -> Placement {
        Placement::new(self.dir.clone(), self.postgres_url.clone())
    }
}

/// Runs `run_backend` on each of `backends` in turn, each with its own
/// random source forked from `seed`'s, printing each backend's `report`
/// as it finishes; returns the figures in the order of `backends`.
pub async fn each_backend<T, Fut>(
    backends: &[&'static str],
    seed: u64,
    report: fn(&T) -> String,
    mut run_backend: impl FnMut(&'static str, Rng) -> Fut,
) -> Vec<T>
where
    Fut: Future<Output = T>,
{
    let mut rng = Rng::new(seed);
    let mut all = Vec::new();
    for &backend in backends {
        let figures = run_backend(backend, rng.fork()).await;
        print!("{}", report(&figures));
        all.push(figures);
    }
    all
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
