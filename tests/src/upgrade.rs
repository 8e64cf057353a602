//! Upgrading stores written by earlier releases (docs/CONTRACT.md,
//! "Upgrading stores"): each backend opens a copy of its fixture store of
//! each [`Release`] (`tests/fixtures/v1` to `v4`, each made by the
//! `make.sh` there), finds every record exactly as the manifests beside it
//! say, and then runs a full lifecycle on it, a question with choices
//! (C26) included.

use crate::fixtures::OpenRequest;
use crate::fixtures::{stored_project, stored_task, stored_wave};
use lf_handoff_adapters::PruneOptions;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use lf_handoff_adapters::ports::PruneCount;
use lf_handoff_adapters::{open_store, DeliveryCursor, ListQuery, Store};
use lf_handoff_domain::id::{InteractiveHandoffId, ProjectSessionId, TaskSessionId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    refused_env_reason, Answer, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffStatus, StepKey,
};
use serde_json::Value;

use crate::rng::Rng;
use crate::worker::Worker;
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! upgrade_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [upgrade];
            AnyBackend: [
                upgrades_a_store_of_release_1_keeping_every_record,
                upgrades_a_store_of_release_2_keeping_every_record,
                upgrades_a_store_of_release_3_keeping_every_record,
                upgrades_a_store_of_release_4_keeping_every_record,
                an_upgraded_store_of_release_1_runs_a_full_lifecycle_and_reopens,
                an_upgraded_store_of_release_2_runs_a_full_lifecycle_and_reopens,
                an_upgraded_store_of_release_3_runs_a_full_lifecycle_and_reopens,
                an_upgraded_store_of_release_4_runs_a_full_lifecycle_and_reopens,
                a_kill_9_during_the_upgrade_of_release_1_leaves_an_upgradable_store,
                a_kill_9_during_the_upgrade_of_release_2_leaves_an_upgradable_store,
                a_kill_9_during_the_upgrade_of_release_3_leaves_an_upgradable_store,
                a_kill_9_during_the_upgrade_of_release_4_leaves_an_upgradable_store,
            ],
        );
    };
}

/// The fields of a handoff that answer specs (C26) added, `null` in every
/// upgraded record.
const UNANSWERED: [&str; 4] = ["choices", "form", "on_expiry", "answer"];

/// A release whose stores `tests/fixtures` holds, one directory each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Release {
    /// 0.1.0 (`tests/fixtures/v1`): SQL schema version 1, sled store and
    /// record format 1; no step keys.
    V1,
    /// 0.2.0 (`tests/fixtures/v2`), the step-key release: SQL schema
    /// version 2, sled store and record format 2.
    V2,
    /// 0.3.0 (`tests/fixtures/v3`), deadlines and history: SQL schema
    /// version 3, sled store and record format 3. Its handoffs have
    /// histories.
    V3,
    /// The 0.3 series' last build (`tests/fixtures/v4`, main at 149f0d1),
    /// the last before answer specs (C26): it calls itself 0.3.0 but
    /// writes SQL schema version 5 (with C23's delivery cursors and C29's
    /// revocations) and sled store and record format 3.
    V4,
}

impl Release {
    /// Every release with fixtures, oldest first.
    pub const ALL: [Release; 4] = [Release::V1, Release::V2, Release::V3, Release::V4];

    /// The fixture number: 1 for `tests/fixtures/v1`.
    pub fn number(self) -> u32 {
        match self {
            Release::V1 => 1,
            Release::V2 => 2,
            Release::V3 => 3,
            Release::V4 => 4,
        }
    }

