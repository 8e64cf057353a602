//! Scenarios for export and import (contract C17): a registry with
//! something of everything ([`varied_registry`], questions with a shape
//! and their answers included) is exported, imported
//! into another store, and exported again, byte for byte the same; an
//! import refuses a store that is not empty, a damaged file and a newer
//! format, changing nothing; an export taken while others write is one
//! consistent snapshot; an imported store reads and works like the
//! original, its histories going on at the next seq and position.
//!
//! The per-backend scenarios run through `conformance_tests!`; the
//! cross-backend round trips (all six ordered pairs) are
//! `tests/tests/round_trip.rs`, over [`round_trip_between`].

use crate::fixtures::stored_wave;
use crate::fixtures::waited_now;
use lf_handoff_adapters::WatchFrom;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration as StdDuration;

use lf_handoff_adapters::{
    open_store, ArchiveSummary, ConflictKind, GenerateId, ListQuery, StorageConfig, Store,
    StoreError,
};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    Actor, Answer, HandoffEvent, HandoffEventKind, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffParent, InteractiveHandoffStatus, OpenOptions, StepKey,
};
use lf_handoff_domain::wave::Wave;
use serde_json::json;
use serde_json::Value;
use tempfile::TempDir;
use time::{Duration, OffsetDateTime};

use crate::fixtures::*;
use crate::hostile::{hostile_request, outcome_with, HOSTILE};
use crate::upgrade::Release;
use crate::worker::Worker;
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! archive_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [archive];
            AnyBackend: [
                c17_an_imported_store_reads_and_works_like_the_original,
                c17_import_refuses_a_non_empty_store_and_leaves_it_unchanged,
                c17_a_damaged_or_newer_file_is_refused_and_changes_nothing,
                c17_an_export_during_writes_is_one_consistent_snapshot,
                c17_upgraded_stores_of_earlier_releases_export_and_import_whole,
                c17_an_import_of_far_positions_keeps_later_events_after_them,
                c29_an_import_keeps_a_handoff_whose_environment_open_refuses,
            ],
        );
    };
}

/// The step of the task's finished handoff in [`varied_registry`].
pub const FINISHED_STEP: &str = "oauth-login@turn-17";

