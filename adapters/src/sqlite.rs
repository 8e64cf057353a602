//! The SQLite backend (the default): one file, several processes.
//!
//! - **Durability:** WAL journal, `synchronous=FULL` by default (a commit is
//!   on disk before the call returns, across power loss); `NORMAL` is an
//!   explicit opt-in.
//! - **Connections:** a few per store handle (`max_connections`), the most
//!   recently used first, never pinged (see `sql/connections.rs`).
//! - **Concurrency:** every write is a single autocommit statement, or a
//!   batch opened with `BEGIN IMMEDIATE`, so a writer takes the write lock
//!   before it reads and can never deadlock into `SQLITE_BUSY`; it waits up
//!   to the busy timeout for another process's lock.
//! - **Files:** the database is created with mode 0600 (and a missing
//!   directory with 0700); SQLite gives its `-wal` and `-shm` files the same
//!   mode. The path must be UTF-8 (the driver passes SQLite UTF-8 names);
//!   another path is refused with `InvalidInput` before anything is created.
//! - **Refusing what is not ours (C11):** before SQLite touches a file, its
//!   header is checked: a non-empty file that is not SQLite, or is shorter
//!   than its header says, is refused unchanged. A SQLite file that is not
//!   an lf-handoff store (another `application_id`, or tables but no
//!   version) is refused unchanged. A store written by a newer schema is
//!   refused unchanged. An empty file is a new store.
//! - **Upgrades:** a store of an older schema (release 0.1.0 wrote
//!   version 1) is migrated in place when opened, in one `BEGIN IMMEDIATE`
//!   transaction that reads the version again once it holds the write
//!   lock, so processes opening it at once migrate it once, and a
//!   `kill -9` leaves the old version or the new one. The header check
//!   skips the read-only probe only for a store at the latest version with
//!   no WAL frames; an older one is probed and then migrated.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use sqlx::sqlite::{SqliteConnectOptions, SqliteQueryResult, SqliteSynchronous};
use sqlx::{ConnectOptions as _, Connection as _};

use crate::changes::{ChangeSource, FileIdentity, Notifier, FILE_CHECK};
use crate::config::{SqliteConfig, Synchronous, MAX_BUSY_TIMEOUT};
use crate::sql::archive::{self, ArchiveDialect};
use crate::sql::connections::Connections;
use crate::sql::schema::{statements_after, UniqueIndex, LATEST_VERSION, SQLITE_POSITION};
use crate::sql::{Dialect, Engine, EngineError, RowsAffected};

/// `PRAGMA application_id` of an lf-handoff store: "LFH1".
pub(crate) const APPLICATION_ID: i64 = 0x4C46_4831;

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The SQLite engine: a few connections to one file.
pub(crate) type SqliteEngine = Engine<SqliteFile>;

/// SQLite's dialect: the store's file, which every message names, and the
/// busy timeout a writer waits for another process's lock.
#[derive(Debug)]
pub(crate) struct SqliteFile {
    path: PathBuf,
    busy_timeout: Duration,
}

impl Dialect for SqliteFile {
    type Db = sqlx::Sqlite;

    /// Takes the write lock before the first read, so a writer never
    /// deadlocks into `SQLITE_BUSY`.
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    const DATA_MODIFYING_CTE: bool = false;
    const ARCHIVE: ArchiveDialect = archive::SQLITE;

    fn store_name(&self) -> String {
        self.path.display().to_string()
    }

    const PINS_INDEXES: bool = true;

    /// Writers take turns, so positions commit in order.
    const EVENT_HORIZON: Option<&'static str> = None;

    fn change_source(&self, options: &SqliteConnectOptions) -> Arc<dyn ChangeSource> {
        Arc::new(DataVersion {
            path: self.path.clone(),
            options: options.clone(),
        })
    }

