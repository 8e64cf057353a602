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

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use lf_handoff_adapters::domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_adapters::domain::interactive_handoff::{
    check_one_active_per_parent, InteractiveHandoff, InteractiveHandoffParent, StepKey,
};
use lf_handoff_adapters::domain::parent::Parent;
use lf_handoff_adapters::domain::wave::Wave;
use lf_handoff_adapters::{open_store, GenerateId, Store};
use lf_handoff_conformance::fixtures;
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use lf_handoff_adapters::domain::interactive_handoff::{HandoffEvent, InteractiveHandoffStatus};

use crate::check::{
    acked_change_has_event, handoff_same_or_later, history_matches_record, history_well_formed,
    parent_same_or_later, progress, AckedChange, HistoryFindings, KnownChanges,
};
use crate::crash_child::{
    child_actor, parse_child_actor, parse_reference, story_arg, CHILD_ARG, DEADLINE_LANES_ARG,
    FAKE_ACK_ARG, FAKE_STEPS_ARG, TRIAL_ARG,
};
use crate::rng::Rng;
use crate::target::{Placement, StoreTarget};

/// How long a child may take to open the store before the trial fails.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a child is assumed to take to open the store until a trial has
/// measured it.
const FIRST_STARTUP: Duration = Duration::from_millis(60);

/// How many problem messages a run keeps for its report.
const KEPT_PROBLEMS: usize = 20;

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

/// The figures of one backend's run.
#[derive(Debug, Default)]
pub struct CrashFigures {
    /// The backend.
    pub backend: &'static str,
    /// Trials run (each ended with a SIGKILL and a check).
    pub trials_run: u64,
    /// Trials whose kill landed before the child had the store open.
    pub kills_before_ready: u64,
    /// Acknowledged transitions, by kind.
    pub acknowledged: BTreeMap<String, u64>,
    /// Transitions issued but not acknowledged when the kill landed.
    pub in_flight: u64,
    /// Of those, how many were found applied after the restart.
    pub in_flight_applied: u64,
    /// Acknowledged (or once observed) state missing or behind after a
    /// restart. Must be 0.
    pub lost: u64,
    /// Records failing `validate()`, I6 broken, refused reads or records
    /// nobody wrote. Must be 0.
    pub violations: u64,
    /// Harness failures: a child that failed by itself, a store that would
    /// not reopen, a store that could not be made. Must be 0.
    pub errors: u64,
    /// Handoffs in the store after the last trial.
    pub handoffs_at_end: usize,
    /// Parents checked after the last trial.
    pub parents_at_end: usize,
    /// Parents playing the crash story.
    pub story_parents: usize,
    /// Story opens at a step that created the step's handoff.
    pub steps_opened: u64,
    /// Story opens at a step that got an existing handoff back: a new
    /// generation ran the step again.
    pub steps_rerun: u64,
    /// Of those, how many got a finished handoff back.
    pub steps_rerun_finished: u64,
    /// Story claims that took the wake over from an older generation.
    pub wakes_taken_over: u64,
    /// Replaced generations' retries answered `claimed = false`.
    pub old_claims_refused: u64,
    /// (parent, step) pairs with more than one handoff. Must be 0.
    pub duplicate_steps: u64,
    /// Handoffs whose wake two generations held (see the module
    /// documentation). Must be 0.
    pub double_held_wakes: u64,
    /// Histories read and checked, after the trials and at the end.
    pub history_reads: u64,
    /// Events in those histories, each counted every time it was checked.
    pub events_checked: u64,
    /// The events in the store after the last trial, by kind.
    pub events_at_end: BTreeMap<String, u64>,
    /// Changes (shown by a stored record or acknowledged) without their
    /// event. Must be 0.
    pub changes_without_event: u64,
    /// Events no change of their record and no acknowledgement accounts
    /// for. Must be 0.
    pub events_without_change: u64,
    /// Malformed histories (numbering, positions, order, status chain,
    /// kinds, details) and events naming a wrong actor. Must be 0.
    pub history_violations: u64,
    /// Every history finding counted so far, so a lasting one counts once.
    history_findings: BTreeSet<String>,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
    /// True when the time limit stopped the run before every trial ran.
    pub stopped_by_time_limit: bool,
    /// The first problems found, described.
    pub problems: Vec<String>,
    /// Where the store was kept after a failure.
    pub kept_store: Option<String>,
}

impl CrashFigures {
    /// Returns true if and only if nothing was lost, nothing broke an
    /// invariant and the harness itself had no error.
    pub fn passed(&self) -> bool {
        self.lost == 0
            && self.violations == 0
            && self.errors == 0
            && self.duplicate_steps == 0
            && self.double_held_wakes == 0
            && self.changes_without_event == 0
            && self.events_without_change == 0
            && self.history_violations == 0
    }

    /// Every acknowledged transition.
    pub fn acknowledged_total(&self) -> u64 {
        self.acknowledged.values().sum()
    }

    fn problem(&mut self, message: String) {
        if self.problems.len() < KEPT_PROBLEMS {
            self.problems.push(message);
        }
    }

    fn lose(&mut self, message: String) {
        self.lost += 1;
        self.problem(format!("lost: {message}"));
    }

    fn violate(&mut self, message: String) {
        self.violations += 1;
        self.problem(format!("violation: {message}"));
    }

    fn fail(&mut self, message: String) {
        self.errors += 1;
        self.problem(format!("error: {message}"));
    }

