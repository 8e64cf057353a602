//! The crash harness's child: runs handoff lifecycles on a store until it
//! is killed, printing every transition after the store acknowledged it.
//!
//! Protocol (one line each, flushed before the next store call):
//!
//! - `ready` once the store is open;
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

use std::io::Write;
use std::path::{Path, PathBuf};

use lf_handoff_adapters::domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_adapters::domain::interactive_handoff::{
    Actor, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus, OpenOptions, StepKey,
};
use lf_handoff_adapters::domain::parent::Parent;
use lf_handoff_adapters::domain::wave::Wave;
use lf_handoff_adapters::{open_store, ConflictKind, GenerateId, StorageConfig, Store, StoreError};
use lf_handoff_conformance::fixtures;

use crate::requests::{open_request, random_outcome, text};
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

/// How many deadlines, each further ahead, a deadline lane tries for one
/// open or extension before it gives up.
const DEADLINE_ATTEMPTS: i32 = 5;

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
    let (mut fake_ack, mut fake_steps, mut story) = (false, false, Vec::new());
    let (mut trial, mut deadline_lanes) = (0u64, 0usize);
    for option in options {
        if option == FAKE_ACK_ARG {
            fake_ack = true;
        } else if option == FAKE_STEPS_ARG {
            fake_steps = true;
        } else if let Some(list) = option.strip_prefix(STORY_ARG) {
            story = parse_story(list)?;
        } else if let Some(number) = option.strip_prefix(TRIAL_ARG) {
            trial = number.parse().map_err(|_| usage())?;
        } else if let Some(number) = option.strip_prefix(DEADLINE_LANES_ARG) {
            deadline_lanes = number.parse().map_err(|_| usage())?;
        } else {
            return Err(usage());
        }
    }
    let seed: u64 = seed.parse().map_err(|e| format!("seed {seed:?}: {e}"))?;
    let lanes: usize = lanes.parse().map_err(|e| format!("lanes {lanes:?}: {e}"))?;
    let config = StorageConfig::from_url(url).map_err(|e| e.to_string())?;
    let store = open_store(&config).await.map_err(|e| e.to_string())?;
    emit("ready")?;
    let mut rng = Rng::new(seed);
    let mut tasks = Vec::new();
    let actor = |lane: usize| Actor::parse(&child_actor(trial, lane)).map_err(|e| e.to_string());
    for lane in 0..lanes.max(1) {
        let lane_rng = rng.fork();
        let lane_store = store.clone().with_actor(actor(lane)?);
        let dir = PathBuf::from(work_dir);
        tasks.push(tokio::spawn(async move {
            let mut runner = Lane {
                lane,
                rng: lane_rng,
                store: lane_store,
                dir,
                fake_ack,
                fake_steps: false,
            };
            loop {
                if let Err(message) = runner.lifecycle().await {
                    let _ = emit(&format!("error {lane} {message}"));
                    return Err(message);
                }
            }
        }));
    }
    let story_lanes = story.len();
    for (n, (parent, step)) in story.into_iter().enumerate() {
        let lane = lanes.max(1) + n;
        let mut runner = Lane {
            lane,
            rng: rng.fork(),
            store: store.clone().with_actor(actor(lane)?),
            dir: PathBuf::from(work_dir),
            fake_ack: false,
            fake_steps,
        };
        tasks.push(tokio::spawn(async move {
            let result = runner.story(parent, step).await;
            if let Err(message) = &result {
                let _ = emit(&format!("error {lane} {message}"));
            }
            result
        }));
    }
    for n in 0..deadline_lanes {
        let lane = lanes.max(1) + story_lanes + n;
        let mut runner = Lane {
            lane,
            rng: rng.fork(),
            store: store.clone().with_actor(actor(lane)?),
            dir: PathBuf::from(work_dir),
            fake_ack: false,
            fake_steps: false,
        };
        tasks.push(tokio::spawn(async move {
            loop {
                if let Err(message) = runner.deadline_lifecycle().await {
                    let _ = emit(&format!("error {lane} {message}"));
                    return Err(message);
                }
            }
        }));
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

struct Lane {
    lane: usize,
    rng: Rng,
    store: Store,
    dir: PathBuf,
    fake_ack: bool,
    fake_steps: bool,
}

impl Lane {
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
            .finish_interactive_handoff(id, outcome)
            .await
            .map_err(|e| format!("finish {id}: {e}"))?;
        self.ack_handoff("finish", id, &finished)?;
        Ok(finished)
    }

    /// The crash story for `reference` (see the module documentation),
    /// from step `step` on, until the child is killed.
    async fn story(
        &mut self,
        reference: InteractiveHandoffParent,
        mut step: u64,
    ) -> Result<(), String> {
        let parent = self
            .store
            .get_parent(&reference)
            .await
            .map_err(|e| format!("read story parent {reference}: {e}"))?
            .ok_or_else(|| format!("story parent {reference} is missing"))?;
        let generation = parent.body_generation();
        loop {
            let key = story_step(step)?;
            let request = open_request(&mut self.rng, &parent, &self.dir)?;
            self.begin("step-open", &reference)?;
            let (mut current, created) = self
                .store
                .open_interactive_handoff(request.with_options(OpenOptions::at_step(key.clone())))
                .await
                .map_err(|e| format!("open {reference} at step {key} by {generation}: {e}"))?;
            let value = serde_json::json!({ "created": created, "step": key, "handoff": current });
            self.ack_json("step-open", &reference, &value)?;
            if self.fake_steps {
                // A deliberate lie for the harness's self-test: a second
                // handoff for the same step.
                let mut phantom = current.clone();
                phantom.id = InteractiveHandoffId::new();
                let value = serde_json::json!({ "created": true, "step": key, "handoff": phantom });
                self.ack_json("step-open", &reference, &value)?;
            }
            let id = current.id.clone();
            if current.status == InteractiveHandoffStatus::Waiting && self.rng.chance(1, 2) {
                current = self.attach(&id).await?;
            }
            if !current.status.is_terminal() {
                let outcome = random_outcome(&mut self.rng);
                current = self.finish(&id, &outcome).await?;
            }
            let replaced = current
                .wake_claimed_by_generation
                .filter(|holder| *holder < generation);
            self.begin("wake", &id)?;
            let (claimed, record) = fixtures::claim_and_read(&self.store, &id, generation)
                .await
                .map_err(|e| format!("claim {id} for {generation}: {e}"))?;
            self.ack_wake(generation, claimed, &record)?;
            if self.fake_steps && claimed {
                // The self-test's other lie: a newer generation won the
                // wake, then this one won it back.
                self.ack_wake(generation + 1, true, &record)?;
                self.ack_wake(generation, true, &record)?;
            }
            if let Some(old) = replaced {
                if self.rng.chance(1, 2) {
                    self.begin("wake", &id)?;
                    let (old_claimed, record) = fixtures::claim_and_read(&self.store, &id, old)
                        .await
                        .map_err(|e| format!("retry the claim of {id} for {old}: {e}"))?;
                    self.ack_wake(old, old_claimed, &record)?;
                }
            }
            if self.rng.chance(1, 2) {
                // The body works on before it records its progress: a kill
                // now makes the next generation run the step again.
                let pause = self.rng.below(20);
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            }
            step += 1;
            emit(&format!("step {} {reference} {step}", self.lane))?;
        }
    }

    /// One lifecycle: a parent, open (with replays), maybe attach, finish,
    /// maybe a new body, claim (with a retry and a loser).
    async fn lifecycle(&mut self) -> Result<(), String> {
        let mut parent = self.new_parent().await?;
        let reference = parent.reference();
        let request = open_request(&mut self.rng, &parent, &self.dir)?;

        self.begin("open", &reference)?;
        let (opened, created) = self
            .store
            .open_interactive_handoff(request.clone())
            .await
            .map_err(|e| format!("open on {reference}: {e}"))?;
        if !created {
            return Err(format!(
                "open on a new parent {reference} reused {}",
                opened.id
            ));
        }
        self.ack_handoff("open", &reference, &opened)?;
        if self.fake_ack {
            // A deliberate lie for the harness's self-test: an open that the
            // store never saw.
            let mut phantom = opened.clone();
            phantom.id = InteractiveHandoffId::new();
            self.ack_handoff("open", &reference, &phantom)?;
        }
        let id = opened.id.clone();
        let mut current = opened;
        if self.rng.chance(1, 3) {
            let (replayed, created) = self
                .store
                .open_interactive_handoff(request)
                .await
                .map_err(|e| format!("replayed open on {reference}: {e}"))?;
            if created || replayed != current {
                return Err(format!("a replayed open of {id} was not a no-op"));
            }
        }

        if self.rng.chance(2, 3) {
            current = self.attach(&id).await?;
            if self.rng.chance(1, 4) {
                let again = self
                    .store
                    .attach_interactive_handoff(&id)
                    .await
                    .map_err(|e| format!("attach {id} again: {e}"))?;
                if again != current {
                    return Err(format!("a repeated attach of {id} changed the record"));
                }
            }
        }

        let outcome = random_outcome(&mut self.rng);
        current = self.finish(&id, &outcome).await?;
        if self.rng.chance(1, 4) {
            let again = self
                .store
                .finish_interactive_handoff(&id, &outcome)
                .await
                .map_err(|e| format!("finish {id} again: {e}"))?;
            if again != current {
                return Err(format!("a repeated finish of {id} changed the record"));
            }
        }

        let mut generation = current.body_generation;
        if self.rng.chance(1, 3) {
            generation = parent.body_generation().max(1) + 1;
            self.begin("body", &reference)?;
            parent = self
                .store
                .record_body(&reference, fixtures::body(generation, None))
                .await
                .map_err(|e| format!("record body {generation} on {reference}: {e}"))?;
            self.ack_parent("body", &parent)?;
        }

        self.begin("claim", &id)?;
        let (claimed, record) = fixtures::claim_and_read(&self.store, &id, generation)
            .await
            .map_err(|e| format!("claim {id} for {generation}: {e}"))?;
        if !claimed {
            return Err(format!("the only claimant of {id} ({generation}) lost"));
        }
        self.ack_handoff("claim", &id, &record)?;
        if self.rng.chance(1, 4) {
            let retry = self
                .store
                .claim_interactive_handoff_wake(&id, generation)
                .await
                .map_err(|e| format!("claim {id} again: {e}"))?;
            let other = self
                .store
                .claim_interactive_handoff_wake(&id, generation + 1)
                .await
                .map_err(|e| format!("second claimant of {id}: {e}"))?;
            if !retry || other {
                return Err(format!(
                    "claim retry of {id}: same generation {retry}, other generation {other}"
                ));
            }
        }
        Ok(())
    }

    /// Acknowledges handoffs a write expired, as a JSON array.
    fn ack_expired(
        &self,
        key: &dyn std::fmt::Display,
        expired: &[InteractiveHandoff],
    ) -> Result<(), String> {
        let json = serde_json::to_string(expired).map_err(|e| e.to_string())?;
        emit(&format!("ack {} expire {key} {json}", self.lane))
    }

    /// Sweeps every due handoff (C14), announced before and acknowledged
    /// after with the handoffs this sweep expired.
    async fn sweep(&self) -> Result<Vec<InteractiveHandoff>, String> {
        self.begin("expire", &"due")?;
        let expired = self
            .store
            .expire_due()
            .await
            .map_err(|e| format!("expire the due handoffs: {e}"))?;
        self.ack_expired(&"due", &expired)?;
        Ok(expired)
    }

    /// After a write on `id` was refused because its deadline had passed:
    /// the store expired it in the same round, which is acknowledged with
    /// the record read back.
    async fn refused_as_due(
        &self,
        id: &InteractiveHandoffId,
        error: &StoreError,
    ) -> Result<InteractiveHandoff, String> {
        let record = self
            .store
            .get_interactive_handoff(id)
            .await
            .map_err(|e| format!("read {id} after {error}: {e}"))?
            .ok_or_else(|| format!("{id} is gone after {error}"))?;
        if record.status != InteractiveHandoffStatus::Expired {
            return Err(format!(
                "{id} was refused as expired ({error}) but is {}",
                record.status
            ));
        }
        self.ack_expired(id, std::slice::from_ref(&record))?;
        Ok(record)
    }

    /// A write on a handoff with a deadline: its result, or the expired
    /// record when the deadline had passed.
    async fn in_time(
        &self,
        id: &InteractiveHandoffId,
        kind: &str,
        result: Result<InteractiveHandoff, StoreError>,
    ) -> Result<InteractiveHandoff, String> {
        match result {
            Ok(record) => {
                self.ack_handoff(kind, id, &record)?;
                Ok(record)
            }
            Err(
                error @ StoreError::Conflict {
                    kind: ConflictKind::Expired,
                    ..
                },
            ) => self.refused_as_due(id, &error).await,
            Err(error) => Err(format!("{kind} {id}: {error}")),
        }
    }

    /// 20 to 300 ms, for a deadline.
    fn some_millis(&mut self) -> time::Duration {
        time::Duration::milliseconds(20 + i64::try_from(self.rng.below(280)).unwrap_or(0))
    }

    /// Sleeps until the store's clock is past `deadline`.
    async fn sleep_past(&self, deadline: time::OffsetDateTime) {
        let left = deadline - self.store.now();
        let left = u64::try_from(left.whole_milliseconds()).unwrap_or(0);
        tokio::time::sleep(std::time::Duration::from_millis(left + 2)).await;
    }

    /// One lifecycle of a handoff with a deadline (see the module
    /// documentation).
    async fn deadline_lifecycle(&mut self) -> Result<(), String> {
        self.sweep().await?;
        let wave = Wave::new(
            WaveId::new(),
            text(&mut self.rng, 2),
            self.dir.display().to_string(),
        );
        let parent = Parent::Wave(wave.clone());
        let reference = parent.reference();
        self.begin("wave", &reference)?;
        self.store
            .create_wave(&wave)
            .await
            .map_err(|e| format!("create wave {}: {e}", wave.id()))?;
        self.ack_parent("wave", &parent)?;
        let request = open_request(&mut self.rng, &parent, &self.dir)?;
        let ttl = self.some_millis();
        self.begin("open", &reference)?;
        let mut attempt = 1;
        let (opened, created) = loop {
            let options = OpenOptions {
                step: None,
                expires_at: Some(self.store.now() + ttl * attempt),
            };
            match self
                .store
                .open_interactive_handoff(request.clone().with_options(options.clone()))
                .await
            {
                Ok(opened) => break opened,
                // On a busy machine the deadline may have passed before the
                // store decided: refused, nothing written; a later one.
                Err(StoreError::InvalidInput(_)) if attempt < DEADLINE_ATTEMPTS => attempt += 1,
                Err(e) => return Err(format!("open on {reference} with a deadline: {e}")),
            }
        };
        if !created {
            return Err(format!(
                "open on a new parent {reference} reused {}",
                opened.id
            ));
        }
        self.ack_handoff("open", &reference, &opened)?;
        let id = opened.id.clone();
        let mut current = opened;
        match self.rng.below(4) {
            0 => {
                // A person in time (most of the time).
                if self.rng.chance(1, 2) {
                    self.begin("attach", &id)?;
                    let result = self.store.attach_interactive_handoff(&id).await;
                    current = self.in_time(&id, "attach", result).await?;
                }
                if !current.status.is_terminal() {
                    let outcome = random_outcome(&mut self.rng);
                    self.begin("finish", &id)?;
                    let result = self.store.finish_interactive_handoff(&id, &outcome).await;
                    current = self.in_time(&id, "finish", result).await?;
                }
            }
            1 => {
                // Extended (two times in three), then left to the sweep.
                if self.rng.chance(2, 3) {
                    let more = self.some_millis();
                    self.begin("extend", &id)?;
                    let mut attempt = 1;
                    let result = loop {
                        let until = self.store.now() + more * attempt;
                        match self.store.extend_interactive_handoff(&id, until).await {
                            // As for the open: the new deadline had passed.
                            Err(StoreError::InvalidInput(_)) if attempt < DEADLINE_ATTEMPTS => {
                                attempt += 1;
                            }
                            result => break result,
                        }
                    };
                    current = self.in_time(&id, "extend", result).await?;
                }
                if let (false, Some(deadline)) = (current.status.is_terminal(), current.expires_at)
                {
                    self.sleep_past(deadline).await;
                    self.sweep().await?;
                    // This sweep or another deadline lane's expired it.
                    current = self
                        .store
                        .get_interactive_handoff(&id)
                        .await
                        .map_err(|e| format!("read {id} after the sweep: {e}"))?
                        .ok_or_else(|| format!("{id} is gone after the sweep"))?;
                    if current.status != InteractiveHandoffStatus::Expired {
                        return Err(format!(
                            "the sweep after {id}'s deadline left it {}",
                            current.status
                        ));
                    }
                }
            }
            2 => {
                // Attached, then finished too late: the store expires it
                // and refuses the finish.
                self.begin("attach", &id)?;
                let result = self.store.attach_interactive_handoff(&id).await;
                current = self.in_time(&id, "attach", result).await?;
                if let (false, Some(deadline)) = (current.status.is_terminal(), current.expires_at)
                {
                    self.sleep_past(deadline).await;
                    let outcome = random_outcome(&mut self.rng);
                    self.begin("finish", &id)?;
                    current = match self.store.finish_interactive_handoff(&id, &outcome).await {
                        Ok(finished) => {
                            return Err(format!(
                                "{id} was finished after its deadline: {finished:?}"
                            ))
                        }
                        Err(
                            error @ StoreError::Conflict {
                                kind: ConflictKind::Expired,
                                ..
                            },
                        ) => self.refused_as_due(&id, &error).await?,
                        Err(error) => return Err(format!("finish {id} too late: {error}")),
                    };
                }
            }
            // Left waiting: a later sweep, often the next child's, expires it.
            _ => {}
        }
        if current.status.is_terminal() && self.rng.chance(2, 3) {
            let generation = current.body_generation;
            self.begin("claim", &id)?;
            let (claimed, record) = fixtures::claim_and_read(&self.store, &id, generation)
                .await
                .map_err(|e| format!("claim {id} for {generation}: {e}"))?;
            if !claimed {
                return Err(format!("the only claimant of {id} ({generation}) lost"));
            }
            self.ack_handoff("claim", &id, &record)?;
        }
        Ok(())
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