    fn map_error(&self, error: sqlx::Error) -> EngineError {
        let path = self.path.display();
        if let sqlx::Error::Database(db) = &error {
            if db.is_unique_violation() {
                // SQLite names the index's columns, not the index.
                return EngineError::Unique {
                    index: UniqueIndex::in_sqlite_message(db.message()),
                    detail: db.message().to_string(),
                };
            }
            let kind = error_kind(&error);
            let code = db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(0);
            let message = match code & 0xff {
                5 | 6 => format!(
                    "{path} is busy: another process held its write lock longer than the busy \
                     timeout ({} ms)",
                    self.busy_timeout.as_millis()
                ),
                11 | 26 => format!(
                    "{path} is damaged or not an lf-handoff store ({}); it was left unchanged",
                    db.message()
                ),
                8 => format!("{path} is read-only: {}", db.message()),
                13 => format!("{path}: the disk is full"),
                14 => format!("cannot open {path}: {}", db.message()),
                10 => format!("{path}: {}", db.message()),
                _ => format!("{path}: SQLite error: {}", db.message()),
            };
            return EngineError::Failed(StoreError::unavailable_because(kind, message, error));
        }
        let kind = error_kind(&error);
        let message = match &error {
            sqlx::Error::PoolTimedOut => {
                format!("{path}: timed out waiting for a database connection")
            }
            sqlx::Error::Io(io) => format!("{path}: {io}"),
            other => format!("{path}: {other}"),
        };
        EngineError::Failed(StoreError::unavailable_because(kind, message, error))
    }
}

/// How often a watched SQLite store's `PRAGMA data_version` is read.
pub(crate) const DATA_VERSION_POLL: Duration = Duration::from_millis(10);

/// SQLite's change signal (C16): `PRAGMA data_version` on a connection of
/// its own, read every [`DATA_VERSION_POLL`] while anyone watches. The
/// value changes when another connection, of this process or another,
/// commits to the file; reading it costs a check of the WAL index in
/// shared memory, not a read of the database. The file's identity is
/// checked every [`FILE_CHECK`]: a store deleted or replaced while
/// watched ends its watchers with `Unavailable` (`io`).
#[derive(Debug)]
struct DataVersion {
    path: PathBuf,
    options: SqliteConnectOptions,
}

#[async_trait::async_trait]
impl ChangeSource for DataVersion {
    async fn run(&self, out: &Arc<Notifier>) {
        let identity = FileIdentity::of(&self.path);
        let gone = || {
            format!(
                "{} was deleted or replaced while it was watched",
                self.path.display()
            )
        };
        if identity.is_none() {
            return out.fail(UnavailableKind::Io, gone());
        }
        let mut conn = None;
        let mut seen: Option<i64> = None;
        let mut checked = Instant::now();
        let mut pause = DATA_VERSION_POLL;
        while out.wanted() {
            if conn.is_none() {
                // A connection that cannot be made now (too many open
                // files, say) is tried again; the readers find out what
                // is wrong meanwhile.
                match self.options.connect().await {
                    Ok(made) => conn = Some(made),
                    Err(_) => out.bump(),
                }
            }
            if let Some(made) = conn.as_mut() {
                match sqlx::query_scalar::<_, i64>("PRAGMA data_version")
                    .fetch_one(made)
                    .await
                {
                    Ok(version) => {
                        // The first reading is the baseline; a commit
                        // between a subscription and it is covered by one
                        // wake then.
                        if seen != Some(version) {
                            out.bump();
                        }
                        seen = Some(version);
                        pause = DATA_VERSION_POLL;
                    }
                    Err(_) => {
                        // Busy for a moment, or the connection broke: wake
                        // the readers once, and try a new connection after
                        // a longer pause.
                        out.bump();
                        conn = None;
                        seen = None;
                    }
                }
            }
            if conn.is_none() {
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            if checked.elapsed() >= FILE_CHECK {
                checked = Instant::now();
                if FileIdentity::of(&self.path) != identity {
                    if let Some(made) = conn.take() {
                        let _ = made.close().await;
                    }
                    return out.fail(UnavailableKind::Io, gone());
                }
            }
            tokio::time::sleep(pause).await;
        }
        if let Some(made) = conn.take() {
            let _ = made.close().await;
        }
    }
}

impl RowsAffected for SqliteQueryResult {
    fn rows_affected(&self) -> u64 {
        SqliteQueryResult::rows_affected(self)
    }
}

impl SqliteEngine {
    /// Opens (creating when missing) and migrates the store at `config.path`.
    pub(crate) async fn open(config: &SqliteConfig) -> StoreResult<Self> {
        let path = config.path.clone();
        if path.to_str().is_none() {
            // sqlx hands SQLite UTF-8 file names only; refuse before anything
            // is created on disk.
            return Err(StoreError::InvalidInput(format!(
                "the SQLite store path {} is not valid UTF-8, which SQLite cannot open; \
                 choose a UTF-8 path",
                path.display()
            )));
        }
        // SQLite keeps its busy timeout in an `int` of milliseconds; a longer
        // value set directly on the struct would make the driver panic.
        let busy_timeout = config.busy_timeout.min(MAX_BUSY_TIMEOUT);
        let state = prepare_file(&path)?;
        // Check an existing file on a read-only connection first: a refused
        // store must not be modified, and a read-write connection would
        // checkpoint the WAL into the file when it closes. A file whose
        // header alone shows a current store needs no probe.
        let current = if state == FileState::New {
            false
        } else if state == FileState::Current {
            true
        } else {
            let mut probe = SqliteConnectOptions::new()
                .filename(&path)
                .read_only(true)
                .busy_timeout(busy_timeout)
                .connect()
                .await
                .map_err(|e| open_error(&path, e))?;
            let version = schema_version(&path, &mut probe).await;
            probe.close().await.map_err(|e| open_error(&path, e))?;
            version? == LATEST_VERSION
        };
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(false)
            .busy_timeout(busy_timeout)
            .synchronous(match config.synchronous {
                Synchronous::Full => SqliteSynchronous::Full,
                Synchronous::Normal => SqliteSynchronous::Normal,
            })
            .foreign_keys(true);
        // The first connection is opened now, so a file SQLite cannot use
        // is reported by open_store.
        let first = options.connect().await.map_err(|e| open_error(&path, e))?;
        let pool = Connections::new(
            options,
            config.max_connections,
            busy_timeout + Duration::from_secs(5),
            None,
        );
        pool.give(first);
        let engine = Engine::new(pool, SqliteFile { path, busy_timeout });
        if !current {
            engine.migrate().await?;
        }
        Ok(engine)
    }