    /// The release's version, as its `lf-handoff --version` prints it:
    /// the 0.3 series' last build still printed `0.3.0`, so `0.3.0` names
    /// [`Release::V3`] when parsed and `4` names that build.
    pub fn version(self) -> &'static str {
        match self {
            Release::V1 => "0.1.0",
            Release::V2 => "0.2.0",
            Release::V3 | Release::V4 => "0.3.0",
        }
    }

    /// The PostgreSQL schema its `postgres.sql` dump creates and fills.
    pub fn postgres_schema(self) -> &'static str {
        match self {
            Release::V1 => "lf_fixture_v1",
            Release::V2 => "lf_fixture_v2",
            Release::V3 => "lf_fixture_v3",
            Release::V4 => "lf_fixture_v4",
        }
    }

    /// The fields of a handoff (as JSON) that later releases added, each
    /// with the value it has in a record of this release once upgraded to
    /// the current one. This release's `handoffs` manifests lack them.
    pub fn later_handoff_fields(self) -> Vec<(&'static str, Value)> {
        let mut fields = match self {
            Release::V1 => vec![("step", Value::Null)],
            Release::V2 | Release::V3 | Release::V4 => Vec::new(),
        };
        // Release 0.3.0: deadlines (C14).
        if self < Release::V3 {
            fields.push(("expires_at", Value::Null));
        }
        // This build: answer specs and answers (C26).
        fields.extend(UNANSWERED.map(|field| (field, Value::Null)));
        fields
    }

    /// Whether this release wrote a history (C15, release 0.3.0).
    pub fn has_history(self) -> bool {
        self >= Release::V3
    }

    /// The same for a census row (`list --json`, the `list` manifests).
    pub fn later_row_fields(self) -> Vec<(&'static str, Value)> {
        let mut fields = match self {
            Release::V1 => vec![("step", Value::Null)],
            Release::V2 | Release::V3 | Release::V4 => Vec::new(),
        };
        if self < Release::V3 {
            fields.push(("expires_at", Value::Null));
            fields.push(("due", Value::Bool(false)));
        }
        fields.push(("asks", Value::Null));
        fields.push(("answer", Value::Null));
        fields
    }

    /// The same for a history event (C15): every release with a history
    /// wrote events without an `answer` (C26), which upgraded ones have as
    /// `null`.
    pub fn later_event_fields(self) -> Vec<(&'static str, Value)> {
        vec![("answer", Value::Null)]
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Release::V4 => f.write_str("the 0.3 series' last build (SQL schema 5, sled format 3)"),
            _ => write!(f, "release {}", self.version()),
        }
    }
}

impl FromStr for Release {
    type Err = String;

    /// `1` or `0.1.0`, `2` or `0.2.0`, `3` or `0.3.0`, `4`.
    fn from_str(text: &str) -> Result<Self, String> {
        Release::ALL
            .into_iter()
            .find(|release| text == release.number().to_string() || text == release.version())
            .ok_or_else(|| {
                let known: Vec<String> = Release::ALL
                    .iter()
                    .map(|release| format!("{} ({release})", release.number()))
                    .collect();
                format!(
                    "no fixtures of release {text:?}; known: {}",
                    known.join(", ")
                )
            })
    }
}

/// The directory of `release`'s fixtures (`tests/fixtures/v1`, ...).
pub fn fixtures(release: Release) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fixtures/v{}", release.number()))
}

fn manifest(backend: &dyn Backend, release: Release, what: &str) -> Value {
    let path = fixtures(release).join(format!("{}.{what}.json", backend.name()));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn array(value: &Value) -> &Vec<Value> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("expected a JSON array, got {value}"))
}

fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not text in {value}"))
}

/// `value` (a handoff or a census row as JSON) without the `later` fields
/// (those added after `release`), each checked to have the value an
/// upgraded record of `release` has, so it compares with `release`'s
/// manifests.
fn as_written_by(release: Release, later: Vec<(&str, Value)>, mut value: Value) -> Value {
    let fields = value.as_object_mut().unwrap();
    for (field, upgraded) in later {
        assert_eq!(
            fields.remove(field),
            Some(upgraded),
            "{field} of a record of {release}"
        );
    }
    value
}

