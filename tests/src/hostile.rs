//! Hostile input, damaged store files and store file permissions, written
//! once for every backend.
//!
//! - Strings that break naive storage (quotes, SQL and shell syntax, control
//!   characters, right-to-left marks, values at the length limit, non-UTF-8
//!   store paths) are stored exactly, or refused with `InvalidInput` when a
//!   rule forbids them (NUL bytes, over-long values, non-UTF-8 working
//!   directories); never truncated or mangled, and a refusal writes nothing.
//! - A store whose files are damaged at random (bytes flipped, ranges
//!   overwritten, the file cut or extended) is refused with `Unavailable`
//!   and left byte-for-byte unchanged with no file added, or it opens and
//!   every read and write either works or is `Unavailable`: never a panic,
//!   never another kind of error.
//! - A store's files are private to their owner: a SQLite database and its
//!   `-wal` and `-shm` files are mode 0600, a store directory (sled) 0700,
//!   and a directory the store had to create is 0700.

use crate::fixtures::{stored_task, stored_wave};
use lf_handoff_adapters::ListQuery;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use lf_handoff_adapters::{open_store, GenerateId, StorageConfig, Store, StoreError};
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, OpenInteractiveHandoff,
};
use lf_handoff_domain::text::{MAX_ITEMS, MAX_TEXT_BYTES};
use lf_handoff_domain::wave::Wave;

use crate::contract::assert_invalid;
use crate::fixtures::*;
use crate::rng::Rng;
use crate::worker::Worker;
use crate::Backend;

/// The scenarios of this module, by what they need of a backend, as
/// [`conformance_tests!`](crate::conformance_tests) runs them: one
/// `#[tokio::test]` each (see [`scenario_tests!`](crate::scenario_tests)).
#[macro_export]
macro_rules! hostile_scenarios {
    ($make:expr) => {
        $crate::scenario_tests!($make, [hostile];
            AnyBackend: [
                hostile_strings_are_stored_exactly_or_refused,
                c11_damaged_store_files_are_refused_unchanged_or_read_cleanly,
                store_files_are_private_to_their_owner,
            ],
        );
    };
}

/// Strings that naive storage mangles. None is blank or holds a NUL byte.
pub const HOSTILE: &[&str] = &[
    "it's \"quoted\" and `back-quoted`",
    "'); DROP TABLE handoffs; --",
    "\" OR 1=1 --",
    "$(rm -rf ~); echo pwned | sh && `id` > /dev/null",
    "; reboot; # ${HOME} %s %n %x",
    "line one\nline two\r\nline three\ttabbed",
    "\u{1}\u{7}\u{8}\u{1b}[31mred\u{1b}[0m\u{7f}",
    "naïve café ✓ 🦀 日本語",
    "\u{202e}txt.exe\u{202c} \u{200b}zero\u{feff}width",
    "{\"kind\":\"completed\",\"summary\":\"forged\"}",
    "\\\" },{ \\u0000 \\x00 \\\\",
    "100% %00 %2F %%",
    " leading and trailing spaces ",
];

/// A working directory whose name holds quotes, shell syntax and non-ASCII.
fn hostile_cwd() -> PathBuf {
    PathBuf::from("/srv/it's \"here\" $(x) ; `y`/naïve 🦀/ dir ")
}

/// A request carrying `text` in every free-form field.
pub(crate) fn hostile_request(wave: &Wave, text: &str, n: usize) -> OpenInteractiveHandoff {
    let mut request = wave_request(wave, &hostile_cwd());
    request.reason = text.to_string();
    request.environment = BTreeMap::from([
        (format!("LF_HOSTILE_{n}"), text.to_string()),
        ("lower 'key' $(x) 🦀".to_string(), text.to_string()),
        ("EMPTY_VALUE".to_string(), String::new()),
    ]);
    request.attach_argv = vec![
        "sh".into(),
        "-c".into(),
        text.to_string(),
        format!("--arg={text}"),
    ];
    request
}

pub(crate) fn outcome_with(n: usize, text: &str) -> InteractiveHandoffOutcome {
    let text = text.to_string();
    match n % 3 {
        0 => InteractiveHandoffOutcome::Completed { summary: text },
        1 => InteractiveHandoffOutcome::HandedBack { summary: text },
        _ => InteractiveHandoffOutcome::Failed { reason: text },
    }
}

