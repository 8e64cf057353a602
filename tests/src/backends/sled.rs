//! The sled backend under test, the stores C11 must refuse, and the
//! scenarios that replace the cross-process ones (sled allows one process).

use lf_handoff_adapters::ListQuery;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use lf_handoff_adapters::{open_store, StorageConfig, Store, StoreError, UnavailableKind};
use tokio::io::AsyncWriteExt;

use crate::fixtures::{location, open_on_new_wave, outcome};
use crate::upgrade::{fixtures, Release};
use crate::worker::Worker;
use crate::{Backend, BoxFuture, Unusable};

/// The scenarios only sled has, which replace the cross-process ones (sled
/// allows one process per store), as [`scenario_tests!`](crate::scenario_tests)
/// runs them on the backend `$make` builds (`backends::sled()`).
#[macro_export]
macro_rules! sled_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [backends::sled];
            AnyBackend: [
                a_second_process_is_refused_while_the_store_is_open,
                open_store_is_refused_while_another_process_holds_it,
                handles_in_one_process_share_the_store,
                reopening_right_after_the_last_handle_drops_works,
                a_new_store_directory_is_private,
                a_store_whose_open_was_killed_mid_snapshot_opens_with_every_record,
                a_store_whose_creation_was_killed_opens_and_works,
                garbage_in_the_middle_of_the_log_is_refused_unchanged,
            ],
        );
    };
}

/// sled directories in the test's temporary directory.
#[derive(Debug, Default)]
pub struct SledBackend {
    /// Worker processes holding a store open for the "locked" C11 case;
    /// stopped by `cleanup` (and killed if dropped first).
    holders: Mutex<Vec<Worker>>,
    /// Hold the "locked" case open in this process instead of a worker.
    hold_here: bool,
    /// The stores this process holds open for that case; closed by
    /// `cleanup`.
    held: Mutex<Vec<Store>>,
    /// Open the stores under test held only during calls, as the command
    /// line does (`SledHold::DuringCalls`).
    during_calls: bool,
}

impl SledBackend {
    /// A backend whose "locked" C11 case is held open by this process, not
    /// by a worker: for tests whose subject is another process (the
    /// command line's), which have no worker binary.
    pub fn holding_here() -> Self {
        Self {
            hold_here: true,
            ..Self::default()
        }
    }
}

/// Builds the sled backend; it needs nothing and never skips.
pub async fn sled() -> Result<Box<dyn Backend>, String> {
    Ok(Box::new(SledBackend::default()))
}

/// The sled backend with its stores held only while calls run, as the
/// command line opens them (`StorageConfig::shared_with_other_processes`).
pub async fn sled_during_calls() -> Result<Box<dyn Backend>, String> {
    Ok(Box::new(SledBackend {
        during_calls: true,
        ..SledBackend::default()
    }))
}

/// The exit code the worker uses for `Unavailable`, as the CLI does.
pub const EXIT_UNAVAILABLE: i32 = 5;