/// Checks every handoff and parent of `release`'s manifests against `store`.
async fn assert_as_written(backend: &dyn Backend, release: Release, store: &Store) {
    let handoffs = manifest(backend, release, "handoffs");
    for expected in array(&handoffs) {
        let id = InteractiveHandoffId::parse(text(expected, "id")).unwrap();
        let stored = store
            .get_interactive_handoff(&id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("handoff {id} is gone"));
        let stored = serde_json::to_value(&stored).unwrap();
        let stored = as_written_by(release, release.later_handoff_fields(), stored);
        // `status --json` of 0.3.0 on prints `due`, which is computed when
        // read, not stored: none of the fixture's handoffs was due.
        let mut expected = expected.clone();
        if let Some(due) = expected.as_object_mut().unwrap().remove("due") {
            assert_eq!(due, Value::Bool(false), "due of handoff {id}");
        }
        assert_eq!(stored, expected, "handoff {id}");
    }
    let listed: Vec<String> = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap()
        .iter()
        .map(|handoff| handoff.id.to_string())
        .collect();
    let written: Vec<&str> = array(&handoffs).iter().map(|h| text(h, "id")).collect();
    assert_eq!(listed, written, "list order");

    // The census rows, as `list --json` printed them (but for their age).
    let rows = manifest(backend, release, "list");
    let stored = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert_eq!(stored.len(), array(&rows).len());
    for (handoff, expected) in stored.iter().zip(array(&rows)) {
        let mut row = serde_json::to_value(handoff.list_row(handoff.updated_at)).unwrap();
        // The rows of releases 0.1.0 to 0.3.0 named the id `session_id`
        // only; `id`, the same id, came after them.
        let id = row.as_object_mut().unwrap().remove("id");
        assert_eq!(id.as_ref(), row.get("session_id"), "{}", handoff.id);
        let mut row = as_written_by(release, release.later_row_fields(), row);
        row.as_object_mut().unwrap().remove("age_secs");
        let mut expected = expected.clone();
        let written = expected.as_object_mut().unwrap();
        written.remove("age_secs");
        if let Some(written_id) = written.remove("id") {
            assert_eq!(Some(&written_id), id.as_ref(), "id of {}", handoff.id);
        }
        assert_eq!(row, expected, "census row of {}", handoff.id);
    }

    // The list filters of C17 serve the old records too (on sled, from
    // the index trees the upgrade filled), and a prune would remove the
    // claimed ones, which have no history (C15).
    let all = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    for handoff in &all {
        for query in [
            ListQuery {
                statuses: vec![handoff.status],
                ..ListQuery::default()
            },
            ListQuery {
                home: Some(handoff.home.clone()),
                ..ListQuery::default()
            },
            ListQuery {
                statuses: vec![handoff.status],
                home: Some(handoff.home.clone()),
                created_before: Some(handoff.created_at + time::Duration::microseconds(1)),
                ..ListQuery::default()
            },
        ] {
            let listed = store
                .list_interactive_handoffs(query.clone())
                .await
                .unwrap();
            let expected: Vec<_> = all.iter().filter(|h| query.matches(h)).cloned().collect();
            assert!(listed.contains(handoff), "{query:?}");
            assert_eq!(listed, expected, "{query:?}");
        }
    }
    let claimed: Vec<_> = all.iter().filter(|h| h.wake_claimed_at.is_some()).collect();
    assert!(
        !claimed.is_empty(),
        "the fixture of {release} has a claimed wake"
    );
    let mut events = 0;
    for handoff in &claimed {
        let history = store.history(&handoff.id).await.unwrap();
        assert_eq!(
            history.is_empty(),
            !release.has_history(),
            "the history of {} from {release}",
            handoff.id
        );
        events += history.len() as u64;
    }
    // Every event the release wrote reads back with the fields added
    // after it, as an upgraded event has them.
    for handoff in &all {
        for event in store.history(&handoff.id).await.unwrap() {
            let value = serde_json::to_value(&event).unwrap();
            as_written_by(release, release.later_event_fields(), value);
        }
    }
    let later = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    assert_eq!(
        store
            .prune(PruneOptions::finished_before(later).dry_run())
            .await
            .unwrap(),
        PruneCount {
            handoffs: claimed.len() as u64,
            events,
        }
    );

    let task_after_body = manifest(backend, release, "task-body");
    for created in array(&manifest(backend, release, "parents")) {
        let id = text(created, "id");
        let expected = if id == text(&task_after_body, "id") {
            &task_after_body
        } else {
            created
        };
        let stored = if id.starts_with("wv_") {
            serde_json::to_value(stored_wave(store, &WaveId::parse(id).unwrap()).await)
        } else if id.starts_with("ps_") {
            serde_json::to_value(stored_project(store, &ProjectSessionId::parse(id).unwrap()).await)
        } else {
            serde_json::to_value(stored_task(store, &TaskSessionId::parse(id).unwrap()).await)
        }
        .unwrap();
        assert_eq!(&stored, expected, "parent {id}");
    }
}