/// Asserts `record` carries exactly what `request` asked for.
#[track_caller]
fn assert_carries(record: &InteractiveHandoff, request: &OpenInteractiveHandoff) {
    assert_eq!(record.reason, request.reason);
    assert_eq!(record.environment, request.environment);
    assert_eq!(record.attach_argv, request.attach_argv);
    assert_eq!(record.cwd, request.cwd);
    assert_eq!(record.home, request.home);
    assert_eq!(record.provider, request.provider);
}

/// Opens the store under a non-UTF-8 directory when the backend can, else
/// checks it refused that with `InvalidInput` without creating anything and
/// opens it under a UTF-8 directory full of quotes and shell syntax. Either
/// way the URL round-trips.
async fn open_under_odd_path(backend: &dyn Backend, dir: &Path) -> (StorageConfig, Store) {
    let odd_dir = dir.join(OsStr::from_bytes(b"odd \xff\xfe 'dir' $(x) %41"));
    let config = backend.config(location(&odd_dir));
    assert_eq!(StorageConfig::from_url(&config.url()).unwrap(), config);
    match open_store(&config).await {
        Ok(store) => return (config, store),
        Err(StoreError::InvalidInput(message)) => {
            println!(
                "{}: refused a non-UTF-8 store path: {message}",
                backend.name()
            );
            assert!(!odd_dir.exists(), "a refused open created {odd_dir:?}");
        }
        Err(other) => panic!("a non-UTF-8 store path: expected InvalidInput, got {other:?}"),
    }
    let quoted = dir.join("it's \"odd\" $(x) ; `y` %41 ñ");
    let config = backend.config(location(&quoted));
    assert_eq!(StorageConfig::from_url(&config.url()).unwrap(), config);
    let store = open_store(&config).await.unwrap();
    (config, store)
}