/// Builds, in `store`, a registry with something of everything: waves
/// named with hostile strings and handoffs carrying them in every field,
/// in every status (waiting, attached, completed, handed back, failed,
/// expired, and one due but not expired yet); a project and a task with its
/// PR; handoffs at steps; a wake claimed, and one taken over by the task's
/// next body; deadlines set, extended and passed; three actors; the
/// [`questions`] of C26. Takes about a second (deadlines must pass).
pub async fn varied_registry(store: &Store, dir: &Path) {
    let alice = store
        .clone()
        .with_actor(Actor::parse("alice 🦀 <ops@example.com> \"quoted\"").unwrap());
    let bob = store
        .clone()
        .with_actor(Actor::parse("bob@build-7 (pid 4242)").unwrap());
    // Hostile strings everywhere, one handoff each, in turn waiting,
    // attached, finished from attached and claimed, finished straight from
    // waiting.
    for (n, text) in HOSTILE.iter().enumerate() {
        let wave = Wave::new(WaveId::new(), (*text).to_string(), format!("/srv/{text}"));
        store.create_wave(&wave).await.unwrap();
        let (handoff, created) = store
            .open_interactive_handoff(hostile_request(&wave, text, n))
            .await
            .unwrap();
        assert!(created);
        match n % 4 {
            0 => {}
            1 => {
                alice.attach_interactive_handoff(&handoff.id).await.unwrap();
            }
            2 => {
                alice.attach_interactive_handoff(&handoff.id).await.unwrap();
                bob.finish_interactive_handoff(&handoff.id, &outcome_with(n, text), None)
                    .await
                    .unwrap();
                assert!(
                    store
                        .claim_interactive_handoff_wake(&handoff.id, 1)
                        .await
                        .unwrap()
                        .claimed
                );
            }
            _ => {
                bob.finish_interactive_handoff(&handoff.id, &outcome_with(n + 2, text), None)
                    .await
                    .unwrap();
            }
        }
    }

    // A project with a handoff of its own, and a task with its PR, at
    // steps: the first finished, handed back and claimed, then taken over
    // by the task's next body, which opens the next step with a deadline.
    let wave = new_wave(store, dir).await;
    let project = fresh_project(wave.id());
    store.create_project_session(&project).await.unwrap();
    let mut on_project = wave_request(&wave, dir);
    on_project.parent = InteractiveHandoffParent::Project(project.id.clone());
    on_project.provider_session_id = project.provider_session_id.clone();
    on_project.reason = "naïve café ✓ 日本語: approve the plan".into();
    let (planned, _) = store.open_interactive_handoff(on_project).await.unwrap();
    alice.attach_interactive_handoff(&planned.id).await.unwrap();
    let (task, pr) = fresh_task(&project, &dir.join("worktree"));
    store.create_task_session(&task, &pr).await.unwrap();
    let step = StepKey::parse(FINISHED_STEP).unwrap();
    let (login, _) = alice
        .open_interactive_handoff(
            task_request(&task).with_options(OpenOptions::at_step(step.clone())),
        )
        .await
        .unwrap();
    alice.attach_interactive_handoff(&login.id).await.unwrap();
    alice
        .finish_interactive_handoff(
            &login.id,
            &InteractiveHandoffOutcome::HandedBack {
                summary: "token in the vault ✓; continue from step 3".into(),
            },
            None,
        )
        .await
        .unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&login.id, 4)
            .await
            .unwrap()
            .claimed
    );
    let reference = InteractiveHandoffParent::Task(task.id.clone());
    store
        .record_body(&reference, body(5, Some("task-thread")))
        .await
        .unwrap();
    assert!(
        bob.claim_interactive_handoff_wake(&login.id, 5)
            .await
            .unwrap()
            .claimed
    );
    let mut next = task_request(&task);
    next.body_generation = 5;
    let options = OpenOptions {
        step: Some(StepKey::parse("deploy approval «prod» #2").unwrap()),
        expires_at: Some(OffsetDateTime::now_utc() + Duration::hours(2)),
        ..OpenOptions::default()
    };
    store
        .open_interactive_handoff(next.with_options(options.clone()))
        .await
        .unwrap();

    // A wave whose first body was recorded.
    let adopted = new_wave(store, dir).await;
    store
        .record_body(
            &InteractiveHandoffParent::Wave(adopted.id().clone()),
            body(2, None),
        )
        .await
        .unwrap();

    // Deadlines: one extended, one expired after an attach and then
    // claimed, one expired while waiting, one due but left unexpired.
    let soon = OffsetDateTime::now_utc() + Duration::milliseconds(300);
    let deadline = |at| OpenOptions {
        step: None,
        expires_at: Some(at),
        ..OpenOptions::default()
    };
    let mut opened = Vec::new();
    for at in [
        OffsetDateTime::now_utc() + Duration::hours(1),
        soon,
        soon,
        soon,
    ] {
        let wave = new_wave(store, dir).await;
        let (handoff, _) = store
            .open_interactive_handoff(wave_request(&wave, dir).with_options(deadline(at)))
            .await
            .unwrap();
        opened.push(handoff);
    }
    bob.extend_interactive_handoff(
        &opened[0].id,
        OffsetDateTime::now_utc() + Duration::hours(3),
    )
    .await
    .unwrap();
    alice
        .attach_interactive_handoff(&opened[1].id)
        .await
        .unwrap();
    let left = soon - OffsetDateTime::now_utc() + Duration::milliseconds(30);
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
    }
    for expiring in &opened[1..3] {
        let expired = waited_now(&bob, &expiring.id).await;
        assert_eq!(expired.outcome, Some(InteractiveHandoffOutcome::Expired));
    }
    assert!(
        store
            .claim_interactive_handoff_wake(&opened[1].id, 1)
            .await
            .unwrap()
            .claimed
    );
    let due = store
        .get_interactive_handoff(&opened[3].id)
        .await
        .unwrap()
        .unwrap();
    assert!(due.is_due(OffsetDateTime::now_utc()));

    // Questions with a shape (C26), answered and not.
    questions(store, dir).await;
}

/// How many waves [`questions`] creates, one per handoff.
const QUESTIONS: u64 = 5;

