//! The PostgreSQL backend: one registry on a server that several machines
//! share.
//!
//! It reuses the shared SQL repository ([`crate::sql`]) unchanged: this
//! module only connects, migrates and maps errors. Every port method is the
//! same statement as on SQLite.
//!
//! - **Concurrency:** every write is one autocommit statement (or, for a
//!   task and its first PR, one transaction). A transition is `UPDATE ...
//!   WHERE id = $1 AND version = $2`: under READ COMMITTED a second writer
//!   waits for the first one's row lock, then re-checks the version on the
//!   new row and updates nothing, so exactly one of several racing writers
//!   on any number of machines wins. The partial unique index
//!   `handoffs_one_active_per_parent` refuses a second active handoff for a
//!   parent (I6), and `handoffs_one_per_parent_step` a second handoff for
//!   one parent and step (C12); the server names the index it refused a row
//!   for as the violated constraint, which is how `map_error` tells them
//!   apart.
//! - **Durability:** a call returns after the server committed, so it is as
//!   durable as the server is configured to be (with the defaults,
//!   `fsync=on` and `synchronous_commit=on`, a commit is on the server's
//!   disk; with synchronous replication, on a standby's too).
//! - **Where the tables live:** in one schema (`lf_handoff` unless the URL
//!   says `?schema=...`), created when missing. Several registries can share
//!   a database in separate schemas. Each connection's `search_path` is that
//!   schema, set in the startup packet (no extra round trip).
//! - **Migrations:** the numbered migrations of [`crate::sql::schema`] (the
//!   same DDL as SQLite). The version lives in the table `lf_handoff_meta`.
//!   Opening first reads it without writing anything: a store written by a
//!   newer build, or a schema holding another program's tables, is refused
//!   and left untouched. Otherwise the migration runs in one transaction
//!   that first takes a transaction-scoped advisory lock
//!   (`pg_advisory_xact_lock`) keyed on the schema name and reads the
//!   version again, so processes on several machines opening a new or an
//!   older store at once migrate it exactly once (a store of release 0.1.0,
//!   version 1, is upgraded in place).
//! - **Connections:** the store is opened on one direct connection (so an
//!   unreachable or refusing server is reported at once, naming host and
//!   port, and at the latest after `acquire_timeout`), which becomes the
//!   first pooled connection after the version check. Calls use at most
//!   `pool_size` connections, the most recently used first (see
//!   `sql/connections.rs`); one idle for a second or more is pinged before
//!   it is lent, and one a statement failed on with an I/O or protocol
//!   error is dropped. A call that cannot get a connection within
//!   `acquire_timeout` fails with `Unavailable`.
//! - **TLS:** sqlx with rustls (ring) and the system's certificate store;
//!   `sslmode` and `sslrootcert`/`sslcert`/`sslkey` have libpq's meanings,
//!   except that `verify-ca` checks the host name too (a limit of sqlx
//!   0.8.6, see docs/POSTGRES.md). Certificate files are checked when the
//!   URL is read; a failed handshake's message says which remedy applies.
//! - **Errors:** every sqlx error is mapped in one place (`map_error`)
//!   into an `Unavailable` whose message names the server (host and port,
//!   database, schema) and says what to do. No message holds the password.

mod config;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_application::{StoreError, StoreResult, UnavailableKind};
use sqlx::postgres::{PgConnectOptions, PgConnection, PgQueryResult};
use sqlx::{ConnectOptions as _, Connection as _};

use crate::changes::{ChangeSource, Notifier};
use crate::sql::archive::{self, ArchiveDialect};
use crate::sql::connections::Connections;
use crate::sql::schema::{postgres_statements_after, UniqueIndex, LATEST_VERSION};
use crate::sql::{Dialect, Engine, EngineError, RowsAffected};

pub use config::{
    PostgresConfig, DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_POOL_SIZE, DEFAULT_POSTGRES_SCHEMA,
};

/// A pooled connection idle for this long is pinged before it is lent, in
/// case the server restarted or closed it meanwhile.
const IDLE_CHECK_AFTER: Duration = Duration::from_secs(1);

