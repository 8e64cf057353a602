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
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus, OpenInteractiveHandoff, Transition,
};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use lf_handoff_domain::{ConflictKind, DomainError};
use tempfile::TempDir;

use super::{keys, record, SledStore};
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

async fn open_on_new_wave(store: &Store, dir: &Path) -> InteractiveHandoff {
    let wave = Wave::new(WaveId::new(), "w".into(), dir.display().to_string());
    store.create_wave(&wave).await.unwrap();
    let request = OpenInteractiveHandoff {
        parent: InteractiveHandoffParent::Wave(wave.id().clone()),
        home: WaveHome::parse("jack@local").unwrap(),
        cwd: PathBuf::from(dir),
        provider: "codex".into(),
        provider_session_id: None,
        body_generation: 1,
        reason: "login".into(),
        environment: BTreeMap::new(),
        attach_argv: vec!["tmux".into(), "attach".into()],
    };
    store.open_interactive_handoff(request).await.unwrap().0
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
    assert_eq!(stored[1..9], 1u64.to_be_bytes());

    for (format, kind, needle) in [
        (2u8, UnavailableKind::NewerSchema, "newer than this build"),
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
        raw.insert(&second, parent.version).await.unwrap(),
        InsertOutcome::ParentBusy
    );
    assert_eq!(
        raw.insert(&second, parent.version + 1).await.unwrap(),
        InsertOutcome::ParentChanged
    );

    // A record that another writer changes between the transition's load
    // and its write is not overwritten, on either write path: the record's
    // compare-and-swap (attach) and the multi-tree transaction (finish).
    for next in [attach, finish] {
        assert_eq!(
            raw.transition(&opened.id, racing(&raw, next))
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
            Arc::new(|h| Ok(Transition::Changed(finish(h)).into()))
        )
        .await
        .unwrap(),
        Some(TransitionOutcome::Applied {
            handoff: Box::new(finished.clone()),
            answer: true,
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
            Arc::new(|h| Ok(Transition::Unchanged(h.clone()).into()))
        )
        .await
        .unwrap(),
        Some(TransitionOutcome::Applied {
            handoff: Box::new(finished.clone()),
            answer: true,
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
            Arc::new(|_| unreachable!("nothing to decide on"))
        )
        .await
        .unwrap(),
        None
    );

    assert_eq!(
        raw.insert(&second, parent.version).await.unwrap(),
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
    let marker = path.join(super::files::MARKER);
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        format!("lf-handoff sled store\nformat {}\n", record::FORMAT)
    );
    std::fs::write(&marker, "lf-handoff sled store\nformat 2\n").unwrap();
    assert_unavailable(
        open_store(&config).await,
        UnavailableKind::NewerSchema,
        "newer lf-handoff (store format 2",
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
    assert!(path.join(super::files::MARKER).is_file());
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
