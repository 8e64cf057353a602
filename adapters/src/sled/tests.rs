//! Tests of what the conformance suite cannot reach through the service:
//! the stored bytes themselves, and the port outcomes on their own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lf_handoff_application::ports::{
    Decision, HandoffRepository, InsertOutcome, ParentRegistry, TransitionOutcome, Versioned,
};
use lf_handoff_application::{GenerateId, ListQuery, Store, StoreError, UnavailableKind};
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::{
    Actor, InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus, OpenInteractiveHandoff, StepKey, Transition,
};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use lf_handoff_domain::{ConflictKind, DomainError};
use tempfile::TempDir;

use super::{files, keys, record, SledStore};
use crate::config::SledConfig;
use crate::{open_store, StorageConfig};

/// A store (through the service) and the raw adapter on the same `Db`.
async fn stores() -> (TempDir, Store, SledStore) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = open_store(&StorageConfig::sled(path.clone()))
        .await
        .unwrap();
    let raw = SledStore::open(&SledConfig { path }).await.unwrap();
    (dir, store, raw)
}

async fn new_wave(store: &Store, dir: &Path) -> InteractiveHandoffParent {
    let wave = Wave::new(WaveId::new(), "w".into(), dir.display().to_string());
    store.create_wave(&wave).await.unwrap();
    InteractiveHandoffParent::Wave(wave.id().clone())
}

fn request(parent: &InteractiveHandoffParent, dir: &Path) -> OpenInteractiveHandoff {
    OpenInteractiveHandoff {
        parent: parent.clone(),
        home: WaveHome::parse("jack@local").unwrap(),
        cwd: PathBuf::from(dir),
        provider: "codex".into(),
        provider_session_id: None,
        body_generation: 1,
        reason: "login".into(),
        environment: BTreeMap::new(),
        attach_argv: vec!["tmux".into(), "attach".into()],
    }
}

async fn open_on_new_wave(store: &Store, dir: &Path) -> InteractiveHandoff {
    let parent = new_wave(store, dir).await;
    store
        .open_interactive_handoff(request(&parent, dir))
        .await
        .unwrap()
        .0
}

fn attach(handoff: &InteractiveHandoff) -> InteractiveHandoff {
    let mut attached = handoff.clone();
    attached.status = InteractiveHandoffStatus::Attached;
    attached.attached_at = Some(attached.updated_at);
    attached
}

fn finish(handoff: &InteractiveHandoff) -> InteractiveHandoff {
    let mut finished = handoff.clone();
    finished.status = InteractiveHandoffStatus::Completed;
    finished.outcome = Some(done());
    finished.terminal_at = Some(finished.updated_at);
    finished
}

/// A decision to store `next(record)` that, while it is being decided,
/// lets another writer store the record again (same value, next version).
fn racing(raw: &SledStore, next: fn(&InteractiveHandoff) -> InteractiveHandoff) -> Decision {
    let shared = raw.shared.clone();
    Arc::new(move |current| {
        let key = keys::handoff(&current.id);
        let stored = shared.handoffs.get(&key).unwrap().unwrap();
        let version = record::handoff(&current.id, &stored).unwrap().version;
        let again = record::encode(version + 1, current).unwrap();
        shared.handoffs.insert(key, again).unwrap();
        Ok(Transition::Changed(next(current)).into())
    })
}

/// The parent's active handoff, as `open` reads it.
async fn active(
    raw: &SledStore,
    parent: &InteractiveHandoffParent,
) -> Result<Option<Versioned<InteractiveHandoff>>, StoreError> {
    let snapshot = raw.load_parent_with_active(parent, None).await?;
    Ok(snapshot.and_then(|snapshot| snapshot.active))
}

/// The parent's handoff for `step`, as `open` at that step reads it.
async fn at_step(
    raw: &SledStore,
    parent: &InteractiveHandoffParent,
    step: &StepKey,
) -> Result<Option<Versioned<InteractiveHandoff>>, StoreError> {
    let snapshot = raw.load_parent_with_active(parent, Some(step)).await?;
    Ok(snapshot.and_then(|snapshot| snapshot.at_step))
}

fn actor() -> Actor {
    Actor::parse("tester@sled (pid 1)").unwrap()
}

fn step(text: &str) -> StepKey {
    StepKey::parse(text).unwrap()
}