    /// Counts what a history check found, each finding once per run.
    fn history(&mut self, found: HistoryFindings) {
        let groups = [
            ("change without its event", found.missing),
            ("event without its change", found.extra),
            ("history violation", found.malformed),
        ];
        for (label, messages) in groups {
            for message in messages {
                let message = format!("{label}: {message}");
                if !self.history_findings.insert(message.clone()) {
                    continue;
                }
                match label {
                    "change without its event" => self.changes_without_event += 1,
                    "event without its change" => self.events_without_change += 1,
                    _ => self.history_violations += 1,
                }
                self.problem(message);
            }
        }
    }

    /// The report, one `[backend] label: value` line per figure.
    pub fn report(&self) -> String {
        let b = self.backend;
        let kinds: Vec<String> = self
            .acknowledged
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        let mut out = String::new();
        out += &format!("[{b}] trials run: {}", self.trials_run);
        if self.stopped_by_time_limit {
            out += " (stopped by the time limit)";
        }
        out += "\n";
        out += &format!(
            "[{b}] kills before the store was open: {}\n",
            self.kills_before_ready
        );
        out += &format!(
            "[{b}] transitions acknowledged: {} ({})\n",
            self.acknowledged_total(),
            kinds.join(", ")
        );
        out += &format!(
            "[{b}] in flight at the kill: {} (applied {}, not applied {})\n",
            self.in_flight,
            self.in_flight_applied,
            self.in_flight - self.in_flight_applied
        );
        out += &format!(
            "[{b}] crash story: {} parents, {} steps opened, {} run again by a new generation \
             ({} finished), {} wakes taken over, {} replaced generations' claims refused\n",
            self.story_parents,
            self.steps_opened,
            self.steps_rerun,
            self.steps_rerun_finished,
            self.wakes_taken_over,
            self.old_claims_refused
        );
        let kinds: Vec<String> = self
            .events_at_end
            .iter()
            .map(|(kind, count)| format!("{kind} {count}"))
            .collect();
        out += &format!(
            "[{b}] events checked: {} in {} history reads (in the store at the end: {} events: {})\n",
            self.events_checked,
            self.history_reads,
            self.events_at_end.values().sum::<u64>(),
            kinds.join(", ")
        );
        out += &format!("[{b}] transitions lost: {}\n", self.lost);
        out += &format!("[{b}] invariant violations: {}\n", self.violations);
        out += &format!(
            "[{b}] duplicate handoffs for one step: {}\n",
            self.duplicate_steps
        );
        out += &format!(
            "[{b}] wakes held by two generations: {}\n",
            self.double_held_wakes
        );
        out += &format!(
            "[{b}] changes without their event: {}\n",
            self.changes_without_event
        );
        out += &format!(
            "[{b}] events without their change: {}\n",
            self.events_without_change
        );
        out += &format!(
            "[{b}] history violations (malformed, wrong actor): {}\n",
            self.history_violations
        );
        out += &format!("[{b}] harness errors: {}\n", self.errors);
        out += &format!(
            "[{b}] records checked after the last trial: {} handoffs, {} parents\n",
            self.handoffs_at_end, self.parents_at_end
        );
        out += &format!("[{b}] elapsed: {:.1} s\n", self.elapsed.as_secs_f64());
        for problem in &self.problems {
            out += &format!("[{b}] {problem}\n");
        }
        if let Some(place) = &self.kept_store {
            out += &format!("[{b}] the store was kept for inspection in {place}\n");
        }
        out
    }
}

/// Runs the crash harness on every backend of `options`, printing each
/// backend's figures as it finishes. `exe` is the binary that acts as the
/// child when given [`CHILD_ARG`].
pub async fn run(options: &CrashOptions, exe: &Path) -> Vec<CrashFigures> {
    let mut rng = Rng::new(options.seed);
    let mut all = Vec::new();
    for backend in &options.backends {
        let figures = run_backend(backend, options, exe, rng.fork()).await;
        print!("{}", figures.report());
        all.push(figures);
    }
    all
}

/// What the harness knows the store must hold.
#[derive(Debug, Default)]
struct Ledger {
    /// Every handoff acknowledged or observed, at the furthest state seen.
    handoffs: BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    /// Every parent acknowledged or observed, at the newest state seen.
    parents: BTreeMap<InteractiveHandoffParent, Parent>,
    /// The crash story.
    story: Story,
    /// What was seen of each handoff's changes and history.
    histories: BTreeMap<InteractiveHandoffId, HistorySeen>,
}

/// What the harness saw of one handoff's history.
#[derive(Debug, Default)]
struct HistorySeen {
    /// The changes its records showed.
    known: KnownChanges,
    /// Its history when it was last read.
    events: Vec<HandoffEvent>,
    /// The trial after which it was last read.
    read_after: Option<u64>,
}

impl Ledger {
    /// Notes what `record`, acknowledged or stored, shows of its changes.
    fn saw(&mut self, record: &InteractiveHandoff) {
        self.histories
            .entry(record.id.clone())
            .or_default()
            .known
            .saw(record);
    }
}

