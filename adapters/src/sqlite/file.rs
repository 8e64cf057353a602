//! The store file before SQLite sees it (C11): created with mode 0600 (its
//! directory 0700) when missing, and its header checked when it exists, so
//! a file that is not a whole SQLite database is refused unchanged.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};

use super::APPLICATION_ID;
use crate::sql::schema::LATEST_VERSION;

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// What the header check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FileState {
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
pub(super) fn prepare_file(path: &Path) -> StoreResult<FileState> {
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
    let mut journal = path.as_os_str().to_owned();
    journal.push("-journal");
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
    use std::time::Duration;

    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{ConnectOptions as _, Connection as _};

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