/// How long a migration waits for another process's migration lock.
const MIGRATION_LOCK_TIMEOUT: &str = "60s";
/// How long a migration's DDL waits for a table another session holds.
const DDL_LOCK_TIMEOUT: &str = "5s";

/// The PostgreSQL engine: a few connections to one schema of one database.
pub(crate) type PostgresEngine = Engine<Server>;

impl PostgresEngine {
    /// Connects, checks the schema version and migrates when needed.
    pub(crate) async fn open(config: &PostgresConfig) -> StoreResult<Self> {
        let options = config.connect_options()?;
        let server = Server::new(&options, config);
        let mut conn = tokio::time::timeout(config.acquire_timeout, options.connect())
            .await
            .map_err(|_| server.no_answer())?
            .map_err(|e| server.unavailable(e))?;
        server.migrate(&mut conn).await?;
        // The version check's connection becomes the first pooled one (its
        // transaction-scoped settings ended with the migration).
        let pool = Connections::new(
            options,
            config.pool_size,
            config.acquire_timeout,
            Some(IDLE_CHECK_AFTER),
        );
        pool.give(conn);
        Ok(Engine::new(pool, server))
    }
}

/// What a message says about the store's server: host and port, database,
/// schema. Never the password.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// `host:port`, `[v6]:port`, or the Unix socket.
    address: String,
    database: String,
    user: String,
    schema: String,
    pool_size: u32,
    acquire_timeout: Duration,
}

/// What the version check found in the store's schema.
#[derive(Debug, PartialEq, Eq)]
enum SchemaState {
    /// No lf-handoff tables yet; the schema itself may not exist.
    Fresh { schema_exists: bool },
    /// An lf-handoff store at this schema version.
    Store { version: i64 },
}

impl Server {
    fn new(options: &PgConnectOptions, config: &PostgresConfig) -> Self {
        let address = match options.get_socket() {
            Some(socket) => format!("socket {} (port {})", socket.display(), options.get_port()),
            None if options.get_host().contains(':') && !options.get_host().starts_with('[') => {
                format!("[{}]:{}", options.get_host(), options.get_port())
            }
            None => format!("{}:{}", options.get_host(), options.get_port()),
        };
        let user = options.get_username().to_string();
        Self {
            address,
            database: options.get_database().unwrap_or(&user).to_string(),
            user,
            schema: config.schema.clone(),
            pool_size: config.pool_size,
            acquire_timeout: config.acquire_timeout,
        }
    }