/// Hostile strings are stored exactly; forbidden ones are refused with
/// `InvalidInput` and write nothing; everything reads back the same after
/// reopening the store from its URL, under a non-UTF-8 path where the
/// backend allows one.
pub async fn hostile_strings_are_stored_exactly_or_refused(backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let (config, store) = open_under_odd_path(backend, dir.path()).await;

    // Parents keep hostile names exactly.
    let mut waves = Vec::new();
    for text in HOSTILE {
        let wave = Wave::new(WaveId::new(), text.to_string(), text.to_string());
        store.create_wave(&wave).await.unwrap();
        assert_eq!(stored_wave(&store, wave.id()).await, Some(wave.clone()));
        waves.push(wave);
    }

    // Handoffs keep hostile strings in every field, through every transition.
    for (n, (text, wave)) in HOSTILE.iter().zip(&waves).enumerate() {
        let request = hostile_request(wave, text, n);
        let (opened, created) = store
            .open_interactive_handoff(request.clone())
            .await
            .unwrap();
        assert!(created);
        assert_carries(&opened, &request);
        let attached = store.attach_interactive_handoff(&opened.id).await.unwrap();
        assert_eq!(attached.attach_descriptor().argv, request.attach_argv);
        assert_eq!(
            attached.attach_descriptor().environment,
            request.environment
        );
        let outcome = outcome_with(n, text);
        let finished = store
            .finish_interactive_handoff(&opened.id, &outcome, None)
            .await
            .unwrap();
        assert_eq!(finished.outcome, Some(outcome));
        assert_eq!(
            store.get_interactive_handoff(&opened.id).await.unwrap(),
            Some(finished)
        );
    }

    // Values at the limits are kept whole.
    let long = "y".repeat(MAX_TEXT_BYTES);
    let wide = "é".repeat(MAX_TEXT_BYTES / 2);
    let wave = new_wave(&store, dir.path()).await;
    let mut request = wave_request(&wave, dir.path());
    request.reason = long.clone();
    request.environment = (0..16)
        .map(|n| (format!("BIG_{n}"), wide.clone()))
        .collect();
    request.attach_argv = (0..MAX_ITEMS).map(|n| format!("arg-{n}")).collect();
    request.attach_argv[1] = long.clone();
    let (opened, _) = store
        .open_interactive_handoff(request.clone())
        .await
        .unwrap();
    assert_carries(&opened, &request);
    let long_outcome = outcome_with(1, &wide);
    store
        .finish_interactive_handoff(&opened.id, &long_outcome, None)
        .await
        .unwrap();
    let stored = store
        .get_interactive_handoff(&opened.id)
        .await
        .unwrap()
        .unwrap();
    assert_carries(&stored, &request);
    assert_eq!(stored.outcome, Some(long_outcome));

    // Forbidden values are refused before anything is written.
    let before = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    let target = new_wave(&store, dir.path()).await;
    type Mutation = Box<dyn Fn(&mut OpenInteractiveHandoff) + Send + Sync>;
    let too_long = "z".repeat(MAX_TEXT_BYTES + 1);
    let refused: Vec<(&str, Mutation)> = vec![
        ("NUL in the reason", Box::new(|r| r.reason = "a\0b".into())),
        (
            "NUL in an environment key",
            Box::new(|r| {
                r.environment.insert("K\0EY".into(), "v".into());
            }),
        ),
        (
            "NUL in an environment value",
            Box::new(|r| {
                r.environment.insert("KEY".into(), "v\0".into());
            }),
        ),
        (
            "NUL in an argument",
            Box::new(|r| r.attach_argv.push("a\0b".into())),
        ),
        (
            "NUL in the provider session",
            Box::new(|r| r.provider_session_id = Some("s\0".into())),
        ),
        ("an over-long reason", {
            let text = too_long.clone();
            Box::new(move |r| r.reason = text.clone())
        }),
        ("an over-long environment value", {
            let text = too_long.clone();
            Box::new(move |r| {
                r.environment.insert("KEY".into(), text.clone());
            })
        }),
        ("an over-long argument", {
            let text = too_long.clone();
            Box::new(move |r| r.attach_argv.push(text.clone()))
        }),
        (
            "too many arguments",
            Box::new(|r| r.attach_argv = vec!["a".into(); MAX_ITEMS + 1]),
        ),
        (
            "too many environment entries",
            Box::new(|r| {
                r.environment = (0..=MAX_ITEMS)
                    .map(|n| (format!("K{n}"), "v".into()))
                    .collect()
            }),
        ),
        (
            "a non-UTF-8 cwd",
            Box::new(|r| r.cwd = PathBuf::from(OsStr::from_bytes(b"/srv/\xff\xfe"))),
        ),
        (
            "a NUL in the cwd",
            Box::new(|r| r.cwd = PathBuf::from(OsStr::from_bytes(b"/srv/a\0b"))),
        ),
    ];
    for (what, mutate) in &refused {
        let mut request = wave_request(&target, dir.path());
        mutate(&mut request);
        assert_invalid(store.open_interactive_handoff(request).await, what);
    }
    let (open, _) = store
        .open_interactive_handoff(wave_request(&target, dir.path()))
        .await
        .unwrap();
    for (what, text) in [("NUL", "done\0"), ("over-long", too_long.as_str())] {
        assert_invalid(
            store
                .finish_interactive_handoff(&open.id, &outcome_with(0, text), None)
                .await,
            what,
        );
    }
    assert_invalid(
        store
            .create_wave(&Wave::new(WaveId::new(), "a\0b".into(), "/r".into()))
            .await,
        "NUL in a wave name",
    );
    let project = fresh_project(target.id());
    store.create_project_session(&project).await.unwrap();
    let (task, pr) = fresh_task(&project, Path::new(OsStr::from_bytes(b"/srv/\xffwork")));
    assert_invalid(
        store.create_task_session(&task, &pr).await,
        "a non-UTF-8 worktree",
    );
    assert_eq!(stored_task(&store, &task.id).await, None);
    let mut after = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert_eq!(after.pop().map(|h| h.id), Some(open.id.clone()));
    assert_eq!(after, before, "a refused request changed the store");
    let everything = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();

    // The same after reopening from the URL alone.
    drop(store);
    let reopened = open_store(&StorageConfig::from_url(&config.url()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        reopened
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap(),
        everything
    );
    for wave in &waves {
        assert_eq!(stored_wave(&reopened, wave.id()).await, Some(wave.clone()));
    }
}

/// Damage rounds per backend.
const DAMAGE_ROUNDS: u64 = 24;

/// C11: a store damaged at random is refused with `Unavailable` and left
/// unchanged (every file byte for byte, no file added), or opens and answers
/// every read and write with a valid value or `Unavailable`; never a panic.
/// Backends that keep no files in the test directory (servers) skip.
pub async fn c11_damaged_store_files_are_refused_unchanged_or_read_cleanly(backend: &dyn Backend) {
    let pristine = tempfile::tempdir().unwrap();
    let pristine_location = location(pristine.path());
    // A worker process fills the store and exits without closing it, so
    // the files are settled and the same on every run.
    let url = backend.config(pristine_location.clone()).url();
    let mut worker = Worker::spawn(
        &url,
        &["populate".into(), pristine.path().display().to_string()],
    );
    assert_eq!(worker.line().await.as_deref(), Some("populated"));
    assert!(worker.child.wait().await.unwrap().success());
    let footprint = store_files(&pristine_location);
    if footprint.is_empty() {
        println!(
            "skipped: {} keeps no store files in the test directory",
            backend.name()
        );
        return;
    }
    let mut rng = Rng::new(0x5eed_c011);
    let (mut refused, mut opened) = (0, 0);
    for round in 0..DAMAGE_ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        for relative in &footprint {
            let to = dir.path().join(relative);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).unwrap();
            }
            std::fs::copy(pristine.path().join(relative), &to).unwrap();
        }
        let victim = dir.path().join(&footprint[rng.index(footprint.len())]);
        let how = damage(&mut rng, &victim);
        let what = format!("round {round}: {how} in {}", victim.display());
        let before = snapshot(dir.path());
        match open_store(&backend.config(location(dir.path()))).await {
            Err(error @ StoreError::Unavailable { .. }) => {
                assert!(!is_panic(&error), "{what}: {error}");
                assert!(
                    snapshot(dir.path()) == before,
                    "{what}: the refused store was modified"
                );
                refused += 1;
            }
            Err(other) => panic!("{what}: expected Unavailable, got {other:?}"),
            Ok(store) => {
                use_damaged(&store, dir.path(), &what).await;
                opened += 1;
            }
        }
    }
    println!(
        "{}: {DAMAGE_ROUNDS} damaged stores: {refused} refused unchanged, {opened} opened and answered cleanly",
        backend.name()
    );
}

