//! Opening what a killed writer leaves, and refusing damage sled would cut
//! away (`recovery`, `log_audit`). The states a kill leaves are made here
//! from real stores by the file operation the kill interrupted; the
//! conformance suite opens stores that real kills left
//! (`tests/fixtures/killed`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lf_handoff_application::{GenerateId, Store, StoreError, UnavailableKind};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{InteractiveHandoffParent, OpenInteractiveHandoff};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;

use super::error::is_locked;
use super::files::{self, SLED_CONF};
use super::log_audit::LOG;
use super::recovery::SEGMENT_SIZE;
use super::tests::{open_raw_after_drop, snapshot};
use crate::{open_store, StorageConfig};

async fn open(path: &Path) -> Result<Store, StoreError> {
    open_store(&StorageConfig::sled(path.to_path_buf())).await
}

/// Opens `count` handoffs on new waves.
async fn open_handoffs(store: &Store, count: usize) -> Vec<InteractiveHandoffId> {
    let mut ids = Vec::new();
    for n in 0..count {
        let wave = Wave::new(WaveId::new(), format!("w{n}"), "/srv/repo".into());
        store.create_wave(&wave).await.unwrap();
        let request = OpenInteractiveHandoff {
            parent: InteractiveHandoffParent::Wave(wave.id().clone()),
            home: WaveHome::parse("jack@local").unwrap(),
            cwd: PathBuf::from("/srv/repo"),
            provider: "codex".into(),
            provider_session_id: None,
            body_generation: 1,
            reason: format!("login {n}"),
            environment: BTreeMap::new(),
            attach_argv: vec!["tmux".into(), "attach".into()],
            options: Default::default(),
        };
        ids.push(store.open_interactive_handoff(request).await.unwrap().0.id);
    }
    ids
}

/// A store with a snapshot and handoffs written after it, closed: the next
/// open walks them and writes a new snapshot.
async fn store_with_a_snapshot(path: &Path) -> Vec<InteractiveHandoffId> {
    let store = open(path).await.unwrap();
    let mut ids = open_handoffs(&store, 3).await;
    drop(store);
    let store = open(path).await.unwrap();
    ids.extend(open_handoffs(&store, 2).await);
    drop(store);
    assert!(
        sled_snapshots(path).len() == 1,
        "{:?}",
        sled_snapshots(path)
    );
    ids
}

/// Whether sled itself, opened directly, refuses the store at `path` for
/// another reason than its lock: a `Db` of the store's last handle may
/// still be closing on sled's threads, so a lock error is waited out for
/// up to two seconds (as `handle::open` does).
fn sled_refuses(path: &Path) -> bool {
    let started = std::time::Instant::now();
    loop {
        match ::sled::Config::new().path(path).open() {
            Ok(_) => return false,
            Err(error)
                if is_locked(&error) && started.elapsed() < std::time::Duration::from_secs(2) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(error) => return !is_locked(&error),
        }
    }
}

/// The store's `snap.*` files, sorted.
fn sled_snapshots(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(path)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("snap."))
        .collect();
    names.sort();
    names
}

async fn assert_all_there(store: &Store, ids: &[InteractiveHandoffId]) {
    for id in ids {
        assert!(
            store.get_interactive_handoff(id).await.unwrap().is_some(),
            "{id} is gone"
        );
    }
}

#[track_caller]
fn assert_damaged(result: Result<Store, StoreError>, needle: &str) {
    match result {
        Err(StoreError::Unavailable { kind, message, .. }) => {
            assert_eq!(kind, UnavailableKind::Damaged, "{message}");
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
            assert!(message.contains("left unchanged"), "{message:?}");
        }
        Err(other) => panic!("expected Damaged, got {other}"),
        Ok(_) => panic!("a damaged store opened"),
    }
}