    /// Reads the version and migrates forward, refusing (and leaving
    /// untouched) a store from a newer build or another program's schema.
    async fn migrate(&self, conn: &mut PgConnection) -> StoreResult<()> {
        let state = tokio::time::timeout(self.acquire_timeout, self.inspect(conn))
            .await
            .map_err(|_| self.no_answer())??;
        if state
            == (SchemaState::Store {
                version: LATEST_VERSION,
            })
        {
            return Ok(());
        }
        let mut tx = conn.begin().await.map_err(|e| self.unavailable(e))?;
        for statement in [
            format!("SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'"),
            format!("SET LOCAL search_path TO \"{}\"", self.schema),
        ] {
            sqlx::query(&statement)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.unavailable(e))?;
        }
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(migration_lock_key(&self.schema))
            .execute(&mut *tx)
            .await
            .map_err(|e| self.unavailable(e))?;
        // Another process may have migrated while we waited for the lock
        // (under READ COMMITTED this read sees its commit): then there is
        // nothing to write.
        let version = match self.inspect(&mut tx).await? {
            SchemaState::Store {
                version: LATEST_VERSION,
            } => return tx.commit().await.map_err(|e| self.unavailable(e)),
            SchemaState::Store { version } => version,
            SchemaState::Fresh { schema_exists } => {
                let mut statements = Vec::new();
                if !schema_exists {
                    statements.push(format!("CREATE SCHEMA \"{}\"", self.schema));
                }
                statements.push(format!(
                    "CREATE TABLE \"{}\".lf_handoff_meta (name TEXT PRIMARY KEY, value BIGINT \
                     NOT NULL)",
                    self.schema
                ));
                for statement in statements {
                    sqlx::query(&statement)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| self.unavailable(e))?;
                }
                0
            }
        };
        // The migration's DDL waits for its tables' locks, and while it
        // waits every read and write of the store queues behind it: wait
        // briefly, and say who to look for when another session holds them.
        sqlx::query(&format!("SET LOCAL lock_timeout = '{DDL_LOCK_TIMEOUT}'"))
            .execute(&mut *tx)
            .await
            .map_err(|e| self.unavailable(e))?;
        for statement in postgres_statements_after(version) {
            sqlx::query(&statement)
                .execute(&mut *tx)
                .await
                .map_err(|e| match &e {
                    sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03") => {
                        StoreError::unavailable_because(
                            UnavailableKind::Locked,
                            format!(
                                "{self}: upgrading the store needs its tables alone for a \
                                 moment, but another session held them for over \
                                 {DDL_LOCK_TIMEOUT} (a long transaction or a dump); \
                                 retry when it is done. Nothing was changed"
                            ),
                            e,
                        )
                    }
                    _ => self.unavailable(e),
                })?;
        }
        sqlx::query(
            "INSERT INTO lf_handoff_meta (name, value) VALUES ('schema_version', $1) \
             ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value",
        )
        .bind(LATEST_VERSION)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.unavailable(e))?;
        tx.commit().await.map_err(|e| self.unavailable(e))
    }

    /// Reads what the schema holds, without writing anything.
    ///
    /// # Errors
    /// `Unavailable` for a schema written by a newer build, a schema that
    /// holds another program's tables, or a damaged version table.
    async fn inspect(&self, conn: &mut PgConnection) -> StoreResult<SchemaState> {
        let (schema_exists, relations, has_meta): (bool, i64, bool) = sqlx::query_as(
            "SELECT \
               EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1), \
               (SELECT count(*) FROM pg_catalog.pg_class c \
                  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                  WHERE n.nspname = $1), \
               EXISTS (SELECT 1 FROM pg_catalog.pg_class c \
                  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                  WHERE n.nspname = $1 AND c.relname = 'lf_handoff_meta' AND c.relkind = 'r')",
        )
        .bind(&self.schema)
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| self.unavailable(e))?;
        if !has_meta {
            if relations > 0 {
                return Err(StoreError::damaged(format!(
                    "schema {} of {} holds {relations} tables or indexes of another program and \
                     no lf-handoff store; name another schema with ?schema=NAME in the store \
                     URL. Nothing was changed",
                    self.schema, self
                )));
            }
            return Ok(SchemaState::Fresh { schema_exists });
        }
        let version: Option<i64> = sqlx::query_scalar(&format!(
            "SELECT value FROM \"{}\".lf_handoff_meta WHERE name = 'schema_version'",
            self.schema
        ))
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| self.unavailable(e))?;
        match version {
            Some(version) if version > LATEST_VERSION => Err(StoreError::unavailable(
                UnavailableKind::NewerSchema,
                format!(
                    "{self} holds a store written by a newer lf-handoff (schema version \
                     {version}; this build understands up to {LATEST_VERSION}); upgrade \
                     lf-handoff to use it. Nothing was changed"
                ),
            )),
            Some(version) if version >= 0 => Ok(SchemaState::Store { version }),
            _ => Err(StoreError::damaged(format!(
                "{self}: the table lf_handoff_meta holds no valid schema version; the store may \
                 be damaged. Nothing was changed"
            ))),
        }
    }

    fn no_answer(&self) -> StoreError {
        StoreError::unavailable(
            UnavailableKind::Unreachable,
            format!(
                "cannot reach PostgreSQL at {}: no answer within {:?}; check that the server is \
                 running and that this machine can reach that host and port (acquire_timeout in \
                 the store URL sets how long to wait)",
                self.address, self.acquire_timeout
            ),
        )
    }

    fn unavailable(&self, error: sqlx::Error) -> StoreError {
        match self.map_error(error) {
            EngineError::Failed(error) => error,
            EngineError::Unique { detail, .. } => StoreError::damaged(format!(
                "{self}: unexpected unique constraint violation: {detail}"
            )),
        }
    }
}