/// A few handoffs in every state, on waves and a task.
pub async fn populate(store: &Store, dir: &Path) {
    for n in 0..8usize {
        let opened = open_on_new_wave(store, dir).await;
        if n % 4 >= 1 {
            store.attach_interactive_handoff(&opened.id).await.unwrap();
        }
        if n % 4 >= 2 {
            store
                .finish_interactive_handoff(&opened.id, &outcome(n), None)
                .await
                .unwrap();
        }
        if n % 4 == 3 {
            store
                .claim_interactive_handoff_wake(&opened.id, 1)
                .await
                .unwrap();
        }
    }
    let task = new_task(store, dir).await;
    store
        .open_interactive_handoff(task_request(&task))
        .await
        .unwrap();
}

/// Every read and a write on a damaged store that opened: a value or
/// `Unavailable`, nothing else.
async fn use_damaged(store: &Store, dir: &Path, what: &str) {
    let clean = |result: Result<(), StoreError>, step: &str| match result {
        Ok(()) | Err(StoreError::Unavailable { .. }) => {
            if let Err(error) = &result {
                assert!(!is_panic(error), "{what}, {step}: {error}");
            }
        }
        Err(other) => panic!("{what}, {step}: expected a value or Unavailable, got {other:?}"),
    };
    match store.list_interactive_handoffs(ListQuery::default()).await {
        Ok(all) => {
            for handoff in &all {
                assert!(handoff.validate().is_ok(), "{what}: read an invalid record");
                clean(
                    store.get_interactive_handoff(&handoff.id).await.map(|_| ()),
                    "get",
                );
                clean(
                    store.get_parent(&handoff.parent).await.map(|_| ()),
                    "get parent",
                );
            }
        }
        Err(error) => clean(Err(error), "list"),
    }
    let wave = Wave::new(WaveId::new(), "after damage".into(), "/r".into());
    clean(store.create_wave(&wave).await, "create a wave");
    clean(
        store
            .open_interactive_handoff(wave_request(&wave, dir))
            .await
            .map(|_| ())
            .or_else(|e| if e.is_not_found() { Ok(()) } else { Err(e) }),
        "open",
    );
}

