//! The SQLite backend under test, and the damaged files C11 must refuse.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use lf_handoff_adapters::{open_store, StorageConfig, UnavailableKind};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};

use crate::fixtures::open_on_new_wave;
use crate::upgrade::{fixtures, Release};
use crate::{Backend, BoxFuture, Unusable};

/// SQLite files in the test's temporary directory.
#[derive(Debug)]
pub struct SqliteBackend;

/// Builds the SQLite backend; it needs nothing and never skips.
pub async fn sqlite() -> Result<Box<dyn Backend>, String> {
    Ok(Box::new(SqliteBackend))
}

impl Backend for SqliteBackend {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    fn config(&self, location: PathBuf) -> StorageConfig {
        StorageConfig::sqlite(location)
    }

    fn shares_across_processes(&self) -> bool {
        true
    }

    fn release_store<'a>(
        &'a self,
        release: Release,
        dir: &'a Path,
    ) -> BoxFuture<'a, StorageConfig> {
        Box::pin(async move {
            let path = dir.join(format!("release-{}.db", release.number()));
            std::fs::copy(fixtures(release).join("registry.db"), &path).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            StorageConfig::sqlite(path)
        })
    }

    fn unusable_stores<'a>(&'a self, dir: &'a Path) -> BoxFuture<'a, Vec<Unusable>> {
        Box::pin(async move {
            let mut cases = Vec::new();

            let garbage = dir.join("garbage.db");
            std::fs::write(&garbage, b"this is not a database\n".repeat(200)).unwrap();
            cases.push(unusable(
                "a file of garbage",
                &garbage,
                UnavailableKind::Damaged,
            ));

            let header_only = dir.join("header-only.db");
            std::fs::write(&header_only, b"SQLite format 3\0").unwrap();
            cases.push(unusable(
                "a 16-byte file",
                &header_only,
                UnavailableKind::Damaged,
            ));

            let truncated = dir.join("truncated.db");
            populated_store(&truncated).await;
            let length = std::fs::metadata(&truncated).unwrap().len();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&truncated)
                .unwrap()
                .set_len(length / 2)
                .unwrap();
            cases.push(unusable(
                "a store cut in half",
                &truncated,
                UnavailableKind::Damaged,
            ));

            let corrupt = dir.join("corrupt.db");
            populated_store(&corrupt).await;
            // Keep the 100-byte header, overwrite the rest of page 1 (the
            // schema's b-tree page) with a pattern.
            let mut bytes = std::fs::read(&corrupt).unwrap();
            bytes[100..4096].fill(0xA5);
            std::fs::write(&corrupt, bytes).unwrap();
            cases.push(unusable(
                "a store whose schema page is overwritten",
                &corrupt,
                UnavailableKind::Damaged,
            ));

            let newer = dir.join("newer.db");
            populated_store(&newer).await;
            raw_sql(&newer, &["PRAGMA user_version = 99"]).await;
            cases.push(unusable(
                "a store from a newer schema",
                &newer,
                UnavailableKind::NewerSchema,
            ));

            let foreign = dir.join("foreign.db");
            raw_sql(
                &foreign,
                &["CREATE TABLE accounts (id INTEGER PRIMARY KEY)"],
            )
            .await;
            cases.push(unusable(
                "another program's database",
                &foreign,
                UnavailableKind::Damaged,
            ));

            let directory = dir.join("a-directory.db");
            std::fs::create_dir(&directory).unwrap();
            cases.push(Unusable {
                what: "a directory".into(),
                config: StorageConfig::sqlite(directory.clone()),
                kind: UnavailableKind::Other,
                message_names: directory.display().to_string(),
                guarded: Vec::new(),
            });
            cases
        })
    }
}

fn unusable(what: &str, path: &Path, kind: UnavailableKind) -> Unusable {
    Unusable {
        what: what.into(),
        config: StorageConfig::sqlite(path.to_path_buf()),
        kind,
        message_names: path.display().to_string(),
        guarded: vec![path.to_path_buf()],
    }
}

/// A real store with a few handoffs, checkpointed so the main file holds
/// everything.
async fn populated_store(path: &Path) {
    let store = open_store(&StorageConfig::sqlite(path.to_path_buf()))
        .await
        .unwrap();
    let dir = path.parent().unwrap();
    for _ in 0..20 {
        open_on_new_wave(&store, dir).await;
    }
    drop(store);
    raw_sql(path, &["PRAGMA wal_checkpoint(TRUNCATE)"]).await;
}

/// Runs statements on `path` with a plain SQLite connection.
async fn raw_sql(path: &Path, statements: &[&str]) {
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .connect()
        .await
        .unwrap();
    for statement in statements {
        sqlx::query(statement).execute(&mut conn).await.unwrap();
    }
    conn.close().await.unwrap();
}

/// A creation killed as SQLite went to remove the rollback journal of its
/// switch to WAL (`tests/fixtures/killed/sqlite-creation`, left by a real
/// kill: see its `make.sh`) left page 1 written and a hot journal of a
/// transaction begun on the empty file. A read-only connection cannot roll
/// that journal back, so the store was refused as damaged; it now opens as
/// the new store it was to be, and works.
pub async fn a_store_whose_creation_was_killed_opens_and_works(_backend: &dyn Backend) {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/killed/sqlite-creation");
    for name in ["registry.db", "registry.db-journal"] {
        let to = dir.path().join(name);
        std::fs::copy(fixture.join(name), &to).unwrap();
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let config = StorageConfig::sqlite(dir.path().join("registry.db"));
    crate::fixtures::opens_empty_and_works(&config, dir.path()).await;
}