/// The crash story's state: its parents, what was seen of their steps, and
/// who was told it holds each wake (for every handoff).
#[derive(Debug, Default)]
struct Story {
    /// Each story parent, the generation last recorded for it, and the step
    /// its body is at (the last one it recorded moving to).
    parents: Vec<(InteractiveHandoffParent, u32, u64)>,
    /// The handoffs seen for each (parent, step): acknowledged by an open
    /// at the step, or stored with that step.
    at_step: BTreeMap<(InteractiveHandoffParent, StepKey), BTreeSet<InteractiveHandoffId>>,
    /// The (parent, step) pairs found with more than one handoff.
    duplicates: BTreeSet<(InteractiveHandoffParent, StepKey)>,
    /// For each handoff, the newest generation told `claimed = true`.
    newest_holder: BTreeMap<InteractiveHandoffId, u32>,
    /// The handoffs whose wake two generations held.
    double_held: BTreeSet<InteractiveHandoffId>,
}

impl Story {
    /// The generation the harness recorded for a story parent, if it is one.
    fn generation(&self, parent: &InteractiveHandoffParent) -> Option<u32> {
        self.parents
            .iter()
            .find(|(reference, _, _)| reference == parent)
            .map(|(_, generation, _)| *generation)
    }

    /// Notes handoff `id` for `step` of `parent`; counts a second one.
    fn saw_at_step(
        &mut self,
        parent: &InteractiveHandoffParent,
        step: &StepKey,
        id: &InteractiveHandoffId,
        figures: &mut CrashFigures,
    ) {
        let key = (parent.clone(), step.clone());
        let ids = self.at_step.entry(key.clone()).or_default();
        ids.insert(id.clone());
        if ids.len() > 1 && self.duplicates.insert(key) {
            let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
            figures.duplicate_steps += 1;
            figures.problem(format!(
                "duplicate: {parent} has {} handoffs for step {step}: {}",
                ids.len(),
                ids.join(", ")
            ));
        }
    }

    /// Notes that `generation` was told `claimed = true` for `id`; counts
    /// a newer generation told so before it.
    fn told_holder(
        &mut self,
        id: &InteractiveHandoffId,
        generation: u32,
        figures: &mut CrashFigures,
    ) {
        let newest = self.newest_holder.entry(id.clone()).or_insert(generation);
        if *newest > generation {
            let newer = *newest;
            self.held_twice(
                id,
                format!("generation {generation} was told it holds the wake after generation {newer} was"),
                figures,
            );
        } else {
            *newest = generation;
        }
    }

    /// Checks that each stored holder is no older than the newest
    /// generation told `claimed = true`.
    fn check_holders<'a>(
        &mut self,
        stored: impl Fn(&InteractiveHandoffId) -> Option<&'a InteractiveHandoff>,
        figures: &mut CrashFigures,
    ) {
        let behind: Vec<(InteractiveHandoffId, u32, Option<u32>)> = self
            .newest_holder
            .iter()
            .filter_map(|(id, newest)| {
                let holder = stored(id)?.wake_claimed_by_generation;
                (holder < Some(*newest)).then(|| (id.clone(), *newest, holder))
            })
            .collect();
        for (id, newest, holder) in behind {
            self.held_twice(
                &id,
                format!("generation {newest} was told it holds the wake, but {holder:?} is stored"),
                figures,
            );
        }
    }

    fn held_twice(
        &mut self,
        id: &InteractiveHandoffId,
        message: String,
        figures: &mut CrashFigures,
    ) {
        if self.double_held.insert(id.clone()) {
            figures.double_held_wakes += 1;
            figures.problem(format!(
                "wake held by two generations: handoff {id}: {message}"
            ));
        }
    }
}

/// The JSON of a `step-open` acknowledgement.
#[derive(Debug, Deserialize)]
struct StepOpened {
    created: bool,
    step: StepKey,
    handoff: InteractiveHandoff,
}

/// The JSON of a `wake` acknowledgement.
#[derive(Debug, Deserialize)]
struct Wake {
    generation: u32,
    claimed: bool,
    handoff: InteractiveHandoff,
}

/// One line the child printed.
#[derive(Debug)]
enum Event {
    Ready,
    Begin {
        lane: usize,
        kind: String,
        key: String,
    },
    Ack {
        lane: usize,
        kind: String,
        key: String,
        json: String,
    },
    Error(String),
    Moved {
        parent: InteractiveHandoffParent,
        step: u64,
    },
}