/// Damages `file` in one of several ways and says how.
fn damage(rng: &mut Rng, file: &Path) -> String {
    let mut bytes = std::fs::read(file).unwrap();
    let len = bytes.len().max(1);
    let how = match rng.below(5) {
        0 => {
            let count = 1 + rng.index(8);
            for _ in 0..count {
                let at = rng.index(len).min(bytes.len().saturating_sub(1));
                if let Some(byte) = bytes.get_mut(at) {
                    *byte ^= 1 + u8::try_from(rng.below(255)).unwrap();
                }
            }
            format!("{count} bytes flipped")
        }
        1 | 2 => {
            let start = rng.index(len);
            let end = (start + 1 + rng.index(4096)).min(bytes.len());
            let zero = rng.chance(1, 2);
            for byte in bytes.iter_mut().take(end).skip(start) {
                *byte = if zero {
                    0
                } else {
                    u8::try_from(rng.below(256)).unwrap()
                };
            }
            format!(
                "bytes {start}..{end} overwritten with {}",
                if zero { "zeros" } else { "noise" }
            )
        }
        3 => {
            let keep = rng.index(len);
            bytes.truncate(keep);
            format!("cut to {keep} bytes")
        }
        _ => {
            let extra = 1 + rng.index(4096);
            bytes.extend((0..extra).map(|_| u8::try_from(rng.below(256)).unwrap()));
            format!("{extra} bytes of noise appended")
        }
    };
    std::fs::write(file, bytes).unwrap();
    how
}

/// The files a closed store at `location` consists of, relative to the
/// location's directory: every file under it when it is a directory,
/// otherwise the file and its siblings named after it (`-wal`, `-shm`...).
pub fn store_files(location: &Path) -> Vec<PathBuf> {
    let Some(base) = location.parent() else {
        return Vec::new();
    };
    let mut files = Vec::new();
    if location.is_dir() {
        collect_files(base, location, &mut files);
    } else if let Some(name) = location.file_name() {
        for entry in std::fs::read_dir(base).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name().as_bytes().starts_with(name.as_bytes())
                && entry.file_type().unwrap().is_file()
            {
                files.push(PathBuf::from(entry.file_name()));
            }
        }
    }
    files.sort();
    files
}

fn collect_files(base: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            collect_files(base, &path, out);
        } else {
            out.push(path.strip_prefix(base).unwrap().to_path_buf());
        }
    }
}

/// Every file and directory under `dir`, with the files' bytes.
fn snapshot(dir: &Path) -> (BTreeSet<PathBuf>, BTreeMap<PathBuf, Vec<u8>>) {
    let mut dirs = BTreeSet::new();
    let mut files = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                dirs.insert(path.clone());
                pending.push(path);
            } else {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    (dirs, files)
}

/// Store files are private: a store directory and any directory the store
/// created are 0700, a database file and its `-wal` and `-shm` are 0600.
/// (Files inside a store directory are guarded by the directory's mode.)
/// Backends that keep no files in the test directory (servers) skip.
pub async fn store_files_are_private_to_their_owner(backend: &dyn Backend) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let created = dir.path().join("made-by-the-store");
    let location = location(&created);
    let store = open_store(&backend.config(location.clone())).await.unwrap();
    // Writes and an open reader, so a WAL and its index exist where the
    // backend keeps them.
    for _ in 0..3 {
        open_on_new_wave(&store, dir.path()).await;
    }
    let listed = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert_eq!(listed.len(), 3);
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    if !created.exists() {
        println!(
            "skipped: {} keeps no store files in the test directory",
            backend.name()
        );
        return;
    }
    assert_eq!(mode(&created), 0o700, "the directory the store created");
    if location.is_dir() {
        // The engine (sled) makes the files inside with the process umask;
        // the 0700 directory is what keeps others out of them.
        assert_eq!(mode(&location), 0o700, "the store directory");
        return;
    }
    let files = store_files(&location);
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let name = location.file_name().unwrap().to_string_lossy().to_string();
    for suffix in ["", "-wal", "-shm"] {
        assert!(
            names.contains(&format!("{name}{suffix}")),
            "{name}{suffix} is missing from {names:?}"
        );
    }
    for file in files {
        let path = created.join(&file);
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    drop(store);
}

/// Whether `error` reports a panic of the engine's thread (sled's calls run
/// on tokio's blocking pool, and a panic there comes back as the error's
/// cause): damage must be refused, never crash the engine.
fn is_panic(error: &StoreError) -> bool {
    std::error::Error::source(error)
        .and_then(|cause| cause.downcast_ref::<tokio::task::JoinError>())
        .is_some_and(tokio::task::JoinError::is_panic)
}
