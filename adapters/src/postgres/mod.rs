//! The PostgreSQL backend: one registry on a server that several machines
//! share.
//!
//! It reuses the shared SQL repository ([`crate::sql`]) and gives it its
//! [`Dialect`](crate::sql::Dialect) (`dialect.rs`: a write and its event in
//! one statement, a prune batch in one, the events a watcher may read);
//! this file connects and migrates. `config.rs` holds the settings and
//! their URL form, `error.rs` the mapping of every error, `watch.rs` the
//! change signal.
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
//!   a database in separate schemas. Every statement names that schema in
//!   each table it reads or writes (`Dialect::statement`, rewriting the
//!   shared statements once each, `text.rs`), so nothing depends on a
//!   session's `search_path`, which a connection pooler may drop (a
//!   startup parameter it ignores) or share (a server session another
//!   client set up).
//! - **Several hosts** (contract C25): `hosts.rs` makes every new
//!   connection, to the host of the URL that accepts writes, so calls
//!   follow a failover within the store's retry window.
//! - **Behind a connection pooler** (contract C25): the startup packet
//!   holds nothing PgBouncer refuses by default (no `options`, no
//!   `extra_float_digits`); the migration lock is transaction-scoped and
//!   the migration runs as simple queries; with `pooler=transaction`
//!   nothing is prepared (each statement is a simple query with its values
//!   written in as literals, `text.rs`), and changes are listened for
//!   on `listen_url` (a direct connection) or, without one, read again
//!   every second ([`RECHECK_EVERY`]).
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
//! - **Errors:** every sqlx error is mapped in one place (`error.rs`: a
//!   table of SQLSTATEs, then the driver's own errors) into an
//!   `Unavailable` whose message names the server (host and port,
//!   database, schema) and says what to do. No message holds the password.

mod config;
pub(crate) mod dialect;
mod error;
mod hosts;
mod text;
mod watch;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lf_handoff_application::{retry, StoreError, StoreResult, UnavailableKind};
use sqlx::postgres::{PgConnection, PgQueryResult};
use sqlx::{Connection as _, Row as _};

use crate::postgres::hosts::{address_of, Host, Hosts};
use crate::postgres::text::qualify;
use crate::sql::connections::{Connect, Connections};
use crate::sql::schema::{statements_after, LATEST_VERSION};
use crate::sql::{Engine, RowsAffected};

pub use config::{
    Pooler, PostgresConfig, TargetSessionAttrs, DEFAULT_ACQUIRE_TIMEOUT, DEFAULT_POOL_SIZE,
    DEFAULT_POSTGRES_SCHEMA,
};

/// A pooled connection idle for this long is pinged before it is lent, in
/// case the server restarted or closed it meanwhile.
const IDLE_CHECK_AFTER: Duration = Duration::from_secs(1);

/// How long a migration waits for another process's migration lock.
const MIGRATION_LOCK_TIMEOUT: &str = "60s";
/// How long a migration's DDL waits for a table another session holds.
const DDL_LOCK_TIMEOUT: &str = "5s";

/// The tables of a store, which every statement names with the store's
/// schema (a unit test checks the list against the migrations).
const STORE_TABLES: &[&str] = &[
    "parents",
    "task_prs",
    "handoffs",
    "handoff_events",
    "handoff_watchers",
    "handoff_position_floor",
    "lf_handoff_meta",
    "delivery_cursors",
    "revocations",
];

/// Behind a pooler in transaction mode without `listen_url`, how often
/// watchers and waiters read the store again, as no `LISTEN` can be held.
pub(crate) const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// The most statement texts a store keeps rewritten (the shared
/// statements and the list shapes are far fewer).
const REWRITTEN_CAPACITY: usize = 1024;

/// The type of an event's position in PostgreSQL's DDL: the writing
/// transaction's id times 2^20 (C16).
/// Concurrent writers commit in any order, but a transaction that has
/// ended can add no event, so a watcher reads only below the oldest
/// transaction still writing (`dialect::EVENT_HORIZON`) and never misses
/// one. A write appends one event per transaction; an import, which
/// appends many, gives each its position explicitly (below its own).
const POSITION: &str = "BIGINT PRIMARY KEY DEFAULT (pg_current_xact_id()::text::bigint * 1048576)";

