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
//!   forbids (the child then exits with status 1).
//!
//! Kinds: `wave`, `parent` (a project or task session created), `body` (a
//! new body generation recorded) with a [`Parent`] as JSON; `open`,
//! `attach`, `finish`, `claim` with an `InteractiveHandoff` as JSON. The key
//! is the parent reference for parent writes and for `open` (whose id is not
//! known before), the handoff id otherwise.
//!
//! Several lanes run lifecycles at once on clones of one store, so a kill
//! can land while several writes are in flight.

use std::io::Write;
use std::path::{Path, PathBuf};

use lf_handoff_adapters::domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_adapters::domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffParent,
};
use lf_handoff_adapters::domain::parent::Parent;
use lf_handoff_adapters::domain::wave::Wave;
use lf_handoff_adapters::{open_store, GenerateId, StorageConfig, Store};
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

/// The optional fifth argument that makes the child acknowledge a write it
/// never made, once per lifecycle: the harness's own tests use it to show
/// that a lost transition is caught.
pub const FAKE_ACK_ARG: &str = "fake-ack";

/// Runs the child: `args` are `<store url> <seed> <lanes> <work dir>
/// [fake-ack]`. Returns only on an error; the parent kills it otherwise.
pub async fn run(args: &[String]) -> Result<(), String> {
    let (url, seed, lanes, work_dir, fake_ack) = match args {
        [url, seed, lanes, dir] => (url, seed, lanes, dir, false),
        [url, seed, lanes, dir, fault] if fault == FAKE_ACK_ARG => (url, seed, lanes, dir, true),
        _ => {
            return Err(format!(
                "usage: {CHILD_ARG} <store url> <seed> <lanes> <work dir> [{FAKE_ACK_ARG}], got {args:?}"
            ))
        }
    };
    let seed: u64 = seed.parse().map_err(|e| format!("seed {seed:?}: {e}"))?;
    let lanes: usize = lanes.parse().map_err(|e| format!("lanes {lanes:?}: {e}"))?;
    let config = StorageConfig::from_url(url).map_err(|e| e.to_string())?;
    let store = open_store(&config).await.map_err(|e| e.to_string())?;
    emit("ready")?;
    let mut rng = Rng::new(seed);
    let mut tasks = Vec::new();
    for lane in 0..lanes.max(1) {
        let lane_rng = rng.fork();
        let lane_store = store.clone();
        let dir = PathBuf::from(work_dir);
        tasks.push(tokio::spawn(async move {
            let mut runner = Lane {
                lane,
                rng: lane_rng,
                store: lane_store,
                dir,
                fake_ack,
            };
            loop {
                if let Err(message) = runner.lifecycle().await {
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
            self.begin("attach", &id)?;
            current = self
                .store
                .attach_interactive_handoff(&id)
                .await
                .map_err(|e| format!("attach {id}: {e}"))?;
            self.ack_handoff("attach", &id, &current)?;
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
        self.begin("finish", &id)?;
        current = self
            .store
            .finish_interactive_handoff(&id, &outcome)
            .await
            .map_err(|e| format!("finish {id}: {e}"))?;
        self.ack_handoff("finish", &id, &current)?;
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
        let (claimed, record) = self
            .store
            .claim_interactive_handoff_wake_with_record(&id, generation)
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
        let project = fixtures::project(wave.id());
        let project_parent = Parent::Project(project.clone());
        self.begin("parent", &project_parent.reference())?;
        self.store
            .create_project_session(&project)
            .await
            .map_err(|e| format!("create project {}: {e}", project.id))?;
        self.ack_parent("parent", &project_parent)?;
        let (task, pr) = fixtures::task(&project, &worktree(&self.dir));
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