/// The first event position that may not be final (C16): the oldest
/// transaction still running that holds a lock on `handoff_events` (every
/// writer of an event locks the table before it is given its transaction
/// id, and an import locks it first of all), or, when none does, the next
/// transaction id, times 2^20. An event's
/// position is its writer's transaction id times that, plus its number in
/// the transaction (`schema::POSTGRES_POSITION`), so every event below
/// the horizon was written by a transaction that has ended: a later
/// statement sees all of them that committed, and no other can come. The
/// lock table names a transaction by its 32-bit id; it is matched to the
/// 64-bit one of the snapshot's running transactions (the statement's
/// snapshot, taken before the lock table is read; the lock table is read
/// once). A transaction that takes its id before it touches
/// `handoff_events` (none of lf-handoff's writes does; a person's `BEGIN`
/// in psql might) is not seen as a writer until it does.
const EVENT_HORIZON: &str = "WITH locks AS MATERIALIZED (\
      SELECT locktype, database, relation, transactionid, mode, granted, pid FROM pg_locks), \
    snap AS MATERIALIZED (SELECT pg_current_snapshot() AS s) \
    SELECT COALESCE(\
      (SELECT MIN(x::text::bigint) FROM snap, pg_snapshot_xip(snap.s) AS x \
       WHERE x::text::bigint % 4294967296 IN (\
         SELECT t.transactionid::text::bigint FROM locks r JOIN locks t ON t.pid = r.pid \
         WHERE r.locktype = 'relation' AND r.relation = to_regclass('handoff_events') \
           AND r.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
           AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock' AND t.granted)), \
      (SELECT pg_snapshot_xmax(s)::text::bigint FROM snap)) * 1048576 AS n";

/// The channel a write's notification goes to (C16).
pub(crate) const CHANNEL: &str = "lf_handoff_events";

/// Makes this session a watcher, so writes notify (the trigger of
/// `handoff_events` sends a notification only while someone watches),
/// and forgets the watchers whose sessions ended.
const REGISTER: [&str; 2] = [
    "DELETE FROM handoff_watchers w \
     WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.pid)",
    "INSERT INTO handoff_watchers (pid) VALUES (pg_backend_pid()) ON CONFLICT DO NOTHING",
];

/// Ends the watch of session `$1`.
const UNREGISTER: &str = "DELETE FROM handoff_watchers WHERE pid = $1";

/// PostgreSQL's change signal (C16): `LISTEN` on a connection of its own,
/// registered in `handoff_watchers` so writes send their notification (in
/// the writing transaction, by a trigger). A write whose statement began
/// before the registration committed does not notify; it ends within
/// moments, so the feed wakes its watchers again [`LATE_WAKES`] after
/// each registration. A lost connection is made again, with a wake, so
/// the watchers catch up; while the server is unreachable the feed keeps
/// trying, and the watchers' own reads report it.
#[derive(Debug)]
struct Notifications {
    options: PgConnectOptions,
    server: String,
}

/// When, after a registration, the feed wakes its watchers again.
const LATE_WAKES: [Duration; 2] = [Duration::from_millis(100), Duration::from_secs(1)];