fn parse_event(line: &str) -> Result<Event, String> {
    if line == "ready" {
        return Ok(Event::Ready);
    }
    if let Some(rest) = line.strip_prefix("error ") {
        return Ok(Event::Error(rest.to_string()));
    }
    if let Some(rest) = line.strip_prefix("step ") {
        let mut words = rest.split(' ').skip(1);
        let (Some(parent), Some(step), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!("the child printed {line:?}"));
        };
        return Ok(Event::Moved {
            parent: parse_reference(parent)?,
            step: step
                .parse()
                .map_err(|e| format!("the child printed {line:?}: {e}"))?,
        });
    }
    let mut words = line.splitn(5, ' ');
    let tag = words.next().unwrap_or_default();
    let lane = words
        .next()
        .and_then(|w| w.parse::<usize>().ok())
        .ok_or_else(|| format!("the child printed {line:?}"))?;
    let kind = words.next().unwrap_or_default().to_string();
    let key = words.next().unwrap_or_default().to_string();
    match (tag, words.next()) {
        ("begin", None) if !key.is_empty() => Ok(Event::Begin { lane, kind, key }),
        ("ack", Some(json)) => Ok(Event::Ack {
            lane,
            kind,
            key,
            json: json.to_string(),
        }),
        _ => Err(format!("the child printed {line:?}")),
    }
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
        if let Err(message) = target.settle().await {
            figures.fail(format!("trial {trial}: {message}"));
            break;
        }
        let store = match open_store(target.config()).await {
            Ok(store) => store,
            Err(e) => {
                figures.fail(format!(
                    "trial {trial}: the store does not reopen after the kill: {e}"
                ));
                break;
            }
        };
        let before = (figures.lost, figures.violations, figures.in_flight);
        let checking = Checking {
            trial,
            options,
            sampling: &mut sampling,
        };
        check_trial(&store, &lines, checking, &mut ledger, &mut figures).await;
        // The orchestrator replaces each story parent's killed body.
        if let Err(message) = record_next_bodies(&store, &mut ledger).await {
            figures.fail(format!("trial {trial}: {message}"));
            break;
        }
        drop(store);
        if options.verbose {
            println!(
                "[{backend}] trial {trial}: {} lines, lost {}, violations {}, in flight {}",
                lines.len(),
                figures.lost - before.0,
                figures.violations - before.1,
                figures.in_flight - before.2
            );
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

/// Creates the story's parents (alternately a wave and a task session
/// under a new project) with body generation 1 recorded.
async fn create_story(
    target: &StoreTarget,
    count: usize,
    ledger: &mut Ledger,
) -> Result<(), String> {
    let store = open_store(target.config())
        .await
        .map_err(|e| format!("cannot open the store to create the story's parents: {e}"))?;
    for n in 0..count {
        let dir = target.work_dir();
        let wave = Wave::new(
            WaveId::new(),
            format!("story {n}"),
            dir.display().to_string(),
        );
        store
            .create_wave(&wave)
            .await
            .map_err(|e| format!("create story wave {}: {e}", wave.id()))?;
        ledger.parents.insert(
            Parent::Wave(wave.clone()).reference(),
            Parent::Wave(wave.clone()),
        );
        let parent = if n % 2 == 0 {
            Parent::Wave(wave)
        } else {
            let project = fixtures::fresh_project(wave.id());
            store
                .create_project_session(&project)
                .await
                .map_err(|e| format!("create story project {}: {e}", project.id))?;
            let project_parent = Parent::Project(project.clone());
            ledger
                .parents
                .insert(project_parent.reference(), project_parent);
            let (task, pr) = fixtures::fresh_task(&project, &dir.join("worktree"));
            store
                .create_task_session(&task, &pr)
                .await
                .map_err(|e| format!("create story task {}: {e}", task.id))?;
            Parent::Task(task)
        };
        let reference = parent.reference();
        let parent = if parent.latest_process().is_some() {
            parent
        } else {
            store
                .record_body(&reference, fixtures::body(1, None))
                .await
                .map_err(|e| format!("record body 1 on story parent {reference}: {e}"))?
        };
        let generation = parent.body_generation();
        ledger.parents.insert(reference.clone(), parent);
        ledger.story.parents.push((reference, generation, 0));
    }
    Ok(())
}

/// Records the next body generation of every story parent.
async fn record_next_bodies(store: &Store, ledger: &mut Ledger) -> Result<(), String> {
    for (reference, generation, _) in &mut ledger.story.parents {
        let next = *generation + 1;
        let parent = store
            .record_body(reference, fixtures::body(next, None))
            .await
            .map_err(|e| format!("record body {next} on story parent {reference}: {e}"))?;
        *generation = next;
        ledger.parents.insert(reference.clone(), parent);
    }
    Ok(())
}

/// Starts a child, kills it at a random moment and returns what it printed.
async fn kill_one_child(
    target: &StoreTarget,
    options: &CrashOptions,
    (trial, story): (u64, &[(InteractiveHandoffParent, u64)]),
    exe: &Path,
    rng: &mut Rng,
    startup: &mut Duration,
    figures: &mut CrashFigures,
) -> Result<Vec<String>, String> {
    let child_seed = rng.next_u64();
    let early = rng.chance(1, 8) && options.min_acks == 0;
    let max_delay_ms = u64::try_from(options.max_delay.as_millis()).unwrap_or(u64::MAX);
    // An early kill lands within one and a half times the last measured
    // startup, so about two in three land before the store is open.
    let startup_ms = u64::try_from(startup.as_millis()).unwrap_or(u64::MAX);
    let delay = Duration::from_millis(if early {
        rng.below(startup_ms.saturating_mul(3) / 2 + 1)
    } else {
        rng.below(max_delay_ms.saturating_add(1))
    });
    let spawned = Instant::now();
    let mut command = Command::new(exe);
    command
        .arg(CHILD_ARG)
        .arg(target.child_url())
        .arg(child_seed.to_string())
        .arg(options.lanes.to_string())
        .arg(target.work_dir());
    if options.fake_acks {
        command.arg(FAKE_ACK_ARG);
    }
    if options.fake_steps {
        command.arg(FAKE_STEPS_ARG);
    }
    if !story.is_empty() {
        command.arg(story_arg(story));
    }
    command.arg(format!("{TRIAL_ARG}{trial}"));
    if options.deadline_lanes > 0 {
        command.arg(format!("{DEADLINE_LANES_ARG}{}", options.deadline_lanes));
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start the child {}: {e}", exe.display()))?;
    let stdout = child.stdout.take().ok_or("the child has no stdout")?;
    let mut stderr = child.stderr.take().ok_or("the child has no stderr")?;
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        // Only whole lines count: a kill during a write of a long line may
        // leave its start without the newline, and such a line was never
        // printed in full, so its transition stays in flight.
        let mut stdout = BufReader::new(stdout);
        let mut line = Vec::new();
        loop {
            line.clear();
            match stdout.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.pop() != Some(b'\n') {
                break;
            }
            let text = String::from_utf8_lossy(&line).into_owned();
            if sender.send(text).is_err() {
                break;
            }
        }
    });
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let mut lines = Vec::new();
    if !early {
        let min_acks = options.min_acks;
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            let mut ready = false;
            let mut acks = 0;
            while let Some(line) = receiver.recv().await {
                if line == "ready" && !ready {
                    *startup = spawned.elapsed();
                }
                ready |= line == "ready";
                acks += usize::from(line.starts_with("ack "));
                lines.push(line);
                if ready && acks >= min_acks {
                    return true;
                }
            }
            false
        })
        .await;
        if ready != Ok(true) {
            let _ = child.start_kill();
            let _ = child.wait().await;
            let stderr = errors.await.unwrap_or_default();
            return Err(format!(
                "the child did not open the store and acknowledge {min_acks} transitions \
                 within {} s: {}",
                READY_TIMEOUT.as_secs(),
                stderr.trim()
            ));
        }
    }
    tokio::time::sleep(delay).await;
    // The child may have failed by itself already; that is checked below.
    let _ = child.start_kill();
    let status = child
        .wait()
        .await
        .map_err(|e| format!("cannot wait for the child: {e}"))?;
    let _ = reader.await;
    while let Some(line) = receiver.recv().await {
        lines.push(line);
    }
    let stderr = errors.await.unwrap_or_default();
    if status.signal() != Some(9) {
        figures.fail(format!(
            "the child ended by itself ({status}) before the kill: {}",
            stderr.trim()
        ));
    }
    if !lines.iter().any(|line| line == "ready") {
        figures.kills_before_ready += 1;
    }
    Ok(lines)
}

