//! `lf-handoff-race`: P processes race open, finish and claim over M
//! handoffs; every race must have exactly one winner. See the
//! `lf_handoff_harness::race` module and `docs/RELIABILITY.md`.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use lf_handoff_harness::program::{
    act_as, backends_and_exe, duration_arg, runtime, verdict, PlacementArgs, EXIT_USAGE,
};
use lf_handoff_harness::race::{self, RaceFigures, RaceOptions, RacerMode, MAX_RACERS, WORKER_ARG};

/// Race P processes over M handoffs: racing opens for one parent, racing
/// finishes with different outcomes, racing wake claims with different
/// generations. Every race must have exactly one winner, and the stored
/// result must be the winner's.
///
/// Exit status: 0 all passed; 1 a race had no winner or several, a stored
/// result was not the winner's, or the harness failed; 2 bad arguments;
/// 3 the time limit stopped a run before all its handoffs ran.
#[derive(Debug, Parser)]
#[command(name = "lf-handoff-race", version)]
struct Args {
    /// Backends to race on, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    backends: String,
    /// Racers in every race (at most 64).
    #[arg(long, default_value_t = 8)]
    processes: usize,
    /// Handoffs raced over; each sees an open, a finish and a claim race.
    #[arg(long, default_value_t = 200)]
    handoffs: u64,
    /// Seed of who gets which outcome and generation, and the release order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How racers run: `auto` (processes where the backend allows it),
    /// `processes` or `handles` (store handles in one process).
    #[arg(long, value_enum, default_value_t = Mode::Auto)]
    mode: Mode,
    /// No new handoff starts on a backend after this long on it, e.g. 10m.
    #[arg(long, default_value = "10m", value_parser = duration_arg)]
    time_limit: Duration,
    #[command(flatten)]
    placement: PlacementArgs,
    /// Self-test: racers that lose a finish claim they won, to show the
    /// harness reports double winners (it must then exit 1).
    #[arg(long, hide = true)]
    self_test_false_wins: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Mode {
    Auto,
    Processes,
    Handles,
}

fn main() -> ExitCode {
    if let Some(status) = act_as(WORKER_ARG, "race worker", |args| async move {
        race::worker(&args).await
    }) {
        return status;
    }
    let args = Args::parse();
    let (backends, exe) = match backends_and_exe(&args.backends) {
        Ok(found) => found,
        Err(status) => return status,
    };
    if args.processes < 2 || args.processes > MAX_RACERS {
        eprintln!("error: --processes must be from 2 to {MAX_RACERS}");
        return ExitCode::from(EXIT_USAGE);
    }
    let options = RaceOptions {
        backends,
        racers: args.processes,
        handoffs: args.handoffs,
        seed: args.seed,
        mode: match args.mode {
            Mode::Auto => RacerMode::Auto,
            Mode::Processes => RacerMode::Processes,
            Mode::Handles => RacerMode::Handles,
        },
        time_limit: args.time_limit,
        placement: args.placement.placement(),
        false_wins: args.self_test_false_wins,
    };
    println!(
        "race harness: seed {}, {} racers x {} handoffs (open, finish and claim races) on {}",
        options.seed,
        options.racers,
        options.handoffs,
        options.backends.join(", ")
    );
    let figures = runtime().block_on(race::run(&options, &exe));
    let races: u64 = figures.iter().map(RaceFigures::races).sum();
    let single: u64 = figures.iter().map(RaceFigures::races_with_one_winner).sum();
    let errors: u64 = figures.iter().map(|f| f.errors).sum();
    verdict(
        "race harness",
        figures.iter().all(RaceFigures::passed),
        figures.iter().all(|f| !f.stopped_by_time_limit),
        &format!("{single} of {races} races had exactly one winner, {errors} errors"),
    )
}
