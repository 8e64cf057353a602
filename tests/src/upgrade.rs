//! Upgrading stores written by the previous release (docs/CONTRACT.md,
//! "Upgrading stores"): each backend opens a copy of its fixture store of
//! release 0.1.0 (`tests/fixtures/v1`, made by `make.sh` there), finds
//! every record exactly as the manifests beside it say, and then runs a
//! full lifecycle on it.

use std::path::{Path, PathBuf};

use lf_handoff_adapters::domain::id::{
    InteractiveHandoffId, ProjectSessionId, TaskSessionId, WaveId,
};
use lf_handoff_adapters::domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffStatus,
    OpenInteractiveHandoff, StepKey,
};
use lf_handoff_adapters::{open_store, Store};
use serde_json::Value;

use crate::rng::Rng;
use crate::worker::Worker;
use crate::Backend;

/// The directory of the release 0.1.0 fixtures.
pub fn fixtures_v1() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/v1")
}

fn manifest(backend: &dyn Backend, what: &str) -> Value {
    let path = fixtures_v1().join(format!("{}.{what}.json", backend.name()));
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

/// The handoff as JSON, checked to carry no step (release 0.1.0 had none)
/// and with the field removed, so it compares with the old manifest.
fn as_release_1(handoff: &InteractiveHandoff) -> Value {
    let mut value = serde_json::to_value(handoff).unwrap();
    let fields = value.as_object_mut().unwrap();
    assert_eq!(
        fields.remove("step"),
        Some(Value::Null),
        "a handoff of release 0.1.0 has no step"
    );
    assert_eq!(fields.remove("expires_at"), Some(Value::Null));
    value
}

/// Checks every handoff and parent of the manifests against `store`.
async fn assert_as_written(backend: &dyn Backend, store: &Store) {
    let handoffs = manifest(backend, "handoffs");
    for expected in array(&handoffs) {
        let id = InteractiveHandoffId::parse(text(expected, "id")).unwrap();
        let stored = store
            .get_interactive_handoff(&id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("handoff {id} is gone"));
        assert_eq!(&as_release_1(&stored), expected, "handoff {id}");
    }
    let listed: Vec<String> = store
        .list_interactive_handoffs(None)
        .await
        .unwrap()
        .iter()
        .map(|handoff| handoff.id.to_string())
        .collect();
    let written: Vec<&str> = array(&handoffs).iter().map(|h| text(h, "id")).collect();
    assert_eq!(listed, written, "list order");

    // The census rows, as `list --json` printed them (but for their age).
    let rows = manifest(backend, "list");
    let stored = store.list_interactive_handoffs(None).await.unwrap();
    assert_eq!(stored.len(), array(&rows).len());
    for (handoff, expected) in stored.iter().zip(array(&rows)) {
        let mut row = serde_json::to_value(handoff.list_row(handoff.updated_at)).unwrap();
        let fields = row.as_object_mut().unwrap();
        assert_eq!(fields.remove("step"), Some(Value::Null));
        assert_eq!(fields.remove("expires_at"), Some(Value::Null));
        assert_eq!(fields.remove("due"), Some(Value::Bool(false)));
        fields.remove("age_secs");
        let mut expected = expected.clone();
        expected.as_object_mut().unwrap().remove("age_secs");
        assert_eq!(row, expected, "census row of {}", handoff.id);
    }

    let task_after_body = manifest(backend, "task-body");
    for created in array(&manifest(backend, "parents")) {
        let id = text(created, "id");
        let expected = if id == text(&task_after_body, "id") {
            &task_after_body
        } else {
            created
        };
        let stored = if id.starts_with("wv_") {
            serde_json::to_value(store.get_wave(&WaveId::parse(id).unwrap()).await.unwrap())
        } else if id.starts_with("ps_") {
            serde_json::to_value(
                store
                    .get_project_session(&ProjectSessionId::parse(id).unwrap())
                    .await
                    .unwrap(),
            )
        } else {
            serde_json::to_value(
                store
                    .get_task_session(&TaskSessionId::parse(id).unwrap())
                    .await
                    .unwrap(),
            )
        }
        .unwrap();
        assert_eq!(&stored, expected, "parent {id}");
    }
}

/// The upgrade keeps every record exactly as release 0.1.0 wrote it, and a
/// second open finds the store upgraded and changes nothing.
pub async fn upgrades_a_store_of_release_1_keeping_every_record(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = backend.release_1_store(dir.path()).await;
    let store = open_store(&config).await.unwrap();
    assert_as_written(backend, &store).await;
    drop(store);
    let again = open_store(&config).await.unwrap();
    assert_as_written(backend, &again).await;
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

/// After the upgrade every transition works on the old records, a new
/// handoff opens at a step, and everything survives a reopen.
pub async fn an_upgraded_store_runs_a_full_lifecycle_and_reopens(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = backend.release_1_store(dir.path()).await;
    let store = open_store(&config).await.unwrap();
    let handoffs = store.list_interactive_handoffs(None).await.unwrap();

    // The waiting handoff: attach, finish, claim.
    let waiting = in_status(&handoffs, InteractiveHandoffStatus::Waiting);
    let attached = store.attach_interactive_handoff(&waiting.id).await.unwrap();
    assert_eq!(attached.status, InteractiveHandoffStatus::Attached);
    let done = InteractiveHandoffOutcome::Completed {
        summary: "done after the upgrade".into(),
    };
    store
        .finish_interactive_handoff(&waiting.id, &done)
        .await
        .unwrap();
    assert!(store
        .claim_interactive_handoff_wake(&waiting.id, waiting.body_generation)
        .await
        .unwrap());

    // The attached one is handed back; the completed one's wake is claimed;
    // the claimed one stays with its holder.
    let was_attached = in_status(&handoffs, InteractiveHandoffStatus::Attached);
    let back = InteractiveHandoffOutcome::HandedBack {
        summary: "continue".into(),
    };
    store
        .finish_interactive_handoff(&was_attached.id, &back)
        .await
        .unwrap();
    let completed = in_status(&handoffs, InteractiveHandoffStatus::Completed);
    assert!(store
        .claim_interactive_handoff_wake(&completed.id, completed.body_generation)
        .await
        .unwrap());
    let handed_back = in_status(&handoffs, InteractiveHandoffStatus::HandedBack);
    let holder = handed_back.wake_claimed_by_generation.unwrap();
    assert!(store
        .claim_interactive_handoff_wake(&handed_back.id, holder)
        .await
        .unwrap());

    // A new handoff at a step on the completed handoff's parent (its body
    // generation and provider are the parent's).
    let parent = store.get_parent(&completed.parent).await.unwrap().unwrap();
    let request = OpenInteractiveHandoff {
        parent: completed.parent.clone(),
        home: completed.home.clone(),
        cwd: completed.cwd.clone(),
        provider: completed.provider.clone(),
        provider_session_id: completed.provider_session_id.clone(),
        body_generation: parent.body_generation(),
        reason: "a second login after the upgrade".into(),
        environment: completed.environment.clone(),
        attach_argv: completed.attach_argv.clone(),
    };
    let step = StepKey::parse("login@after-upgrade").unwrap();
    let (opened, created) = store
        .open_interactive_handoff_at_step(request.clone(), &step)
        .await
        .unwrap();
    assert!(created);
    let (again, created) = store
        .open_interactive_handoff_at_step(request, &step)
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again, opened);

    let before: Vec<InteractiveHandoff> = store.list_interactive_handoffs(None).await.unwrap();
    assert_eq!(before.len(), handoffs.len() + 1);
    drop(store);
    let reopened = open_store(&config).await.unwrap();
    assert_eq!(
        reopened.list_interactive_handoffs(None).await.unwrap(),
        before
    );
}

/// A `kill -9` at a random moment of a process opening (and so upgrading)
/// a store of release 0.1.0 leaves a store that the next open upgrades, or
/// finds upgraded, with every record as it was.
pub async fn a_kill_9_during_the_upgrade_leaves_an_upgradable_store(backend: &dyn Backend) {
    // How long a worker takes from its start to an upgraded, open store:
    // the kills below land across that span, most of them after the
    // process has started and before it has opened the store.
    let dir = tempfile::tempdir().unwrap();
    let config = backend.release_1_store(dir.path()).await;
    let started = std::time::Instant::now();
    let mut worker = Worker::spawn(&config.url(), &["probe".into()]);
    assert_eq!(worker.line().await.as_deref(), Some("opened"));
    let span = started.elapsed().as_millis().max(1);
    worker.child.wait().await.unwrap();

    let mut rng = Rng::new(0x5eed_0013);
    let (mut killed, mut finished) = (0, 0);
    for round in 0..8 {
        let dir = tempfile::tempdir().unwrap();
        let config = backend.release_1_store(dir.path()).await;
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
        assert_as_written(backend, &store).await;
    }
    println!("upgrade kills over {span} ms opens: {killed} killed, {finished} finished first");
}