/// PostgreSQL's own statements of migration 3, after the shared ones:
/// the sessions that watch (C16), so a write notifies only while someone
/// listens (a notification makes concurrent commits take turns); the
/// trigger that sends it, in the writing transaction; and the last
/// position an import was given, which the store's export gives again.
const MIGRATION_3: &[&str] = &[
    "CREATE TABLE handoff_watchers (pid INTEGER PRIMARY KEY)",
    "CREATE TABLE handoff_position_floor (floor BIGINT NOT NULL)",
    "CREATE FUNCTION handoff_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
         IF EXISTS (SELECT 1 FROM handoff_watchers) THEN
             PERFORM pg_notify('lf_handoff_events', '');
         END IF;
         RETURN NULL;
     END
     $$",
    // The function finds `handoff_watchers` in the store's schema
    // whatever the writing session's search path (the migration runs with
    // it set to the store's schema).
    "ALTER FUNCTION handoff_events_notify() SET search_path FROM CURRENT",
    "CREATE TRIGGER handoff_events_notify AFTER INSERT ON handoff_events
        FOR EACH STATEMENT EXECUTE FUNCTION handoff_events_notify()",
];

/// The statements that bring a store at `version` to the latest schema:
/// the shared migrations, with PostgreSQL's own after migration 3's.
pub(crate) fn migrations_after(version: i64) -> impl Iterator<Item = String> {
    statements_after(version, POSITION, &[&[], &[], MIGRATION_3])
}

/// The PostgreSQL engine: a few connections to one schema of one database.
pub(crate) type PostgresEngine = Engine<Server>;

impl PostgresEngine {
    /// Connects, checks the schema version and migrates when needed. A
    /// server that cannot be used yet (refused, silent, restarting, or only
    /// standbys while a failover is under way: `Unreachable`) is tried
    /// again within the configuration's retry window, as every call is;
    /// what no wait mends (a refused password, a missing database, a newer
    /// store) fails at once.
    pub(crate) async fn open(config: &PostgresConfig) -> StoreResult<Self> {
        let hosts = Arc::new(Hosts::new(
            hosts_of(config.host_options()?),
            config.target_session_attrs,
            config.acquire_timeout,
            config.pooler,
        ));
        let listen = config.listen_options()?.map(|(options, attrs)| {
            // A session of its own, which LISTEN needs.
            Arc::new(Hosts::new(
                hosts_of(options),
                attrs,
                config.acquire_timeout,
                Pooler::None,
            ))
        });
        let server = Server::new(hosts.clone(), listen, config);
        let conn = retry(config.retry_window, "opening the store", || async {
            let mut conn = tokio::time::timeout(config.acquire_timeout, hosts.connect())
                .await
                .map_err(|_| server.no_answer())?
                .map_err(|e| server.unavailable(e))?;
            server.migrate(&mut conn).await?;
            Ok(conn)
        })
        .await?;
        // The version check's connection becomes the first pooled one (its
        // transaction-scoped settings ended with the migration). New ones
        // are made by the hosts, which choose the server.
        let first = hosts
            .hosts()
            .first()
            .map(|host| host.options.clone())
            .ok_or_else(|| {
                StoreError::InvalidInput(format!(
                    "store URL {:?} names no host",
                    config.redacted_url()
                ))
            })?;
        let pool = Connections::new(
            first,
            config.pool_size,
            config.acquire_timeout,
            Some(IDLE_CHECK_AFTER),
        )
        .with_connector(hosts);
        pool.give(conn);
        Ok(Engine::new(pool, server))
    }
}

/// What a message says about the store's server: host and port, database,
/// schema. Never the password.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// `host:port`, `[v6]:port`, or the Unix socket; for a URL of several
    /// hosts, each of them, separated by commas.
    address: String,
    database: String,
    user: String,
    schema: String,
    pool_size: u32,
    acquire_timeout: Duration,
    /// How long a statement waits for the server's answer.
    reply_timeout: Duration,
    /// Which server the store uses; with `ReadWrite`, a write refused as
    /// read-only means the server was demoted, and is retried elsewhere.
    attrs: TargetSessionAttrs,
    /// The URL's servers, which new connections choose among.
    hosts: Arc<Hosts>,
    /// The servers of `listen_url`, where changes are listened for.
    listen: Option<Arc<Hosts>>,
    /// The pooler in front of the server, as the URL says.
    pooler: Pooler,
    /// Each statement's text with the schema named in every table, by
    /// its text as written.
    rewritten: Arc<Mutex<HashMap<String, String>>>,
}

/// The servers of `options`, each named as messages name it.
fn hosts_of(options: Vec<sqlx::postgres::PgConnectOptions>) -> Vec<Host> {
    options
        .into_iter()
        .map(|options| Host {
            address: address_of(&options),
            options,
        })
        .collect()
}

