//! The SQL engines' connections: a few connections to one database, the
//! most recently returned one lent first, with nothing between a statement
//! and its connection.
//!
//! sqlx's general-purpose pool pings a connection before lending it and
//! again, on a spawned task, when it comes back. On SQLite (a file handle
//! in this process) each ping was a round trip to the connection's worker
//! thread; on PostgreSQL, to the server; and handing connections back
//! through a task spread consecutive statements over every connection (in
//! SQLite's WAL mode each then found another's commit and started with a
//! cold page cache). The benchmark
//! (`docs/history/BENCHMARKS-2026-12.md`) measured that
//! as most of the store's cost over raw statements.
//!
//! Here a statement takes the most recently returned idle connection and
//! gives it back synchronously when it is done. Health is checked only
//! where it can fail: a connection a statement failed on with an I/O,
//! protocol or worker error is dropped, not reused; and, when the engine
//! asks for it (PostgreSQL, whose server may restart or close idle
//! sessions), a connection that sat idle for a while is pinged before it
//! is lent, and replaced if the ping fails.
//!
//! New connections are made from the engine's connect options, or by a
//! [`Connect`] the engine gives ([`Connections::with_connector`]):
//! PostgreSQL's, which chooses among the servers of a URL of several hosts
//! (`postgres/hosts.rs`).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sqlx::{ConnectOptions as _, Connection};

use crate::sql::driver::BoxFuture;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Makes a new connection, in place of the connect options'.
#[async_trait::async_trait]
pub(crate) trait Connect<C>: Send + Sync + 'static {
    /// A new connection.
    async fn connect(&self) -> Result<C, sqlx::Error>;
}

/// At most `max` connections made from `options` (or by `connector`).
pub(crate) struct Connections<C: Connection> {
    options: C::Options,
    connector: Option<Arc<dyn Connect<C>>>,
    idle: Mutex<Vec<Idle<C>>>,
    slots: Semaphore,
    acquire_timeout: Duration,
    check_idle_after: Option<Duration>,
    setup: Option<Setup<C>>,
}

/// What is done to every new connection before it is first lent (SQLite
/// installs its busy handler on it).
pub(crate) type Setup<C> =
    Box<dyn for<'c> Fn(&'c mut C) -> BoxFuture<'c, Result<(), sqlx::Error>> + Send + Sync>;

struct Idle<C> {
    conn: C,
    since: Instant,
}

/// A connection lent to one statement or transaction; returned on drop.
pub(crate) struct Lease<'a, C: Connection> {
    conn: Option<C>,
    owner: &'a Connections<C>,
    broken: bool,
    _slot: SemaphorePermit<'a>,
}

impl<C: Connection> Connections<C> {
    /// Adds an open connection to the idle ones.
    pub(crate) fn give(&self, conn: C) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Idle {
                conn,
                since: Instant::now(),
            });
    }
}

