//! The crash harness's child: runs handoff lifecycles on a store until it
//! is killed, printing every transition after the store acknowledged it.
//!
//! Protocol (one line each, flushed before the next store call):
//!
//! - `opening` right before the store is opened, `ready` once it is open;
//! - `begin <lane> <kind> <key>` before a write is issued;
//! - `ack <lane> <kind> <key> <json>` after the store acknowledged it, with
//!   the record the store returned;
//! - `error <lane> <message>` when the store did something the contract
//!   forbids (the child then exits with status 1);
//! - `step <lane> <parent> <n>` when a story body has moved past its step
//!   `n - 1` (what a body records outside the registry).
//!
//! Kinds: `wave`, `parent` (a project or task session created), `body` (a
//! new body generation recorded) with a [`Parent`] as JSON; `open`,
//! `attach`, `finish`, `claim`, `extend` with an `InteractiveHandoff` as
//! JSON; `expire` with a JSON array of the handoffs a write expired (a
//! sweep, key `due`, or an attach or finish refused because the handoff
//! was due, key its id);
//! `step-open` with `{"created": bool, "handoff": InteractiveHandoff}` and
//! `wake` with `{"generation": G, "claimed": bool, "handoff":
//! InteractiveHandoff}` (the story's open at a step and claims, whatever
//! their answer). The key is the parent reference for parent writes and
//! for opens (whose id is not known before), the handoff id otherwise.
//!
//! Several lanes run lifecycles at once on clones of one store, so a kill
//! can land while several writes are in flight. Each lane's handle names
//! the actor [`child_actor`]`(trial, lane)` (C15), so the harness can tell
//! which child and lane made each event of a history.
//!
//! **Deadlines** (C14). Each of the [`DEADLINE_LANES_ARG`] lanes runs
//! lifecycles whose handoffs have a deadline 20 to 300 ms ahead: it sweeps
//! (`expire_due`) before each one, then attaches and finishes in time, or
//! extends the deadline and leaves the handoff to the sweep, or attaches
//! and finishes too late (the store expires it and refuses), or leaves it
//! waiting for a later sweep (often the next child's); then it claims the
//! wake of a finished or expired handoff.
//!
//! **The crash story** (C12, C13). Each parent named with [`STORY_ARG`]
//! gets a lane of its own, whose body is the parent's current generation
//! (the harness records a new one after every kill, as an orchestrator
//! replaces a crashed body). Starting at the step the harness says the
//! parent's last body moved past, it plays the steps in order: open at the
//! step (`login@turn-<n>`, the same key for the same step whichever
//! generation runs it), attach and finish unless an earlier generation
//! already did, claim the wake (taking it over from an older generation
//! that claimed it and was killed), sometimes let the replaced generation
//! retry its claim, then, sometimes after a pause, record that it moved
//! past the step. A kill between the claim and that record is the crash
//! the story is about: the next generation runs the step again.

mod deadlines;
mod lifecycle;

use std::io::Write;
use std::path::{Path, PathBuf};

use lf_handoff_adapters::{open_store, GenerateId, StorageConfig, Store};
use lf_handoff_conformance::fixtures;
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    Actor, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent, StepKey,
};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::wave::Wave;

use crate::requests::text;
use crate::rng::Rng;

/// The first argument that makes a harness binary act as the crash child.
pub const CHILD_ARG: &str = "__crash-child";

/// Writes one whole line to stdout and flushes it, so the parent has it
/// before the next store call starts.
fn emit(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(|e| format!("cannot write to the harness: {e}"))
}

/// The optional argument that makes the child acknowledge a write it
/// never made, once per lifecycle: the harness's own tests use it to show
/// that a lost transition is caught.
pub const FAKE_ACK_ARG: &str = "fake-ack";

/// The optional argument that makes story lanes acknowledge a second
/// handoff for a step and a wake won back by a replaced generation, which
/// the store never gave: the harness's own tests use it to show that both
/// are counted.
pub const FAKE_STEPS_ARG: &str = "fake-steps";

/// The prefix of the optional argument naming the story's parents and the
/// step each one's body is at: `story=<parent>@<step>,<parent>@<step>`.
pub const STORY_ARG: &str = "story=";

/// The prefix of the optional argument giving the trial's number, which
/// the lanes' actors name (default 0).
pub const TRIAL_ARG: &str = "trial=";

/// The prefix of the optional argument giving the number of lanes whose
/// handoffs have deadlines (default 0).
pub const DEADLINE_LANES_ARG: &str = "deadline-lanes=";

/// The actor lane `lane` of the child of trial `trial` names in the
/// history of every change it makes.
pub fn child_actor(trial: u64, lane: usize) -> String {
    format!("crash-child {trial} lane {lane}")
}

/// The trial and lane of an actor made by [`child_actor`]; `None` for any
/// other name.
pub fn parse_child_actor(actor: &str) -> Option<(u64, usize)> {
    let rest = actor.strip_prefix("crash-child ")?;
    let (trial, lane) = rest.split_once(" lane ")?;
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if !digits(trial) || !digits(lane) {
        return None;
    }
    Some((trial.parse().ok()?, lane.parse().ok()?))
}