/// The upgrade keeps every record of a store of release 0.1.0 exactly as
/// that release wrote it, and a second open finds the store upgraded and
/// changes nothing.
pub async fn upgrades_a_store_of_release_1_keeping_every_record(backend: &dyn Backend) {
    keeps_every_record(backend, Release::V1).await;
}

/// The same for a store of release 0.2.0, steps included.
pub async fn upgrades_a_store_of_release_2_keeping_every_record(backend: &dyn Backend) {
    keeps_every_record(backend, Release::V2).await;
}

/// The same for a store of release 0.3.0, histories included.
pub async fn upgrades_a_store_of_release_3_keeping_every_record(backend: &dyn Backend) {
    keeps_every_record(backend, Release::V3).await;
}

/// The same for a store of the 0.3 series' last build (SQL schema 5, sled
/// format 3), delivery cursors and revocations tables included.
pub async fn upgrades_a_store_of_release_4_keeping_every_record(backend: &dyn Backend) {
    keeps_every_record(backend, Release::V4).await;
}

async fn keeps_every_record(backend: &dyn Backend, release: Release) {
    let dir = tempfile::tempdir().unwrap();
    let config = backend.release_store(release, dir.path()).await;
    let store = open_store(&config).await.unwrap();
    assert_as_written(backend, release, &store).await;
    drop(store);
    let again = open_store(&config).await.unwrap();
    assert_as_written(backend, release, &again).await;
}

/// The environment of `handoff` without the names C29 refuses (a fixture's
/// `EDITOR`), as a body of this release opens it; the stored handoff keeps
/// them.
fn without_refused_names(handoff: &InteractiveHandoff) -> BTreeMap<String, String> {
    let mut environment = handoff.environment.clone();
    environment.retain(|name, _| refused_env_reason(name).is_none());
    environment
}

fn in_status(
    handoffs: &[InteractiveHandoff],
    status: InteractiveHandoffStatus,
) -> &InteractiveHandoff {
    handoffs
        .iter()
        .find(|handoff| handoff.status == status)
        .unwrap_or_else(|| panic!("the fixture has no {status:?} handoff"))
}

/// After the upgrade of a store of release 0.1.0 every transition works on
/// the old records, a new handoff opens at a step, and everything survives
/// a reopen.
pub async fn an_upgraded_store_of_release_1_runs_a_full_lifecycle_and_reopens(
    backend: &dyn Backend,
) {
    runs_a_full_lifecycle_and_reopens(backend, Release::V1).await;
}

/// The same for a store of release 0.2.0; first, each body re-running a
/// step the store holds gets that handoff back (the step index survived).
pub async fn an_upgraded_store_of_release_2_runs_a_full_lifecycle_and_reopens(
    backend: &dyn Backend,
) {
    runs_a_full_lifecycle_and_reopens(backend, Release::V2).await;
}

