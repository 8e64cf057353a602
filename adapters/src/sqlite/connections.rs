//! The SQLite engine's connections: a few connections to one file, the
//! most recently used one first, and nothing between a statement and its
//! connection.
//!
//! sqlx's general-purpose pool pings a connection before handing it out
//! and again, on a spawned task, when it comes back: right for a server
//! that may hang up, but a SQLite connection is a file handle in this
//! process. Each ping was a round trip to the connection's worker thread,
//! and handing connections back through a task spread consecutive
//! statements over all connections, where (in WAL mode) each one finds
//! another's commit and starts with a cold page cache. Here a statement
//! takes the most recently returned connection and gives it back when it
//! is done, synchronously. A connection whose worker failed is dropped,
//! not reused.

use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::ConnectOptions as _;
use tokio::sync::{Semaphore, SemaphorePermit};

/// At most `max` connections to one SQLite file.
#[derive(Debug)]
pub(crate) struct SqliteConnections {
    options: SqliteConnectOptions,
    idle: Mutex<Vec<SqliteConnection>>,
    slots: Semaphore,
    acquire_timeout: Duration,
}

/// A connection lent to one statement or transaction; returned on drop.
#[derive(Debug)]
pub(crate) struct SqliteLease<'a> {
    conn: Option<SqliteConnection>,
    owner: &'a SqliteConnections,
    broken: bool,
    _slot: SemaphorePermit<'a>,
}

impl SqliteConnections {
    /// Opens the first connection (so a file SQLite cannot use is reported
    /// now) and allows up to `max` (at least 1).
    pub(crate) async fn open(
        options: SqliteConnectOptions,
        max: u32,
        acquire_timeout: Duration,
    ) -> Result<Self, sqlx::Error> {
        let first = options.connect().await?;
        Ok(Self {
            options,
            idle: Mutex::new(vec![first]),
            slots: Semaphore::new(usize::try_from(max.max(1)).unwrap_or(1)),
            acquire_timeout,
        })
    }

    /// Lends a connection: the most recently returned idle one, else a new
    /// one while fewer than `max` are open, else the first one returned.
    ///
    /// # Errors
    /// `PoolTimedOut` after the acquire timeout; the connect error when a
    /// new connection cannot be opened.
    pub(crate) async fn acquire(&self) -> Result<SqliteLease<'_>, sqlx::Error> {
        let slot = match tokio::time::timeout(self.acquire_timeout, self.slots.acquire()).await {
            Ok(Ok(slot)) => slot,
            Ok(Err(_)) => return Err(sqlx::Error::PoolClosed),
            Err(_) => return Err(sqlx::Error::PoolTimedOut),
        };
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.options.connect().await?,
        };
        Ok(SqliteLease {
            conn: Some(conn),
            owner: self,
            broken: false,
            _slot: slot,
        })
    }
}

impl SqliteLease<'_> {
    /// Records that a statement failed on this connection; one whose worker
    /// is gone (or whose file handle failed) is dropped instead of reused.
    pub(crate) fn failed(&mut self, error: &sqlx::Error) {
        if matches!(error, sqlx::Error::WorkerCrashed | sqlx::Error::Io(_)) {
            self.broken = true;
        }
    }
}

impl Deref for SqliteLease<'_> {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        match &self.conn {
            Some(conn) => conn,
            None => unreachable!("a lease holds its connection until it is dropped"),
        }
    }
}

impl DerefMut for SqliteLease<'_> {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        match &mut self.conn {
            Some(conn) => conn,
            None => unreachable!("a lease holds its connection until it is dropped"),
        }
    }
}

impl Drop for SqliteLease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if !self.broken {
                self.owner
                    .idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(conn);
            }
        }
    }
}

impl crate::sql::ConnectionSource<sqlx::Sqlite> for SqliteConnections {
    type Lease<'a> = SqliteLease<'a>;

    fn lend(
        &self,
    ) -> impl std::future::Future<Output = Result<SqliteLease<'_>, sqlx::Error>> + Send {
        self.acquire()
    }
}

impl crate::sql::LeaseHealth for SqliteLease<'_> {
    fn failed(&mut self, error: &sqlx::Error) {
        SqliteLease::failed(self, error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn connections(dir: &std::path::Path, max: u32) -> SqliteConnections {
        let options = SqliteConnectOptions::new()
            .filename(dir.join("c.db"))
            .create_if_missing(true);
        SqliteConnections::open(options, max, Duration::from_millis(200))
            .await
            .unwrap()
    }

    async fn connection_id(lease: &mut SqliteLease<'_>) -> i64 {
        // Each connection has its own temp schema; a marker table tells them apart.
        sqlx::query_scalar("SELECT count(*) FROM temp.sqlite_master")
            .fetch_one(&mut **lease)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_most_recently_returned_connection_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connections(dir.path(), 4).await;
        {
            let mut lease = pool.acquire().await.unwrap();
            sqlx::query("CREATE TEMP TABLE marker (x)")
                .execute(&mut *lease)
                .await
                .unwrap();
        }
        for _ in 0..3 {
            let mut lease = pool.acquire().await.unwrap();
            assert_eq!(connection_id(&mut lease).await, 1, "same connection");
        }
        // While one is lent, a second connection is opened.
        let _first = pool.acquire().await.unwrap();
        let mut second = pool.acquire().await.unwrap();
        assert_eq!(connection_id(&mut second).await, 0, "a new connection");
    }

    #[tokio::test]
    async fn acquiring_past_the_limit_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connections(dir.path(), 1).await;
        let _held = pool.acquire().await.unwrap();
        assert!(matches!(
            pool.acquire().await,
            Err(sqlx::Error::PoolTimedOut)
        ));
    }

    #[tokio::test]
    async fn a_broken_connection_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connections(dir.path(), 2).await;
        {
            let mut lease = pool.acquire().await.unwrap();
            sqlx::query("CREATE TEMP TABLE marker (x)")
                .execute(&mut *lease)
                .await
                .unwrap();
            lease.failed(&sqlx::Error::WorkerCrashed);
        }
        let mut lease = pool.acquire().await.unwrap();
        assert_eq!(connection_id(&mut lease).await, 0, "a fresh connection");
    }
}