/// The step key a story body uses for its step `n`: the same for every
/// generation that runs the step.
///
/// # Errors
/// Never for the keys made here; the parse error as text otherwise.
pub fn story_step(n: u64) -> Result<StepKey, String> {
    StepKey::parse(&format!("login@turn-{n}")).map_err(|e| e.to_string())
}

/// The [`STORY_ARG`] argument for `parents` at their steps.
pub fn story_arg(parents: &[(InteractiveHandoffParent, u64)]) -> String {
    let list: Vec<String> = parents
        .iter()
        .map(|(parent, step)| format!("{parent}@{step}"))
        .collect();
    format!("{STORY_ARG}{}", list.join(","))
}

fn parse_story(list: &str) -> Result<Vec<(InteractiveHandoffParent, u64)>, String> {
    list.split(',')
        .filter(|item| !item.is_empty())
        .map(|item| {
            let (parent, step) = item
                .rsplit_once('@')
                .ok_or_else(|| format!("story parent {item:?} has no @<step>"))?;
            let step = step
                .parse()
                .map_err(|e| format!("story step {step:?}: {e}"))?;
            Ok((parse_reference(parent)?, step))
        })
        .collect()
}

/// The child's arguments after the four positional ones.
#[derive(Debug, Default)]
struct ChildOptions {
    fake_ack: bool,
    fake_steps: bool,
    story: Vec<(InteractiveHandoffParent, u64)>,
    trial: u64,
    deadline_lanes: usize,
}

impl ChildOptions {
    fn parse(options: &[String], usage: &dyn Fn() -> String) -> Result<Self, String> {
        let mut parsed = Self::default();
        for option in options {
            if option == FAKE_ACK_ARG {
                parsed.fake_ack = true;
            } else if option == FAKE_STEPS_ARG {
                parsed.fake_steps = true;
            } else if let Some(list) = option.strip_prefix(STORY_ARG) {
                parsed.story = parse_story(list)?;
            } else if let Some(number) = option.strip_prefix(TRIAL_ARG) {
                parsed.trial = number.parse().map_err(|_| usage())?;
            } else if let Some(number) = option.strip_prefix(DEADLINE_LANES_ARG) {
                parsed.deadline_lanes = number.parse().map_err(|_| usage())?;
            } else {
                return Err(usage());
            }
        }
        Ok(parsed)
    }
}

/// Runs the child: `args` are `<store url> <seed> <lanes> <work dir>
/// [fake-ack] [fake-steps] [story=...] [trial=N] [deadline-lanes=N]`.
/// Returns only on an error; the parent kills it otherwise.
pub async fn run(args: &[String]) -> Result<(), String> {
    let usage = || {
        format!(
            "usage: {CHILD_ARG} <store url> <seed> <lanes> <work dir> [{FAKE_ACK_ARG}] \
             [{FAKE_STEPS_ARG}] [{STORY_ARG}<parent>@<step>,...] [{TRIAL_ARG}N] \
             [{DEADLINE_LANES_ARG}N], got {args:?}"
        )
    };
    let [url, seed, lanes, work_dir, options @ ..] = args else {
        return Err(usage());
    };
    let options = ChildOptions::parse(options, &usage)?;
    let seed: u64 = seed.parse().map_err(|e| format!("seed {seed:?}: {e}"))?;
    let lanes: usize = lanes.parse().map_err(|e| format!("lanes {lanes:?}: {e}"))?;
    let config = StorageConfig::from_url(url).map_err(|e| e.to_string())?;
    emit("opening")?;
    let store = open_store(&config).await.map_err(|e| e.to_string())?;
    emit("ready")?;
    let mut rng = Rng::new(seed);
    let trial = options.trial;
    let lane = |lane: usize, rng: &mut Rng| -> Result<Lane, String> {
        let actor = Actor::parse(&child_actor(trial, lane)).map_err(|e| e.to_string())?;
        Ok(Lane {
            lane,
            rng: rng.fork(),
            store: store.clone().with_actor(actor),
            dir: PathBuf::from(work_dir),
            fake_ack: false,
            fake_steps: false,
        })
    };
    let mut tasks = Vec::new();
    for n in 0..lanes.max(1) {
        let mut runner = lane(n, &mut rng)?;
        runner.fake_ack = options.fake_ack;
        tasks.push(tokio::spawn(async move { runner.forever(false).await }));
    }
    let story_lanes = options.story.len();
    for (n, (parent, step)) in options.story.into_iter().enumerate() {
        let mut runner = lane(lanes.max(1) + n, &mut rng)?;
        runner.fake_steps = options.fake_steps;
        tasks.push(tokio::spawn(async move {
            let result = runner.story(parent, step).await;
            if let Err(message) = &result {
                let _ = emit(&format!("error {} {message}", runner.lane));
            }
            result
        }));
    }
    for n in 0..options.deadline_lanes {
        let mut runner = lane(lanes.max(1) + story_lanes + n, &mut rng)?;
        tasks.push(tokio::spawn(async move { runner.forever(true).await }));
    }
    for task in tasks {
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(message)) => return Err(message),
            Err(e) => return Err(format!("a lane stopped: {e}")),
        }
    }
    Ok(())
}