/// Which trial is checked, how the run was set up, and the random source
/// that picks the histories sampled.
struct Checking<'a> {
    trial: u64,
    options: &'a CrashOptions,
    sampling: &'a mut Rng,
}

/// Checks the store after one kill against what the child acknowledged and
/// what earlier trials observed.
async fn check_trial(
    store: &Store,
    lines: &[String],
    checking: Checking<'_>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    let Checking {
        trial,
        options,
        sampling,
    } = checking;
    let stored: BTreeMap<InteractiveHandoffId, InteractiveHandoff> =
        match store.list_interactive_handoffs(None).await {
            Ok(all) => {
                check_invariants(&all, figures);
                all.into_iter().map(|h| (h.id.clone(), h)).collect()
            }
            Err(e) => {
                figures.violate(format!("listing every handoff failed: {e}"));
                return;
            }
        };

    // The handoffs this trial created or changed: their histories are read.
    let mut to_read: BTreeSet<InteractiveHandoffId> = stored
        .iter()
        .filter(|(id, now)| ledger.handoffs.get(*id) != Some(*now))
        .map(|(id, _)| id.clone())
        .collect();

    // Earlier trials' records: still there, never behind.
    for (id, known) in &ledger.handoffs {
        match stored.get(id) {
            None => figures.lose(format!(
                "handoff {id}, held after an earlier trial, is gone"
            )),
            Some(now) => {
                if let Err(message) = handoff_same_or_later(known, now) {
                    figures.lose(format!("after a later crash: {message}"));
                }
            }
        }
    }

    let mut events = Vec::new();
    for line in lines {
        match parse_event(line) {
            Ok(event) => events.push(event),
            Err(message) => figures.fail(message),
        }
    }

    // This trial's acknowledgements.
    let mut open_lanes: BTreeMap<usize, (String, String)> = BTreeMap::new();
    let mut acked: Vec<AckedChange> = Vec::new();
    for event in &events {
        match event {
            Event::Ready => {}
            Event::Error(message) => figures.fail(format!("the child reported: {message}")),
            Event::Begin { lane, kind, key } => {
                open_lanes.insert(*lane, (kind.clone(), key.clone()));
            }
            Event::Ack {
                lane,
                kind,
                key,
                json,
            } => {
                open_lanes.remove(lane);
                let ack = Ack {
                    kind,
                    key,
                    json,
                    actor: child_actor(trial, *lane),
                };
                check_ack(store, &ack, &stored, ledger, figures, &mut acked).await;
            }
            Event::Moved { parent, step } => {
                match ledger
                    .story
                    .parents
                    .iter_mut()
                    .find(|(reference, _, _)| reference == parent)
                {
                    Some((_, _, at)) => *at = (*at).max(*step),
                    None => figures.fail(format!("the child moved {parent}, not a story parent")),
                }
            }
        }
    }

    // Transitions in flight at the kill: whole or not at all.
    for (kind, key) in open_lanes.values() {
        figures.in_flight += 1;
        match in_flight_applied(store, kind, key, &stored, ledger).await {
            Ok(true) => figures.in_flight_applied += 1,
            Ok(false) => {}
            Err(message) => figures.violate(message),
        }
    }

    // One handoff per step; no wake went back to an older generation.
    check_story(&stored, &mut ledger.story, figures);

    // Every change has its event, and no event is without its change.
    for record in stored.values() {
        ledger.saw(record);
    }
    to_read.extend(
        acked
            .iter()
            .map(|change| change.id.clone())
            .filter(|id| stored.contains_key(id)),
    );
    let others: Vec<&InteractiveHandoffId> =
        stored.keys().filter(|id| !to_read.contains(*id)).collect();
    if !others.is_empty() {
        for _ in 0..SAMPLED_HISTORIES.min(others.len()) {
            to_read.insert(others[sampling.index(others.len())].clone());
        }
    }
    let reading = Reading {
        trial,
        lanes: options.child_lanes(),
        doctor: options.fake_history,
    };
    check_histories(store, &to_read, &stored, &acked, &reading, ledger, figures).await;

    // Nothing appears that nobody wrote.
    for (id, handoff) in &stored {
        if !ledger.handoffs.contains_key(id) {
            figures.violate(format!(
                "handoff {id} on {} is stored but no acknowledged or in-flight open made it",
                handoff.parent
            ));
        }
    }
    // From now on the stored state is what must survive.
    for (id, handoff) in stored {
        ledger.handoffs.insert(id, handoff);
    }
}