impl<C: Connection + 'static> Connections<C> {
    /// No connection yet; up to `max` (at least 1). A lend waits at most
    /// `acquire_timeout`, connecting included. With `check_idle_after`, a
    /// connection idle that long is pinged before it is lent.
    pub(crate) fn new(
        options: C::Options,
        max: u32,
        acquire_timeout: Duration,
        check_idle_after: Option<Duration>,
    ) -> Self {
        Self {
            options,
            connector: None,
            idle: Mutex::new(Vec::new()),
            slots: Semaphore::new(usize::try_from(max.max(1)).unwrap_or(1)),
            acquire_timeout,
            check_idle_after,
            setup: None,
        }
    }

    /// The same, with `setup` run on every connection it makes.
    // SQLite's connections take their pragmas in a setup.
    #[cfg(feature = "sqlite")]
    pub(crate) fn with_setup(mut self, setup: Setup<C>) -> Self {
        self.setup = Some(setup);
        self
    }

    /// New connections are made by `connector` instead of from the
    /// options (PostgreSQL's: the host that accepts writes).
    #[cfg(feature = "postgres")]
    pub(crate) fn with_connector(mut self, connector: Arc<dyn Connect<C>>) -> Self {
        self.connector = Some(connector);
        self
    }

    /// What new connections are made from.
    pub(crate) fn options(&self) -> &C::Options {
        &self.options
    }

    /// A new connection, from the connector or the options.
    async fn connect(&self) -> Result<C, sqlx::Error> {
        match &self.connector {
            Some(connector) => connector.connect().await,
            None => self.options.connect().await,
        }
    }

    /// Closes every idle connection; new ones are made when needed.
    pub(crate) fn close_idle(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().unwrap_or_else(PoisonError::into_inner));
        drop(idle);
    }

    /// Lends a connection: the most recently returned idle one, else a new
    /// one while fewer than `max` are lent, else the first one returned.
    ///
    /// # Errors
    /// `PoolTimedOut` after the acquire timeout; the connect error when a
    /// new connection cannot be opened.
    pub(crate) async fn acquire(&self) -> Result<Lease<'_, C>, sqlx::Error> {
        tokio::time::timeout(self.acquire_timeout, self.lend_one())
            .await
            .unwrap_or(Err(sqlx::Error::PoolTimedOut))
    }

    async fn lend_one(&self) -> Result<Lease<'_, C>, sqlx::Error> {
        let slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        let lease = |conn| Lease {
            conn: Some(conn),
            owner: self,
            broken: false,
            _slot: slot,
        };
        loop {
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let Some(Idle { mut conn, since }) = idle else {
                break;
            };
            let stale = self
                .check_idle_after
                .is_some_and(|after| since.elapsed() >= after);
            if !stale || conn.ping().await.is_ok() {
                return Ok(lease(conn));
            }
            // The server closed it while it was idle: drop it, try the next.
        }
        let mut conn = self.connect().await?;
        if let Some(setup) = &self.setup {
            setup(&mut conn).await?;
        }
        Ok(lease(conn))
    }
}

impl<C: Connection> fmt::Debug for Connections<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connections")
            .field("available", &self.slots.available_permits())
            .field("acquire_timeout", &self.acquire_timeout)
            .finish_non_exhaustive()
    }
}

impl<C: Connection> Lease<'_, C> {
    /// A statement on this connection failed with `error`: an I/O,
    /// protocol, TLS or worker error means the connection is broken, and so
    /// does a server error that ends the session (PostgreSQL's classes 08,
    /// connection exception, and 57P, such as `57P01` when an administrator
    /// terminated it or the server shuts down), and a write refused as
    /// read-only (`25006`: the server was demoted, or made read-only, since
    /// the connection was made): it is dropped instead of given back, so a
    /// retry gets a fresh connection, to whichever server accepts writes.
    pub(crate) fn failed(&mut self, error: &sqlx::Error) {
        let ends_session = match error {
            sqlx::Error::Database(db) => db.code().is_some_and(|code| {
                code.starts_with("08") || code.starts_with("57P") || code == "25006"
            }),
            _ => false,
        };
        if ends_session
            || matches!(
                error,
                sqlx::Error::Io(_)
                    | sqlx::Error::Protocol(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::WorkerCrashed
            )
        {
            self.broken = true;
        }
    }
}

impl<C: Connection> Deref for Lease<'_, C> {
    type Target = C;

    fn deref(&self) -> &C {
        match &self.conn {
            Some(conn) => conn,
            None => unreachable!("a lease holds its connection until it is dropped"),
        }
    }
}

impl<C: Connection> DerefMut for Lease<'_, C> {
    fn deref_mut(&mut self) -> &mut C {
        match &mut self.conn {
            Some(conn) => conn,
            None => unreachable!("a lease holds its connection until it is dropped"),
        }
    }
}

impl<C: Connection> Drop for Lease<'_, C> {
    /// Gives the connection back, unless it failed, is still inside a
    /// transaction or holds bytes it has not sent. A transaction dropped
    /// without its end (a cancelled call: a client that went away from the
    /// service mid-request, an error between `BEGIN` and `COMMIT`) is
    /// rolled back by sqlx only lazily: PostgreSQL's `ROLLBACK` is queued
    /// in the connection's buffer until its next use, and meanwhile the
    /// server keeps the transaction open with its locks (seen: a session
    /// idle in transaction for minutes, blocking every writer of its rows,
    /// after a client was killed mid-request). A connection that still
    /// counts a transaction would also refuse the next caller's `BEGIN`
    /// ("begin_with at non-zero transaction depth"). Such a connection is
    /// closed instead, at once: the server then ends the transaction, and
    /// a new connection is opened when needed. (`should_flush` is sqlx's
    /// own check for unsent bytes, hidden from its docs, which sqlx's pool
    /// uses for the same purpose; the test
    /// `a_call_cancelled_inside_its_transaction_leaves_no_lock_on_postgresql`
    /// fails if an upgrade changes it.)
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if !self.broken && !conn.is_in_transaction() && !conn.should_flush() {
                self.owner.give(conn);
            }
        }
    }
}