/// Builds, in `store`, handoffs that ask in every way and end in every
/// way: choices completed with an answer and claimed, the sample form
/// handed back with its answer, one expired with its `on_expiry`, one
/// waiting with a form and an `on_expiry`, one attached with choices.
pub(crate) async fn questions(store: &Store, dir: &Path) {
    let choices = ask(store, dir, |r| {
        r.choices(&["allow=Allow «prod» ✓", "deny=Deny"])
    })
    .await;
    store
        .finish_interactive_handoff(
            &choices.id,
            &InteractiveHandoffOutcome::Completed {
                summary: "allowed".into(),
            },
            Some(&Answer::choice("allow")),
        )
        .await
        .unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&choices.id, 1)
            .await
            .unwrap()
            .claimed
    );
    let form = ask(store, dir, |r| r.form(sample_form())).await;
    store.attach_interactive_handoff(&form.id).await.unwrap();
    store
        .finish_interactive_handoff(
            &form.id,
            &InteractiveHandoffOutcome::HandedBack {
                summary: "see the budget".into(),
            },
            Some(&sample_form_answer()),
        )
        .await
        .unwrap();
    let expiring = ask(store, dir, |r| {
        r.choices(&["allow", "deny"])
            .on_expiry(Answer::choice("deny"))
            .expires_at(OffsetDateTime::now_utc() + Duration::milliseconds(300))
    })
    .await;
    ask(store, dir, |r| {
        r.form(sample_form())
            .on_expiry(Answer(
                json!({"budget": 0, "branch": "main", "ratio": 3.3000000000000003}),
            ))
            .expires_at(OffsetDateTime::now_utc() + Duration::hours(2))
    })
    .await;
    let attached = ask(store, dir, |r| r.choices(&["a", "b", "c"])).await;
    store
        .attach_interactive_handoff(&attached.id)
        .await
        .unwrap();
    let left =
        expiring.expires_at.unwrap() - OffsetDateTime::now_utc() + Duration::milliseconds(30);
    if left.is_positive() {
        tokio::time::sleep(left.unsigned_abs()).await;
    }
    let expired = waited_now(store, &expiring.id).await;
    assert_eq!(expired.status, InteractiveHandoffStatus::Expired);
    assert_eq!(expired.answer, Some(Answer::choice("deny")));
}

/// The export of `store`.
pub async fn export(store: &Store) -> Vec<u8> {
    let mut out = Vec::new();
    let summary = store.export(&mut out, None).await.unwrap();
    let lines = out.iter().filter(|&&b| b == b'\n').count() as u64;
    assert_eq!(
        lines,
        summary.records() + 2,
        "a header, the records, an end"
    );
    out
}

/// The export as text, for messages.
fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

/// Asserts two exports are the same bytes, naming the first line that
/// differs.
#[track_caller]
pub fn assert_same_export(again: &[u8], first: &[u8], what: &str) {
    if again == first {
        return;
    }
    let (a, b) = (text(again), text(first));
    let line = a
        .lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or_else(|| a.lines().count().min(b.lines().count()));
    panic!(
        "{what}: the exports differ first at line {}:\n  got:      {:?}\n  expected: {:?}",
        line + 1,
        a.lines().nth(line),
        b.lines().nth(line)
    );
}