/// The story's checks on what is stored: every handoff stored with a step
/// counts for that step, and no stored holder is older than a generation
/// told it holds the wake.
fn check_story(
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    story: &mut Story,
    figures: &mut CrashFigures,
) {
    for handoff in stored.values() {
        if let Some(step) = &handoff.step {
            story.saw_at_step(&handoff.parent, step, &handoff.id, figures);
        }
    }
    story.check_holders(|id| stored.get(id), figures);
}

/// Checks a story acknowledgement (`step-open` or `wake`) beyond what
/// every handoff acknowledgement is checked for, and returns its record
/// and whether the acknowledged answer says the record changed (a handoff
/// created, a wake held by the claiming generation).
fn check_story_ack(
    kind: &str,
    json: &str,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) -> Result<(InteractiveHandoff, bool), String> {
    if kind == "step-open" {
        let opened: StepOpened = serde_json::from_str(json)
            .map_err(|e| format!("unreadable {kind} acknowledgement: {e}"))?;
        let handoff = opened.handoff;
        if handoff.step.as_ref() != Some(&opened.step) {
            figures.violate(format!(
                "an open of {} at step {} returned handoff {} of step {:?}",
                handoff.parent, opened.step, handoff.id, handoff.step
            ));
        }
        if opened.created {
            figures.steps_opened += 1;
        } else {
            figures.steps_rerun += 1;
            figures.steps_rerun_finished += u64::from(handoff.status.is_terminal());
        }
        ledger
            .story
            .saw_at_step(&handoff.parent, &opened.step, &handoff.id, figures);
        return Ok((handoff, opened.created));
    }
    let wake: Wake = serde_json::from_str(json)
        .map_err(|e| format!("unreadable {kind} acknowledgement: {e}"))?;
    let handoff = wake.handoff;
    let (generation, id) = (wake.generation, &handoff.id);
    let holder = handoff.wake_claimed_by_generation;
    if wake.claimed {
        if holder != Some(generation) {
            figures.violate(format!(
                "generation {generation} was told it holds the wake of {id}, whose record \
                 names {holder:?}"
            ));
        }
        let before = ledger
            .handoffs
            .get(id)
            .and_then(|known| known.wake_claimed_by_generation);
        if before.is_some_and(|old| old < generation) {
            figures.wakes_taken_over += 1;
        }
        ledger.story.told_holder(id, generation, figures);
    } else if holder.is_some_and(|holder| holder > generation) {
        figures.old_claims_refused += 1;
    }
    if !wake.claimed && ledger.story.generation(&handoff.parent) == Some(generation) {
        figures.violate(format!(
            "generation {generation}, the current body of {}, was refused the wake of {id} \
             (holder {holder:?})",
            handoff.parent
        ));
    }
    let held = wake.claimed && holder == Some(generation);
    Ok((handoff, held))
}

/// One acknowledgement: its kind, key and JSON, and the actor of the lane
/// that printed it.
struct Ack<'a> {
    kind: &'a str,
    key: &'a str,
    json: &'a str,
    actor: String,
}

