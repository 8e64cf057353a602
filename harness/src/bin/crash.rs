//! `lf-handoff-crash`: SIGKILL a process running handoff lifecycles at
//! random moments and check that nothing acknowledged is lost. See the
//! `lf_handoff_harness::crash` module and `docs/RELIABILITY.md`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use lf_handoff_conformance::upgrade::Release;
use lf_handoff_harness::crash::{self, CrashFigures, CrashOptions};
use lf_handoff_harness::crash_child::{self, CHILD_ARG};
use lf_handoff_harness::kills::{self, KillFigures, KillOptions};
use lf_handoff_harness::program::{
    act_as, backends_and_exe, duration_arg, runtime, verdict, PlacementArgs,
};
use lf_handoff_harness::upgrade::{self, UpgradeFigures};

/// Kill a process running handoff lifecycles with SIGKILL at random moments,
/// reopen the store, and check that every acknowledged transition survived,
/// every record keeps its invariants, and every change has its history
/// event and no event is without its change.
///
/// Exit status: 0 all passed; 1 a transition was lost, an invariant broke, a
/// history lacked an event or held one too many, or the harness failed; 2
/// bad arguments; 3 the time limit stopped a run before all its trials ran.
#[derive(Debug, Parser)]
#[command(name = "lf-handoff-crash", version)]
struct Args {
    /// Backends to crash, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    backends: String,
    /// Kill-and-check trials per backend.
    #[arg(long, default_value_t = 30)]
    trials: u64,
    /// Seed of every choice the harness makes (printed, so a run can be
    /// repeated; the exact interleaving is up to the operating system).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Concurrent lifecycles in each child.
    #[arg(long, default_value_t = 4)]
    lanes: usize,
    /// Acknowledged transitions to wait for before the kill delay starts
    /// (with 0, one trial in 8 kills during the child's startup instead).
    #[arg(long, default_value_t = 0)]
    min_acks: usize,
    /// Longest delay between the child's `ready` (and --min-acks) and the
    /// kill, e.g. 150ms.
    #[arg(long, default_value = "150ms", value_parser = duration_arg)]
    max_delay: Duration,
    /// No new trial starts on a backend after this long on it, e.g. 10m.
    #[arg(long, default_value = "10m", value_parser = duration_arg)]
    time_limit: Duration,
    #[command(flatten)]
    placement: PlacementArgs,
    /// Parents whose bodies play the crash story of step keys and wake
    /// hand-overs, one lane each in every child (0: none).
    #[arg(long, default_value_t = 2)]
    story_parents: usize,
    /// Lanes in each child whose handoffs have deadlines of 20 to 300 ms,
    /// which they sweep, extend and let expire (0: none).
    #[arg(long, default_value_t = 1)]
    deadline_lanes: usize,
    /// Upgrade trials per backend: SIGKILL a process opening a copy of the
    /// backend's store of the --upgrade-from release, then check the next
    /// open keeps every record (0: none). PostgreSQL uses
    /// $LF_HANDOFF_TEST_POSTGRES_URL.
    #[arg(long, default_value_t = 0)]
    upgrade_trials: u64,
    /// The release whose fixture stores the upgrade trials open: 1 (0.1.0,
    /// tests/fixtures/v1), 2 (0.2.0), 3 (0.3.0) or 4 (the 0.3 series' last
    /// build, SQL schema 5, tests/fixtures/v4).
    #[arg(long, default_value = "1")]
    upgrade_from: Release,
    /// Kills per backend in the kill loop (SQLite and sled): children
    /// killed while they create, open, upgrade or write a store, and the
    /// command line's `complete` killed, each followed by a check that the
    /// store opens with every acknowledged write (0: none).
    #[arg(long, default_value_t = 0)]
    kills: u64,
    /// Kills per store in the kill loop before it starts a new store.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    kills_per_store: u64,
    /// The `lf-handoff` binary whose `complete` the kill loop kills
    /// [default: lf-handoff next to this program, when there is one].
    #[arg(long)]
    cli: Option<PathBuf>,
    /// strace, with which the kill loop kills children as they enter a
    /// system call picked at random [default: strace on the PATH, when
    /// there is one].
    #[arg(long)]
    strace: Option<PathBuf>,
    /// Print a line per trial (and per kill of the kill loop).
    #[arg(long)]
    verbose: bool,
    /// Self-test: children acknowledge writes they never made, to show the
    /// harness (and its kill loop) reports them as lost (it must then exit
    /// 1).
    #[arg(long, hide = true)]
    self_test_fake_acks: bool,
    /// Self-test: story lanes acknowledge a second handoff for a step and a
    /// wake won back by an older generation, to show the harness counts
    /// both (it must then exit 1).
    #[arg(long, hide = true)]
    self_test_fake_steps: bool,
    /// Self-test: the harness drops an event from one history it reads and
    /// adds one to another after each trial, to show it counts a change
    /// without its event and an event without its change (it must then
    /// exit 1).
    #[arg(long, hide = true)]
    self_test_fake_history: bool,
}