    async fn migrate(&self) -> StoreResult<()> {
        let file = &self.dialect;
        let mut conn = self.pool.acquire().await.map_err(|e| file.unavailable(e))?;
        let version = schema_version(&file.path, &mut conn).await?;
        if version == LATEST_VERSION {
            return Ok(());
        }
        // A new store: switch to WAL first (a store being upgraded has it
        // already, and this changes nothing). Changing the journal mode needs
        // an exclusive lock that the busy handler does not wait for, so retry.
        let deadline = Instant::now() + file.busy_timeout;
        loop {
            match sqlx::query_scalar::<_, String>("PRAGMA journal_mode = WAL")
                .fetch_one(&mut *conn)
                .await
            {
                Ok(mode) if mode.eq_ignore_ascii_case("wal") => break,
                Ok(mode) => {
                    return Err(StoreError::unavailable(
                        UnavailableKind::Other,
                        format!(
                            "{}: SQLite refused WAL mode (journal mode is {mode})",
                            file.path.display()
                        ),
                    ))
                }
                Err(e) if is_busy(&e) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => return Err(file.unavailable(e)),
            }
        }
        let mut tx = conn
            .begin_with(SqliteFile::BEGIN_WRITE)
            .await
            .map_err(|e| file.unavailable(e))?;
        // Another process may have migrated while we waited for the lock
        // (in WAL mode the write lock comes with the newest snapshot, so
        // this read sees its commit): then there is nothing to write.
        let version = schema_version(&file.path, &mut tx).await?;
        if version == LATEST_VERSION {
            return tx.commit().await.map_err(|e| file.unavailable(e));
        }
        for statement in statements_after(version, SQLITE_POSITION) {
            sqlx::query(&statement)
                .execute(&mut *tx)
                .await
                .map_err(|e| file.unavailable(e))?;
        }
        // PRAGMA values cannot be bound; both are integer constants.
        sqlx::query(&format!("PRAGMA application_id = {APPLICATION_ID}"))
            .execute(&mut *tx)
            .await
            .map_err(|e| file.unavailable(e))?;
        sqlx::query(&format!("PRAGMA user_version = {LATEST_VERSION}"))
            .execute(&mut *tx)
            .await
            .map_err(|e| file.unavailable(e))?;
        tx.commit().await.map_err(|e| file.unavailable(e))?;
        Ok(())
    }
}

impl SqliteFile {
    fn unavailable(&self, error: sqlx::Error) -> StoreError {
        match self.map_error(error) {
            EngineError::Failed(error) => error,
            EngineError::Unique { detail, .. } => StoreError::damaged(format!(
                "{}: unexpected unique constraint violation: {detail}",
                self.path.display()
            )),
        }
    }
}

/// Reads the schema version, refusing a store this build must not touch.
async fn schema_version(path: &Path, conn: &mut sqlx::SqliteConnection) -> StoreResult<i64> {
    let read = |e: sqlx::Error| {
        StoreError::unavailable_because(
            UnavailableKind::Damaged,
            format!(
                "{} is damaged or not an lf-handoff store ({e}); it was left unchanged",
                path.display()
            ),
            e,
        )
    };
    // One statement, so the three values come from one snapshot: read one
    // by one, another process's first migration could commit in between
    // and make a new store look like someone else's database.
    let (application_id, version, tables): (i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT application_id FROM pragma_application_id), \
                (SELECT user_version FROM pragma_user_version), \
                (SELECT count(*) FROM sqlite_master)",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(read)?;
    let shown = path.display();
    if application_id == APPLICATION_ID {
        if version > LATEST_VERSION {
            return Err(StoreError::unavailable(
                UnavailableKind::NewerSchema,
                format!(
                    "{shown} was written by a newer lf-handoff (schema version {version}; this \
                     build understands up to {LATEST_VERSION}); upgrade lf-handoff to use it. \
                     The file was left unchanged"
                ),
            ));
        }
        return Ok(version);
    }
    if application_id == 0 && version == 0 && tables == 0 {
        return Ok(0);
    }
    Err(StoreError::damaged(format!(
        "{shown} is a SQLite database but not an lf-handoff store (application id \
         {application_id:#x}); point the store at another file. The file was left unchanged"
    )))
}

/// The kind of every SQLite error, in one place: busy or locked, damaged
/// or not a database, read-only, full, I/O.
fn error_kind(error: &sqlx::Error) -> UnavailableKind {
    match error {
        sqlx::Error::Database(db) => {
            match db.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or(0) & 0xff {
                5 | 6 => UnavailableKind::Locked,
                11 | 26 => UnavailableKind::Damaged,
                8 | 23 => UnavailableKind::PermissionDenied,
                13 => UnavailableKind::DiskFull,
                10 | 14 => UnavailableKind::Io,
                _ => UnavailableKind::Other,
            }
        }
        sqlx::Error::PoolTimedOut => UnavailableKind::Locked,
        sqlx::Error::Io(io) => UnavailableKind::of_io_error(io),
        _ => UnavailableKind::Other,
    }
}

fn is_busy(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db)
        if matches!(db.code().and_then(|c| c.parse::<i32>().ok()).map(|c| c & 0xff), Some(5 | 6)))
}

