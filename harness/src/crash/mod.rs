//! The crash harness: kill a child running lifecycles with SIGKILL at random
//! moments, reopen the store, and check that nothing acknowledged was lost
//! and that every record keeps its invariants (contract C8).
//!
//! One trial:
//!
//! 1. start the child ([`crate::crash_child`]) on the backend's store;
//! 2. wait a random delay, usually measured from the child's `ready` (the
//!    store is open and lifecycles are running), in one trial of eight from
//!    the spawn itself, within one and a half times the child's last
//!    measured startup (so most of those kills land while the store is
//!    being opened or created);
//! 3. SIGKILL it, wait for it, and read every line it printed;
//! 4. once the child is dead (and, on a server, once the server has ended
//!    its sessions, so a statement it was running has committed or rolled
//!    back), reopen the store in this process (for sled only now: the
//!    child held the store's lock) and check:
//!    - every acknowledged transition is there: the stored record is the
//!      acknowledged one or further along, never behind or different
//!      ([`crate::check`]);
//!    - every record the store held after an earlier trial is still there
//!      and not behind (a later crash must not undo an earlier one);
//!    - each transition in flight at the kill either happened whole or not
//!      at all (counted: applied or not);
//!    - every stored record passes `validate()` (I1-I5, I7) and at most one
//!      handoff per parent is active (I6); no record appears that nobody
//!      wrote;
//!    - **every change has its event and no event is without its change**
//!      (C15, [`crate::check`]): the history of every handoff acknowledged
//!      or changed in the trial, and of up to [`SAMPLED_HISTORIES`] others,
//!      is well formed, is exactly the changes its record shows (with the
//!      wake holders and deadlines seen before), holds an event for each
//!      acknowledged transition, named after the child and lane that
//!      acknowledged it, still starts with every event read after an
//!      earlier trial, and its new events name a lane of a child started
//!      since that read.
//!
//! After the last trial every parent ever acknowledged is read back as
//! well, and the history of every handoff in the store is checked once
//! more (no two events share a store-wide position).
//!
//! **Deadlines** (C14): `--deadline-lanes` lanes per child open handoffs
//! with deadlines and sweep, extend and let them expire
//! ([`crate::crash_child`]); expiries are acknowledged like any other
//! transition, and a sweep in flight at the kill counts as applied if any
//! handoff was found expired that no acknowledgement expired.
//!
//! **The crash story** (C12, C13; [`crate::crash_child`]): a few parents
//! are the story's. After every kill the harness records the next body
//! generation for each, as an orchestrator replaces a crashed body, and the
//! next child's body re-runs the step the last one had not recorded moving
//! past. The checks count, over the run:
//!
//! - **duplicate handoffs for one step**: the (parent, step) pairs for which
//!   more than one handoff id was acknowledged by an open at the step or
//!   found stored with that step;
//! - **wakes held by two generations**: the handoffs (the story's and the
//!   lifecycles') for which a generation was told `claimed = true` after a
//!   newer generation had been told `claimed = true` (an old holder won back
//!   a wake its replacement took over), or whose stored holder, after a
//!   trial, is older than the newest generation told `claimed = true` (a
//!   hand-over was undone).
//!
//! A story claim by the parent's current generation that is refused, or a
//! `claimed = true` whose record names another holder, is a violation.

mod child;
mod figures;
mod histories;
mod ledger;
mod trial;

use std::path::Path;
use std::time::{Duration, Instant};

use lf_handoff_adapters::open_store;
use lf_handoff_domain::interactive_handoff::InteractiveHandoffParent;

pub(crate) use child::{parse_event, ChildOutput, Event};
pub use figures::CrashFigures;

use crate::program::each_backend;
use crate::rng::Rng;
use crate::target::{Placement, StoreTarget};
use child::{create_story, kill_one_child, record_next_bodies};
use ledger::Ledger;
use trial::{check_trial, final_sweep, Checking};

/// How long a child is assumed to take to open the store until a trial has
/// measured it.
const FIRST_STARTUP: Duration = Duration::from_millis(60);

/// How many histories of handoffs a trial did not change are checked after
/// it, besides those of the handoffs it changed (all are checked at the
/// end).
pub const SAMPLED_HISTORIES: usize = 32;