/// `value` stored as release 0.1.0 stored it: record format 1, and a
/// handoff's JSON without `step` or `expires_at`.
fn format_1<T: serde::Serialize>(version: u64, value: &T) -> Vec<u8> {
    older_format(1, &["step", "expires_at"], version, value)
}

fn older_format<T: serde::Serialize>(
    format: u8,
    missing: &[&str],
    version: u64,
    value: &T,
) -> Vec<u8> {
    let mut json = serde_json::to_value(value).unwrap();
    if let Some(fields) = json.as_object_mut() {
        for field in missing {
            fields.remove(*field);
        }
    }
    let mut bytes = vec![format];
    bytes.extend_from_slice(&version.to_be_bytes());
    bytes.extend_from_slice(&serde_json::to_vec(&json).unwrap());
    bytes
}

/// The format byte, version and JSON of a stored record.
fn stored_parts(tree: &::sled::Tree, key: &[u8]) -> (u8, u64, serde_json::Value) {
    let bytes = tree.get(key).unwrap().unwrap();
    let version = u64::from_be_bytes(bytes[1..9].try_into().unwrap());
    (
        bytes[0],
        version,
        serde_json::from_slice(&bytes[9..]).unwrap(),
    )
}

fn done() -> InteractiveHandoffOutcome {
    InteractiveHandoffOutcome::Completed {
        summary: "done".into(),
    }
}