#[async_trait::async_trait]
impl Connect<PgConnection> for Hosts {
    async fn connect(&self) -> Result<PgConnection, sqlx::Error> {
        Hosts::connect(self).await
    }
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
    fn new(hosts: Arc<Hosts>, listen: Option<Arc<Hosts>>, config: &PostgresConfig) -> Self {
        let addresses: Vec<&str> = hosts
            .hosts()
            .iter()
            .map(|host| host.address.as_str())
            .collect();
        let (user, database) = match hosts.hosts().first() {
            Some(host) => {
                let user = host.options.get_username().to_string();
                let database = host.options.get_database().unwrap_or(&user).to_string();
                (user, database)
            }
            None => (String::new(), String::new()),
        };
        Self {
            address: addresses.join(","),
            database,
            user,
            schema: config.schema.clone(),
            pool_size: config.pool_size,
            acquire_timeout: config.acquire_timeout,
            reply_timeout: config.reply_timeout,
            attrs: config.target_session_attrs,
            hosts,
            listen,
            pooler: config.pooler,
            rewritten: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// `sql` with the store's schema named in every table.
    fn qualified(&self, sql: &str) -> String {
        qualify(sql, &self.schema, STORE_TABLES)
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
        self.run(
            &mut tx,
            &format!("SET LOCAL lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'"),
        )
        .await?;
        self.run(
            &mut tx,
            &format!("SET LOCAL search_path TO \"{}\"", self.schema),
        )
        .await?;
        // Transaction-scoped: a pooler in transaction mode hands the
        // session on after the commit, with nothing held.
        self.run(
            &mut tx,
            &format!(
                "SELECT pg_advisory_xact_lock({})",
                migration_lock_key(&self.schema)
            ),
        )
        .await?;
        // Another process may have migrated while we waited for the lock
        // (under READ COMMITTED this read sees its commit): then there is
        // nothing to write.
        let version = match self.inspect(&mut tx).await? {
            SchemaState::Store {
                version: LATEST_VERSION,
            } => return tx.commit().await.map_err(|e| self.unavailable(e)),
            SchemaState::Store { version } => version,
            SchemaState::Fresh { schema_exists } => {
                if !schema_exists {
                    self.run(&mut tx, &format!("CREATE SCHEMA \"{}\"", self.schema))
                        .await?;
                }
                let meta = format!(
                    "CREATE TABLE \"{}\".lf_handoff_meta (name TEXT PRIMARY KEY, value BIGINT \
                     NOT NULL)",
                    self.schema
                );
                self.run(&mut tx, &meta).await?;
                0
            }
        };
        self.upgrade(&mut tx, version).await?;
        tx.commit().await.map_err(|e| self.unavailable(e))
    }

    /// Runs the migrations after `version` in `tx` and records the latest
    /// version. The migration's DDL waits for its tables' locks, and while
    /// it waits every read and write of the store queues behind it: it
    /// waits briefly, and says who to look for when another session holds
    /// them.
    async fn upgrade(&self, tx: &mut PgConnection, version: i64) -> StoreResult<()> {
        self.run(
            tx,
            &format!("SET LOCAL lock_timeout = '{DDL_LOCK_TIMEOUT}'"),
        )
        .await?;
        for statement in migrations_after(version) {
            sqlx::Executor::execute(&mut *tx, statement.as_str())
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
        self.run(
            tx,
            &format!(
                "INSERT INTO lf_handoff_meta (name, value) VALUES ('schema_version', \
                 {LATEST_VERSION}) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value"
            ),
        )
        .await
    }

    /// Executes `sql` (no parameters) on `conn` as a simple query, which
    /// prepares nothing on the server (behind a pooler in transaction mode
    /// a prepared statement would stay in a server session other clients
    /// get).
    async fn run(&self, conn: &mut PgConnection, sql: &str) -> StoreResult<()> {
        sqlx::Executor::execute(&mut *conn, sql)
            .await
            .map(drop)
            .map_err(|e| self.unavailable(e))
    }

    /// Reads what the schema holds, without writing anything.
    ///
    /// # Errors
    /// `Unavailable` for a schema written by a newer build, a schema that
    /// holds another program's tables, or a damaged version table.
    async fn inspect(&self, conn: &mut PgConnection) -> StoreResult<SchemaState> {
        // Simple queries, which prepare nothing (behind a pooler in
        // transaction mode a prepared statement could be another client's
        // session's); the schema's name is checked to need no quoting.
        let schema = &self.schema;
        let row = sqlx::Executor::fetch_one(
            &mut *conn,
            format!(
                "SELECT \
                   EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = '{schema}'), \
                   (SELECT count(*) FROM pg_catalog.pg_class c \
                      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                      WHERE n.nspname = '{schema}'), \
                   EXISTS (SELECT 1 FROM pg_catalog.pg_class c \
                      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                      WHERE n.nspname = '{schema}' AND c.relname = 'lf_handoff_meta' \
                        AND c.relkind = 'r')"
            )
            .as_str(),
        )
        .await
        .map_err(|e| self.unavailable(e))?;
        let read = || -> Result<(bool, i64, bool), sqlx::Error> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        };
        let (schema_exists, relations, has_meta) = read().map_err(|e| self.unavailable(e))?;
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
        let version: Option<i64> = sqlx::Executor::fetch_optional(
            &mut *conn,
            format!("SELECT value FROM \"{schema}\".lf_handoff_meta WHERE name = 'schema_version'")
                .as_str(),
        )
        .await
        .and_then(|row| row.map(|row| row.try_get(0)).transpose())
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
}

impl RowsAffected for PgQueryResult {
    fn rows_affected(&self) -> u64 {
        PgQueryResult::rows_affected(self)
    }
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
        let config =
            StorageConfig::postgres("postgres://postgres@127.0.0.1:1/none?retry_window=300ms")
                .unwrap();
        match open_store(&config).await {
            Err(StoreError::Unavailable { kind, message, .. }) => {
                assert_eq!(kind, UnavailableKind::Unreachable, "{message}");
                assert!(message.contains("127.0.0.1:1"), "{message}");
                assert!(message.contains("connection refused"), "{message}");
                assert!(
                    message.contains("gave up on opening the store"),
                    "{message}"
                );
            }
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("a store opened on port 1"),
        }
    }

    #[tokio::test]
    async fn an_unresolvable_host_is_unavailable_naming_it() {
        let config = StorageConfig::postgres(
            "postgres://postgres@no-such-host.invalid:5433/none?retry_window=0s",
        )
        .unwrap();
        match open_store(&config).await {
            Err(StoreError::Unavailable { kind, message, .. }) => {
                assert_eq!(kind, UnavailableKind::Unreachable, "{message}");
                assert!(message.contains("no-such-host.invalid:5433"), "{message}")
            }
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("a store opened on an unresolvable host"),
        }
    }

    /// The server of the store URL `url`, as messages name it.
    fn server_of(url: &str) -> Server {
        let config = PostgresConfig::from_url(url).unwrap();
        let hosts = Hosts::new(
            hosts_of(config.host_options().unwrap()),
            config.target_session_attrs,
            config.acquire_timeout,
            config.pooler,
        );
        Server::new(Arc::new(hosts), None, &config)
    }

    /// A notification met where a statement's answer belongs (a pooler in
    /// transaction mode handed over a session that holds another client's
    /// `LISTEN`) says what is wrong and what to set, not that the server
    /// does not answer like PostgreSQL.
    #[test]
    fn a_notification_in_a_statements_answer_names_the_pooler_setting() {
        let server = server_of("postgres://lf@127.0.0.1:6432/lf");
        let clash =
            sqlx::Error::Protocol("execute: unexpected message: NotificationResponse".to_string());
        let (kind, message) = server.describe(&clash);
        assert_eq!(kind, UnavailableKind::Refused);
        assert!(message.contains("pooler=transaction"), "{message}");
        assert!(message.contains("listen_url"), "{message}");
        assert!(!message.contains("does not answer like"), "{message}");
        let other = sqlx::Error::Protocol("unknown message type: 'X'".to_string());
        assert!(server.describe(&other).1.contains("does not answer like"));
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
            let server = server_of(url);
            assert_eq!(server.address, address, "{url}");
            assert_eq!(
                server.to_string(),
                format!("PostgreSQL at {address} (database lf, schema lf_handoff)")
            );
        }
    }

    /// Every table the migrations create is named with the schema in
    /// every statement, and nothing else is.
    #[test]
    fn the_qualified_tables_are_the_tables_of_the_migrations() {
        let mut created: Vec<String> = migrations_after(0)
            .filter_map(|statement| {
                let rest = statement.trim_start().strip_prefix("CREATE TABLE ")?;
                let name = rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
                name.into_iter().next().map(str::to_string)
            })
            .collect();
        created.push("lf_handoff_meta".into());
        created.sort();
        let mut qualified: Vec<String> = STORE_TABLES.iter().map(|t| (*t).to_string()).collect();
        qualified.sort();
        assert_eq!(created, qualified);
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