impl Notifications {
    /// One session: listens and registers, then passes notifications on
    /// until nobody watches (`Ok`) or the connection fails (`Err`). The
    /// listener runs on a task of its own, never interrupted while it
    /// reads (a read cut short would leave the connection mid-message);
    /// it is stopped, and its session unregistered, when nobody watches.
    async fn session(&self, out: &Arc<Notifier>) -> Result<(), sqlx::Error> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect_lazy_with(self.options.clone());
        let mut listener = sqlx::postgres::PgListener::connect_with(&pool).await?;
        listener.listen(CHANNEL).await?;
        for statement in REGISTER {
            sqlx::query(statement).execute(&mut listener).await?;
        }
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut listener)
            .await?;
        out.bump();
        let server = self.server.clone();
        let forward = out.clone();
        let mut listening = tokio::spawn(async move {
            loop {
                match listener.try_recv().await {
                    Ok(Some(_)) => forward.bump(),
                    Ok(None) => {
                        return Err(sqlx::Error::Protocol(format!(
                            "the watch connection to {server} was lost"
                        )))
                    }
                    Err(error) => return Err(error),
                }
            }
        });
        let started = tokio::time::Instant::now();
        let mut late: Vec<tokio::time::Instant> = LATE_WAKES
            .iter()
            .rev()
            .map(|after| started + *after)
            .collect();
        loop {
            let tick = late
                .last()
                .copied()
                .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(1));
            tokio::select! {
                ended = &mut listening => {
                    return match ended {
                        Ok(result) => result,
                        Err(join) => Err(sqlx::Error::Protocol(format!("the watch task failed: {join}"))),
                    };
                }
                () = tokio::time::sleep_until(tick) => {
                    if late.last().is_some_and(|at| *at <= tokio::time::Instant::now()) {
                        late.pop();
                        out.bump();
                    }
                    if !out.wanted() {
                        listening.abort();
                        sqlx::query(UNREGISTER).bind(pid).execute(&pool).await?;
                        return Ok(());
                    }
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl ChangeSource for Notifications {
    async fn run(&self, out: &Arc<Notifier>) {
        let mut pause = Duration::from_millis(50);
        while out.wanted() {
            match self.session(out).await {
                Ok(()) => return,
                Err(error) => {
                    tracing::debug!("watching {}: {error}; connecting again", self.server);
                    // Whatever came meanwhile is read after the pause.
                    tokio::time::sleep(pause).await;
                    out.bump();
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        }
    }
}

/// PostgreSQL's dialect: the server, which every message names.
impl Dialect for Server {
    type Db = sqlx::Postgres;

    /// READ COMMITTED: a writer that finds a row another transaction
    /// changed waits for it, then re-checks its condition on the new row.
    const BEGIN_WRITE: &'static str = "BEGIN";
    const DATA_MODIFYING_CTE: bool = true;
    const ARCHIVE: ArchiveDialect = archive::POSTGRES;

    fn store_name(&self) -> String {
        self.to_string()
    }

    const PINS_INDEXES: bool = false;

    const EVENT_HORIZON: Option<&'static str> = Some(EVENT_HORIZON);

    fn change_source(&self, options: &PgConnectOptions) -> Arc<dyn ChangeSource> {
        Arc::new(Notifications {
            options: options.clone(),
            server: self.to_string(),
        })
    }

    /// Maps one sqlx error to what the shared repository understands: a
    /// unique violation, or an actionable `Unavailable`.
    fn map_error(&self, error: sqlx::Error) -> EngineError {
        let address = &self.address;
        if let sqlx::Error::Database(db) = &error {
            if db.is_unique_violation() {
                // PostgreSQL names the violated index as the constraint.
                return EngineError::Unique {
                    index: db.constraint().and_then(UniqueIndex::named),
                    detail: db.message().to_string(),
                };
            }
            let code = db.code().map(|code| code.into_owned()).unwrap_or_default();
            let detail = db.message();
            let (kind, message) = match code.as_str() {
                "28P01" | "28000" => (
                    UnavailableKind::Refused,
                    format!(
                        "PostgreSQL at {address} refused user {} ({detail}); check the user and \
                     password in the store URL and the server's pg_hba.conf",
                        self.user
                    ),
                ),
                "3D000" => (
                    UnavailableKind::Refused,
                    format!(
                        "database {} does not exist on PostgreSQL at {address}; create it \
                     (createdb {}) or name another database in the store URL",
                        self.database, self.database
                    ),
                ),
                "53300" => (
                    UnavailableKind::Unreachable,
                    format!(
                        "PostgreSQL at {address} has no free connections ({detail}); lower \
                     pool_size in the store URL or raise the server's max_connections"
                    ),
                ),
                // Terminated by an administrator (57P01), a crash of
                // another session (57P02), starting up or shutting down
                // (57P03), an idle session closed by the server (57P05):
                // a later attempt on a new connection may pass.
                "57P01" | "57P02" | "57P03" | "57P05" => (
                    UnavailableKind::Unreachable,
                    format!(
                        "PostgreSQL at {address} ended the session or is restarting ({detail}); \
                     retry once it is up"
                    ),
                ),
                "42501" => (
                    UnavailableKind::PermissionDenied,
                    format!(
                        "{self}: permission denied ({detail}); grant user {} CREATE on the \
                     database (or have an administrator create schema {} for it) and USAGE on \
                     the schema",
                        self.user, self.schema
                    ),
                ),
                "42P01" | "3F000" => (
                    UnavailableKind::Damaged,
                    format!(
                    "{self}: the store's tables are missing ({detail}); the schema was dropped \
                     while in use. Open the store again to recreate it"
                ),
                ),
                "55P03" => (
                    UnavailableKind::Locked,
                    format!(
                        "{self}: another process held the store's migration lock for over \
                     {MIGRATION_LOCK_TIMEOUT} ({detail}); retry, and check for a stuck process"
                    ),
                ),
                "25006" => (
                    UnavailableKind::PermissionDenied,
                    format!(
                        "{self} is read-only ({detail}); point the store URL at the primary server"
                    ),
                ),
                "53100" => (
                    UnavailableKind::DiskFull,
                    format!("{self}: the server's disk is full ({detail})"),
                ),
                code if code.starts_with("08") => (
                    UnavailableKind::Unreachable,
                    format!("lost the connection to PostgreSQL at {address}: {detail}"),
                ),
                code => (
                    UnavailableKind::Other,
                    format!("{self}: PostgreSQL error {code}: {detail}"),
                ),
            };
            return EngineError::Failed(StoreError::unavailable_because(kind, message, error));
        }
        let (kind, message) = match &error {
            sqlx::Error::PoolTimedOut => (
                UnavailableKind::Unreachable,
                format!(
                    "no connection to PostgreSQL at {address} within {:?}: the server is down, \
                 unreachable or out of connections (max_connections), or all {} pooled \
                 connections stayed busy; check the server, or raise acquire_timeout or \
                 pool_size in the store URL",
                    self.acquire_timeout, self.pool_size
                ),
            ),
            sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => (
                UnavailableKind::Unreachable,
                format!(
                "cannot connect to PostgreSQL at {address}: connection refused; check that the \
                 server is running and listening on that host and port"
            ),
            ),
            sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => (
                UnavailableKind::Unreachable,
                format!(
                "{address} closed the connection unexpectedly ({io}); check that the store URL's \
                 host and port name a PostgreSQL server and that it is up"
            ),
            ),
            sqlx::Error::Io(io) => match tls_failure(&io.to_string()) {
                Some(TlsFailure::HostName) => (
                    UnavailableKind::Refused,
                    format!(
                        "PostgreSQL at {address} presented a TLS certificate that does not name \
                     that host ({io}); connect by a name the certificate lists, or use \
                     sslmode=require (encrypted, the certificate not checked). With this build \
                     sslmode=verify-ca checks the name too, as verify-full does"
                    ),
                ),
                Some(TlsFailure::UnknownIssuer) => (
                    UnavailableKind::Refused,
                    format!(
                        "PostgreSQL at {address} presented a TLS certificate that no trusted \
                     authority signed ({io}); name the certificate of the authority that \
                     signed it with sslrootcert=/path/to/ca.pem in the store URL, or install \
                     it in the system's certificate store"
                    ),
                ),
                Some(TlsFailure::Other) => (
                    UnavailableKind::Refused,
                    format!(
                        "TLS with PostgreSQL at {address} failed ({io}); check sslmode and the \
                     certificate options in the store URL"
                    ),
                ),
                None => (
                    UnavailableKind::Unreachable,
                    format!("cannot talk to PostgreSQL at {address}: {io}"),
                ),
            },
            sqlx::Error::Tls(tls) if tls.to_string().contains("does not support TLS") => (
                UnavailableKind::Refused,
                format!(
                    "PostgreSQL at {address} does not offer TLS, but the store URL asks for it \
                 (sslmode=require, verify-ca or verify-full); turn ssl on in the server's \
                 postgresql.conf, or use sslmode=prefer or disable"
                ),
            ),
            sqlx::Error::Tls(tls) => (
                UnavailableKind::Refused,
                format!(
                    "TLS with PostgreSQL at {address} failed ({tls}); check sslmode and the \
                 certificate options (sslrootcert, sslcert, sslkey) in the store URL"
                ),
            ),
            sqlx::Error::Protocol(detail) => (
                UnavailableKind::Refused,
                format!(
                "{address} does not answer like a PostgreSQL server ({detail}); check the host \
                 and port in the store URL"
            ),
            ),
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::ColumnIndexOutOfBounds { .. }
            | sqlx::Error::Decode(_) => (
                UnavailableKind::Damaged,
                format!(
                    "{self}: a stored value is unreadable ({error}); the store may be damaged or \
                 changed by another program"
                ),
            ),
            other => (UnavailableKind::Other, format!("{self}: {other}")),
        };
        EngineError::Failed(StoreError::unavailable_because(kind, message, error))
    }
}

impl RowsAffected for PgQueryResult {
    fn rows_affected(&self) -> u64 {
        PgQueryResult::rows_affected(self)
    }
}

/// Why a TLS handshake failed, as far as a person can act on it.
#[derive(Debug, PartialEq, Eq)]
enum TlsFailure {
    /// The certificate is valid but names another host.
    HostName,
    /// No trusted authority signed the certificate.
    UnknownIssuer,
    /// Anything else the TLS library refused.
    Other,
}

/// Reads a TLS failure out of an I/O error's text (the driver wraps the TLS
/// library's error in an I/O error, so its type is not reachable here);
/// `None` for an I/O error that is not about TLS.
fn tls_failure(io_error: &str) -> Option<TlsFailure> {
    if !io_error.contains("peer certificate") && !io_error.contains("TLS") {
        return None;
    }
    Some(if io_error.contains("not valid for name") {
        TlsFailure::HostName
    } else if io_error.contains("UnknownIssuer") {
        TlsFailure::UnknownIssuer
    } else {
        TlsFailure::Other
    })
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PostgreSQL at {} (database {}, schema {})",
            self.address, self.database, self.schema
        )
    }
}

/// The advisory lock key of `schema`'s migrations: a stable 64-bit FNV-1a
/// hash, the same in every build and on every machine.
fn migration_lock_key(schema: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in b"lf-handoff migrate ".iter().chain(schema.as_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    i64::from_be_bytes(hash.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{open_store, StorageConfig};

    #[tokio::test]
    async fn a_refusing_server_is_unavailable_naming_its_address() {
        let config = StorageConfig::postgres("postgres://postgres@127.0.0.1:1/none").unwrap();
        match open_store(&config).await {
            Err(StoreError::Unavailable { kind, message, .. }) => {
                assert_eq!(kind, UnavailableKind::Unreachable, "{message}");
                assert!(message.contains("127.0.0.1:1"), "{message}");
                assert!(message.contains("connection refused"), "{message}");
            }
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("a store opened on port 1"),
        }
    }

    #[tokio::test]
    async fn an_unresolvable_host_is_unavailable_naming_it() {
        let config =
            StorageConfig::postgres("postgres://postgres@no-such-host.invalid:5433/none").unwrap();
        match open_store(&config).await {
            Err(StoreError::Unavailable { kind, message, .. }) => {
                assert_eq!(kind, UnavailableKind::Unreachable, "{message}");
                assert!(message.contains("no-such-host.invalid:5433"), "{message}")
            }
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("a store opened on an unresolvable host"),
        }
    }

    #[test]
    fn messages_name_the_server_by_host_and_port_or_socket() {
        for (url, address) in [
            ("postgres://lf@db.internal:6543/lf", "db.internal:6543"),
            ("postgres://lf@[::1]:5432/lf", "[::1]:5432"),
            (
                "postgres:///lf?host=/var/run/postgresql&user=lf&port=5432",
                "socket /var/run/postgresql (port 5432)",
            ),
        ] {
            let config = PostgresConfig::from_url(url).unwrap();
            let server = Server::new(&config.connect_options().unwrap(), &config);
            assert_eq!(server.address, address, "{url}");
            assert_eq!(
                server.to_string(),
                format!("PostgreSQL at {address} (database lf, schema lf_handoff)")
            );
        }
    }

    #[test]
    fn the_migration_lock_key_is_stable_and_per_schema() {
        assert_eq!(
            migration_lock_key("lf_handoff"),
            migration_lock_key("lf_handoff")
        );
        assert_ne!(
            migration_lock_key("lf_handoff"),
            migration_lock_key("other")
        );
        // The key must never change between builds: processes of different
        // versions migrate under the same lock.
        assert_eq!(migration_lock_key(""), 0xf067_d355_798c_db67_u64 as i64);
    }
}
