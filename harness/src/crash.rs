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
//!      wrote.
//!
//! After the last trial every parent ever acknowledged is read back as well.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use lf_handoff_adapters::domain::id::InteractiveHandoffId;
use lf_handoff_adapters::domain::interactive_handoff::{
    check_one_active_per_parent, InteractiveHandoff, InteractiveHandoffParent,
};
use lf_handoff_adapters::domain::parent::Parent;
use lf_handoff_adapters::{open_store, Store};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;
use tokio::sync::mpsc;

use crate::check::{handoff_same_or_later, parent_same_or_later, stage};
use crate::crash_child::{parse_reference, CHILD_ARG, FAKE_ACK_ARG};
use crate::rng::Rng;
use crate::target::{Placement, StoreTarget};

/// How long a child may take to open the store before the trial fails.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a child is assumed to take to open the store until a trial has
/// measured it.
const FIRST_STARTUP: Duration = Duration::from_millis(60);

/// How many problem messages a run keeps for its report.
const KEPT_PROBLEMS: usize = 20;

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
        self.lost == 0 && self.violations == 0 && self.errors == 0
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
        out += &format!("[{b}] transitions lost: {}\n", self.lost);
        out += &format!("[{b}] invariant violations: {}\n", self.violations);
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
        json: String,
    },
    Error(String),
}

fn parse_event(line: &str) -> Result<Event, String> {
    if line == "ready" {
        return Ok(Event::Ready);
    }
    if let Some(rest) = line.strip_prefix("error ") {
        return Ok(Event::Error(rest.to_string()));
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
    let mut startup = FIRST_STARTUP;
    for trial in 0..options.trials {
        if started.elapsed() >= options.time_limit {
            figures.stopped_by_time_limit = true;
            break;
        }
        let lines =
            match kill_one_child(&target, options, exe, &mut rng, &mut startup, &mut figures).await
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
        check_trial(&store, &lines, &mut ledger, &mut figures).await;
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
        final_sweep(&target, &mut ledger, &mut figures).await;
    }
    figures.elapsed = started.elapsed();
    figures.kept_store = target.finish(!figures.passed()).await;
    figures
}

/// Starts a child, kills it at a random moment and returns what it printed.
async fn kill_one_child(
    target: &StoreTarget,
    options: &CrashOptions,
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
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if sender.send(line).is_err() {
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

/// Checks the store after one kill against what the child acknowledged and
/// what earlier trials observed.
async fn check_trial(
    store: &Store,
    lines: &[String],
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
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
    for event in &events {
        match event {
            Event::Ready => {}
            Event::Error(message) => figures.fail(format!("the child reported: {message}")),
            Event::Begin { lane, kind, key } => {
                open_lanes.insert(*lane, (kind.clone(), key.clone()));
            }
            Event::Ack { lane, kind, json } => {
                open_lanes.remove(lane);
                *figures.acknowledged.entry(kind.clone()).or_default() += 1;
                check_ack(store, kind, json, &stored, ledger, figures).await;
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

async fn check_ack(
    store: &Store,
    kind: &str,
    json: &str,
    stored: &BTreeMap<InteractiveHandoffId, InteractiveHandoff>,
    ledger: &mut Ledger,
    figures: &mut CrashFigures,
) {
    match kind {
        "wave" | "parent" | "body" => {
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
        "open" | "attach" | "finish" | "claim" => {
            let acknowledged: InteractiveHandoff = match serde_json::from_str(json) {
                Ok(handoff) => handoff,
                Err(e) => return figures.fail(format!("unreadable {kind} acknowledgement: {e}")),
            };
            let id = acknowledged.id.clone();
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
                .is_some_and(|known| stage(known) > stage(&acknowledged));
            if !further {
                ledger.handoffs.insert(id, acknowledged);
            }
        }
        other => figures.fail(format!("the child acknowledged an unknown kind {other:?}")),
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
        "open" => {
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
        "attach" | "finish" | "claim" => {
            let id = InteractiveHandoffId::parse(key).map_err(|e| e.to_string())?;
            let (Some(known), Some(now)) = (ledger.handoffs.get(&id), stored.get(&id)) else {
                return Err(format!(
                    "{kind} of {id} was in flight but the handoff is unknown"
                ));
            };
            Ok(stage(now) > stage(known))
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

/// After the last trial: every handoff and every parent ever acknowledged
/// or observed is read back and checked once more.
async fn final_sweep(target: &StoreTarget, ledger: &mut Ledger, figures: &mut CrashFigures) {
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
    let stored: BTreeMap<_, _> = all.iter().map(|h| (&h.id, h)).collect();
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
}