async fn check_ack(
    store: &Store,
    ack: &Ack<'_>,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
    acked: &mut Vec<AckedChange>,
) {
    let (kind, json) = (ack.kind, ack.json);
    match kind {
        "wave" | "parent" | "body" => {
            *figures.acknowledged.entry(kind.to_string()).or_default() += 1;
            let acknowledged: Parent = match serde_json::from_str(json) {
                Ok(parent) => parent,
                Err(e) => return figures.fail(format!("unreadable {kind} acknowledgement: {e}")),
            };
            let reference = acknowledged.reference();
            match store.get_parent(&reference).await {
                Ok(Some(now)) => {
                    if let Err(message) = parent_same_or_later(&acknowledged, &now) {
                        figures.lose(format!("acknowledged {kind}: {message}"));
                    }
                }
                Ok(None) => figures.lose(format!("acknowledged {kind} {reference} is missing")),
                Err(e) => figures.violate(format!("reading parent {reference}: {e}")),
            }
            ledger.parents.insert(reference, acknowledged);
        }
        "expire" => {
            // The handoffs one write expired: a sweep, or an attach or
            // finish refused because the deadline had passed.
            let expired: Vec<InteractiveHandoff> = match serde_json::from_str(json) {
                Ok(expired) => expired,
                Err(e) => return figures.fail(format!("unreadable {kind} acknowledgement: {e}")),
            };
            for handoff in expired {
                *figures.acknowledged.entry(kind.to_string()).or_default() += 1;
                if handoff.status != InteractiveHandoffStatus::Expired {
                    figures.violate(format!(
                        "handoff {} was acknowledged as expired but is {}",
                        handoff.id, handoff.status
                    ));
                }
                // A sweep reports only what it expired itself; a refused
                // write may find the handoff expired by another sweeper.
                let actor = (ack.key == "due").then(|| ack.actor.clone());
                acked.extend(AckedChange::of(kind, &handoff, actor));
                check_handoff_ack(kind, handoff, stored, ledger, figures);
            }
        }
        "open" | "attach" | "finish" | "claim" | "extend" | "step-open" | "wake" => {
            *figures.acknowledged.entry(kind.to_string()).or_default() += 1;
            let parsed = if matches!(kind, "step-open" | "wake") {
                check_story_ack(kind, json, ledger, figures)
            } else {
                serde_json::from_str(json)
                    .map(|handoff| (handoff, true))
                    .map_err(|e| format!("unreadable {kind} acknowledgement: {e}"))
            };
            let (acknowledged, changed) = match parsed {
                Ok(parsed) => parsed,
                Err(message) => return figures.fail(message),
            };
            if changed {
                // A story claim may have been the holder's retry, so only a
                // claim made in this trial must name this lane (checked with
                // every new event).
                let actor = (kind != "wake").then(|| ack.actor.clone());
                acked.extend(AckedChange::of(kind, &acknowledged, actor));
            }
            if kind == "claim" {
                // A lifecycle lane acknowledges only a claim it won.
                if let Some(generation) = acknowledged.wake_claimed_by_generation {
                    ledger
                        .story
                        .told_holder(&acknowledged.id, generation, figures);
                }
            }
            check_handoff_ack(kind, acknowledged, stored, ledger, figures);
        }
        other => figures.fail(format!("the child acknowledged an unknown kind {other:?}")),
    }
}

/// Checks an acknowledged handoff record against the stored one and keeps
/// the furthest of the two known.
fn check_handoff_ack(
    kind: &str,
    acknowledged: InteractiveHandoff,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    let id = acknowledged.id.clone();
    ledger.saw(&acknowledged);
    match stored.get(&id) {
        Some(now) => {
            if let Err(message) = handoff_same_or_later(&acknowledged, now) {
                figures.lose(format!("acknowledged {kind}: {message}"));
            }
        }
        None => figures.lose(format!(
            "acknowledged {kind} of handoff {id}: it is missing"
        )),
    }
    let further = ledger
        .handoffs
        .get(&id)
        .is_some_and(|known| progress(known) > progress(&acknowledged));
    if !further {
        ledger.handoffs.insert(id, acknowledged);
    }
}

/// Whether a transition in flight at the kill is visible after the restart.
async fn in_flight_applied(
    store: &Store,
    kind: &str,
    key: &str,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &mut Ledger,
) -> Result<bool, String> {
    match kind {
        "wave" | "parent" | "body" => {
            let reference = parse_reference(key)?;
            let now = store
                .get_parent(&reference)
                .await
                .map_err(|e| format!("reading parent {reference}: {e}"))?;
            let Some(now) = now else {
                return Ok(false);
            };
            let applied = match ledger.parents.get(&reference) {
                None => true,
                Some(known) => now.body_generation() > known.body_generation(),
            };
            ledger.parents.insert(reference, now);
            Ok(applied)
        }
        "open" | "step-open" => {
            let reference = parse_reference(key)?;
            let mut applied = false;
            for (id, handoff) in stored {
                if handoff.parent == reference && !ledger.handoffs.contains_key(id) {
                    ledger.handoffs.insert(id.clone(), handoff.clone());
                    applied = true;
                }
            }
            Ok(applied)
        }
        "expire" if key == "due" => Ok(stored.iter().any(|(id, now)| {
            now.status == InteractiveHandoffStatus::Expired
                && ledger
                    .handoffs
                    .get(id)
                    .is_some_and(|known| known.status != InteractiveHandoffStatus::Expired)
        })),
        "attach" | "finish" | "claim" | "wake" | "extend" | "expire" => {
            let id = InteractiveHandoffId::parse(key).map_err(|e| e.to_string())?;
            let (Some(known), Some(now)) = (ledger.handoffs.get(&id), stored.get(&id)) else {
                return Err(format!(
                    "{kind} of {id} was in flight but the handoff is unknown"
                ));
            };
            Ok(progress(now) > progress(known)
                || (kind == "extend" && now.expires_at != known.expires_at))
        }
        other => Err(format!("the child began an unknown kind {other:?}")),
    }
}

fn check_invariants(all: &[InteractiveHandoff], figures: &mut CrashFigures) {
    for handoff in all {
        if let Err(violation) = handoff.validate() {
            figures.violate(violation.to_string());
        }
    }
    if let Err(violation) = check_one_active_per_parent(all) {
        figures.violate(violation.to_string());
    }
}

/// How histories are read: after which trial, the lanes each child had, and
/// whether to doctor what was read (the self-test).
struct Reading {
    trial: u64,
    lanes: usize,
    doctor: bool,
}