impl Backend for SledBackend {
    fn name(&self) -> &'static str {
        "sled"
    }

    fn config(&self, location: PathBuf) -> StorageConfig {
        let config = StorageConfig::sled(location);
        if self.during_calls {
            config.shared_with_other_processes()
        } else {
            config
        }
    }

    fn shares_across_processes(&self) -> bool {
        false
    }

    fn release_store<'a>(
        &'a self,
        release: Release,
        dir: &'a Path,
    ) -> BoxFuture<'a, StorageConfig> {
        Box::pin(async move {
            let store = dir.join(format!("release-{}", release.number()));
            copy_dir(&fixtures(release).join("sled"), &store);
            StorageConfig::sled(store)
        })
    }

    fn unusable_stores<'a>(&'a self, dir: &'a Path) -> BoxFuture<'a, Vec<Unusable>> {
        Box::pin(async move {
            let mut cases = Vec::new();

            let file = dir.join("a-file");
            std::fs::write(&file, b"not a directory\n").unwrap();
            cases.push(Unusable {
                what: "a regular file".into(),
                config: StorageConfig::sled(file.clone()),
                kind: UnavailableKind::Damaged,
                message_names: file.display().to_string(),
                guarded: vec![file],
            });

            let foreign = dir.join("foreign");
            std::fs::create_dir(&foreign).unwrap();
            std::fs::write(foreign.join("conf"), b"segment_size: 524288\n").unwrap();
            std::fs::write(foreign.join("db"), b"someone else's data\n".repeat(100)).unwrap();
            cases.push(unusable(
                "a directory of someone else's files",
                &foreign,
                UnavailableKind::Damaged,
            ));

            let garbage = dir.join("garbage-log");
            populated_store(&garbage).await;
            let log = garbage.join("db");
            let length = std::fs::metadata(&log).unwrap().len() as usize;
            std::fs::write(&log, b"garbage!".repeat(length / 8 + 1)).unwrap();
            cases.push(unusable(
                "a store whose log is garbage",
                &garbage,
                UnavailableKind::Damaged,
            ));

            let bad_conf = dir.join("bad-conf");
            populated_store(&bad_conf).await;
            std::fs::write(bad_conf.join("conf"), b"segment_size: 1\n").unwrap();
            cases.push(unusable(
                "a store whose sled settings are corrupt",
                &bad_conf,
                UnavailableKind::Damaged,
            ));

            let newer = dir.join("newer");
            populated_store(&newer).await;
            std::fs::write(
                newer.join("lf-handoff-store"),
                b"lf-handoff sled store\nformat 99\n",
            )
            .unwrap();
            cases.push(unusable(
                "a store from a newer format",
                &newer,
                UnavailableKind::NewerSchema,
            ));

            let locked = dir.join("locked");
            populated_store(&locked).await;
            let config = StorageConfig::sled(locked.clone());
            if self.hold_here {
                let store = open_store(&config).await.unwrap();
                self.held.lock().unwrap().push(store);
            } else {
                let mut holder = Worker::spawn(&config.url(), &["hold".into()]);
                assert_eq!(holder.line().await.as_deref(), Some("ready"));
                self.holders.lock().unwrap().push(holder);
            }
            cases.push(unusable(
                "a store another process holds",
                &locked,
                UnavailableKind::Locked,
            ));
            cases
        })
    }

    fn cleanup(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.held.lock().unwrap().clear();
            let holders: Vec<Worker> = std::mem::take(&mut *self.holders.lock().unwrap());
            for mut holder in holders {
                release(&mut holder).await;
            }
        })
    }
}

/// A refused store whose every file must stay byte-for-byte unchanged.
fn unusable(what: &str, dir: &Path, kind: UnavailableKind) -> Unusable {
    Unusable {
        what: what.into(),
        config: StorageConfig::sled(dir.to_path_buf()),
        kind,
        message_names: dir.display().to_string(),
        guarded: files_in(dir),
    }
}