/// The same for a store of release 0.3.0, whose histories go on.
pub async fn an_upgraded_store_of_release_3_runs_a_full_lifecycle_and_reopens(
    backend: &dyn Backend,
) {
    runs_a_full_lifecycle_and_reopens(backend, Release::V3).await;
}

/// The same for a store of the 0.3 series' last build.
pub async fn an_upgraded_store_of_release_4_runs_a_full_lifecycle_and_reopens(
    backend: &dyn Backend,
) {
    runs_a_full_lifecycle_and_reopens(backend, Release::V4).await;
}

async fn runs_a_full_lifecycle_and_reopens(backend: &dyn Backend, release: Release) {
    let dir = tempfile::tempdir().unwrap();
    let config = backend.release_store(release, dir.path()).await;
    let store = open_store(&config).await.unwrap();
    let handoffs = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();

    // Every stored step, run again by its parent's current body, returns
    // its handoff as it is and creates nothing (C12).
    let mut replayed = 0;
    for handoff in &handoffs {
        let Some(step) = &handoff.step else { continue };
        let parent = store.get_parent(&handoff.parent).await.unwrap().unwrap();
        let request = OpenRequest::like(handoff)
            .environment(without_refused_names(handoff))
            .body_generation(parent.body_generation())
            .reason("the step again after the upgrade")
            .at_step(step.clone());
        let (found, created) = store
            .open_interactive_handoff(request.build())
            .await
            .unwrap();
        assert!(!created, "step {step} of {} was opened again", handoff.id);
        assert_eq!(&found, handoff, "step {step}");
        replayed += 1;
    }
    if !release
        .later_handoff_fields()
        .iter()
        .any(|(field, _)| *field == "step")
    {
        assert!(replayed > 0, "the fixture of {release} has no step");
    }

    // Upgraded handoffs have no deadline, and a history only from a
    // release that wrote one (C14, C15).
    for handoff in &handoffs {
        assert_eq!(handoff.expires_at, None, "{}", handoff.id);
        assert_eq!(
            store.history(&handoff.id).await.unwrap().is_empty(),
            !release.has_history(),
            "the history of {} from {release}",
            handoff.id
        );
    }
    assert!(store.expire_due().await.unwrap().is_empty());

    // The waiting handoff: a deadline, attach, finish, claim; its history
    // goes on from the release's (from 1 after a release without one).
    let waiting = in_status(&handoffs, InteractiveHandoffStatus::Waiting);
    let before = store.history(&waiting.id).await.unwrap().len() as u64;
    let deadline = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    let extended = store
        .extend_interactive_handoff(&waiting.id, deadline)
        .await
        .unwrap();
    assert!(extended.expires_at.is_some());
    let attached = store.attach_interactive_handoff(&waiting.id).await.unwrap();
    assert_eq!(attached.status, InteractiveHandoffStatus::Attached);
    let done = InteractiveHandoffOutcome::Completed {
        summary: "done after the upgrade".into(),
    };
    store
        .finish_interactive_handoff(&waiting.id, &done, None)
        .await
        .unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&waiting.id, waiting.body_generation)
            .await
            .unwrap()
            .claimed
    );
    let events = store.history(&waiting.id).await.unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (1..=before + 4).collect();
    assert_eq!(seqs, expected, "{events:#?}");
    let first_after = &events[usize::try_from(before).unwrap()];
    assert_eq!(
        first_after.status_before,
        Some(InteractiveHandoffStatus::Waiting)
    );

    // The attached one is handed back; the completed one's wake is claimed;
    // the claimed one stays with its holder.
    let was_attached = in_status(&handoffs, InteractiveHandoffStatus::Attached);
    let back = InteractiveHandoffOutcome::HandedBack {
        summary: "continue".into(),
    };
    store
        .finish_interactive_handoff(&was_attached.id, &back, None)
        .await
        .unwrap();
    let completed = in_status(&handoffs, InteractiveHandoffStatus::Completed);
    assert!(
        store
            .claim_interactive_handoff_wake(&completed.id, completed.body_generation)
            .await
            .unwrap()
            .claimed
    );
    let handed_back = in_status(&handoffs, InteractiveHandoffStatus::HandedBack);
    let holder = handed_back.wake_claimed_by_generation.unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&handed_back.id, holder)
            .await
            .unwrap()
            .claimed
    );

    // A new handoff at a step on the completed handoff's parent (its body
    // generation and provider are the parent's).
    let parent = store.get_parent(&completed.parent).await.unwrap().unwrap();
    let step = StepKey::parse("login@after-upgrade").unwrap();
    let request = OpenRequest::like(completed)
        .body_generation(parent.body_generation())
        .reason("a second login after the upgrade")
        .at_step(step.clone());
    let (opened, created) = store
        .open_interactive_handoff(request.clone().build())
        .await
        .unwrap();
    assert!(created);
    let (again, created) = store
        .open_interactive_handoff(request.build())
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again, opened);

    // A question with choices on the parent the attached handoff was
    // handed back for (C26): refused without an answer, completed with
    // one, which the record, its finish event and its wake's claim carry.
    let asked_parent = store
        .get_parent(&was_attached.parent)
        .await
        .unwrap()
        .unwrap();
    let asking = OpenRequest::like(was_attached)
        .environment(without_refused_names(was_attached))
        .body_generation(asked_parent.body_generation())
        .reason("allow the deploy after the upgrade?")
        .at_step(StepKey::parse("deploy@after-upgrade").unwrap())
        .choices(&["allow=Allow", "deny=Deny"]);
    let (asked, created) = store
        .open_interactive_handoff(asking.build())
        .await
        .unwrap();
    assert!(created);
    assert_eq!(asked.choices.as_ref().map(Vec::len), Some(2));
    let done = InteractiveHandoffOutcome::Completed {
        summary: "answered after the upgrade".into(),
    };
    assert!(matches!(
        store
            .finish_interactive_handoff(&asked.id, &done, None)
            .await,
        Err(lf_handoff_adapters::StoreError::InvalidInput { .. })
    ));
    let deny = Answer::choice("deny");
    let answered = store
        .finish_interactive_handoff(&asked.id, &done, Some(&deny))
        .await
        .unwrap();
    assert_eq!(answered.answer.as_ref(), Some(&deny));
    let finish = store.history(&asked.id).await.unwrap().pop().unwrap();
    assert_eq!(finish.answer.as_ref(), Some(&deny), "{finish:?}");
    let woken = store
        .claim_interactive_handoff_wake(&asked.id, asked.body_generation)
        .await
        .unwrap();
    assert!(woken.claimed);
    assert_eq!(woken.handoff.answer.as_ref(), Some(&deny));

    let before: Vec<InteractiveHandoff> = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert_eq!(before.len(), handoffs.len() + 2);
    drop(store);
    let reopened = open_store(&config).await.unwrap();
    assert_eq!(
        reopened
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap(),
        before
    );

    // A prune removes the claimed ones, old records and new alike, with
    // the history written since the upgrade, and keeps the others (C17).
    let claimed: Vec<&InteractiveHandoff> = before
        .iter()
        .filter(|h| h.wake_claimed_at.is_some())
        .collect();
    let mut events = 0;
    for handoff in &claimed {
        events += reopened.history(&handoff.id).await.unwrap().len() as u64;
    }
    let later = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
    assert_eq!(
        reopened
            .prune(PruneOptions::finished_before(later))
            .await
            .unwrap(),
        PruneCount {
            handoffs: claimed.len() as u64,
            events,
        }
    );
    let kept: Vec<InteractiveHandoff> = before
        .into_iter()
        .filter(|h| h.wake_claimed_at.is_none())
        .collect();
    assert_eq!(
        reopened
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap(),
        kept
    );

    // The upgraded store keeps the service's delivery cursors (C23).
    let now = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    let cursor = DeliveryCursor {
        position: 7,
        reminded_until: now,
        holder: "after-upgrade".into(),
        lease_until: now,
        version: 0,
    };
    assert!(reopened
        .swap_delivery_cursor("after-upgrade", None, &cursor)
        .await
        .unwrap());
    assert_eq!(
        reopened.delivery_cursor("after-upgrade").await.unwrap(),
        Some(DeliveryCursor {
            version: 1,
            ..cursor
        })
    );

    // ...and its revocations (C29).
    let until = reopened.now() + time::Duration::hours(1);
    reopened
        .revoke("session:after-upgrade", until)
        .await
        .unwrap();
    assert!(reopened.is_revoked("session:after-upgrade").await.unwrap());
}