#[track_caller]
fn assert_unavailable<T: std::fmt::Debug>(
    result: Result<T, StoreError>,
    kind: UnavailableKind,
    needle: &str,
) {
    match result {
        Err(StoreError::Unavailable {
            kind: actual,
            message,
            ..
        }) => {
            assert_eq!(actual, kind, "{message}");
            assert!(
                message.contains(needle),
                "{message:?} does not say {needle:?}"
            )
        }
        other => panic!("expected Unavailable saying {needle:?}, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn records_carry_the_format_and_an_unknown_one_is_refused_unchanged() {
    let (dir, store, raw) = stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let key = keys::handoff(&opened.id);
    let stored = raw.shared.handoffs.get(&key).unwrap().unwrap().to_vec();
    assert_eq!(stored[0], record::FORMAT);
    assert_eq!(record::FORMAT, 3);
    assert_eq!(stored[1..9], 1u64.to_be_bytes());

    for (format, kind, needle) in [
        (4u8, UnavailableKind::NewerSchema, "newer than this build"),
        (255, UnavailableKind::NewerSchema, "record format 255"),
        (0, UnavailableKind::Damaged, "unknown record format"),
    ] {
        let mut changed = stored.clone();
        changed[0] = format;
        raw.shared.handoffs.insert(&key, changed.clone()).unwrap();
        assert_unavailable(
            store.get_interactive_handoff(&opened.id).await,
            kind,
            needle,
        );
        assert_unavailable(store.list_interactive_handoffs(None).await, kind, needle);
        assert_unavailable(
            store.attach_interactive_handoff(&opened.id).await,
            kind,
            needle,
        );
        assert_eq!(raw.shared.handoffs.get(&key).unwrap().unwrap(), changed);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_that_fails_validation_or_sits_under_another_id_is_refused() {
    let (dir, store, raw) = stores().await;
    let first = open_on_new_wave(&store, dir.path()).await;
    let second = open_on_new_wave(&store, dir.path()).await;

    let mut broken = first.clone();
    broken.status = InteractiveHandoffStatus::Completed; // no outcome: breaks I1
    let key = keys::handoff(&first.id);
    raw.shared
        .handoffs
        .insert(&key, record::encode(1, &broken).unwrap())
        .unwrap();
    assert_unavailable(
        store.get_interactive_handoff(&first.id).await,
        UnavailableKind::Damaged,
        "stored",
    );

    raw.shared
        .handoffs
        .insert(&key, record::encode(1, &second).unwrap())
        .unwrap();
    assert_unavailable(
        store.get_interactive_handoff(&first.id).await,
        UnavailableKind::Damaged,
        &format!("the record holds handoff {}", second.id),
    );

    raw.shared.handoffs.insert(&key, &b"\x01\x00"[..]).unwrap();
    assert_unavailable(
        store.get_interactive_handoff(&first.id).await,
        UnavailableKind::Damaged,
        "shorter",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_read_only_the_records_their_index_names() {
    let (dir, store, raw) = stores().await;
    let kept = open_on_new_wave(&store, dir.path()).await;
    let finished = open_on_new_wave(&store, dir.path()).await;
    store
        .finish_interactive_handoff(&finished.id, &done())
        .await
        .unwrap();
    // Damage the finished record: only lists that must read it may fail.
    raw.shared
        .handoffs
        .insert(keys::handoff(&finished.id), &b"\x01garbage!"[..])
        .unwrap();

    let active = store
        .query_interactive_handoffs(&ListQuery {
            parent: None,
            active_only: true,
        })
        .await
        .unwrap();
    assert_eq!(active, vec![kept.clone()]);
    for active_only in [false, true] {
        let listed = store
            .query_interactive_handoffs(&ListQuery {
                parent: Some(kept.parent.clone()),
                active_only,
            })
            .await
            .unwrap();
        assert_eq!(listed, vec![kept.clone()]);
    }
    assert_unavailable(
        store.list_interactive_handoffs(None).await,
        UnavailableKind::Damaged,
        "unreadable",
    );
    assert_unavailable(
        store
            .list_interactive_handoffs(Some(&finished.parent))
            .await,
        UnavailableKind::Damaged,
        "unreadable",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_entry_without_its_record_is_refused() {
    let (dir, store, raw) = stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    raw.shared
        .handoffs
        .remove(keys::handoff(&opened.id))
        .unwrap();
    assert_unavailable(
        store.list_interactive_handoffs(None).await,
        UnavailableKind::Damaged,
        "not stored",
    );
    assert_unavailable(
        store.list_interactive_handoffs(Some(&opened.parent)).await,
        UnavailableKind::Damaged,
        "not stored",
    );
    assert_unavailable(
        active(&raw, &opened.parent).await,
        UnavailableKind::Damaged,
        "not stored",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn insert_checks_the_parent_version_and_the_active_slot_atomically() {
    let (dir, store, raw) = stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let parent = raw.load_parent(&opened.parent).await.unwrap().unwrap();
    assert_eq!(parent.version, 1);

    let mut second = opened.clone();
    second.id = GenerateId::new();
    assert_eq!(
        raw.insert(&second, parent.version, &actor()).await.unwrap(),
        InsertOutcome::ParentBusy
    );
    assert_eq!(
        raw.insert(&second, parent.version + 1, &actor())
            .await
            .unwrap(),
        InsertOutcome::ParentChanged
    );

    // A record that another writer changes between the transition's load
    // and its write is not overwritten, on either write path: the record's
    // compare-and-swap (attach) and the multi-tree transaction (finish).
    for next in [attach, finish] {
        assert_eq!(
            raw.transition(&opened.id, racing(&raw, next), &actor())
                .await
                .unwrap(),
            Some(TransitionOutcome::Lost)
        );
    }
    let current = raw.load(&opened.id).await.unwrap().unwrap();
    assert_eq!(current.version, 3, "only the racing writers' versions");
    assert_eq!(current.value, opened);
    assert!(active(&raw, &opened.parent).await.unwrap().is_some());

    // Finishing frees the slot in the same write.
    let finished = finish(&opened);
    assert_eq!(
        raw.transition(
            &opened.id,
            Arc::new(|h| Ok(Transition::Changed(finish(h)).into())),
            &actor(),
        )
        .await
        .unwrap(),
        Some(TransitionOutcome::Applied {
            handoff: Box::new(finished.clone()),
            answer: Ok(true),
        })
    );
    let stored = raw.load(&opened.id).await.unwrap().unwrap();
    assert_eq!((stored.version, &stored.value), (4, &finished));
    assert!(active(&raw, &opened.parent).await.unwrap().is_none());
    assert!(raw
        .shared
        .slots
        .get(keys::parent(&opened.parent))
        .unwrap()
        .is_none());
    // A replay writes nothing; a refusal is returned as it is; an unknown
    // id is `None`.
    assert_eq!(
        raw.transition(
            &opened.id,
            Arc::new(|h| Ok(Transition::Unchanged(h.clone()).into())),
            &actor(),
        )
        .await
        .unwrap(),
        Some(TransitionOutcome::Applied {
            handoff: Box::new(finished.clone()),
            answer: Ok(true),
        })
    );
    assert_eq!(raw.load(&opened.id).await.unwrap().unwrap().version, 4);
    let refused = raw
        .transition(
            &opened.id,
            Arc::new(|_| {
                Err(DomainError::conflict(
                    ConflictKind::OtherOutcome,
                    "refused".to_string(),
                ))
            }),
            &actor(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refused.conflict_kind(),
        Some(ConflictKind::OtherOutcome),
        "{refused}"
    );
    assert_eq!(
        raw.transition(
            &GenerateId::new(),
            Arc::new(|_| unreachable!("nothing to decide on")),
            &actor(),
        )
        .await
        .unwrap(),
        None
    );

    assert_eq!(
        raw.insert(&second, parent.version, &actor()).await.unwrap(),
        InsertOutcome::Inserted
    );
    assert_eq!(
        active(&raw, &opened.parent).await.unwrap().unwrap().value,
        second
    );
    assert_eq!(raw.shared.active.len(), 1);
    assert_eq!(raw.shared.by_created.len(), 2);
    assert_eq!(raw.shared.by_parent.len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_newer_store_format_is_refused_before_sled_opens_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let config = StorageConfig::sled(path.clone());
    drop(open_store(&config).await.unwrap());
    let marker = path.join(files::MARKER);
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "lf-handoff sled store\nformat 3\n"
    );
    std::fs::write(&marker, "lf-handoff sled store\nformat 4\n").unwrap();
    let before = snapshot(&path);
    assert_unavailable(
        open_store(&config).await,
        UnavailableKind::NewerSchema,
        "newer lf-handoff (store format 4",
    );
    assert_eq!(snapshot(&path), before, "a newer store is left untouched");
    std::fs::write(&marker, "lf-handoff sled store\nformat 0\n").unwrap();
    assert_unavailable(
        open_store(&config).await,
        UnavailableKind::Damaged,
        "store format 0, which no lf-handoff wrote",
    );
    std::fs::write(&marker, "lf-handoff sled store\n").unwrap();
    assert_unavailable(
        open_store(&config).await,
        UnavailableKind::Damaged,
        "marker lf-handoff-store is unreadable",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_directory_becomes_a_store_and_keeps_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty");
    std::fs::create_dir(&path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
    // A marker left half-written by a crashed creation does not count.
    std::fs::write(path.join("lf-handoff-store.tmp"), "lf-hand").unwrap();
    let store = open_store(&StorageConfig::sled(path.clone()))
        .await
        .unwrap();
    open_on_new_wave(&store, dir.path()).await;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o750);
    assert!(path.join(files::MARKER).is_file());
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_write_sleds_buffer_out_only_while_a_write_is_in_flight() {
    let (dir, store, raw) = stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let shared = raw.shared.clone();
    tokio::task::spawn_blocking(move || {
        let key = keys::handoff(&opened.id);
        let read = || {
            let found = shared.get(&shared.handoffs, &key, |bytes| Ok(bytes.len()));
            assert!(found.unwrap().is_some());
        };
        // A change no write of the store made (as sled's own node splits
        // are) stays in sled's buffer: a read does not write it out.
        shared.by_created.insert(b"~scratch", &[][..]).unwrap();
        read();
        assert!(
            shared.db.flush().unwrap() > 0,
            "the read wrote sled's buffer out with no write in flight"
        );
        // While a write is in flight, a read writes out what it may have seen.
        shared
            .write(|| {
                shared.by_created.remove(b"~scratch").unwrap();
                read();
                assert_eq!(
                    shared.db.flush().unwrap(),
                    0,
                    "the read left an unfinished write in memory only"
                );
                Ok(())
            })
            .unwrap();
        // A write that failed may have left its change in memory only:
        // reads settle from then on.
        let failed: Result<(), StoreError> = shared.write(|| {
            Err(StoreError::unavailable(
                UnavailableKind::DiskFull,
                "disk on fire",
            ))
        });
        assert!(failed.is_err());
        shared.by_created.insert(b"~scratch", &[][..]).unwrap();
        read();
        assert_eq!(shared.db.flush().unwrap(), 0);
    })
    .await
    .unwrap();
}

/// Every file of `dir` with its bytes, to show a store was left untouched.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(snapshot(&path));
        } else {
            let bytes = std::fs::read(&path).unwrap();
            files.insert(path, bytes);
        }
    }
    files
}

/// A handoff for the wave `parent` at `step` that `insert` may store: a
/// copy of `template` with a new id.
fn at(
    template: &InteractiveHandoff,
    parent: &InteractiveHandoffParent,
    step: Option<&StepKey>,
) -> InteractiveHandoff {
    let mut handoff = template.clone();
    handoff.id = GenerateId::new();
    handoff.parent = parent.clone();
    if let InteractiveHandoffParent::Wave(wave) = parent {
        handoff.wave_id = wave.clone();
    }
    handoff.step = step.cloned();
    handoff
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_inserts_of_one_step_store_one_and_the_step_stays_taken() {
    let (dir, store, first) = stores().await;
    let second = SledStore::open(&SledConfig {
        path: dir.path().join("store"),
    })
    .await
    .unwrap();
    let template = open_on_new_wave(&store, dir.path()).await;
    let login = step("oauth-login@turn-17");
    for round in 0..10 {
        let parent = new_wave(&store, dir.path()).await;
        let version = first.load_parent(&parent).await.unwrap().unwrap().version;
        let (a, b) = (
            at(&template, &parent, Some(&login)),
            at(&template, &parent, Some(&login)),
        );
        let who = actor();
        let (from_a, from_b) = tokio::join!(
            first.insert(&a, version, &who),
            second.insert(&b, version, &who)
        );
        let (winner, outcomes) = match (from_a.unwrap(), from_b.unwrap()) {
            (InsertOutcome::Inserted, lost) => (a, lost),
            (lost, InsertOutcome::Inserted) => (b, lost),
            other => panic!("round {round}: no insert won: {other:?}"),
        };
        assert_eq!(outcomes, InsertOutcome::StepTaken, "round {round}");
        assert_eq!(
            first.shared.steps.get(keys::step(&parent, &login)).unwrap(),
            Some(winner.id.as_str().as_bytes().into())
        );

        // The step's handoff is found through its key, whatever its status.
        let found = at_step(&second, &parent, &login).await.unwrap().unwrap();
        assert_eq!((found.version, &found.value), (1, &winner));
        let finished = store
            .finish_interactive_handoff(&winner.id, &done())
            .await
            .unwrap();
        let snapshot = first
            .load_parent_with_active(&parent, Some(&login))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(snapshot.active, None);
        assert_eq!(snapshot.at_step.unwrap().value, finished);
        assert_eq!(
            at_step(&first, &parent, &step("other")).await.unwrap(),
            None
        );

        // With the slot free, the step alone still refuses a second one;
        // another step opens.
        assert_eq!(
            first
                .insert(&at(&template, &parent, Some(&login)), version, &actor())
                .await
                .unwrap(),
            InsertOutcome::StepTaken
        );
        let other = at(&template, &parent, Some(&step("other")));
        assert_eq!(
            second.insert(&other, version, &actor()).await.unwrap(),
            InsertOutcome::Inserted
        );
        assert_eq!(
            at_step(&first, &parent, &step("other"))
                .await
                .unwrap()
                .unwrap()
                .value,
            other
        );
        assert_eq!(
            store
                .list_interactive_handoffs(Some(&parent))
                .await
                .unwrap()
                .len(),
            2
        );
    }
    // A handoff without a step has no entry.
    assert_eq!(first.shared.steps.len(), 20);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transition_keeps_the_step() {
    let (dir, store, raw) = stores().await;
    let parent = new_wave(&store, dir.path()).await;
    let (opened, _) = store
        .open_interactive_handoff_at_step(request(&parent, dir.path()), &step("a"))
        .await
        .unwrap();
    let moved = raw
        .transition(
            &opened.id,
            Arc::new(|h| {
                let mut next = attach(h);
                next.step = Some(StepKey::parse("b").unwrap());
                Ok(Transition::Changed(next).into())
            }),
            &actor(),
        )
        .await;
    assert_unavailable(moved, UnavailableKind::Other, "keeps its step");
    assert_eq!(raw.load(&opened.id).await.unwrap().unwrap().value, opened);
    assert_eq!(raw.shared.steps.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_step_index_is_refused() {
    let (dir, store, raw) = stores().await;
    let parent = new_wave(&store, dir.path()).await;
    let key = step("a");
    let (opened, _) = store
        .open_interactive_handoff_at_step(request(&parent, dir.path()), &key)
        .await
        .unwrap();
    store
        .finish_interactive_handoff(&opened.id, &done())
        .await
        .unwrap();
    let (other_step, _) = store
        .open_interactive_handoff_at_step(request(&parent, dir.path()), &step("b"))
        .await
        .unwrap();
    let elsewhere = open_on_new_wave(&store, dir.path()).await;
    let entry = keys::step(&parent, &key);
    let unused: lf_handoff_domain::id::InteractiveHandoffId = GenerateId::new();
    for (holder, needle) in [
        (
            unused.as_str().as_bytes().to_vec(),
            format!("names handoff {unused}, which is not stored"),
        ),
        (b"garbage".to_vec(), "holds garbage for step \"a\"".into()),
        (
            elsewhere.id.as_str().as_bytes().to_vec(),
            format!("belongs to {} at no step", elsewhere.parent),
        ),
        (
            other_step.id.as_str().as_bytes().to_vec(),
            format!("for step \"a\" of {parent}, but it belongs to {parent} at step \"b\""),
        ),
    ] {
        raw.shared.steps.insert(&entry, holder).unwrap();
        assert_unavailable(
            at_step(&raw, &parent, &key).await,
            UnavailableKind::Damaged,
            &needle,
        );
        assert_unavailable(
            store
                .open_interactive_handoff_at_step(request(&parent, dir.path()), &key)
                .await,
            UnavailableKind::Damaged,
            &needle,
        );
    }
    // Only a read at that step reads the entry.
    let snapshot = raw.load_parent_with_active(&parent, None).await.unwrap();
    assert_eq!(snapshot.unwrap().active.unwrap().value, other_step);
}

#[tokio::test(flavor = "multi_thread")]
async fn format_1_records_are_read_and_written_back_in_the_current_format() {
    let (dir, store, raw) = stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let id_key = keys::handoff(&opened.id);
    let parent_key = keys::parent(&opened.parent);
    let parent = raw.load_parent(&opened.parent).await.unwrap().unwrap();
    raw.shared
        .handoffs
        .insert(&id_key, format_1(1, &opened))
        .unwrap();
    raw.shared
        .parents
        .insert(&parent_key, format_1(1, &parent.value))
        .unwrap();
    let (format, _, json) = stored_parts(&raw.shared.handoffs, &id_key);
    assert_eq!(format, 1);
    assert!(json.get("step").is_none());

    // Read as they are, with no step; reading writes nothing.
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(opened.clone())
    );
    assert_eq!(
        store.list_interactive_handoffs(None).await.unwrap(),
        vec![opened.clone()]
    );
    assert_eq!(
        active(&raw, &opened.parent).await.unwrap().unwrap().version,
        1
    );
    assert_eq!(stored_parts(&raw.shared.handoffs, &id_key).0, 1);

    // The next write of each stores format 3, at the next version.
    let attached = store.attach_interactive_handoff(&opened.id).await.unwrap();
    let (format, version, json) = stored_parts(&raw.shared.handoffs, &id_key);
    assert_eq!((format, version), (3, 2));
    assert_eq!(json["step"], serde_json::Value::Null);
    assert_eq!(
        serde_json::from_value::<InteractiveHandoff>(json).unwrap(),
        attached
    );
    store
        .finish_interactive_handoff(&opened.id, &done())
        .await
        .unwrap();
    // Opening on the format-1 parent checks its version as written.
    let (second, created) = store
        .open_interactive_handoff_at_step(request(&opened.parent, dir.path()), &step("s"))
        .await
        .unwrap();
    assert!(created);
    assert_eq!(stored_parts(&raw.shared.parents, &parent_key).0, 1);
    assert_eq!(
        raw.swap_parent(1, &parent.value).await.unwrap(),
        lf_handoff_application::ports::SwapOutcome::Swapped
    );
    let (format, version, _) = stored_parts(&raw.shared.parents, &parent_key);
    assert_eq!((format, version), (3, 2));
    assert_eq!(
        at_step(&raw, &opened.parent, &step("s"))
            .await
            .unwrap()
            .unwrap()
            .value,
        second
    );
}

/// A copy of the store release 0.1.0 wrote (`tests/fixtures/v1/sled`).
fn release_1_store(dir: &Path) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/v1/sled");
    let store = dir.join("release-1");
    std::fs::create_dir(&store).unwrap();
    for entry in std::fs::read_dir(fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), store.join(entry.file_name())).unwrap();
    }
    store
}

const MARKER_1: &str = "lf-handoff sled store\nformat 1\n";
const MARKER_3: &str = "lf-handoff sled store\nformat 3\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_store_of_release_1_is_upgraded_in_place_and_its_records_lazily() {
    let dir = tempfile::tempdir().unwrap();
    let path = release_1_store(dir.path());
    let marker = path.join(files::MARKER);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_1);
    // What a crash in the middle of writing the new marker leaves behind.
    std::fs::write(path.join("lf-handoff-store.tmp"), "lf-handoff sled st").unwrap();

    let raw = SledStore::open(&SledConfig { path: path.clone() })
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_3);
    assert!(!path.join("lf-handoff-store.tmp").exists());
    // No record was rewritten: every one is still format 1.
    let formats: Vec<u8> = raw
        .shared
        .handoffs
        .iter()
        .chain(raw.shared.parents.iter())
        .map(|entry| entry.unwrap().1[0])
        .collect();
    assert_eq!(formats.len(), 5 + 5);
    assert!(formats.iter().all(|format| *format == 1), "{formats:?}");

    let store = open_store(&StorageConfig::sled(path.clone()))
        .await
        .unwrap();
    let handoffs = store.list_interactive_handoffs(None).await.unwrap();
    assert_eq!(handoffs.len(), 5);
    assert!(handoffs.iter().all(|handoff| handoff.step.is_none()));
    let waiting = handoffs
        .iter()
        .find(|handoff| handoff.status == InteractiveHandoffStatus::Waiting)
        .unwrap();
    store.attach_interactive_handoff(&waiting.id).await.unwrap();
    let (format, version, _) = stored_parts(&raw.shared.handoffs, &keys::handoff(&waiting.id));
    assert_eq!((format, version), (3, 2));
    drop((store, raw));

    // Reopening finds it upgraded and changes nothing more.
    let before = snapshot(&path);
    let store = open_store(&StorageConfig::sled(path.clone()))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_3);
    assert_eq!(
        store.list_interactive_handoffs(None).await.unwrap().len(),
        5
    );
    drop(store);
    assert_eq!(snapshot(&path)[&marker], before[&marker]);
}

/// A copy of the release-0.1.0 store in `dir`, held open by a `Db` opened
/// here directly: sled's lock belongs to the open file, so it holds the
/// store as another process would.
async fn held_release_1_store(dir: &Path) -> (std::path::PathBuf, ::sled::Db) {
    let path = release_1_store(dir);
    let holder = tokio::task::spawn_blocking({
        let path = path.clone();
        move || ::sled::Config::new().path(path).open().unwrap()
    })
    .await
    .unwrap();
    (path, holder)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_marker_of_a_store_another_holder_has_open_is_not_upgraded() {
    let dir = tempfile::tempdir().unwrap();
    let (path, holder) = held_release_1_store(dir.path()).await;
    let marker = path.join(files::MARKER);
    assert_unavailable(
        open_store(&StorageConfig::sled(path.clone())).await,
        UnavailableKind::Locked,
        "locked by another process",
    );
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_1);
    tokio::task::spawn_blocking(move || drop(holder))
        .await
        .unwrap();
    drop(open_store(&StorageConfig::sled(path)).await.unwrap());
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_marker_that_changes_while_the_lock_is_awaited_is_decided_again() {
    let dir = tempfile::tempdir().unwrap();
    let (path, holder) = held_release_1_store(dir.path()).await;
    let marker = path.join(files::MARKER);
    // The open reads the format-1 marker, then waits for sled's lock...
    let config = StorageConfig::sled(path.clone());
    let opening = tokio::spawn(async move { open_store(&config).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // ...while a newer build upgrades the store and lets it go.
    std::fs::write(&marker, "lf-handoff sled store\nformat 4\n").unwrap();
    tokio::task::spawn_blocking(move || drop(holder))
        .await
        .unwrap();
    assert_unavailable(
        opening.await.unwrap(),
        UnavailableKind::NewerSchema,
        "newer lf-handoff (store format 4",
    );
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "lf-handoff sled store\nformat 4\n",
        "the newer marker is never written back to an older format"
    );
}