/// One lane of the child: its number, random source, store handle (naming
/// the lane's actor) and working directory.
struct Lane {
    lane: usize,
    rng: Rng,
    store: Store,
    dir: PathBuf,
    fake_ack: bool,
    fake_steps: bool,
}

impl Lane {
    /// Runs lifecycles (with deadlines when `deadlines`) one after
    /// another; on the first error, prints it and returns it.
    async fn forever(&mut self, deadlines: bool) -> Result<(), String> {
        loop {
            let round = if deadlines {
                self.deadline_lifecycle().await
            } else {
                self.lifecycle().await
            };
            if let Err(message) = round {
                let _ = emit(&format!("error {} {message}", self.lane));
                return Err(message);
            }
        }
    }

    fn begin(&self, kind: &str, key: &dyn std::fmt::Display) -> Result<(), String> {
        emit(&format!("begin {} {kind} {key}", self.lane))
    }

    fn ack_parent(&self, kind: &str, parent: &Parent) -> Result<(), String> {
        let json = serde_json::to_string(parent).map_err(|e| e.to_string())?;
        emit(&format!(
            "ack {} {kind} {} {json}",
            self.lane,
            parent.reference()
        ))
    }

    fn ack_handoff(
        &self,
        kind: &str,
        key: &dyn std::fmt::Display,
        handoff: &InteractiveHandoff,
    ) -> Result<(), String> {
        let json = serde_json::to_string(handoff).map_err(|e| e.to_string())?;
        emit(&format!("ack {} {kind} {key} {json}", self.lane))
    }

    fn ack_json(
        &self,
        kind: &str,
        key: &dyn std::fmt::Display,
        value: &serde_json::Value,
    ) -> Result<(), String> {
        emit(&format!("ack {} {kind} {key} {value}", self.lane))
    }

    /// Acknowledges a story claim: its generation, the answer and the
    /// record.
    fn ack_wake(
        &self,
        generation: u32,
        claimed: bool,
        handoff: &InteractiveHandoff,
    ) -> Result<(), String> {
        let value = serde_json::json!({
            "generation": generation,
            "claimed": claimed,
            "handoff": handoff,
        });
        self.ack_json("wake", &handoff.id, &value)
    }

    /// Attaches `id`, announced before and acknowledged after.
    async fn attach(&self, id: &InteractiveHandoffId) -> Result<InteractiveHandoff, String> {
        self.begin("attach", id)?;
        let attached = self
            .store
            .attach_interactive_handoff(id)
            .await
            .map_err(|e| format!("attach {id}: {e}"))?;
        self.ack_handoff("attach", id, &attached)?;
        Ok(attached)
    }

    /// Finishes `id` with `outcome`, announced before and acknowledged
    /// after.
    async fn finish(
        &self,
        id: &InteractiveHandoffId,
        outcome: &InteractiveHandoffOutcome,
    ) -> Result<InteractiveHandoff, String> {
        self.begin("finish", id)?;
        let finished = self
            .store
            .finish_interactive_handoff(id, outcome, None)
            .await
            .map_err(|e| format!("finish {id}: {e}"))?;
        self.ack_handoff("finish", id, &finished)?;
        Ok(finished)
    }

    /// A new wave (three in four lifecycles) or a new task session under a
    /// new project; each creation is acknowledged.
    async fn new_parent(&mut self) -> Result<Parent, String> {
        let wave = Wave::new(
            WaveId::new(),
            text(&mut self.rng, 2),
            self.dir.display().to_string(),
        );
        let wave_parent = Parent::Wave(wave.clone());
        self.begin("wave", &wave_parent.reference())?;
        self.store
            .create_wave(&wave)
            .await
            .map_err(|e| format!("create wave {}: {e}", wave.id()))?;
        self.ack_parent("wave", &wave_parent)?;
        if self.rng.chance(3, 4) {
            return Ok(wave_parent);
        }
        let project = fixtures::fresh_project(wave.id());
        let project_parent = Parent::Project(project.clone());
        self.begin("parent", &project_parent.reference())?;
        self.store
            .create_project_session(&project)
            .await
            .map_err(|e| format!("create project {}: {e}", project.id))?;
        self.ack_parent("parent", &project_parent)?;
        let (task, pr) = fixtures::fresh_task(&project, &worktree(&self.dir));
        let task_parent = Parent::Task(task.clone());
        self.begin("parent", &task_parent.reference())?;
        self.store
            .create_task_session(&task, &pr)
            .await
            .map_err(|e| format!("create task {}: {e}", task.id))?;
        self.ack_parent("parent", &task_parent)?;
        Ok(task_parent)
    }
}

fn worktree(dir: &Path) -> PathBuf {
    dir.join("worktree")
}

/// Parses a reference printed by the child.
///
/// # Errors
/// The parse error as text.
pub fn parse_reference(text: &str) -> Result<InteractiveHandoffParent, String> {
    InteractiveHandoffParent::parse(text).map_err(|e| e.to_string())
}