/// Every file under `dir`, recursively, in a stable order.
pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_in(&path));
        } else {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// A real store with a few handoffs, closed, then opened and closed once
/// more so that sled has nothing left to tidy when it is next opened.
async fn populated_store(dir: &Path) {
    let config = StorageConfig::sled(dir.to_path_buf());
    let store = open_store(&config).await.unwrap();
    for _ in 0..5 {
        open_on_new_wave(&store, dir.parent().unwrap()).await;
    }
    drop(store);
    drop(open_store(&config).await.unwrap());
}

/// Tells a `hold` worker to close its store and waits for it to exit 0.
async fn release(holder: &mut Worker) {
    let mut stdin = holder.child.stdin.take().expect("piped stdin");
    stdin.write_all(b"release\n").await.unwrap();
    stdin.flush().await.unwrap();
    drop(stdin);
    assert_eq!(holder.line().await.as_deref(), Some("released"));
    let status = holder.child.wait().await.unwrap();
    assert!(status.success(), "the holder exited with {status}");
}

#[track_caller]
fn assert_locked(kind: UnavailableKind, message: &str, dir: &Path) {
    assert_eq!(kind, UnavailableKind::Locked, "{message}");
    let canonical = std::fs::canonicalize(dir).unwrap();
    assert!(
        message.contains(&canonical.display().to_string()),
        "{message:?} does not name {}",
        canonical.display()
    );
}

/// Replaces C3/C6 across processes: while this process has the store open,
/// a second process's open fails with `Unavailable` saying the store is
/// locked and why, and the worker exits with the unavailable code (5). The
/// holder's store keeps working, and once it is closed a second process
/// opens the store and sees everything.
pub async fn a_second_process_is_refused_while_the_store_is_open(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = backend.config(location(dir.path()));
    let store = open_store(&config).await.unwrap();
    let opened = open_on_new_wave(&store, dir.path()).await;

    let mut probe = Worker::spawn(&config.url(), &["probe".into()]);
    let line = probe.line().await.unwrap();
    let message = line
        .strip_prefix("unavailable locked ")
        .unwrap_or_else(|| panic!("the probe printed {line:?}"));
    assert_locked(UnavailableKind::Locked, message, &location(dir.path()));
    let status = probe.child.wait().await.unwrap();
    assert_eq!(status.code(), Some(EXIT_UNAVAILABLE), "{status}");

    // The refused process changed nothing for the holder.
    let finished = store
        .finish_interactive_handoff(&opened.id, &outcome(1), None)
        .await
        .unwrap();
    drop(store);

    let mut probe = Worker::spawn(&config.url(), &["probe".into(), opened.id.to_string()]);
    assert_eq!(
        probe.line().await.as_deref(),
        Some(format!("opened {}", finished.status).as_str())
    );
    assert!(probe.child.wait().await.unwrap().success());
}

/// The other direction: while another process holds the store, this
/// process's `open_store` is `Unavailable` with the same message (after the
/// bounded wait for the lock); once the holder exits, it opens.
pub async fn open_store_is_refused_while_another_process_holds_it(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = backend.config(location(dir.path()));
    let store = open_store(&config).await.unwrap();
    let opened = open_on_new_wave(&store, dir.path()).await;
    drop(store);

    let mut holder = Worker::spawn(&config.url(), &["hold".into()]);
    assert_eq!(holder.line().await.as_deref(), Some("ready"));
    for _ in 0..2 {
        match open_store(&config).await {
            Err(StoreError::Unavailable { kind, message, .. }) => {
                assert_locked(kind, &message, &location(dir.path()))
            }
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("a second process opened a held sled store"),
        }
    }
    release(&mut holder).await;

    let store = open_store(&config).await.unwrap();
    assert_eq!(
        store.get_interactive_handoff(&opened.id).await.unwrap(),
        Some(opened)
    );
}

/// Handles in one process share one `Db`: opening the same directory many
/// times, by differently spelled paths, never reports a lock, and every
/// handle sees every other handle's writes at once.
pub async fn handles_in_one_process_share_the_store(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let path = location(dir.path());
    let first = open_store(&backend.config(path.clone())).await.unwrap();
    let spellings = [
        path.clone(),
        dir.path().join(".").join("registry.db"),
        path.join("."),
    ];
    for spelling in spellings {
        let other = open_store(&backend.config(spelling)).await.unwrap();
        let opened = open_on_new_wave(&other, dir.path()).await;
        assert_eq!(
            first.get_interactive_handoff(&opened.id).await.unwrap(),
            Some(opened)
        );
    }
}

/// Dropping every handle and reopening at once works, again and again:
/// the lock a closing `Db` still holds is waited for, not reported.
pub async fn reopening_right_after_the_last_handle_drops_works(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = backend.config(location(dir.path()));
    let mut ids = Vec::new();
    for _ in 0..20 {
        let store = open_store(&config).await.unwrap();
        ids.push(open_on_new_wave(&store, dir.path()).await.id);
        assert_eq!(
            store
                .list_interactive_handoffs(ListQuery::default())
                .await
                .unwrap()
                .len(),
            ids.len()
        );
    }
    let store = open_store(&config).await.unwrap();
    let listed: Vec<_> = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|handoff| handoff.id)
        .collect();
    assert_eq!(listed, ids);
}

/// A new store's directory is private to its owner (mode 0700).
pub async fn a_new_store_directory_is_private(backend: &dyn Backend) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("store");
    drop(open_store(&backend.config(path.clone())).await.unwrap());
    for created in [path.clone(), dir.path().join("nested")] {
        let mode = std::fs::metadata(&created).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}: {mode:o}", created.display());
    }
}

/// Copies the directory `from` to `to` (created 0700), files 0600.
fn copy_dir(from: &Path, to: &Path) {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().mode(0o700).create(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
}

/// A copy of the store `name` that a real kill left
/// (`tests/fixtures/killed/<name>`, made by its `make.sh`), in `dir`.
fn killed_store(name: &str, dir: &Path) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/killed");
    let store = dir.join(name);
    copy_dir(&fixture.join(name), &store);
    store
}

/// The handoffs the killed stores hold, as `status --json` printed them
/// before the kill, without `due` (which the command line works out from
/// the deadline and the time when it prints), and with the fields of
/// answers (C26), which the build that made them lacked, as its records
/// read today: `null`.
fn killed_manifest() -> Vec<serde_json::Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/killed/snapshot.handoffs.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut handoffs: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    for handoff in &mut handoffs {
        let fields = handoff.as_object_mut().unwrap();
        fields.remove("due");
        for field in ["choices", "form", "on_expiry", "answer"] {
            fields.entry(field).or_insert(serde_json::Value::Null);
        }
    }
    handoffs
}