/// Reads and checks the history of each of `ids` that is stored (see the
/// module documentation), with the changes `acked` in this trial.
async fn check_histories(
    store: &Store,
    ids: &BTreeSet<InteractiveHandoffId>,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    acked: &[AckedChange],
    reading: &Reading,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    let mut doctored = 0;
    for id in ids {
        let Some(record) = stored.get(id) else {
            continue;
        };
        let events = match store.history(id).await {
            Ok(events) => events,
            Err(e) => {
                figures.violate(format!("reading the history of {id}: {e}"));
                continue;
            }
        };
        let mut checked = events.clone();
        if reading.doctor {
            // The self-test's lies: one history loses its last event,
            // another gains a second `opened`.
            if doctored == 0 && checked.len() >= 2 {
                checked.pop();
                doctored += 1;
            } else if doctored == 1 {
                if let (Some(first), Some(last)) = (checked.first(), checked.last()) {
                    let mut again = first.clone();
                    again.seq = last.seq + 1;
                    again.position = last.position + 1;
                    again.at = last.at;
                    checked.push(again);
                    doctored += 1;
                }
            }
        }
        figures.history_reads += 1;
        figures.events_checked += checked.len() as u64;
        let seen = ledger.histories.entry(id.clone()).or_default();
        let mut found = HistoryFindings {
            malformed: history_well_formed(id, &checked),
            ..HistoryFindings::default()
        };
        found.append(history_matches_record(record, &checked, &seen.known));
        for change in acked.iter().filter(|change| &change.id == id) {
            found.append(acked_change_has_event(change, &checked));
        }
        // What an earlier read saw is still there, unchanged.
        let kept = seen
            .events
            .iter()
            .zip(&checked)
            .take_while(|(before, now)| before == now)
            .count();
        let since = seen
            .read_after
            .map_or_else(String::new, |trial| format!(" after trial {trial}"));
        if kept < seen.events.len() {
            if kept == checked.len() {
                found.missing.push(format!(
                    "handoff {id}: {} of the events read{since} are gone",
                    seen.events.len() - kept
                ));
            } else {
                found.mismatch(format!(
                    "handoff {id}: event {} read{since} has changed",
                    kept + 1
                ));
            }
        }
        // New events name a lane of a child started since that read.
        for event in checked.iter().skip(seen.events.len()) {
            let fits = parse_child_actor(event.actor.as_str()).is_some_and(|(trial, lane)| {
                trial <= reading.trial
                    && seen.read_after.is_none_or(|after| trial > after)
                    && lane < reading.lanes
            });
            if !fits {
                found.malformed.push(format!(
                    "handoff {id}: event {} ({}) names the actor {:?}, not a lane of a child \
                     run{since}",
                    event.seq,
                    event.kind,
                    event.actor.as_str()
                ));
            }
        }
        seen.events = events;
        seen.read_after = Some(reading.trial);
        figures.history(found);
    }
}

/// After the last trial: every handoff and every parent ever acknowledged
/// or observed is read back and checked once more, and so is every
/// handoff's history.
async fn final_sweep(
    target: &StoreTarget,
    options: &CrashOptions,
    last_trial: u64,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    let store = match open_store(target.config()).await {
        Ok(store) => store,
        Err(e) => return figures.fail(format!("the store does not reopen at the end: {e}")),
    };
    let all = match store.list_interactive_handoffs(None).await {
        Ok(all) => all,
        Err(e) => return figures.violate(format!("listing every handoff failed: {e}")),
    };
    check_invariants(&all, figures);
    figures.handoffs_at_end = all.len();
    let stored: BTreeMap<_, _> = all.iter().map(|h| (h.id.clone(), h.clone())).collect();
    check_story(&stored, &mut ledger.story, figures);
    for (id, known) in &ledger.handoffs {
        match stored.get(id) {
            None => figures.lose(format!("handoff {id} is gone at the end")),
            Some(now) => {
                if let Err(message) = handoff_same_or_later(known, now) {
                    figures.lose(format!("at the end: {message}"));
                }
            }
        }
    }
    let mut parents: BTreeSet<InteractiveHandoffParent> = ledger.parents.keys().cloned().collect();
    parents.extend(all.iter().map(|h| h.parent.clone()));
    for reference in parents {
        match store.get_parent(&reference).await {
            Ok(Some(now)) => {
                if let Some(known) = ledger.parents.get(&reference) {
                    if let Err(message) = parent_same_or_later(known, &now) {
                        figures.lose(format!("at the end: {message}"));
                    }
                }
                figures.parents_at_end += 1;
            }
            Ok(None) => figures.lose(format!("parent {reference} is gone at the end")),
            Err(e) => figures.violate(format!("reading parent {reference}: {e}")),
        }
    }

    // Every history, once more; every event has a position of its own.
    let reading = Reading {
        trial: last_trial,
        lanes: options.child_lanes(),
        doctor: false,
    };
    let ids: BTreeSet<InteractiveHandoffId> = stored.keys().cloned().collect();
    check_histories(&store, &ids, &stored, &[], &reading, ledger, figures).await;
    let mut positions: BTreeMap<u64, &InteractiveHandoffId> = BTreeMap::new();
    let mut found = HistoryFindings::default();
    for id in &ids {
        let Some(seen) = ledger.histories.get(id) else {
            continue;
        };
        for event in &seen.events {
            *figures
                .events_at_end
                .entry(event.kind.to_string())
                .or_default() += 1;
            if let Some(other) = positions.insert(event.position, id) {
                found.malformed.push(format!(
                    "events of handoffs {other} and {id} share the position {}",
                    event.position
                ));
            }
        }
    }
    figures.history(found);
}