/// What a crash run does.
#[derive(Debug, Clone)]
pub struct CrashOptions {
    /// The backends to run, in order.
    pub backends: Vec<&'static str>,
    /// Trials per backend.
    pub trials: u64,
    /// Fixes every choice the harness and its children make (not the exact
    /// interleaving, which the operating system decides).
    pub seed: u64,
    /// Concurrent lifecycles in each child.
    pub lanes: usize,
    /// The child must have acknowledged this many transitions before the
    /// kill delay starts; with 0, one trial in eight kills early instead.
    pub min_acks: usize,
    /// The longest delay between the child's `ready` (and `min_acks`
    /// acknowledgements) and its kill.
    pub max_delay: Duration,
    /// No new trial starts on a backend after this much time on it.
    pub time_limit: Duration,
    /// Where stores are made.
    pub placement: Placement,
    /// Print a line per trial.
    pub verbose: bool,
    /// Self-test only: children acknowledge writes they never made, so the
    /// run must report losses.
    pub fake_acks: bool,
    /// Parents whose bodies play the crash story, one lane each in every
    /// child (0: no story).
    pub story_parents: usize,
    /// Self-test only: story lanes acknowledge a second handoff for a step
    /// and a wake won back, so the run must count both.
    pub fake_steps: bool,
    /// Lanes in each child whose handoffs have deadlines (0: none).
    pub deadline_lanes: usize,
    /// Self-test only: after each trial the harness drops the last event of
    /// one history it reads and adds a second `opened` to another, so the
    /// run must count a change without its event and an event without its
    /// change.
    pub fake_history: bool,
}

impl CrashOptions {
    /// Lanes in each child: lifecycles, story parents, deadlines.
    pub fn child_lanes(&self) -> usize {
        self.lanes.max(1) + self.story_parents + self.deadline_lanes
    }
}

/// Runs the crash harness on every backend of `options`, printing each
/// backend's figures as it finishes. `exe` is the binary that acts as the
/// child when given [`CHILD_ARG`](crate::crash_child::CHILD_ARG).
pub async fn run(options: &CrashOptions, exe: &Path) -> Vec<CrashFigures> {
    each_backend(
        &options.backends,
        options.seed,
        CrashFigures::report,
        |backend, rng| run_backend(backend, options, exe, rng),
    )
    .await
}

async fn run_backend(
    backend: &'static str,
    options: &CrashOptions,
    exe: &Path,
    mut rng: Rng,
) -> CrashFigures {
    let started = Instant::now();
    let mut figures = CrashFigures {
        backend,
        ..CrashFigures::default()
    };
    let target = match StoreTarget::create(backend, &options.placement).await {
        Ok(target) => target,
        Err(message) => {
            figures.fail(message);
            return figures;
        }
    };
    let mut ledger = Ledger::default();
    let mut sampling = rng.fork();
    if options.story_parents > 0 {
        if let Err(message) = create_story(&target, options.story_parents, &mut ledger).await {
            figures.fail(message);
            figures.elapsed = started.elapsed();
            figures.kept_store = target.finish(true).await;
            return figures;
        }
        figures.story_parents = options.story_parents;
    }
    let mut startup = FIRST_STARTUP;
    for trial in 0..options.trials {
        if started.elapsed() >= options.time_limit {
            figures.stopped_by_time_limit = true;
            break;
        }
        let story: Vec<(InteractiveHandoffParent, u64)> = ledger
            .story
            .parents
            .iter()
            .map(|(parent, _, step)| (parent.clone(), *step))
            .collect();
        let lines = match kill_one_child(
            &target,
            options,
            (trial, &story),
            exe,
            &mut rng,
            &mut startup,
            &mut figures,
        )
        .await
        {
            Ok(lines) => lines,
            Err(message) => {
                figures.fail(format!("trial {trial}: {message}"));
                break;
            }
        };
        figures.trials_run += 1;
        let checking = Checking {
            trial,
            options,
            sampling: &mut sampling,
        };
        if let Err(message) =
            check_after_kill(&target, &lines, checking, &mut ledger, &mut figures).await
        {
            figures.fail(format!("trial {trial}: {message}"));
            break;
        }
    }
    if figures.trials_run > 0 {
        let last = figures.trials_run - 1;
        final_sweep(&target, options, last, &mut ledger, &mut figures).await;
    }
    figures.elapsed = started.elapsed();
    figures.kept_store = target.finish(!figures.passed()).await;
    figures
}

/// Once the child is dead: reopens the store, checks the trial, and
/// records the next body of every story parent (as the orchestrator
/// replaces each killed body). An error ends the run.
async fn check_after_kill(
    target: &StoreTarget,
    lines: &[String],
    checking: Checking<'_>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) -> Result<(), String> {
    let (trial, options) = (checking.trial, checking.options);
    target.settle().await?;
    let store = open_store(target.config())
        .await
        .map_err(|e| format!("the store does not reopen after the kill: {e}"))?;
    let before = (figures.lost, figures.violations, figures.in_flight);
    check_trial(&store, lines, checking, ledger, figures).await;
    record_next_bodies(&store, ledger).await?;
    drop(store);
    if options.verbose {
        println!(
            "[{}] trial {trial}: {} lines, lost {}, violations {}, in flight {}",
            figures.backend,
            lines.len(),
            figures.lost - before.0,
            figures.violations - before.1,
            figures.in_flight - before.2
        );
    }
    Ok(())
}