/// A `kill -9` at a random moment of a process opening (and so upgrading)
/// a store of release 0.1.0 leaves a store that the next open upgrades, or
/// finds upgraded, with every record as it was.
pub async fn a_kill_9_during_the_upgrade_of_release_1_leaves_an_upgradable_store(
    backend: &dyn Backend,
) {
    kill_9_during_the_upgrade(backend, Release::V1).await;
}

/// The same for a store of release 0.2.0.
pub async fn a_kill_9_during_the_upgrade_of_release_2_leaves_an_upgradable_store(
    backend: &dyn Backend,
) {
    kill_9_during_the_upgrade(backend, Release::V2).await;
}

/// The same for a store of release 0.3.0.
pub async fn a_kill_9_during_the_upgrade_of_release_3_leaves_an_upgradable_store(
    backend: &dyn Backend,
) {
    kill_9_during_the_upgrade(backend, Release::V3).await;
}

/// The same for a store of the 0.3 series' last build.
pub async fn a_kill_9_during_the_upgrade_of_release_4_leaves_an_upgradable_store(
    backend: &dyn Backend,
) {
    kill_9_during_the_upgrade(backend, Release::V4).await;
}

async fn kill_9_during_the_upgrade(backend: &dyn Backend, release: Release) {
    // How long a worker takes from its start to an upgraded, open store:
    // the kills below land across that span, most of them after the
    // process has started and before it has opened the store.
    let dir = tempfile::tempdir().unwrap();
    let config = backend.release_store(release, dir.path()).await;
    let started = std::time::Instant::now();
    let mut worker = Worker::spawn(&config.url(), &["probe".into()]);
    assert_eq!(worker.line().await.as_deref(), Some("opened"));
    let span = started.elapsed().as_millis().max(1);
    worker.child.wait().await.unwrap();

    let mut rng = Rng::new(0x5eed_0013);
    let (mut killed, mut finished) = (0, 0);
    for round in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let config = backend.release_store(release, dir.path()).await;
        let mut worker = Worker::spawn(&config.url(), &["probe".into()]);
        let at = span / 3 + u128::from(rng.below(u64::try_from(span).unwrap_or(u64::MAX)));
        let delay = std::time::Duration::from_millis(u64::try_from(at).unwrap_or(u64::MAX));
        match tokio::time::timeout(delay, worker.line()).await {
            Ok(line) => {
                assert_eq!(line.as_deref(), Some("opened"), "round {round}");
                finished += 1;
            }
            Err(_) => {
                worker.child.start_kill().unwrap();
                killed += 1;
            }
        }
        worker.child.wait().await.unwrap();
        let store = open_store(&config).await.unwrap();
        assert_as_written(backend, release, &store).await;
    }
    println!(
        "upgrade kills of {release} stores over {span} ms opens: {killed} killed, \
         {finished} finished first"
    );
}