fn open_error(path: &Path, error: sqlx::Error) -> StoreError {
    StoreError::unavailable_because(
        error_kind(&error),
        format!("cannot open SQLite store {}: {error}", path.display()),
        error,
    )
}

/// What the header check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileState {
    /// An empty file: a new store.
    New,
    /// A SQLite file whose header shows an lf-handoff store at
    /// [`LATEST_VERSION`], with no write-ahead log frames that could hold a
    /// newer header.
    Current,
    /// A SQLite file whose version must be read through SQLite.
    Existing,
}

/// Creates the file (0600) and its directory (0700) when missing, and checks
/// an existing file's header before SQLite sees it.
fn prepare_file(path: &Path) -> StoreResult<FileState> {
    let shown = path.display();
    if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        if !dir.exists() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| {
                    StoreError::unavailable_because(
                        UnavailableKind::of_io_error(&e),
                        format!("cannot create the store directory {}: {e}", dir.display()),
                        e,
                    )
                })?;
        }
    }
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => {
            // SQLite syncs the file's contents, but the directory entry of a
            // file it did not create is ours to make durable.
            if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                fs::File::open(dir)
                    .and_then(|dir| dir.sync_all())
                    .map_err(|e| {
                        StoreError::unavailable_because(
                            UnavailableKind::of_io_error(&e),
                            format!("cannot sync the directory of {shown}: {e}"),
                            e,
                        )
                    })?;
            }
            return Ok(FileState::New);
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(StoreError::unavailable_because(
                UnavailableKind::of_io_error(&e),
                format!("cannot create the store file {shown}: {e}"),
                e,
            ))
        }
    }
    check_header(path)
}