/// The `snap.*.generating` files of a store directory.
fn generating(store: &Path) -> Vec<PathBuf> {
    files_in(store)
        .into_iter()
        .filter(|file| file.to_string_lossy().ends_with(".generating"))
        .collect()
}

/// An open killed while sled wrote its new snapshot left an empty, or a
/// partly written, `snap.<lsn>.generating`, which sled reads first and
/// refuses. The store opens with every handoff as it was acknowledged
/// before the kill, and then works: a lifecycle, a reopen.
pub async fn a_store_whose_open_was_killed_mid_snapshot_opens_with_every_record(
    _backend: &dyn Backend,
) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = killed_manifest();
    for name in ["snapshot-empty", "snapshot-partial"] {
        let path = killed_store(name, dir.path());
        assert_eq!(generating(&path).len(), 1, "{name}: the fixture changed");
        let config = StorageConfig::sled(path.clone());
        let store = open_store(&config)
            .await
            .unwrap_or_else(|e| panic!("{name} does not open: {e}"));
        assert!(
            generating(&path).is_empty(),
            "{name}: the unfinished snapshot stayed"
        );
        let listed = store
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap();
        let listed: Vec<serde_json::Value> = listed
            .iter()
            .map(|handoff| serde_json::to_value(handoff).unwrap())
            .collect();
        for expected in &manifest {
            assert!(
                listed.contains(expected),
                "{name}: {expected} is not stored as written"
            );
        }
        assert_eq!(listed.len(), manifest.len(), "{name}");
        drop(store);
        let store = crate::fixtures::works_across_a_reopen(&config, dir.path()).await;
        assert_eq!(
            store
                .list_interactive_handoffs(ListQuery::default())
                .await
                .unwrap()
                .len(),
            manifest.len() + 1
        );
    }
}

/// A creation killed between sled's two writes of its settings file left
/// them without their checksum, and no log: sled refuses that. The store
/// opens (empty: nothing was acknowledged) and works.
pub async fn a_store_whose_creation_was_killed_opens_and_works(_backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let path = killed_store("creation", dir.path());
    let config = StorageConfig::sled(path.clone());
    crate::fixtures::opens_empty_and_works(&config, dir.path()).await;
}

/// Garbage written in the middle of the log is damage, not a torn tail:
/// the store is refused as damaged, naming what is wrong, and every file
/// is left byte for byte (sled itself would zero the log from the garbage
/// on and lose what follows; the store's unfinished snapshot, which a
/// store that is not damaged gets repaired, is left too).
pub async fn garbage_in_the_middle_of_the_log_is_refused_unchanged(_backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let mut noise = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 1..6 {
        let round_dir = dir.path().join(round.to_string());
        std::fs::create_dir(&round_dir).unwrap();
        let path = killed_store("snapshot-partial", &round_dir);
        let log = path.join("db");
        let mut bytes = std::fs::read(&log).unwrap();
        let first = bytes.iter().position(|&b| b != 0).unwrap();
        let last = bytes.iter().rposition(|&b| b != 0).unwrap();
        let at = first + (last - first) * round / 6;
        for byte in &mut bytes[at..at + 64] {
            noise ^= noise << 13;
            noise ^= noise >> 7;
            noise ^= noise << 17;
            *byte = noise.to_le_bytes()[0];
        }
        std::fs::write(&log, &bytes).unwrap();
        let before: Vec<(PathBuf, Vec<u8>)> = files_in(&path)
            .into_iter()
            .map(|file| {
                let bytes = std::fs::read(&file).unwrap();
                (file, bytes)
            })
            .collect();
        match open_store(&StorageConfig::sled(path.clone())).await {
            Err(StoreError::Unavailable { kind, message, .. }) => {
                assert_eq!(kind, UnavailableKind::Damaged, "{message}");
                assert!(
                    message.contains("its sled log db holds, at byte"),
                    "{message}"
                );
                assert!(message.contains("left unchanged"), "{message}");
            }
            Err(other) => panic!("garbage at byte {at}: expected Damaged, got {other}"),
            Ok(_) => panic!("garbage at byte {at}: the damaged store opened"),
        }
        for (file, bytes) in before {
            assert_eq!(
                std::fs::read(&file).unwrap(),
                bytes,
                "{} changed",
                file.display()
            );
        }
        assert_eq!(files_in(&path).len(), 5, "a file was added or removed");
    }
}
