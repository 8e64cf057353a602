//! Tests of what the conformance suite cannot reach through the service:
//! the stored bytes themselves, and the port outcomes on their own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lf_handoff_application::ports::{
    Decision, HandoffRepository, InsertOutcome, ParentRegistry, TransitionOutcome, Versioned,
};
use lf_handoff_application::testing::OpenRequest;
use lf_handoff_application::{
    Clock, GenerateId, ListQuery, Store, StoreError, StorePorts, UnavailableKind,
};
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::{
    Actor, HandoffEvent, HandoffEventKind, InteractiveHandoff, InteractiveHandoffOutcome,
    InteractiveHandoffParent, InteractiveHandoffStatus, OpenOptions, StepKey, Transition,
};
use lf_handoff_domain::timestamp::truncate_to_micros;
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use lf_handoff_domain::{ConflictKind, DomainError};
use tempfile::TempDir;
use time::{Duration, OffsetDateTime};

use super::handle::{sync_at_open, SyncAtOpen};
use super::{files, keys, record, SledStore};
use crate::sled::SledConfig;
use crate::{open_store, StorageConfig};

/// A store (through the service) and the raw adapter on the same `Db`.
/// Overwrites handoff `id`'s stored record with bytes no release wrote:
/// any read of it is refused as damage.
fn damage_record(raw: &SledStore, id: &lf_handoff_domain::id::InteractiveHandoffId) {
    raw.shared()
        .trees
        .handoffs
        .insert(keys::handoff(id), &b"\x01garbage!"[..])
        .unwrap();
}

async fn stores() -> (TempDir, Store, SledStore) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = open_store(&StorageConfig::sled(path.clone()))
        .await
        .unwrap();
    let raw = SledStore::open(&SledConfig::new(path)).await.unwrap();
    (dir, store, raw)
}

async fn new_wave(store: &Store, dir: &Path) -> InteractiveHandoffParent {
    let wave = Wave::new(WaveId::new(), "w".into(), dir.display().to_string());
    store.create_wave(&wave).await.unwrap();
    InteractiveHandoffParent::Wave(wave.id().clone())
}