// The pool is tested on SQLite connections, in memory.
#[cfg(feature = "sqlite")]
#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};

    fn connections(
        dir: &std::path::Path,
        max: u32,
        check_idle_after: Option<Duration>,
    ) -> Connections<SqliteConnection> {
        let options = SqliteConnectOptions::new()
            .filename(dir.join("c.db"))
            .create_if_missing(true);
        Connections::new(options, max, Duration::from_millis(200), check_idle_after)
    }

    /// Each connection has its own temp schema: a marker table tells them apart.
    async fn marked(lease: &mut Lease<'_, SqliteConnection>) -> bool {
        let tables: i64 = sqlx::query_scalar("SELECT count(*) FROM temp.sqlite_master")
            .fetch_one(&mut **lease)
            .await
            .unwrap();
        tables == 1
    }

    async fn mark(lease: &mut Lease<'_, SqliteConnection>) {
        sqlx::query("CREATE TEMP TABLE marker (x)")
            .execute(&mut **lease)
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn the_most_recently_returned_connection_is_lent_first() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connections(dir.path(), 4, None);
        mark(&mut pool.acquire().await.unwrap()).await;
        for _ in 0..3 {
            assert!(marked(&mut pool.acquire().await.unwrap()).await);
        }
        // While one is lent, a second connection is opened.
        let _first = pool.acquire().await.unwrap();
        assert!(!marked(&mut pool.acquire().await.unwrap()).await);
    }

    #[tokio::test]
    async fn idle_connections_closed_are_replaced_and_a_lent_one_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connections(dir.path(), 2, None);
        let mut lent = pool.acquire().await.unwrap();
        mark(&mut lent).await;
        mark(&mut pool.acquire().await.unwrap()).await;
        pool.close_idle();
        // The idle one is gone: a new, unmarked connection is made.
        assert!(!marked(&mut pool.acquire().await.unwrap()).await);
        // The lent one was not touched, and goes back when it is done.
        assert!(marked(&mut lent).await);
        drop(lent);
        assert!(marked(&mut pool.acquire().await.unwrap()).await);
    }

    #[tokio::test]
    async fn lending_past_the_limit_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connections(dir.path(), 1, None);
        let _held = pool.acquire().await.unwrap();
        assert!(matches!(
            pool.acquire().await,
            Err(sqlx::Error::PoolTimedOut)
        ));
    }

    #[tokio::test]
    async fn a_connection_that_failed_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connections(dir.path(), 2, None);
        {
            let mut lease = pool.acquire().await.unwrap();
            mark(&mut lease).await;
            lease.failed(&sqlx::Error::WorkerCrashed);
        }
        assert!(!marked(&mut pool.acquire().await.unwrap()).await);
        {
            let mut lease = pool.acquire().await.unwrap();
            mark(&mut lease).await;
            // A constraint violation says nothing about the connection.
            lease.failed(&sqlx::Error::RowNotFound);
        }
        assert!(marked(&mut pool.acquire().await.unwrap()).await);
    }

    #[tokio::test]
    async fn a_connection_left_inside_a_transaction_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connections(dir.path(), 1, None);
        {
            let mut lease = pool.acquire().await.unwrap();
            mark(&mut lease).await;
            let tx = sqlx::Connection::begin_with(&mut *lease, "BEGIN IMMEDIATE")
                .await
                .unwrap();
            // Its end never runs, as when the call is cancelled at the
            // wrong moment.
            std::mem::forget(tx);
        }
        let mut lease = pool.acquire().await.unwrap();
        assert!(!marked(&mut lease).await);
        sqlx::Connection::begin_with(&mut *lease, "BEGIN IMMEDIATE")
            .await
            .unwrap()
            .commit()
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn an_idle_connection_is_pinged_and_kept_when_it_answers() {
        let dir = tempfile::tempdir().unwrap();
        let pool = connections(dir.path(), 2, Some(Duration::ZERO));
        mark(&mut pool.acquire().await.unwrap()).await;
        assert!(marked(&mut pool.acquire().await.unwrap()).await);
    }
}
