//! Command-line cold start: a fresh `lf-handoff status ID` process against
//! the engine's own command-line client reading the same row from the same
//! store (`sqlite3 FILE "SELECT ... WHERE id = ..."`, or `psql`).
//!
//! Both commands run the same number of times, alternating; each run is a
//! new process, so each figure includes process start, opening the store
//! and one read. The output of every run is checked to hold the handoff id.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::stats::{ratio, Summary};

/// The cold-start figures, or why they are missing.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum ColdStart {
    /// Both commands ran.
    Measured {
        /// Runs per command.
        runs: usize,
        /// `lf-handoff status ID`.
        cli: Summary,
        /// The engine's client, e.g. `sqlite3`.
        raw_command: String,
        /// The engine's client's timings.
        raw: Summary,
        /// cli / raw, by median.
        ratio: f64,
    },
    /// Only the CLI ran: the engine has no client here.
    CliOnly {
        /// Runs.
        runs: usize,
        /// `lf-handoff status ID`.
        cli: Summary,
        /// Why there is no comparison.
        reason: String,
    },
    /// Could not be measured.
    Unavailable {
        /// Why, and what to do.
        reason: String,
    },
}

/// Where the CLI binary is expected: beside this benchmark's own binary.
pub fn default_cli_path() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.join("lf-handoff"))
}

/// Measures `runs` cold starts of each command.
pub fn measure(
    cli: Option<&Path>,
    store_url: &str,
    id: &str,
    raw_command: Option<Vec<String>>,
    runs: usize,
) -> ColdStart {
    let Some(cli) = cli.filter(|path| path.is_file()) else {
        return ColdStart::Unavailable {
            reason: format!(
                "CLI not built: {} does not exist; build it with \
                 `cargo build --release -p lf-handoff-cli` (or pass --cli PATH)",
                cli.map_or_else(|| "lf-handoff".into(), |p| p.display().to_string())
            ),
        };
    };
    let cli_args = vec![
        cli.display().to_string(),
        "--store".into(),
        store_url.into(),
        "status".into(),
        id.into(),
    ];
    // One untimed run of each: it reports what is wrong, and warms the
    // page cache for both.
    if let Err(reason) = run(&cli_args, id) {
        return ColdStart::Unavailable {
            reason: format!("CLI not usable for `status`: {reason}"),
        };
    }
    let raw_command = match raw_command {
        Some(args) => match run(&args, id) {
            Ok(_) => Some(args),
            Err(reason) => {
                return cli_only(&cli_args, id, runs, format!("{}: {reason}", args[0]));
            }
        },
        None => None,
    };
    let Some(raw_args) = raw_command else {
        return cli_only(&cli_args, id, runs, "the engine has no client here".into());
    };
    let mut cli_timings = Vec::with_capacity(runs);
    let mut raw_timings = Vec::with_capacity(runs);
    for n in 0..runs {
        let turns = if n % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for cli_turn in turns {
            let args = if cli_turn { &cli_args } else { &raw_args };
            match run(args, id) {
                Ok(elapsed) if cli_turn => cli_timings.push(elapsed),
                Ok(elapsed) => raw_timings.push(elapsed),
                Err(reason) => {
                    return ColdStart::Unavailable {
                        reason: format!("{} failed during the runs: {reason}", args[0]),
                    }
                }
            }
        }
    }
    let cli = Summary::of(&cli_timings);
    let raw = Summary::of(&raw_timings);
    ColdStart::Measured {
        runs,
        cli,
        raw_command: raw_args[0].clone(),
        raw,
        ratio: ratio(cli.median_us, raw.median_us),
    }
}

fn cli_only(cli_args: &[String], id: &str, runs: usize, reason: String) -> ColdStart {
    let mut timings = Vec::with_capacity(runs);
    for _ in 0..runs {
        match run(cli_args, id) {
            Ok(elapsed) => timings.push(elapsed),
            Err(reason) => return ColdStart::Unavailable { reason },
        }
    }
    ColdStart::CliOnly {
        runs,
        cli: Summary::of(&timings),
        reason,
    }
}

/// Runs `args`, requiring success and `id` in its output.
fn run(args: &[String], id: &str) -> Result<Duration, String> {
    let start = Instant::now();
    let output = Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", args[0]))?;
    let elapsed = start.elapsed();
    if !output.status.success() {
        return Err(format!(
            "exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    if !String::from_utf8_lossy(&output.stdout).contains(id) {
        return Err(format!(
            "exited 0 but did not print the handoff {id} (stdout: {:?})",
            String::from_utf8_lossy(&output.stdout).trim()
        ));
    }
    Ok(elapsed)
}