/// The name sled gives the snapshot after `name`'s (one sequence number
/// further): it sorts last, as the one a killed open was writing did.
fn next_snapshot_name(name: &str) -> String {
    let lsn = i64::from_str_radix(name.trim_start_matches("snap."), 16).unwrap();
    format!("snap.{:016X}.generating", lsn + 1)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unfinished_snapshot_a_killed_open_left_is_removed_and_the_store_opens() {
    let dir = tempfile::tempdir().unwrap();
    // The killed open created the file (empty), or wrote part of it.
    for keep in [0, 5, 12, 40] {
        let path = dir.path().join(format!("cut-at-{keep}"));
        let ids = store_with_a_snapshot(&path).await;
        let last = sled_snapshots(&path).pop().unwrap();
        let whole = std::fs::read(path.join(&last)).unwrap();
        let unfinished = path.join(next_snapshot_name(&last));
        std::fs::write(&unfinished, &whole[..keep.min(whole.len() - 1)]).unwrap();
        // sled itself refuses the store.
        assert!(sled_refuses(&path), "sled opened an unfinished snapshot");

        let store = open(&path).await.unwrap();
        assert_all_there(&store, &ids).await;
        assert!(!unfinished.exists(), "{} was kept", unfinished.display());
        let more = open_handoffs(&store, 1).await;
        drop(store);
        let store = open(&path).await.unwrap();
        assert_all_there(&store, &[ids, more].concat()).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_snapshot_that_was_renamed_is_refused_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    store_with_a_snapshot(&path).await;
    let last = path.join(sled_snapshots(&path).pop().unwrap());
    let mut bytes = std::fs::read(&last).unwrap();
    bytes[2] ^= 0x55;
    std::fs::write(&last, bytes).unwrap();
    let before = snapshot(&path);
    assert_damaged(open(&path).await, "its sled snapshot snap.");
    assert_eq!(snapshot(&path), before);
}

#[tokio::test(flavor = "multi_thread")]
async fn settings_a_killed_creation_cut_before_their_checksum_are_completed() {
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made");
    drop(open(&made).await.unwrap());
    let whole = std::fs::read(made.join(SLED_CONF)).unwrap();
    assert_eq!(whole.len(), 62, "sled's settings changed: {whole:?}");
    // The creation was killed between sled's two writes of `conf`: the
    // text is there, its CRC is not, and no log exists yet (or an empty
    // one, had another open got that far).
    for log in [None, Some(&b""[..])] {
        let path = dir.path().join(format!("log-{}", log.is_some()));
        std::fs::create_dir(&path).unwrap();
        std::fs::copy(made.join(files::MARKER), path.join(files::MARKER)).unwrap();
        std::fs::write(path.join(SLED_CONF), &whole[..whole.len() - 4]).unwrap();
        if let Some(log) = log {
            std::fs::write(path.join(LOG), log).unwrap();
        }
        assert!(
            sled_refuses(&path),
            "sled opened settings without a checksum"
        );

        let store = open(&path).await.unwrap();
        let ids = open_handoffs(&store, 1).await;
        drop(store);
        assert_eq!(std::fs::read(path.join(SLED_CONF)).unwrap(), whole);
        assert_all_there(&open(&path).await.unwrap(), &ids).await;
    }
    assert_eq!(SEGMENT_SIZE, 512 * 1024);
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_is_repaired_while_another_open_file_holds_the_stores_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let ids = store_with_a_snapshot(&path).await;
    let holder = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || open_raw_after_drop(&path))
            .await
            .unwrap()
    };
    let last = sled_snapshots(&path).pop().unwrap();
    let unfinished = path.join(next_snapshot_name(&last));
    std::fs::write(&unfinished, b"").unwrap();
    match open(&path).await {
        Err(StoreError::Unavailable { kind, message, .. }) => {
            assert_eq!(kind, UnavailableKind::Locked, "{message}")
        }
        Err(other) => panic!("expected Locked, got {other}"),
        Ok(_) => panic!("a held store opened"),
    }
    assert!(unfinished.exists(), "a held store was repaired");
    tokio::task::spawn_blocking(move || drop(holder))
        .await
        .unwrap();
    let store = open(&path).await.unwrap();
    assert_all_there(&store, &ids).await;
    assert!(!unfinished.exists());
}

/// The data of the log: from its first to its last non-zero byte.
fn data_span(log: &[u8]) -> (usize, usize) {
    let first = log.iter().position(|&b| b != 0).unwrap();
    let last = log.iter().rposition(|&b| b != 0).unwrap();
    (first, last)
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_in_the_middle_of_the_log_is_refused_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let pristine = dir.path().join("pristine");
    store_with_a_snapshot(&pristine).await;
    let log = std::fs::read(pristine.join(LOG)).unwrap();
    let (first, last) = data_span(&log);
    let mut noise = 0x2545_f491_4f6c_dd1d_u64;
    for step in 1..8 {
        let path = dir.path().join(format!("garbage-{step}"));
        std::fs::create_dir(&path).unwrap();
        for (file, bytes) in snapshot(&pristine) {
            std::fs::write(path.join(file.file_name().unwrap()), bytes).unwrap();
        }
        let mut damaged = log.clone();
        let at = first + (last - first) * step / 8;
        for byte in &mut damaged[at..at + 100] {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            *byte = noise.to_le_bytes()[0];
        }
        std::fs::write(path.join(LOG), &damaged).unwrap();
        let before = snapshot(&path);
        assert_damaged(open(&path).await, "its sled log db holds, at byte");
        assert_eq!(snapshot(&path), before, "garbage at byte {at}");
    }
}