/// The lines of an export, parsed.
fn lines(bytes: &[u8]) -> Vec<Value> {
    text(bytes)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Asserts an export is one consistent state of a registry whose
/// handoffs all have their whole history (every one was opened with
/// history): besides what the import's checks refuse, each handoff's
/// version is its event count, and its last event leaves it in the
/// status it has, so no handoff was read at another moment than its
/// events.
#[track_caller]
pub fn assert_consistent(bytes: &[u8]) {
    let mut handoffs: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut last_status: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut counted = BTreeMap::<&str, u64>::new();
    let all = lines(bytes);
    for line in &all[1..all.len() - 1] {
        let (kind, body) = line.as_object().unwrap().iter().next().unwrap();
        *counted.entry(kind.as_str()).or_default() += 1;
        match kind.as_str() {
            "handoff" => {
                let id = body["record"]["id"].as_str().unwrap().to_string();
                let events = body["events"].as_u64().unwrap();
                assert_eq!(
                    body["version"].as_u64().unwrap(),
                    events,
                    "handoff {id}: one event per change"
                );
                let status = body["record"]["status"].as_str().unwrap().to_string();
                handoffs.insert(id, (events, status));
            }
            "event" => {
                let id = body["handoff_id"].as_str().unwrap().to_string();
                let seq = body["seq"].as_u64().unwrap();
                let status = body["status_after"].as_str().unwrap().to_string();
                let before = last_status.insert(id.clone(), (seq, status));
                assert_eq!(
                    before.map_or(0, |(seq, _)| seq) + 1,
                    seq,
                    "handoff {id}'s events are contiguous"
                );
                assert!(handoffs.contains_key(&id), "event of handoff {id} is alone");
            }
            _ => {}
        }
    }
    for (id, (events, status)) in &handoffs {
        let (seq, after) = last_status
            .get(id)
            .unwrap_or_else(|| panic!("handoff {id} has no events"));
        assert_eq!(seq, events, "handoff {id}: all its events are there");
        assert_eq!(after, status, "handoff {id}: its last event is its status");
    }
    let end = &all[all.len() - 1]["end"];
    assert_eq!(end["handoffs"].as_u64(), Some(handoffs.len() as u64));
    assert_eq!(
        end["events"].as_u64(),
        Some(counted.get("event").copied().unwrap_or(0))
    );
}

/// A fresh store of `backend` other than its main one, named `name`.
pub(crate) async fn other(
    backend: &dyn Backend,
    dir: &TempDir,
    name: &str,
) -> (StorageConfig, Store) {
    let config = backend.other_config(name, dir.path().join(name));
    let store = open_store(&config).await.unwrap();
    (config, store)
}

/// The main store of `backend` in `dir`, with a varied registry.
async fn populated(backend: &dyn Backend, dir: &TempDir) -> Store {
    let store = open_store(&backend.config(location(dir.path())))
        .await
        .unwrap();
    varied_registry(&store, dir.path()).await;
    store
}

#[track_caller]
fn assert_not_empty<T: std::fmt::Debug>(result: Result<T, StoreError>, what: &str) {
    match result {
        Err(StoreError::Conflict {
            kind: ConflictKind::NotEmpty,
            ..
        }) => {}
        other => panic!("{what}: expected a not_empty conflict, got {other:?}"),
    }
}

/// Every handoff of `store` with its history, every parent and PR.
async fn everything(
    store: &Store,
) -> (
    Vec<InteractiveHandoff>,
    Vec<Vec<lf_handoff_domain::interactive_handoff::HandoffEvent>>,
    Vec<InteractiveHandoff>,
) {
    let all = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    let mut histories = Vec::new();
    for handoff in &all {
        histories.push(store.history(&handoff.id).await.unwrap());
    }
    let active = store
        .list_interactive_handoffs(ListQuery {
            active_only: true,
            ..ListQuery::default()
        })
        .await
        .unwrap();
    (all, histories, active)
}

/// C17: exported, imported into another store of the same backend and
/// exported again, a registry is the same bytes; the imported store
/// answers every read as the original (lists, histories, parents, PRs)
/// and its indexes work: the due handoff is swept, a step replays its
/// handoff, the active slot replays; a handoff goes on through attach,
/// finish and claim with its history at the next seq, and new events take
/// the positions after the file's last one.
pub async fn c17_an_imported_store_reads_and_works_like_the_original(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let source = populated(backend, &dir).await;
    let file = export(&source).await;
    assert_consistent(&file);
    let (_, target) = other(backend, &dir, "copy").await;
    let summary = target.import(&mut file.as_slice(), None).await.unwrap();
    assert_eq!(
        summary.parents,
        HOSTILE.len() as u64 + 3 + 1 + 4 + QUESTIONS
    );
    assert_eq!(summary.task_prs, 1);
    assert_same_export(&export(&target).await, &file, "export, import, export");

    let (all, histories, active) = everything(&source).await;
    assert_eq!(everything(&target).await, (all.clone(), histories, active));
    for handoff in &all {
        let parent = source.get_parent(&handoff.parent).await.unwrap();
        assert!(parent.is_some());
        assert_eq!(target.get_parent(&handoff.parent).await.unwrap(), parent);
    }
    let task = all
        .iter()
        .find_map(|h| match &h.parent {
            InteractiveHandoffParent::Task(id) => Some(id.clone()),
            _ => None,
        })
        .unwrap();
    let Some(lf_handoff_domain::parent::Parent::Task(task)) = target
        .get_parent(&InteractiveHandoffParent::Task(task))
        .await
        .unwrap()
    else {
        panic!("the task came across");
    };
    let the_pr = lines(&file)
        .into_iter()
        .find_map(|line| line.get("task_pr").cloned())
        .unwrap();
    let pr_id = lf_handoff_domain::id::TaskPrId::parse(the_pr["id"].as_str().unwrap()).unwrap();
    assert_eq!(
        target.get_task_pr(&pr_id).await.unwrap(),
        source.get_task_pr(&pr_id).await.unwrap()
    );

    // The due index: the one due handoff is swept.
    let swept = target.expire_due().await.unwrap();
    assert_eq!(swept.len(), 1, "{swept:?}");
    // Every later event comes after the last position given (on SQLite
    // and sled the very next one; on PostgreSQL, whose positions are
    // transaction ids, a later one).
    let events = target.history(&swept[0].id).await.unwrap();
    let last = events.last().unwrap();
    assert_eq!((last.kind, last.seq), (HandoffEventKind::Expired, 2));
    assert!(last.position > summary.last_position, "{last:?}");
    let mut position = last.position;
    // The step index and the active slot: replays, writing nothing.
    let mut at_five = task_request(&task);
    at_five.body_generation = 5;
    let step = StepKey::parse(FINISHED_STEP).unwrap();
    let (finished, created) = target
        .open_interactive_handoff(
            at_five
                .clone()
                .with_options(OpenOptions::at_step(step.clone())),
        )
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(finished.step, Some(step));
    let (busy, created) = target.open_interactive_handoff(at_five).await.unwrap();
    assert!(!created && busy.is_active(), "{busy:?}");
    // A waiting handoff goes on: its history continues at the next seq and
    // the next positions.
    let waiting = all
        .iter()
        .find(|h| h.status.as_str() == "waiting" && h.expires_at.is_none() && h.step.is_none())
        .unwrap();
    target
        .attach_interactive_handoff(&waiting.id)
        .await
        .unwrap();
    target
        .finish_interactive_handoff(&waiting.id, &outcome(0), None)
        .await
        .unwrap();
    assert!(
        target
            .claim_interactive_handoff_wake(&waiting.id, 1)
            .await
            .unwrap()
            .claimed
    );
    let history = target.history(&waiting.id).await.unwrap();
    let seqs: Vec<u64> = history[1..].iter().map(|e| e.seq).collect();
    assert_eq!(seqs, vec![2, 3, 4]);
    for event in &history[1..] {
        assert!(event.position > position, "{history:#?}");
        position = event.position;
    }
    // A new handoff on an imported parent gets the next position.
    let wave = match &waiting.parent {
        InteractiveHandoffParent::Wave(id) => stored_wave(&target, id).await.unwrap(),
        other => panic!("a wave handoff: {other}"),
    };
    let (reopened, created) = target
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    assert!(created);
    let opened = target.history(&reopened.id).await.unwrap();
    assert_eq!(opened[0].seq, 1);
    assert!(opened[0].position > position, "{opened:?}");
    // And the original is untouched by all of it.
    assert_same_export(&export(&source).await, &file, "the source");

    // A last position past the last event's (the newest events were
    // removed before the export) is kept: the next event takes the one
    // after it, never one given before.
    let last = |n: u64| format!("\"last_position\":{n}}}}}");
    let ahead_file = text(&file).replace(
        &last(summary.last_position),
        &last(summary.last_position + 100),
    );
    assert_ne!(ahead_file.as_bytes(), file.as_slice());
    let (_, ahead) = other(backend, &dir, "ahead").await;
    ahead
        .import(&mut ahead_file.as_bytes(), None)
        .await
        .unwrap();
    assert_same_export(
        &export(&ahead).await,
        ahead_file.as_bytes(),
        "a later last position",
    );
    let wave = new_wave(&ahead, dir.path()).await;
    let (fresh, _) = ahead
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    let opened = ahead.history(&fresh.id).await.unwrap();
    assert!(
        opened[0].position > summary.last_position + 100,
        "{opened:?}"
    );
}

/// C17: an import into a store that holds anything, even one wave, is a
/// `not_empty` conflict and changes nothing; so is importing a store's
/// export into itself.
pub async fn c17_import_refuses_a_non_empty_store_and_leaves_it_unchanged(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let source = populated(backend, &dir).await;
    let file = export(&source).await;
    assert_not_empty(
        source.import(&mut file.as_slice(), None).await,
        "into itself",
    );
    assert_same_export(&export(&source).await, &file, "the refused source");

    let (_, target) = other(backend, &dir, "busy").await;
    new_wave(&target, dir.path()).await;
    let before = export(&target).await;
    assert_not_empty(
        target.import(&mut file.as_slice(), None).await,
        "over a wave",
    );
    assert_same_export(&export(&target).await, &before, "the refused target");
    // Whatever the input holds: the store is looked at first.
    assert_not_empty(target.import(&mut &b""[..], None).await, "an empty input");
    assert_not_empty(
        target.import(&mut &b"not an export\n"[..], None).await,
        "a damaged input",
    );
    assert_same_export(&export(&target).await, &before, "the refused target");
}

/// The export `file` with line `n` (1-based) replaced by `with`, or left
/// out when `with` is `None`.
fn edited(file: &[u8], n: usize, with: Option<&str>) -> Vec<u8> {
    let mut out = String::new();
    for (i, line) in text(file).lines().enumerate() {
        if i + 1 == n {
            if let Some(with) = with {
                out.push_str(with);
                out.push('\n');
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.into_bytes()
}

/// C17: a file that is damaged (a line that is not JSON, an event left
/// out, a record twice, counts that disagree, the end cut off, an empty or
/// foreign file) is refused as `InvalidInput` naming the line, a file of a
/// newer format version as `InvalidInput` saying so, and none of them
/// changes the store, which then imports the good file.
pub async fn c17_a_damaged_or_newer_file_is_refused_and_changes_nothing(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let source = populated(backend, &dir).await;
    let file = export(&source).await;
    let count = text(&file).lines().count();
    let line = |n: usize| text(&file).lines().nth(n - 1).unwrap().to_string();
    let first_event = (1..=count)
        .find(|&n| line(n).starts_with("{\"event\""))
        .unwrap();
    let end = line(count).replace("\"events\":", "\"events\":1");
    let cases: Vec<(String, Vec<u8>, Option<String>)> = vec![
        (
            "a line that is not JSON, late in the file".into(),
            edited(&file, count - 1, Some("{\"event\": {not json")),
            Some(format!("line {}", count - 1)),
        ),
        (
            "an event left out".into(),
            edited(&file, first_event + 1, None),
            Some(format!("line {}", first_event + 1)),
        ),
        (
            "a handoff twice".into(),
            edited(&file, first_event, Some(&line(first_event - 1))),
            Some(format!("line {first_event}")),
        ),
        (
            "an end line counting other events".into(),
            edited(&file, count, Some(&end)),
            Some(format!("line {count}")),
        ),
        (
            "the end line cut off".into(),
            edited(&file, count, None),
            Some("cut short".into()),
        ),
        ("an empty file".into(), Vec::new(), Some("empty".into())),
        (
            "another program's file".into(),
            b"id,name\n1,someone\n".to_vec(),
            Some("line 1".into()),
        ),
        (
            "a newer format version".into(),
            edited(
                &file,
                1,
                Some("{\"format\":\"lf-handoff-export\",\"version\":3}"),
            ),
            Some("newer".into()),
        ),
    ];
    let (target_config, target) = other(backend, &dir, "target").await;
    let empty = export(&target).await;
    for (what, bytes, names) in cases {
        match target.import(&mut bytes.as_slice(), None).await {
            Err(StoreError::InvalidInput(message)) => {
                if let Some(names) = names {
                    assert!(message.contains(&names), "{what}: {message}");
                }
            }
            other => panic!("{what}: expected InvalidInput, got {other:?}"),
        }
        assert_same_export(&export(&target).await, &empty, &what);
        // It opens again (a sled store left marked would be refused).
        drop(open_store(&target_config).await.unwrap());
    }
    target.import(&mut file.as_slice(), None).await.unwrap();
    assert_same_export(&export(&target).await, &file, "the good file");
}

/// C17: exports taken while others write (another process on a backend
/// that shares its store between processes, other handles of this process
/// on sled) are each one consistent state, which imports and exports
/// again unchanged.
pub async fn c17_an_export_during_writes_is_one_consistent_snapshot(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = backend.config(location(dir.path()));
    let store = open_store(&config).await.unwrap();
    let churn_dir = dir.path().join("churn");
    std::fs::create_dir_all(&churn_dir).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut worker = None;
    let mut local = Vec::new();
    if backend.shares_across_processes() {
        let mut churn = Worker::spawn(
            &config.url(),
            &["churn".into(), churn_dir.display().to_string()],
        );
        assert_eq!(churn.line().await.as_deref(), Some("ready"));
        for _ in 0..10 {
            churn.line().await.unwrap();
        }
        worker = Some(churn);
    } else {
        for n in 0..3 {
            let handle = open_store(&config).await.unwrap();
            let stop = stop.clone();
            let churn_dir = churn_dir.clone();
            local.push(tokio::spawn(async move {
                while !stop.load(Ordering::SeqCst) {
                    lifecycle(&handle, &churn_dir, n).await;
                }
            }));
        }
        tokio::time::sleep(StdDuration::from_millis(50)).await;
    }
    // Many exports in a row, so writes land during some of them.
    let mut exports = Vec::new();
    for _ in 0..EXPORTS_DURING_WRITES {
        exports.push(export(&store).await);
        tokio::time::sleep(StdDuration::from_millis(5)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for task in local {
        task.await.unwrap();
    }
    if let Some(mut churn) = worker {
        churn.child.start_kill().unwrap();
        churn.child.wait().await.unwrap();
    }
    for file in &exports {
        assert_consistent(file);
    }
    let handoffs = |file: &[u8]| lines(file).last().unwrap()["end"]["handoffs"].as_u64();
    let last = &exports[EXPORTS_DURING_WRITES - 1];
    assert!(
        handoffs(last) > handoffs(&exports[0]),
        "the writers went on between the exports"
    );
    let (_, copy) = other(backend, &dir, "copy").await;
    copy.import(&mut last.as_slice(), None).await.unwrap();
    assert_same_export(&export(&copy).await, last, "a snapshot, imported");
}

/// C17: a store of each earlier release, upgraded by this build, exports
/// whole (its handoffs without history, from releases before 0.3.0, have
/// no events and a counter of 0,
/// its records of older formats read as this one's) and imports into a
/// new store of the same backend, which exports the same bytes.
pub async fn c17_upgraded_stores_of_earlier_releases_export_and_import_whole(
    backend: &dyn Backend,
) {
    for release in Release::ALL {
        let dir = tempfile::tempdir().unwrap();
        let config = backend.release_store(release, dir.path()).await;
        let store = open_store(&config).await.unwrap();
        let file = export(&store).await;
        let all = lines(&file);
        let end = &all[all.len() - 1]["end"];
        assert!(end["handoffs"].as_u64().unwrap() > 0, "{release}: {end}");
        let events = end["events"].as_u64().unwrap();
        assert_eq!(
            events == 0,
            !release.has_history(),
            "{release}: {events} events (a history only from a release that wrote one)"
        );
        let (_, copy) = other(backend, &dir, &format!("copy{}", release.number())).await;
        copy.import(&mut file.as_slice(), None).await.unwrap();
        assert_same_export(&export(&copy).await, &file, &format!("{release}"));
    }
}

/// How many exports [`c17_an_export_during_writes_is_one_consistent_snapshot`]
/// takes while others write.
const EXPORTS_DURING_WRITES: usize = 25;

/// C17 across backends: a varied registry built in a store of `from`,
/// exported, imported into a store of `to` and exported again is the same
/// bytes; imported back into another store of `from`, it still is. Skips,
/// saying why, when either backend cannot run here.
pub async fn round_trip_between<F, T>(from: F, to: T)
where
    F: Future<Output = Result<Box<dyn Backend>, String>>,
    T: Future<Output = Result<Box<dyn Backend>, String>>,
{
    let from: Arc<dyn Backend> = match from.await {
        Ok(backend) => Arc::from(backend),
        Err(reason) => return skip(&reason),
    };
    let to: Arc<dyn Backend> = match to.await {
        Ok(backend) => Arc::from(backend),
        Err(reason) => {
            from.cleanup().await;
            return skip(&reason);
        }
    };
    let (source, target) = (from.clone(), to.clone());
    let outcome = tokio::spawn(async move {
        let dir = tempfile::tempdir().unwrap();
        let store = populated(&*source, &dir).await;
        let file = export(&store).await;
        assert_consistent(&file);
        let (_, there) = other(&*target, &dir, "target").await;
        let summary: ArchiveSummary = there.import(&mut file.as_slice(), None).await.unwrap();
        assert!(summary.events > summary.handoffs, "{summary:?}");
        let what = format!("{} to {}", source.name(), target.name());
        let again = export(&there).await;
        assert_same_export(&again, &file, &what);
        let (_, back) = other(&*source, &dir, "back").await;
        back.import(&mut again.as_slice(), None).await.unwrap();
        assert_same_export(&export(&back).await, &file, &format!("{what} and back"));
        // The histories came across whole.
        let ids: BTreeSet<InteractiveHandoffId> = store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap()
            .into_iter()
            .map(|h| h.id)
            .collect();
        for id in &ids {
            assert_eq!(
                there.history(id).await.unwrap(),
                store.history(id).await.unwrap()
            );
        }
    })
    .await;
    from.cleanup().await;
    to.cleanup().await;
    if let Err(error) = outcome {
        if error.is_panic() {
            std::panic::resume_unwind(error.into_panic());
        }
        panic!("scenario did not finish: {error}");
    }
}

fn skip(reason: &str) {
    let test = std::thread::current().name().unwrap_or("test").to_string();
    let _ = writeln!(std::io::stderr(), "skipped {test}: {reason}");
    println!("skipped: {reason}");
}

/// C16 with C17: a file whose positions are beyond anything this store
/// gives (from a busier server) is imported with its events in the same
/// order, and every later event comes after all of them, so a watcher
/// from 0 sees the history in order.
pub async fn c17_an_import_of_far_positions_keeps_later_events_after_them(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let store = populated(backend, &dir).await;
    let file = export(&store).await;
    const FAR: u64 = 1 << 50;
    let shifted: String = text(&file)
        .lines()
        .map(|line| {
            let mut value: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(position) = value.pointer_mut("/event/position") {
                *position = (position.as_u64().unwrap() + FAR).into();
            }
            if let Some(last) = value.pointer_mut("/end/last_position") {
                *last = (last.as_u64().unwrap() + FAR).into();
            }
            serde_json::to_string(&value).unwrap() + "\n"
        })
        .collect();
    let (_, there) = other(backend, &dir, "far").await;
    there.import(&mut shifted.as_bytes(), None).await.unwrap();
    let mut watcher = there
        .watch(
            WatchFrom::After(0),
            lf_handoff_adapters::WatchFilter::default(),
        )
        .await
        .unwrap();
    let mut imported = Vec::new();
    while let Some(event) = watcher
        .next_within(std::time::Duration::from_millis(200))
        .await
        .unwrap()
    {
        imported.push(event);
    }
    let original = crate::watch::all_events(&store).await;
    let key = |e: &HandoffEvent| (e.handoff_id.clone(), e.seq, e.kind);
    assert_eq!(
        imported.iter().map(key).collect::<Vec<_>>(),
        original.iter().map(key).collect::<Vec<_>>(),
        "the same events in the same order"
    );
    let wave = new_wave(&there, dir.path()).await;
    let (fresh, _) = there
        .open_interactive_handoff(wave_request(&wave, dir.path()))
        .await
        .unwrap();
    let next = watcher
        .next_within(std::time::Duration::from_secs(10))
        .await
        .unwrap()
        .expect("the new open is watched");
    assert_eq!(next.handoff_id, fresh.id);
    assert!(next.position > imported.last().unwrap().position);
}

/// C29 with C17: an export of an earlier release's store may hold a
/// handoff whose environment `open` now refuses (`BASH_ENV` here); an
/// import keeps it whole, as it keeps everything, and the store reads,
/// attaches and exports it (the command line's `attach` is what refuses
/// to run it).
pub async fn c29_an_import_keeps_a_handoff_whose_environment_open_refuses(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let source = open_store(&backend.config(location(dir.path())))
        .await
        .unwrap();
    let handoff = open_on_new_wave(&source, dir.path()).await;
    let file = String::from_utf8(export(&source).await).unwrap();
    let older = file.replace(
        r#""environment":{"LF_HOME":"/tmp/lf"}"#,
        r#""environment":{"BASH_ENV":"/tmp/x","LF_HOME":"/tmp/lf"}"#,
    );
    assert_ne!(older, file, "the export names the fixture's environment");
    let (_, target) = other(backend, &dir, "older").await;
    target.import(&mut older.as_bytes(), None).await.unwrap();
    let stored = target
        .get_interactive_handoff(&handoff.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.environment["BASH_ENV"], "/tmp/x");
    assert_same_export(
        &export(&target).await,
        older.as_bytes(),
        "the imported store",
    );
    let attached = target
        .attach_interactive_handoff(&handoff.id)
        .await
        .unwrap();
    assert_eq!(attached.environment, stored.environment);
}