async fn open_on_new_wave(store: &Store, dir: &Path) -> InteractiveHandoff {
    let parent = new_wave(store, dir).await;
    store
        .open_interactive_handoff(OpenRequest::new(&parent).cwd(dir).build())
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
    let shared = raw.shared().clone();
    Arc::new(move |current| {
        let key = keys::handoff(&current.id);
        let stored = shared.trees.handoffs.get(&key).unwrap().unwrap();
        let version = record::handoff(&current.id, &stored).unwrap().version;
        let again = record::encode(version + 1, current).unwrap();
        shared.trees.handoffs.insert(key, again).unwrap();
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

/// `value` stored as builds with steps and without deadlines stored it:
/// record format 2, and a handoff's JSON without `expires_at`.
fn format_2<T: serde::Serialize>(version: u64, value: &T) -> Vec<u8> {
    older_format(2, &["expires_at"], version, value)
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
    let stored = raw
        .shared()
        .trees
        .handoffs
        .get(&key)
        .unwrap()
        .unwrap()
        .to_vec();
    assert_eq!(stored[0], record::FORMAT);
    assert_eq!(record::FORMAT, 4);
    assert_eq!(stored[1..9], 1u64.to_be_bytes());

    for (format, kind, needle) in [
        (5u8, UnavailableKind::NewerSchema, "newer than this build"),
        (255, UnavailableKind::NewerSchema, "record format 255"),
        (0, UnavailableKind::Damaged, "unknown record format"),
    ] {
        let mut changed = stored.clone();
        changed[0] = format;
        raw.shared()
            .trees
            .handoffs
            .insert(&key, changed.clone())
            .unwrap();
        assert_unavailable(
            store.get_interactive_handoff(&opened.id).await,
            kind,
            needle,
        );
        assert_unavailable(
            store.list_interactive_handoffs(ListQuery::default()).await,
            kind,
            needle,
        );
        assert_unavailable(
            store.attach_interactive_handoff(&opened.id).await,
            kind,
            needle,
        );
        assert_eq!(
            raw.shared().trees.handoffs.get(&key).unwrap().unwrap(),
            changed
        );
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
    raw.shared()
        .trees
        .handoffs
        .insert(&key, record::encode(1, &broken).unwrap())
        .unwrap();
    assert_unavailable(
        store.get_interactive_handoff(&first.id).await,
        UnavailableKind::Damaged,
        "stored",
    );

    raw.shared()
        .trees
        .handoffs
        .insert(&key, record::encode(1, &second).unwrap())
        .unwrap();
    assert_unavailable(
        store.get_interactive_handoff(&first.id).await,
        UnavailableKind::Damaged,
        &format!("the record holds handoff {}", second.id),
    );

    raw.shared()
        .trees
        .handoffs
        .insert(&key, &b"\x01\x00"[..])
        .unwrap();
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
        .finish_interactive_handoff(&finished.id, &done(), None)
        .await
        .unwrap();
    // Damage the finished record: only lists that must read it may fail.
    damage_record(&raw, &finished.id);

    let active = store
        .list_interactive_handoffs(ListQuery {
            parent: None,
            active_only: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(active, vec![kept.clone()]);
    for active_only in [false, true] {
        let listed = store
            .list_interactive_handoffs(ListQuery {
                parent: Some(kept.parent.clone()),
                active_only,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(listed, vec![kept.clone()]);
    }
    assert_unavailable(
        store.list_interactive_handoffs(ListQuery::default()).await,
        UnavailableKind::Damaged,
        "unreadable",
    );
    assert_unavailable(
        store
            .list_interactive_handoffs(ListQuery::from(&finished.parent))
            .await,
        UnavailableKind::Damaged,
        "unreadable",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn newest_first_reads_only_the_newest_records() {
    let (dir, store, raw) = stores().await;
    let oldest = open_on_new_wave(&store, dir.path()).await;
    let middle = open_on_new_wave(&store, dir.path()).await;
    let newest = open_on_new_wave(&store, dir.path()).await;
    store
        .finish_interactive_handoff(&middle.id, &done(), None)
        .await
        .unwrap();
    let middle = store
        .get_interactive_handoff(&middle.id)
        .await
        .unwrap()
        .unwrap();
    // Damage the oldest record: a walk from the newest end that stops
    // before it never reads it.
    damage_record(&raw, &oldest.id);
    let newest_two = |statuses: Vec<InteractiveHandoffStatus>| ListQuery {
        statuses,
        newest_first: true,
        limit: Some(2),
        ..Default::default()
    };
    let both = store
        .list_interactive_handoffs(newest_two(vec![]))
        .await
        .unwrap();
    assert_eq!(both, vec![newest, middle]);
    // Several statuses: their walks merged, greatest key first.
    let merged = store
        .list_interactive_handoffs(newest_two(vec![
            InteractiveHandoffStatus::Completed,
            InteractiveHandoffStatus::Waiting,
        ]))
        .await
        .unwrap();
    assert_eq!(merged, both);
    assert_unavailable(
        store
            .list_interactive_handoffs(ListQuery {
                newest_first: true,
                ..Default::default()
            })
            .await,
        UnavailableKind::Damaged,
        "unreadable",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deadline_bound_reads_only_the_due_records() {
    let (dir, store, raw) = stores().await;
    let undated = open_on_new_wave(&store, dir.path()).await;
    let parent = new_wave(&store, dir.path()).await;
    let deadline = OffsetDateTime::now_utc() + Duration::minutes(10);
    let (dated, _) = store
        .open_interactive_handoff(
            OpenRequest::new(&parent)
                .cwd(dir.path())
                .expires_at(deadline)
                .build(),
        )
        .await
        .unwrap();
    let later = open_on_new_wave(&store, dir.path()).await;
    // Damage both records with no deadline: a list bounded by a deadline
    // walks the due index and never reads them.
    damage_record(&raw, &undated.id);
    damage_record(&raw, &later.id);
    let due = ListQuery {
        due_by: Some(deadline + Duration::minutes(1)),
        ..Default::default()
    };
    for newest_first in [false, true] {
        let listed = store
            .list_interactive_handoffs(ListQuery {
                newest_first,
                ..due.clone()
            })
            .await
            .unwrap();
        assert_eq!(listed, vec![dated.clone()]);
    }
    assert_unavailable(
        store
            .list_interactive_handoffs(ListQuery {
                active_only: true,
                ..Default::default()
            })
            .await,
        UnavailableKind::Damaged,
        "unreadable",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_index_entry_without_its_record_is_refused() {
    let (dir, store, raw) = stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    raw.shared()
        .trees
        .handoffs
        .remove(keys::handoff(&opened.id))
        .unwrap();
    assert_unavailable(
        store.list_interactive_handoffs(ListQuery::default()).await,
        UnavailableKind::Damaged,
        "not stored",
    );
    assert_unavailable(
        store
            .list_interactive_handoffs(ListQuery::from(&opened.parent))
            .await,
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
async fn handoffs_created_in_one_microsecond_are_listed_by_id() {
    let (dir, store, raw) = stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let finished = store
        .finish_interactive_handoff(&opened.id, &done(), None)
        .await
        .unwrap();
    let version = raw
        .load_parent(&opened.parent)
        .await
        .unwrap()
        .unwrap()
        .version;
    crate::list_ties::ties_are_listed_by_id(&raw, &finished, version).await;
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
        .shared()
        .trees
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
    assert_eq!(raw.shared().trees.active.len(), 1);
    assert_eq!(raw.shared().trees.by_created.len(), 2);
    assert_eq!(raw.shared().trees.by_parent.len(), 2);
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
        "lf-handoff sled store\nformat 4\n"
    );
    std::fs::write(&marker, "lf-handoff sled store\nformat 5\n").unwrap();
    let before = snapshot(&path);
    assert_unavailable(
        open_store(&config).await,
        UnavailableKind::NewerSchema,
        "newer lf-handoff (store format 5",
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
async fn only_a_new_store_syncs_its_log_when_it_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    // No directory, then a directory whose log is missing or empty: new.
    assert_eq!(sync_at_open(&path), SyncAtOpen::Log);
    std::fs::create_dir(&path).unwrap();
    assert_eq!(sync_at_open(&path), SyncAtOpen::Log);
    std::fs::write(path.join(super::log_audit::LOG), b"").unwrap();
    assert_eq!(sync_at_open(&path), SyncAtOpen::Log);
    std::fs::remove_file(path.join(super::log_audit::LOG)).unwrap();

    let store = open_store(&StorageConfig::sled(path.clone()))
        .await
        .unwrap();
    let opened = open_on_new_wave(&store, dir.path()).await;
    drop(store);
    // A log that holds data is an existing store's: only the directory is
    // synced, and the store opens with everything it had.
    assert_eq!(sync_at_open(&path), SyncAtOpen::Directory);
    let store = open_store(&StorageConfig::sled(path.clone()))
        .await
        .unwrap();
    let found = store.get_interactive_handoff(&opened.id).await.unwrap();
    assert_eq!(found, Some(opened));
}

#[tokio::test(flavor = "multi_thread")]
async fn reads_write_sleds_buffer_out_only_while_a_write_is_in_flight() {
    let (dir, store, raw) = stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let shared = raw.shared().clone();
    tokio::task::spawn_blocking(move || {
        let key = keys::handoff(&opened.id);
        let read = || {
            let found = shared.get(&shared.trees.handoffs, &key, |bytes| Ok(bytes.len()));
            assert!(found.unwrap().is_some());
        };
        // A change no write of the store made (as sled's own node splits
        // are) stays in sled's buffer: a read does not write it out.
        shared
            .trees
            .by_created
            .insert(b"~scratch", &[][..])
            .unwrap();
        read();
        assert!(
            shared.db.flush().unwrap() > 0,
            "the read wrote sled's buffer out with no write in flight"
        );
        // While a write is in flight, a read writes out what it may have seen.
        shared
            .write(|| {
                shared.trees.by_created.remove(b"~scratch").unwrap();
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
        shared
            .trees
            .by_created
            .insert(b"~scratch", &[][..])
            .unwrap();
        read();
        assert_eq!(shared.db.flush().unwrap(), 0);
    })
    .await
    .unwrap();
}

/// A handoff's load on a store kept open reads on the caller's thread: it
/// answers while the blocking pool's only thread is taken.
#[test]
fn a_load_does_not_wait_for_the_blocking_pool() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (dir, store, _raw) = stores().await;
        let opened = open_on_new_wave(&store, dir.path()).await;
        let (took, taken) = tokio::sync::oneshot::channel::<()>();
        let (let_go, held) = std::sync::mpsc::channel::<()>();
        let occupied = tokio::task::spawn_blocking(move || {
            took.send(()).unwrap();
            held.recv().ok();
        });
        taken.await.unwrap();
        let found = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            store.get_interactive_handoff(&opened.id),
        )
        .await;
        let_go.send(()).unwrap();
        occupied.await.unwrap();
        assert_eq!(
            found
                .expect("the load waited for the blocking pool")
                .unwrap(),
            Some(opened)
        );
    });
}

/// The load that reads on the caller's thread settles as every read does:
/// sled's buffer is written out only while a write is in flight, or after
/// one failed.
#[tokio::test(flavor = "multi_thread")]
async fn a_load_on_the_callers_thread_settles_as_other_reads_do() {
    let (dir, store, raw) = stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let shared = raw.shared();
    let scratch = || {
        shared
            .trees
            .by_created
            .insert(b"~scratch", &[][..])
            .unwrap();
    };
    scratch();
    assert!(raw.load(&opened.id).await.unwrap().is_some());
    assert!(
        shared.db.flush().unwrap() > 0,
        "the load wrote sled's buffer out with no write in flight"
    );
    // A write in flight (on another thread) that changed a tree: the load
    // writes out what it may have seen.
    let (changed, wait_changed) = std::sync::mpsc::channel::<()>();
    let (finish, wait_finish) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn({
        let shared = shared.clone();
        move || {
            shared
                .write(|| {
                    shared
                        .trees
                        .by_created
                        .insert(b"~in-flight", &[][..])
                        .unwrap();
                    changed.send(()).unwrap();
                    wait_finish.recv().ok();
                    Ok(())
                })
                .unwrap();
        }
    });
    wait_changed.recv().unwrap();
    assert!(raw.load(&opened.id).await.unwrap().is_some());
    let left = shared.db.flush().unwrap();
    finish.send(()).unwrap();
    writer.join().unwrap();
    assert_eq!(left, 0, "the load left an unfinished write in memory only");
    // A write that failed may have left its change in memory only: loads
    // settle from then on.
    let failed: Result<(), StoreError> = shared.write(|| {
        Err(StoreError::unavailable(
            UnavailableKind::DiskFull,
            "disk on fire",
        ))
    });
    assert!(failed.is_err());
    scratch();
    assert!(raw.load(&opened.id).await.unwrap().is_some());
    assert_eq!(
        shared.db.flush().unwrap(),
        0,
        "the load left what it may have seen in memory only"
    );
}

/// Every file of `dir` with its bytes, to show a store was left untouched.
pub(super) fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
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
    let second = SledStore::open(&SledConfig::new(dir.path().join("store")))
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
            first
                .shared()
                .trees
                .steps
                .get(keys::step(&parent, &login))
                .unwrap(),
            Some(winner.id.as_str().as_bytes().into())
        );

        // The step's handoff is found through its key, whatever its status.
        let found = at_step(&second, &parent, &login).await.unwrap().unwrap();
        assert_eq!((found.version, &found.value), (1, &winner));
        let finished = store
            .finish_interactive_handoff(&winner.id, &done(), None)
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
                .list_interactive_handoffs(ListQuery::from(&parent))
                .await
                .unwrap()
                .len(),
            2
        );
    }
    // A handoff without a step has no entry.
    assert_eq!(first.shared().trees.steps.len(), 20);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transition_keeps_the_step() {
    let (dir, store, raw) = stores().await;
    let parent = new_wave(&store, dir.path()).await;
    let (opened, _) = store
        .open_interactive_handoff(
            OpenRequest::new(&parent)
                .cwd(dir.path())
                .at_step(step("a"))
                .build(),
        )
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
    assert_eq!(raw.shared().trees.steps.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_step_index_is_refused() {
    let (dir, store, raw) = stores().await;
    let parent = new_wave(&store, dir.path()).await;
    let key = step("a");
    let (opened, _) = store
        .open_interactive_handoff(
            OpenRequest::new(&parent)
                .cwd(dir.path())
                .at_step(key.clone())
                .build(),
        )
        .await
        .unwrap();
    store
        .finish_interactive_handoff(&opened.id, &done(), None)
        .await
        .unwrap();
    let (other_step, _) = store
        .open_interactive_handoff(
            OpenRequest::new(&parent)
                .cwd(dir.path())
                .at_step(step("b"))
                .build(),
        )
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
        raw.shared().trees.steps.insert(&entry, holder).unwrap();
        assert_unavailable(
            at_step(&raw, &parent, &key).await,
            UnavailableKind::Damaged,
            &needle,
        );
        assert_unavailable(
            store
                .open_interactive_handoff(
                    OpenRequest::new(&parent)
                        .cwd(dir.path())
                        .at_step(key.clone())
                        .build(),
                )
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
    raw.shared()
        .trees
        .handoffs
        .insert(&id_key, format_1(1, &opened))
        .unwrap();
    raw.shared()
        .trees
        .parents
        .insert(&parent_key, format_1(1, &parent.value))
        .unwrap();
    let (format, _, json) = stored_parts(&raw.shared().trees.handoffs, &id_key);
    assert_eq!(format, 1);
    assert!(json.get("step").is_none());

    // Read as they are, with no step; reading writes nothing.
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(opened.clone())
    );
    assert_eq!(
        store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap(),
        vec![opened.clone()]
    );
    assert_eq!(
        active(&raw, &opened.parent).await.unwrap().unwrap().version,
        1
    );
    assert_eq!(stored_parts(&raw.shared().trees.handoffs, &id_key).0, 1);

    // The next write of each stores format 4, at the next version.
    let attached = store.attach_interactive_handoff(&opened.id).await.unwrap();
    let (format, version, json) = stored_parts(&raw.shared().trees.handoffs, &id_key);
    assert_eq!((format, version), (record::FORMAT, 2));
    assert_eq!(json["step"], serde_json::Value::Null);
    assert_eq!(
        serde_json::from_value::<InteractiveHandoff>(json).unwrap(),
        attached
    );
    store
        .finish_interactive_handoff(&opened.id, &done(), None)
        .await
        .unwrap();
    // Opening on the format-1 parent checks its version as written.
    let (second, created) = store
        .open_interactive_handoff(
            OpenRequest::new(&opened.parent)
                .cwd(dir.path())
                .at_step(step("s"))
                .build(),
        )
        .await
        .unwrap();
    assert!(created);
    assert_eq!(stored_parts(&raw.shared().trees.parents, &parent_key).0, 1);
    assert_eq!(
        raw.swap_parent(1, &parent.value).await.unwrap(),
        lf_handoff_application::ports::SwapOutcome::Swapped
    );
    let (format, version, _) = stored_parts(&raw.shared().trees.parents, &parent_key);
    assert_eq!((format, version), (record::FORMAT, 2));
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
const MARKER_2: &str = "lf-handoff sled store\nformat 2\n";
const MARKER_4: &str = "lf-handoff sled store\nformat 4\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_store_of_release_1_is_upgraded_in_place_and_its_records_lazily() {
    let dir = tempfile::tempdir().unwrap();
    let path = release_1_store(dir.path());
    let marker = path.join(files::MARKER);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_1);
    // What a crash in the middle of writing the new marker leaves behind.
    std::fs::write(path.join("lf-handoff-store.tmp"), "lf-handoff sled st").unwrap();

    let raw = SledStore::open(&SledConfig::new(path.clone()))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_4);
    assert!(!path.join("lf-handoff-store.tmp").exists());
    // No record was rewritten: every one is still format 1.
    let formats: Vec<u8> = raw
        .shared()
        .trees
        .handoffs
        .iter()
        .chain(raw.shared().trees.parents.iter())
        .map(|entry| entry.unwrap().1[0])
        .collect();
    assert_eq!(formats.len(), 5 + 5);
    assert!(formats.iter().all(|format| *format == 1), "{formats:?}");

    let store = open_store(&StorageConfig::sled(path.clone()))
        .await
        .unwrap();
    let handoffs = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert_eq!(handoffs.len(), 5);
    assert!(handoffs.iter().all(|handoff| handoff.step.is_none()));
    let waiting = handoffs
        .iter()
        .find(|handoff| handoff.status == InteractiveHandoffStatus::Waiting)
        .unwrap();
    store.attach_interactive_handoff(&waiting.id).await.unwrap();
    let (format, version, _) =
        stored_parts(&raw.shared().trees.handoffs, &keys::handoff(&waiting.id));
    assert_eq!((format, version), (record::FORMAT, 2));
    drop((store, raw));

    // Reopening finds it upgraded and changes nothing more.
    let before = snapshot(&path);
    let store = open_store(&StorageConfig::sled(path.clone()))
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_4);
    assert_eq!(
        store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap()
            .len(),
        5
    );
    drop(store);
    assert_eq!(snapshot(&path)[&marker], before[&marker]);
}

/// sled's `Db` at `path`, opened directly right after the store's last
/// handle dropped: sled closes a `Db` on its own threads and holds the
/// file lock a moment longer, so the open is tried again for up to two
/// seconds (as `handle::open` does).
pub(super) fn open_raw_after_drop(path: &Path) -> ::sled::Db {
    let started = std::time::Instant::now();
    loop {
        match ::sled::Config::new().path(path).open() {
            Ok(db) => return db,
            Err(error) if started.elapsed() < std::time::Duration::from_secs(2) => {
                let _ = error;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(error) => panic!("{} stays locked: {error}", path.display()),
        }
    }
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
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_4);
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
    std::fs::write(&marker, "lf-handoff sled store\nformat 5\n").unwrap();
    tokio::task::spawn_blocking(move || drop(holder))
        .await
        .unwrap();
    assert_unavailable(
        opening.await.unwrap(),
        UnavailableKind::NewerSchema,
        "newer lf-handoff (store format 5",
    );
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "lf-handoff sled store\nformat 5\n",
        "the newer marker is never written back to an older format"
    );
}

// ----- deadlines (C14) and history (C15) -----

/// A clock the test moves by hand.
#[derive(Debug)]
struct TestClock(std::sync::Mutex<OffsetDateTime>);

impl TestClock {
    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

impl Clock for TestClock {
    fn now(&self) -> OffsetDateTime {
        *self.0.lock().unwrap()
    }
}

/// A store on `TestClock` naming [`actor`] in its history, and the raw
/// adapter under it.
async fn timed_stores() -> (TempDir, Store, Arc<SledStore>, Arc<TestClock>) {
    let dir = tempfile::tempdir().unwrap();
    let raw = Arc::new(
        SledStore::open(&SledConfig::new(dir.path().join("store")))
            .await
            .unwrap(),
    );
    let clock = Arc::new(TestClock(std::sync::Mutex::new(truncate_to_micros(
        OffsetDateTime::now_utc(),
    ))));
    let store = Store::new(StorePorts {
        clock: clock.clone(),
        ..StorePorts::of("sled", raw.clone())
    })
    .with_actor(actor());
    (dir, store, raw, clock)
}

/// Opens a handoff on a new wave that expires `in` from the clock's now.
async fn open_expiring(
    store: &Store,
    clock: &TestClock,
    dir: &Path,
    expires_in: Duration,
) -> InteractiveHandoff {
    let parent = new_wave(store, dir).await;
    let options = OpenOptions {
        step: None,
        expires_at: Some(clock.now() + expires_in),
        ..OpenOptions::default()
    };
    let (opened, created) = store
        .open_interactive_handoff(
            OpenRequest::new(&parent)
                .cwd(dir)
                .build()
                .with_options(options.clone()),
        )
        .await
        .unwrap();
    assert!(created);
    opened
}

/// Every stored event, in position order, checked against its key.
fn all_events(raw: &SledStore) -> Vec<HandoffEvent> {
    raw.shared()
        .trees
        .events
        .iter()
        .map(|entry| {
            let (key, bytes) = entry.unwrap();
            let position = u64::from_be_bytes(key.as_ref().try_into().unwrap());
            record::event(position, &bytes).unwrap()
        })
        .collect()
}

/// The store's last position, as its counter holds it.
fn last_position(raw: &SledStore) -> Option<u64> {
    raw.shared()
        .trees
        .counters
        .get(keys::POSITION)
        .unwrap()
        .map(|bytes| u64::from_be_bytes(bytes.as_ref().try_into().unwrap()))
}

/// The ids `handoffs_due` holds, in key order.
fn due_entries(raw: &SledStore) -> Vec<lf_handoff_domain::id::InteractiveHandoffId> {
    raw.shared()
        .trees
        .due
        .iter()
        .map(|entry| keys::id_in_index(keys::DUE, &entry.unwrap().0, 0).unwrap())
        .collect()
}

fn no_ids() -> Vec<lf_handoff_domain::id::InteractiveHandoffId> {
    Vec::new()
}

fn kinds(events: &[HandoffEvent]) -> Vec<HandoffEventKind> {
    events.iter().map(|event| event.kind).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_change_appends_its_event_in_the_same_write_and_a_replay_none() {
    let (dir, store, raw, clock) = timed_stores().await;
    let parent = new_wave(&store, dir.path()).await;
    let (opened, _) = store
        .open_interactive_handoff(OpenRequest::new(&parent).cwd(dir.path()).build())
        .await
        .unwrap();
    let (_, created) = store
        .open_interactive_handoff(OpenRequest::new(&parent).cwd(dir.path()).build())
        .await
        .unwrap();
    assert!(!created, "a replayed open");
    clock.advance(Duration::seconds(1));
    let attached = store.attach_interactive_handoff(&opened.id).await.unwrap();
    clock.advance(Duration::seconds(1));
    store.attach_interactive_handoff(&opened.id).await.unwrap();
    // Another handoff's change in between: positions are store-wide.
    let other = open_on_new_wave(&store, dir.path()).await;
    clock.advance(Duration::seconds(1));
    let finished = store
        .finish_interactive_handoff(&opened.id, &done(), None)
        .await
        .unwrap();
    store
        .finish_interactive_handoff(&opened.id, &done(), None)
        .await
        .unwrap();
    clock.advance(Duration::seconds(1));
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 1)
            .await
            .unwrap()
            .claimed
    );
    assert!(
        store
            .claim_interactive_handoff_wake(&opened.id, 1)
            .await
            .unwrap()
            .claimed
    );
    let claimed = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();

    let history = raw.history(&opened.id).await.unwrap();
    use HandoffEventKind as K;
    use InteractiveHandoffStatus as S;
    assert_eq!(
        kinds(&history),
        [K::Opened, K::Attached, K::Finished, K::WakeClaimed]
    );
    let numbers: Vec<(u64, u64)> = history.iter().map(|e| (e.seq, e.position)).collect();
    assert_eq!(numbers, [(1, 1), (2, 2), (3, 4), (4, 5)]);
    let statuses: Vec<_> = history
        .iter()
        .map(|e| (e.status_before, e.status_after))
        .collect();
    assert_eq!(
        statuses,
        [
            (None, S::Waiting),
            (Some(S::Waiting), S::Attached),
            (Some(S::Attached), S::Completed),
            (Some(S::Completed), S::Completed),
        ]
    );
    let times: Vec<_> = history.iter().map(|e| e.at).collect();
    assert_eq!(
        times,
        [
            opened.updated_at,
            attached.updated_at,
            finished.updated_at,
            claimed.updated_at
        ]
    );
    assert!(history.iter().all(|e| e.actor == actor()));
    assert!(history.iter().all(|e| e.handoff_id == opened.id));
    assert_eq!(history[3].detail.as_deref(), Some("generation 1"));
    assert_eq!(store.history(&opened.id).await.unwrap(), history);

    let other_history = raw.history(&other.id).await.unwrap();
    assert_eq!(kinds(&other_history), [K::Opened]);
    assert_eq!((other_history[0].seq, other_history[0].position), (1, 3));
    assert_eq!(all_events(&raw).len(), 5);
    assert_eq!(raw.shared().trees.history.len(), 5);
    assert_eq!(last_position(&raw), Some(5));

    // The event names the actor the caller passed.
    let someone = Actor::parse("someone else").unwrap();
    raw.transition(
        &other.id,
        Arc::new(|h| Ok(Transition::Changed(attach(h)).into())),
        &someone,
    )
    .await
    .unwrap();
    let other_history = raw.history(&other.id).await.unwrap();
    assert_eq!(kinds(&other_history), [K::Opened, K::Attached]);
    assert_eq!(
        (
            other_history[1].seq,
            other_history[1].position,
            &other_history[1].actor
        ),
        (2, 6, &someone)
    );

    // A replay, a refusal, a lost race and a change the history cannot
    // name write no event.
    let before = (all_events(&raw), raw.load(&other.id).await.unwrap());
    raw.transition(
        &other.id,
        Arc::new(|h| Ok(Transition::Unchanged(h.clone()).into())),
        &actor(),
    )
    .await
    .unwrap();
    raw.transition(
        &other.id,
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
    let unnamed = raw
        .transition(
            &other.id,
            Arc::new(|h| {
                let mut same = h.clone();
                same.reason = "changed in no way the history names".into();
                Ok(Transition::Changed(same).into())
            }),
            &actor(),
        )
        .await;
    assert_unavailable(unnamed, UnavailableKind::Other, "history cannot record");
    assert_eq!(
        (all_events(&raw), raw.load(&other.id).await.unwrap()),
        before
    );
    assert_eq!(
        raw.transition(&other.id, racing(&raw, finish), &actor())
            .await
            .unwrap(),
        Some(TransitionOutcome::Lost)
    );
    assert_eq!(all_events(&raw), before.0);
    assert_eq!(last_position(&raw), Some(6));

    // An unknown handoff has no history.
    assert_eq!(raw.history(&GenerateId::new()).await.unwrap(), vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_writers_get_positions_in_commit_order_and_seqs_without_gaps() {
    let (dir, store, _) = stores().await;
    let path = dir.path().join("store");
    let template = open_on_new_wave(&store, dir.path()).await;
    let mut writers = Vec::new();
    for writer in 0..4 {
        let store = open_store(&StorageConfig::sled(path.clone()))
            .await
            .unwrap()
            .with_actor(Actor::parse(&format!("writer {writer}")).unwrap());
        let dir = dir.path().to_path_buf();
        writers.push(tokio::spawn(async move {
            for _ in 0..5 {
                let opened = open_on_new_wave(&store, &dir).await;
                store.attach_interactive_handoff(&opened.id).await.unwrap();
                store
                    .finish_interactive_handoff(&opened.id, &done(), None)
                    .await
                    .unwrap();
            }
        }));
    }
    // Eight handles race to finish one handoff: one finished event.
    let mut finishers = Vec::new();
    for _ in 0..8 {
        let store = open_store(&StorageConfig::sled(path.clone()))
            .await
            .unwrap();
        let id = template.id.clone();
        finishers.push(tokio::spawn(async move {
            store.finish_interactive_handoff(&id, &done(), None).await
        }));
    }
    for task in writers {
        task.await.unwrap();
    }
    for task in finishers {
        task.await.unwrap().unwrap();
    }

    let raw = SledStore::open(&SledConfig::new(path)).await.unwrap();
    let events = all_events(&raw);
    // 1 + 4 x 5 opens, 20 attaches, 20 finishes and one racing finish.
    assert_eq!(events.len(), 62);
    let positions: Vec<u64> = events.iter().map(|e| e.position).collect();
    assert_eq!(positions, (1..=62).collect::<Vec<_>>());
    assert_eq!(last_position(&raw), Some(62));
    let mut by_handoff: BTreeMap<_, Vec<&HandoffEvent>> = BTreeMap::new();
    for event in &events {
        by_handoff
            .entry(event.handoff_id.clone())
            .or_default()
            .push(event);
    }
    assert_eq!(by_handoff.len(), 21);
    for (id, events) in by_handoff {
        // In position order, each handoff's seqs count from 1 without a
        // gap, and its history reads the same events.
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "{id}");
        let history = raw.history(&id).await.unwrap();
        assert_eq!(history.iter().collect::<Vec<_>>(), events, "{id}");
        let expected = if id == template.id {
            vec![HandoffEventKind::Opened, HandoffEventKind::Finished]
        } else {
            vec![
                HandoffEventKind::Opened,
                HandoffEventKind::Attached,
                HandoffEventKind::Finished,
            ]
        };
        assert_eq!(kinds(&history), expected, "{id}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_due_index_follows_open_extend_finish_and_expire() {
    let (dir, store, raw, clock) = timed_stores().await;
    let start = clock.now();
    let minutes = Duration::minutes;
    let a = open_expiring(&store, &clock, dir.path(), minutes(10)).await;
    let b = open_expiring(&store, &clock, dir.path(), minutes(5)).await;
    let c = open_on_new_wave(&store, dir.path()).await;
    let d = open_expiring(&store, &clock, dir.path(), minutes(20)).await;
    assert_eq!(c.expires_at, None);
    assert_eq!(
        due_entries(&raw),
        [b.id.clone(), a.id.clone(), d.id.clone()]
    );
    assert_eq!(
        raw.shared()
            .trees
            .due
            .get(keys::due(start + minutes(10), &a.id))
            .unwrap(),
        Some(::sled::IVec::default())
    );
    // The deadline is stored in the record.
    let (_, _, json) = stored_parts(&raw.shared().trees.handoffs, &keys::handoff(&a.id));
    assert_eq!(
        serde_json::from_value::<InteractiveHandoff>(json)
            .unwrap()
            .expires_at,
        Some(start + minutes(10))
    );

    // Reads: up to `now` inclusive, earliest first, at most `limit`.
    assert_eq!(raw.due(start, 10).await.unwrap(), no_ids());
    assert_eq!(
        raw.due(start + minutes(5) - Duration::microseconds(1), 10)
            .await
            .unwrap(),
        no_ids()
    );
    assert_eq!(
        raw.due(start + minutes(5), 10).await.unwrap(),
        vec![b.id.clone()]
    );
    assert_eq!(
        raw.due(start + minutes(30), 10).await.unwrap(),
        vec![b.id.clone(), a.id.clone(), d.id.clone()]
    );
    assert_eq!(
        raw.due(start + minutes(30), 2).await.unwrap(),
        vec![b.id.clone(), a.id.clone()]
    );
    assert_eq!(raw.due(start + minutes(30), 0).await.unwrap(), no_ids());

    // Extending moves the entry.
    clock.advance(minutes(1));
    store
        .extend_interactive_handoff(&a.id, start + minutes(2))
        .await
        .unwrap();
    assert_eq!(
        due_entries(&raw),
        [a.id.clone(), b.id.clone(), d.id.clone()]
    );
    assert!(raw
        .shared()
        .trees
        .due
        .get(keys::due(start + minutes(10), &a.id))
        .unwrap()
        .is_none());
    // Finishing drops it; attaching keeps it.
    store
        .finish_interactive_handoff(&b.id, &done(), None)
        .await
        .unwrap();
    store.attach_interactive_handoff(&d.id).await.unwrap();
    assert_eq!(due_entries(&raw), [a.id.clone(), d.id.clone()]);

    // The sweep expires what is due and drops its entry.
    clock.advance(minutes(2));
    let expired = store.expire_due().await.unwrap();
    assert_eq!(
        expired.iter().map(|h| h.id.clone()).collect::<Vec<_>>(),
        vec![a.id.clone()]
    );
    assert_eq!(expired[0].status, InteractiveHandoffStatus::Expired);
    assert_eq!(due_entries(&raw), vec![d.id.clone()]);
    assert_eq!(raw.due(clock.now(), 10).await.unwrap(), no_ids());
    assert!(store.expire_due().await.unwrap().is_empty());
    assert_eq!(
        kinds(&raw.history(&a.id).await.unwrap()),
        [
            HandoffEventKind::Opened,
            HandoffEventKind::Extended,
            HandoffEventKind::Expired
        ]
    );

    // A write on a due handoff stores its expiry, and drops the entry.
    clock.advance(minutes(30));
    let refused = store
        .finish_interactive_handoff(&d.id, &done(), None)
        .await
        .unwrap_err();
    assert_eq!(refused.conflict_kind(), Some(ConflictKind::Expired));
    assert!(due_entries(&raw).is_empty());
    assert_eq!(
        store
            .get_interactive_handoff(&d.id)
            .await
            .unwrap()
            .unwrap()
            .status,
        InteractiveHandoffStatus::Expired
    );
    assert_eq!(
        kinds(&raw.history(&d.id).await.unwrap()),
        [
            HandoffEventKind::Opened,
            HandoffEventKind::Attached,
            HandoffEventKind::Expired
        ]
    );
    // Four opens, an extend, a finish, an attach and two expiries.
    assert_eq!(last_position(&raw), Some(9));
}

#[tokio::test(flavor = "multi_thread")]
async fn due_skips_what_is_no_longer_due_and_refuses_an_entry_without_its_record() {
    let (dir, store, raw, clock) = timed_stores().await;
    let start = clock.now();
    let kept = open_expiring(&store, &clock, dir.path(), Duration::minutes(1)).await;
    let finished = open_expiring(&store, &clock, dir.path(), Duration::minutes(2)).await;
    store
        .finish_interactive_handoff(&finished.id, &done(), None)
        .await
        .unwrap();
    // Entries left behind, as a reader walking the index sees them when a
    // record finishes or moves its deadline meanwhile: one whose record is
    // not due is skipped, and a handoff is named once.
    raw.shared()
        .trees
        .due
        .insert(
            keys::due(start + Duration::minutes(2), &finished.id),
            &[][..],
        )
        .unwrap();
    raw.shared()
        .trees
        .due
        .insert(keys::due(start, &kept.id), &[][..])
        .unwrap();
    assert_eq!(
        raw.due(start + Duration::minutes(5), 10).await.unwrap(),
        vec![kept.id.clone()]
    );
    assert_eq!(
        raw.due(start + Duration::seconds(30), 10).await.unwrap(),
        no_ids()
    );
    // An entry naming no record is damage.
    let unknown: lf_handoff_domain::id::InteractiveHandoffId = GenerateId::new();
    raw.shared()
        .trees
        .due
        .insert(keys::due(start, &unknown), &[][..])
        .unwrap();
    assert_unavailable(
        raw.due(start + Duration::minutes(5), 10).await,
        UnavailableKind::Damaged,
        &format!("index handoffs_due names handoff {unknown}, which is not stored"),
    );
    raw.shared()
        .trees
        .due
        .insert(&b"short"[..], &[][..])
        .unwrap();
    assert_unavailable(
        raw.due(start + Duration::minutes(5), 10).await,
        UnavailableKind::Damaged,
        "malformed key",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handoff_stored_without_history_starts_at_event_1() {
    let (dir, store, raw, _) = timed_stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    let id_key = keys::handoff(&opened.id);
    // As a build without history stored it: format 2, no events.
    raw.shared()
        .trees
        .handoffs
        .insert(&id_key, format_2(1, &opened))
        .unwrap();
    raw.shared().trees.events.clear().unwrap();
    raw.shared().trees.history.clear().unwrap();
    raw.shared()
        .trees
        .counters
        .remove(keys::seq_counter(&opened.id))
        .unwrap();
    assert_eq!(raw.history(&opened.id).await.unwrap(), vec![]);
    assert_eq!(store.history(&opened.id).await.unwrap(), vec![]);
    assert_eq!(
        store
            .history(&GenerateId::new())
            .await
            .unwrap_err()
            .kind_name(),
        "not_found"
    );

    store.attach_interactive_handoff(&opened.id).await.unwrap();
    let history = raw.history(&opened.id).await.unwrap();
    assert_eq!(kinds(&history), [HandoffEventKind::Attached]);
    // Its first event; the position counter went on from where it was.
    assert_eq!((history[0].seq, history[0].position), (1, 2));
    assert_eq!(
        stored_parts(&raw.shared().trees.handoffs, &id_key).0,
        record::FORMAT
    );

    // A record of format 1 or 2 that names a deadline was not written by
    // the build it claims.
    let mut with_deadline = opened.clone();
    with_deadline.expires_at = Some(opened.created_at + Duration::hours(1));
    for format in [1u8, 2] {
        let mut bytes = record::encode(1, &with_deadline).unwrap();
        bytes[0] = format;
        raw.shared().trees.handoffs.insert(&id_key, bytes).unwrap();
        assert_unavailable(
            store.get_interactive_handoff(&opened.id).await,
            UnavailableKind::Damaged,
            &format!("record format {format} has no deadline"),
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreadable_event_or_history_entry_is_refused() {
    let (dir, store, raw, _) = timed_stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    store.attach_interactive_handoff(&opened.id).await.unwrap();
    let other = open_on_new_wave(&store, dir.path()).await;
    let event_key = keys::event(2);
    let good = raw.shared().trees.events.get(event_key).unwrap().unwrap();
    let other_event = raw
        .shared()
        .trees
        .events
        .get(keys::event(3))
        .unwrap()
        .unwrap();
    let mut newer = good.to_vec();
    newer[0] = 5;
    let mut older = good.to_vec();
    older[0] = 2;
    for (bytes, kind, needle) in [
        (
            b"\x03{not json".to_vec(),
            UnavailableKind::Damaged,
            "history event at position 2 is unreadable",
        ),
        (Vec::new(), UnavailableKind::Damaged, "the event is empty"),
        (newer, UnavailableKind::NewerSchema, "record format 5"),
        (
            older,
            UnavailableKind::Damaged,
            "record format 2 has no history events",
        ),
        (
            other_event.to_vec(),
            UnavailableKind::Damaged,
            "the event holds position 3",
        ),
    ] {
        raw.shared().trees.events.insert(event_key, bytes).unwrap();
        assert_unavailable(raw.history(&opened.id).await, kind, needle);
        assert_unavailable(store.history(&opened.id).await, kind, needle);
    }
    raw.shared()
        .trees
        .events
        .insert(event_key, good.clone())
        .unwrap();
    assert_eq!(raw.history(&opened.id).await.unwrap().len(), 2);

    // History entries that name another handoff's event, a missing event,
    // or skip a seq.
    let history_key = keys::history(&opened.id, 2);
    for (key, value, needle) in [
        (
            history_key.clone(),
            keys::event(3).to_vec(),
            format!("position 3 holds event 1 of handoff {}", other.id),
        ),
        (
            history_key.clone(),
            keys::event(99).to_vec(),
            "event 2 names position 99, where no event is stored".to_string(),
        ),
        (
            history_key.clone(),
            b"\x00".to_vec(),
            "position of event 2".to_string(),
        ),
        (
            keys::history(&opened.id, 4),
            keys::event(2).to_vec(),
            "it holds event 4 where event 3 belongs".to_string(),
        ),
    ] {
        let saved = raw.shared().trees.history.get(&key).unwrap();
        raw.shared().trees.history.insert(&key, value).unwrap();
        assert_unavailable(
            raw.history(&opened.id).await,
            UnavailableKind::Damaged,
            &needle,
        );
        match saved {
            Some(saved) => raw.shared().trees.history.insert(&key, saved).unwrap(),
            None => raw.shared().trees.history.remove(&key).unwrap(),
        };
    }
    assert_eq!(raw.history(&opened.id).await.unwrap().len(), 2);
    assert_eq!(raw.history(&other.id).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_counter_behind_the_history_is_refused_and_nothing_is_written() {
    let (dir, store, raw, _) = timed_stores().await;
    let opened = open_on_new_wave(&store, dir.path()).await;
    store.attach_interactive_handoff(&opened.id).await.unwrap();
    let stored = raw.load(&opened.id).await.unwrap();
    let events = all_events(&raw);

    // Position 2 is taken: it is never given again.
    raw.shared()
        .trees
        .counters
        .insert(keys::POSITION, &1u64.to_be_bytes()[..])
        .unwrap();
    assert_unavailable(
        store
            .finish_interactive_handoff(&opened.id, &done(), None)
            .await,
        UnavailableKind::Damaged,
        "position 2 is taken",
    );
    raw.shared()
        .trees
        .counters
        .insert(keys::POSITION, &2u64.to_be_bytes()[..])
        .unwrap();
    // So is the handoff's seq 2.
    raw.shared()
        .trees
        .counters
        .insert(keys::seq_counter(&opened.id), &1u64.to_be_bytes()[..])
        .unwrap();
    assert_unavailable(
        store
            .finish_interactive_handoff(&opened.id, &done(), None)
            .await,
        UnavailableKind::Damaged,
        "event 2 is stored",
    );
    // A counter that is not eight bytes.
    raw.shared()
        .trees
        .counters
        .insert(keys::seq_counter(&opened.id), &b"two"[..])
        .unwrap();
    assert_unavailable(
        store
            .finish_interactive_handoff(&opened.id, &done(), None)
            .await,
        UnavailableKind::Damaged,
        "the last seq of handoff",
    );
    assert_eq!(raw.load(&opened.id).await.unwrap(), stored);
    assert_eq!(all_events(&raw), events);

    // A new handoff whose id already has history is refused as well.
    let parent = new_wave(&store, dir.path()).await;
    let version = raw.load_parent(&parent).await.unwrap().unwrap().version;
    let fresh = at(&opened, &parent, None);
    raw.shared()
        .trees
        .counters
        .insert(keys::seq_counter(&fresh.id), &3u64.to_be_bytes()[..])
        .unwrap();
    assert_unavailable(
        raw.insert(&fresh, version, &actor()).await,
        UnavailableKind::Damaged,
        "it is new, yet its counter says it has 3 events",
    );
    assert_eq!(raw.load(&fresh.id).await.unwrap(), None);
    assert_eq!(all_events(&raw), events);

    raw.shared()
        .trees
        .counters
        .insert(keys::seq_counter(&opened.id), &2u64.to_be_bytes()[..])
        .unwrap();
    store
        .finish_interactive_handoff(&opened.id, &done(), None)
        .await
        .unwrap();
    let history = raw.history(&opened.id).await.unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!((history[2].seq, history[2].position), (3, 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_of_format_2_is_upgraded_to_the_current_one_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let config = StorageConfig::sled(path.clone());
    // A store as the build before deadlines and history left it: marker
    // and records of format 2, and none of the new trees.
    let store = open_store(&config).await.unwrap();
    let opened = open_on_new_wave(&store, dir.path()).await;
    let parent = store.get_parent(&opened.parent).await.unwrap().unwrap();
    drop(store);
    tokio::task::spawn_blocking({
        let path = path.clone();
        let (opened, parent) = (opened.clone(), parent.clone());
        move || {
            let db = open_raw_after_drop(&path);
            db.open_tree(keys::HANDOFFS)
                .unwrap()
                .insert(keys::handoff(&opened.id), format_2(1, &opened))
                .unwrap();
            db.open_tree(keys::PARENTS)
                .unwrap()
                .insert(keys::parent(&opened.parent), format_2(1, &parent))
                .unwrap();
            for tree in [keys::DUE, keys::EVENTS, keys::HISTORY, keys::COUNTERS] {
                assert!(db.drop_tree(tree).unwrap());
            }
            db.flush().unwrap();
        }
    })
    .await
    .unwrap();
    let marker = path.join(files::MARKER);
    std::fs::write(&marker, MARKER_2).unwrap();

    let store = open_store(&config).await.unwrap();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_4);
    assert_eq!(
        store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap(),
        vec![opened.clone()]
    );
    assert_eq!(store.history(&opened.id).await.unwrap(), vec![]);
    let raw = SledStore::open(&SledConfig::new(path.clone()))
        .await
        .unwrap();
    let id_key = keys::handoff(&opened.id);
    assert_eq!(stored_parts(&raw.shared().trees.handoffs, &id_key).0, 2);

    let finished = store
        .finish_interactive_handoff(&opened.id, &done(), None)
        .await
        .unwrap();
    let (format, version, json) = stored_parts(&raw.shared().trees.handoffs, &id_key);
    assert_eq!((format, version), (record::FORMAT, 2));
    assert_eq!(json["expires_at"], serde_json::Value::Null);
    let history = store.history(&opened.id).await.unwrap();
    assert_eq!(kinds(&history), [HandoffEventKind::Finished]);
    assert_eq!((history[0].seq, history[0].position), (1, 1));
    drop((store, raw));

    // Reopening finds it upgraded and changes nothing more.
    let store = open_store(&config).await.unwrap();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_4);
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(finished)
    );
    assert_eq!(store.history(&opened.id).await.unwrap(), history);
}

/// A tree's entries, key and value.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every tree of the store `raw` opened, by name, with every entry.
fn every_tree(raw: &SledStore) -> BTreeMap<Vec<u8>, Entries> {
    raw.shared()
        .db
        .tree_names()
        .into_iter()
        .map(|name| {
            let tree = raw.shared().db.open_tree(&name).unwrap();
            let entries = tree
                .iter()
                .map(|entry| {
                    let (key, value) = entry.unwrap();
                    (key.to_vec(), value.to_vec())
                })
                .collect();
            (name.to_vec(), entries)
        })
        .collect()
}

#[tokio::test]
async fn an_import_writes_every_tree_as_the_stores_own_writes_did() {
    let (dir, store, raw, clock) = timed_stores().await;
    // Every kind of index entry: a finished, claimed handoff at a step
    // (slot freed, step kept), an active one with a deadline (slot, active,
    // due), one extended, one expired, a task with its PR.
    let parent = new_wave(&store, dir.path()).await;
    let (stepped, _) = store
        .open_interactive_handoff(
            OpenRequest::new(&parent)
                .cwd(dir.path())
                .at_step(step("login@1"))
                .build(),
        )
        .await
        .unwrap();
    store
        .finish_interactive_handoff(&stepped.id, &done(), None)
        .await
        .unwrap();
    store
        .claim_interactive_handoff_wake(&stepped.id, 1)
        .await
        .unwrap();
    let (active, _) = store
        .open_interactive_handoff(
            OpenRequest::new(&parent)
                .cwd(dir.path())
                .build()
                .with_options(OpenOptions {
                    step: Some(step("deploy@2")),
                    expires_at: Some(clock.now() + Duration::hours(1)),
                    ..OpenOptions::default()
                }),
        )
        .await
        .unwrap();
    store.attach_interactive_handoff(&active.id).await.unwrap();
    let extended = open_expiring(&store, &clock, dir.path(), Duration::hours(1)).await;
    store
        .extend_interactive_handoff(&extended.id, clock.now() + Duration::hours(5))
        .await
        .unwrap();
    let expiring = open_expiring(&store, &clock, dir.path(), Duration::seconds(1)).await;
    clock.advance(Duration::seconds(2));
    store
        .wait(&expiring.id, Some(std::time::Duration::ZERO))
        .await
        .unwrap();
    let mut out = Vec::new();
    let summary = store.export(&mut out, None).await.unwrap();
    assert!(summary.events >= 9, "{summary:?}");

    let copy = dir.path().join("copy");
    let imported = open_store(&StorageConfig::sled(copy.clone()))
        .await
        .unwrap();
    imported.import(&mut out.as_slice(), None).await.unwrap();
    let raw_copy = SledStore::open(&SledConfig::new(copy)).await.unwrap();
    let trees = every_tree(&raw);
    for (tree, entries) in [
        (keys::DUE, 2),
        (keys::STEPS, 2),
        (keys::ACTIVE_SLOTS, 2),
        (keys::ACTIVE, 2),
        (keys::HANDOFFS, 4),
    ] {
        assert_eq!(
            trees[tree].len(),
            entries,
            "{}",
            String::from_utf8_lossy(tree)
        );
    }
    assert_eq!(every_tree(&raw_copy), trees);
    assert!(raw_copy
        .shared()
        .trees
        .counters
        .get(keys::IMPORTING)
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_store_an_import_left_marked_is_refused_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let raw = SledStore::open(&SledConfig::new(path.clone()))
            .await
            .unwrap();
        raw.shared()
            .trees
            .counters
            .insert(keys::IMPORTING, &b"in progress"[..])
            .unwrap();
        raw.shared().make_durable().unwrap();
    }
    let refused = open_store(&StorageConfig::sled(path.clone())).await;
    assert_unavailable(
        refused,
        UnavailableKind::Damaged,
        "did not finish (the process died",
    );
    assert_unavailable(
        SledStore::open(&SledConfig::new(path)).await,
        UnavailableKind::Damaged,
        "delete the directory and run the import again",
    );
}

// ----- list filters and prune (C17) -----

/// Every key of every tree but `parents` and `task_prs` that names
/// `id` (in its key or its value), as `tree: key`.
fn entries_naming(
    raw: &SledStore,
    id: &lf_handoff_domain::id::InteractiveHandoffId,
) -> Vec<String> {
    let shared = &raw.shared();
    let needle = id.as_str().as_bytes();
    let contains = |bytes: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    let mut found = Vec::new();
    for tree in [
        &shared.trees.handoffs,
        &shared.trees.by_created,
        &shared.trees.by_parent,
        &shared.trees.active,
        &shared.trees.slots,
        &shared.trees.steps,
        &shared.trees.due,
        &shared.trees.by_status,
        &shared.trees.by_home,
        &shared.trees.prunable,
        &shared.trees.history,
        &shared.trees.counters,
    ] {
        for entry in tree.iter() {
            let (key, value) = entry.unwrap();
            if contains(&key) || contains(&value) {
                found.push(format!(
                    "{}: {}",
                    String::from_utf8_lossy(&tree.name()),
                    String::from_utf8_lossy(&key)
                ));
            }
        }
    }
    for entry in shared.trees.events.iter() {
        let (key, value) = entry.unwrap();
        if contains(&value) {
            found.push(format!("handoff_events: {key:?}"));
        }
    }
    found
}

/// The statuses `handoffs_by_status` files handoff `id` under.
fn filed_statuses(
    raw: &SledStore,
    id: &lf_handoff_domain::id::InteractiveHandoffId,
) -> Vec<InteractiveHandoffStatus> {
    InteractiveHandoffStatus::ALL
        .into_iter()
        .filter(|status| {
            let prefix = keys::by_status_prefix(*status);
            raw.shared()
                .trees
                .by_status
                .scan_prefix(&prefix)
                .any(|entry| {
                    keys::id_in_index(keys::BY_STATUS, &entry.unwrap().0, prefix.len()).unwrap()
                        == *id
                })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_list_trees_follow_every_change_and_a_prune_leaves_nothing() {
    let (dir, store, raw, clock) = timed_stores().await;
    let parent = new_wave(&store, dir.path()).await;
    let options = OpenOptions {
        step: Some(step("login@1")),
        expires_at: Some(clock.now() + Duration::hours(1)),
        ..OpenOptions::default()
    };
    let (opened, _) = store
        .open_interactive_handoff(
            OpenRequest::new(&parent)
                .cwd(dir.path())
                .build()
                .with_options(options.clone()),
        )
        .await
        .unwrap();
    let id = opened.id.clone();
    let prunable = |raw: &SledStore| raw.shared().trees.prunable.iter().count();
    assert_eq!(
        filed_statuses(&raw, &id),
        [InteractiveHandoffStatus::Waiting]
    );
    assert_eq!(raw.shared().trees.by_home.iter().count(), 1);
    assert_eq!(prunable(&raw), 0);

    clock.advance(Duration::seconds(1));
    store.attach_interactive_handoff(&id).await.unwrap();
    assert_eq!(
        filed_statuses(&raw, &id),
        [InteractiveHandoffStatus::Attached]
    );
    clock.advance(Duration::seconds(1));
    let finished = store
        .finish_interactive_handoff(&id, &done(), None)
        .await
        .unwrap();
    assert_eq!(
        filed_statuses(&raw, &id),
        [InteractiveHandoffStatus::Completed]
    );
    assert_eq!(prunable(&raw), 0, "an unclaimed wake is not prunable");
    assert_eq!(
        raw.count_prunable(clock.now() + Duration::days(1))
            .await
            .unwrap()
            .handoffs,
        0
    );
    clock.advance(Duration::seconds(1));
    assert!(
        store
            .claim_interactive_handoff_wake(&id, 1)
            .await
            .unwrap()
            .claimed
    );
    let finished_at = finished.terminal_at.unwrap();
    assert_eq!(
        raw.shared()
            .trees
            .prunable
            .iter()
            .map(|entry| entry.unwrap().0.to_vec())
            .collect::<Vec<_>>(),
        vec![keys::prunable(finished_at, &id)]
    );
    assert_eq!(raw.shared().trees.by_home.iter().count(), 1);
    assert_eq!(raw.shared().trees.by_status.iter().count(), 1);

    // The cutoff is exclusive: finished at the cutoff is not before it.
    let none = lf_handoff_application::ports::PruneCount::default();
    assert_eq!(raw.count_prunable(finished_at).await.unwrap(), none);
    assert_eq!(raw.prune_batch(finished_at, 10).await.unwrap(), none);
    let just_after = finished_at + Duration::nanoseconds(1);
    let all = lf_handoff_application::ports::PruneCount {
        handoffs: 1,
        events: 4,
    };
    assert_eq!(raw.count_prunable(just_after).await.unwrap(), all);
    let position = last_position(&raw);
    assert_eq!(raw.prune_batch(just_after, 10).await.unwrap(), all);
    assert_eq!(entries_naming(&raw, &id), Vec::<String>::new());
    // The position counter stays: a position is never given twice.
    assert_eq!(last_position(&raw), position);
    assert_eq!(raw.prune_batch(just_after, 10).await.unwrap(), none);
    // The step is free again.
    assert_eq!(
        at_step(&raw, &parent, &step("login@1")).await.unwrap(),
        None
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn status_and_home_lists_read_only_the_records_their_index_names() {
    let (dir, store, raw) = stores().await;
    let kept = open_on_new_wave(&store, dir.path()).await;
    let parent = new_wave(&store, dir.path()).await;
    let mut elsewhere = OpenRequest::new(&parent).cwd(dir.path()).build();
    elsewhere.home = WaveHome::parse("ssh://jill@build.example").unwrap();
    let (finished, _) = store.open_interactive_handoff(elsewhere).await.unwrap();
    store
        .finish_interactive_handoff(&finished.id, &done(), None)
        .await
        .unwrap();
    damage_record(&raw, &finished.id);
    for query in [
        ListQuery {
            statuses: vec![InteractiveHandoffStatus::Waiting],
            ..Default::default()
        },
        ListQuery {
            home: Some(kept.home.clone()),
            ..Default::default()
        },
        ListQuery {
            statuses: vec![
                InteractiveHandoffStatus::Waiting,
                InteractiveHandoffStatus::Failed,
            ],
            ..Default::default()
        },
    ] {
        assert_eq!(
            store
                .list_interactive_handoffs(query.clone())
                .await
                .unwrap(),
            vec![kept.clone()],
            "{query:?}"
        );
    }
    for query in [
        ListQuery {
            statuses: vec![InteractiveHandoffStatus::Completed],
            ..Default::default()
        },
        ListQuery {
            home: Some(finished.home.clone()),
            ..Default::default()
        },
    ] {
        assert_unavailable(
            store.list_interactive_handoffs(query.clone()).await,
            UnavailableKind::Damaged,
            "unreadable",
        );
    }
    // An entry left without its record is damage; one that went with its
    // record (a prune while the list read) is skipped.
    raw.shared()
        .trees
        .handoffs
        .remove(keys::handoff(&finished.id))
        .unwrap();
    assert_unavailable(
        store
            .list_interactive_handoffs(ListQuery {
                home: Some(finished.home.clone()),
                ..Default::default()
            })
            .await,
        UnavailableKind::Damaged,
        "not stored",
    );
    let entry = keys::by_home(&finished.home, finished.created_at, &finished.id);
    assert_unavailable(
        super::repository::named_record(
            &raw.shared(),
            &raw.shared().trees.by_home,
            &entry,
            &finished.id,
        ),
        UnavailableKind::Damaged,
        "not stored",
    );
    raw.shared().trees.by_home.remove(&entry).unwrap();
    assert_eq!(
        super::repository::named_record(
            &raw.shared(),
            &raw.shared().trees.by_home,
            &entry,
            &finished.id
        )
        .unwrap(),
        None
    );
    assert!(store
        .list_interactive_handoffs(ListQuery {
            home: Some(finished.home.clone()),
            ..Default::default()
        })
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upgrade_fills_the_list_trees_from_scratch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let config = StorageConfig::sled(path.clone());
    let store = open_store(&config).await.unwrap();
    let waiting = open_on_new_wave(&store, dir.path()).await;
    let claimed = open_on_new_wave(&store, dir.path()).await;
    store
        .finish_interactive_handoff(&claimed.id, &done(), None)
        .await
        .unwrap();
    assert!(
        store
            .claim_interactive_handoff_wake(&claimed.id, 1)
            .await
            .unwrap()
            .claimed
    );
    let claimed = store
        .get_interactive_handoff(&claimed.id)
        .await
        .unwrap()
        .unwrap();
    drop(store);
    // A store of format 2 whose upgrade was killed while it filled the
    // trees, then changed by a build of format 2 (which knows nothing of
    // them): a stale entry for the waiting handoff, which it attached.
    tokio::task::spawn_blocking({
        let path = path.clone();
        let waiting = waiting.clone();
        move || {
            let db = open_raw_after_drop(&path);
            let by_status = db.open_tree(keys::BY_STATUS).unwrap();
            by_status.clear().unwrap();
            by_status
                .insert(
                    keys::by_status(
                        InteractiveHandoffStatus::Waiting,
                        waiting.created_at,
                        &waiting.id,
                    ),
                    &[][..],
                )
                .unwrap();
            let attached = attach(&waiting);
            db.open_tree(keys::HANDOFFS)
                .unwrap()
                .insert(keys::handoff(&waiting.id), format_2(2, &attached))
                .unwrap();
            for tree in [keys::BY_HOME, keys::PRUNABLE] {
                db.open_tree(tree).unwrap().clear().unwrap();
            }
            db.flush().unwrap();
        }
    })
    .await
    .unwrap();
    let marker = path.join(files::MARKER);
    std::fs::write(&marker, MARKER_2).unwrap();

    let store = open_store(&config).await.unwrap();
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), MARKER_4);
    let raw = SledStore::open(&SledConfig::new(path.clone()))
        .await
        .unwrap();
    assert_eq!(
        filed_statuses(&raw, &waiting.id),
        [InteractiveHandoffStatus::Attached]
    );
    assert_eq!(
        filed_statuses(&raw, &claimed.id),
        [InteractiveHandoffStatus::Completed]
    );
    assert_eq!(raw.shared().trees.by_status.iter().count(), 2);
    assert_eq!(raw.shared().trees.by_home.iter().count(), 2);
    assert_eq!(
        raw.shared()
            .trees
            .prunable
            .iter()
            .map(|entry| entry.unwrap().0.to_vec())
            .collect::<Vec<_>>(),
        vec![keys::prunable(claimed.terminal_at.unwrap(), &claimed.id)]
    );
    assert!(store
        .list_interactive_handoffs(ListQuery {
            statuses: vec![InteractiveHandoffStatus::Waiting],
            ..Default::default()
        })
        .await
        .unwrap()
        .is_empty());
    drop((store, raw));
    // Reopening finds the store upgraded: the trees are not filled again.
    let store = open_store(&config).await.unwrap();
    let raw = SledStore::open(&SledConfig::new(path)).await.unwrap();
    raw.shared().trees.by_home.clear().unwrap();
    drop((store, raw));
    let store = open_store(&config).await.unwrap();
    assert!(store
        .list_interactive_handoffs(ListQuery {
            home: Some(waiting.home.clone()),
            ..Default::default()
        })
        .await
        .unwrap()
        .is_empty());
}