/// Refuses a non-empty file that is not a whole SQLite database, and tells
/// a new (empty) file and a current store from the others.
fn check_header(path: &Path) -> StoreResult<FileState> {
    let shown = path.display();
    let io_error = |e: std::io::Error| {
        StoreError::unavailable_because(
            UnavailableKind::of_io_error(&e),
            format!("cannot read {shown}: {e}"),
            e,
        )
    };
    let metadata = fs::metadata(path).map_err(io_error)?;
    if !metadata.is_file() {
        return Err(StoreError::unavailable(
            UnavailableKind::Other,
            format!("{shown} is not a regular file; a SQLite store URL must name a file"),
        ));
    }
    let length = metadata.len();
    if length == 0 {
        return Ok(FileState::New);
    }
    let mut header = [0u8; 100];
    let mut file = fs::File::open(path).map_err(io_error)?;
    let read = read_up_to(&mut file, &mut header).map_err(io_error)?;
    if read < header.len() || &header[..16] != SQLITE_MAGIC {
        return Err(StoreError::damaged(format!(
            "{shown} is not an lf-handoff store: it is not a SQLite database (corrupt, truncated \
             or another kind of file). It was left unchanged"
        )));
    }
    // While a WAL holds pages not yet copied back, the main file may
    // legitimately be shorter than its header says.
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    let wal_has_frames = fs::metadata(&wal).map(|m| m.len() > 0).unwrap_or(false);
    let change_counter = u32::from_be_bytes([header[24], header[25], header[26], header[27]]);
    let valid_for = u32::from_be_bytes([header[92], header[93], header[94], header[95]]);
    let page_count = u64::from(u32::from_be_bytes([
        header[28], header[29], header[30], header[31],
    ]));
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536,
        size => u64::from(size),
    };
    if !wal_has_frames && change_counter == valid_for && page_count * page_size > length {
        return Err(StoreError::damaged(format!(
            "{shown} is truncated: its header describes {} bytes but the file holds {length}. \
             It was left unchanged; restore it from a backup",
            page_count * page_size
        )));
    }
    // With no WAL frames, page 1 on disk is the latest: its header holds the
    // user version (offset 60) and the application id (offset 68).
    let field = |at: usize| {
        i64::from(i32::from_be_bytes([
            header[at],
            header[at + 1],
            header[at + 2],
            header[at + 3],
        ]))
    };
    if !wal_has_frames && field(68) == APPLICATION_ID && field(60) == LATEST_VERSION {
        return Ok(FileState::Current);
    }
    if field(68) == 0 && field(60) == 0 && creation_was_killed(path).map_err(io_error)? {
        return Ok(FileState::New);
    }
    Ok(FileState::Existing)
}

/// True when a rollback journal beside the file records a transaction that
/// began on an empty database (its header's page count is 0): the switch to
/// WAL of a store whose creation was killed (the kill loop of the crash
/// harness finds it). A read-only connection cannot roll that journal back
/// and is refused, so such a file is opened as a new store: SQLite's own
/// recovery rolls the journal back (leaving an empty database, so nothing
/// anyone wrote is lost) and the migration runs.
fn creation_was_killed(path: &Path) -> std::io::Result<bool> {
    const JOURNAL_MAGIC: [u8; 8] = [0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7];
    let journal = PathBuf::from(format!("{}-journal", path.display()));
    let mut file = match fs::File::open(&journal) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let mut header = [0u8; 28];
    let read = read_up_to(&mut file, &mut header)?;
    Ok(read == header.len() && header[..8] == JOURNAL_MAGIC && header[16..20] == [0; 4])
}

fn read_up_to(file: &mut fs::File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StorageConfig;

    async fn set_user_version(path: &Path, version: i64) {
        let mut conn = SqliteConnectOptions::new()
            .filename(path)
            .connect()
            .await
            .unwrap();
        sqlx::query(&format!("PRAGMA user_version = {version}"))
            .execute(&mut conn)
            .await
            .unwrap();
        conn.close().await.unwrap();
    }

    #[tokio::test]
    async fn the_header_tells_a_current_store_from_one_that_needs_a_probe() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        fs::write(&path, b"").unwrap();
        assert_eq!(check_header(&path).unwrap(), FileState::New);

        let store = crate::open_store(&StorageConfig::sqlite(path.clone()))
            .await
            .unwrap();
        drop(store);
        // The last connection closes asynchronously; wait for its WAL to go.
        for _ in 0..100 {
            if check_header(&path).unwrap() == FileState::Current {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(check_header(&path).unwrap(), FileState::Current);

        // An older store (release 0.1.0 wrote version 1) must be probed and
        // migrated, never taken for a current one: the header itself says
        // so, with no WAL left.
        set_user_version(&path, LATEST_VERSION - 1).await;
        let header = fs::read(&path).unwrap();
        assert_eq!(
            i64::from(i32::from_be_bytes([
                header[60], header[61], header[62], header[63]
            ])),
            LATEST_VERSION - 1
        );
        assert_eq!(check_header(&path).unwrap(), FileState::Existing);

        set_user_version(&path, LATEST_VERSION + 1).await;
        assert_eq!(check_header(&path).unwrap(), FileState::Existing);
    }
}