fn main() -> ExitCode {
    if let Some(status) = act_as(CHILD_ARG, "crash child", |args| async move {
        crash_child::run(&args).await
    }) {
        return status;
    }
    if let Some(status) = act_as(
        upgrade::OPEN_CHILD_ARG,
        "upgrade child",
        |args| async move { upgrade::child(&args).await },
    ) {
        return status;
    }
    let args = Args::parse();
    let (backends, exe) = match backends_and_exe(&args.backends) {
        Ok(found) => found,
        Err(status) => return status,
    };
    let options = CrashOptions {
        backends,
        trials: args.trials,
        seed: args.seed,
        lanes: args.lanes.max(1),
        min_acks: args.min_acks,
        max_delay: args.max_delay,
        time_limit: args.time_limit,
        placement: args.placement.placement(),
        verbose: args.verbose,
        fake_acks: args.self_test_fake_acks,
        story_parents: args.story_parents,
        fake_steps: args.self_test_fake_steps,
        deadline_lanes: args.deadline_lanes,
        fake_history: args.self_test_fake_history,
    };
    println!(
        "crash harness: seed {}, {} trials per backend on {}, {} lanes per child, {} story parents and {} deadline lanes, kill 0-{} ms after ready (1 trial in 8: during startup); {} upgrade trials per backend of {} stores; {} kills per backend in the kill loop",
        options.seed,
        options.trials,
        options.backends.join(", "),
        options.lanes,
        options.story_parents,
        options.deadline_lanes,
        options.max_delay.as_millis(),
        args.upgrade_trials,
        args.upgrade_from,
        args.kills
    );
    let runtime = runtime();
    let figures = if options.trials > 0 {
        runtime.block_on(crash::run(&options, &exe))
    } else {
        Vec::new()
    };
    let upgrades = if args.upgrade_trials > 0 {
        runtime.block_on(upgrade::run(
            &options.backends,
            args.upgrade_from,
            args.upgrade_trials,
            options.seed,
            &exe,
        ))
    } else {
        Vec::new()
    };
    let kills = if args.kills > 0 {
        runtime.block_on(kills::run(&kill_options(&args, &options, &exe), &exe))
    } else {
        Vec::new()
    };
    judge(&figures, &upgrades, &kills)
}

/// The kill loop's options: the run's, with the command line binary named
/// or found next to this program.
fn kill_options(args: &Args, options: &CrashOptions, exe: &std::path::Path) -> KillOptions {
    let cli = args.cli.clone().or_else(|| {
        let sibling = exe.with_file_name("lf-handoff");
        sibling.is_file().then_some(sibling)
    });
    if cli.is_none() {
        println!("kill loop: no lf-handoff binary next to this program and no --cli: the command line's complete is not killed");
    }
    let strace = args.strace.clone().or_else(|| {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("strace"))
                .find(|candidate| candidate.is_file())
        })
    });
    if strace.is_none() {
        println!("kill loop: no strace on the PATH and no --strace: no kills at an exact system call, only timed ones");
    }
    KillOptions {
        backends: options.backends.clone(),
        kills: args.kills,
        per_store: args.kills_per_store,
        seed: options.seed,
        max_delay: options.max_delay,
        time_limit: options.time_limit,
        base_dir: args.placement.dir.clone(),
        cli,
        strace,
        verbose: options.verbose,
        fake_acks: options.fake_acks,
    }
}

/// The verdict line and exit status of the whole run.
fn judge(figures: &[CrashFigures], upgrades: &[UpgradeFigures], kills: &[KillFigures]) -> ExitCode {
    let upgrade_lost: u64 = upgrades.iter().map(|f| f.lost).sum();
    let upgrade_errors: u64 = upgrades.iter().map(|f| f.errors).sum();
    let lost: u64 = figures.iter().map(|f| f.lost).sum();
    let violations: u64 = figures.iter().map(|f| f.violations).sum();
    let errors: u64 = figures.iter().map(|f| f.errors).sum();
    let duplicates: u64 = figures.iter().map(|f| f.duplicate_steps).sum();
    let double_held: u64 = figures.iter().map(|f| f.double_held_wakes).sum();
    let without_event: u64 = figures.iter().map(|f| f.changes_without_event).sum();
    let without_change: u64 = figures.iter().map(|f| f.events_without_change).sum();
    let history: u64 = figures.iter().map(|f| f.history_violations).sum();
    let unopenable: u64 = kills.iter().map(|f| f.unopenable).sum();
    let kill_lost: u64 = kills.iter().map(|f| f.lost).sum();
    let kill_errors: u64 = kills.iter().map(|f| f.errors).sum();
    verdict(
        "crash harness",
        figures.iter().all(CrashFigures::passed)
            && upgrades.iter().all(UpgradeFigures::passed)
            && kills.iter().all(KillFigures::passed),
        figures.iter().all(|f| !f.stopped_by_time_limit)
            && kills.iter().all(|f| !f.stopped_by_time_limit),
        &format!(
            "{lost} transitions lost, {violations} invariant violations, {duplicates} duplicate \
             handoffs for one step, {double_held} wakes held by two generations, {without_event} \
             changes without their event, {without_change} events without their change, \
             {history} history violations, {errors} harness errors, {upgrade_lost} records lost \
             and {upgrade_errors} failures in upgrade trials, {unopenable} unopenable stores, \
             {kill_lost} acknowledged writes lost and {kill_errors} failures in the kill loop"
        ),
    )
}
