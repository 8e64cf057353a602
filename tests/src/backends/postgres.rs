//! The PostgreSQL backend under test, on the server named by
//! `LF_HANDOFF_TEST_POSTGRES_URL` (for example
//! `postgres://postgres@127.0.0.1:5432/test`).
//!
//! Every test gets a fresh schema (`lft_` and 32 hex digits), so tests run in
//! parallel without seeing each other; [`Backend::cleanup`] drops it, and the
//! schemas C11 prepares beside it, so nothing is left behind.
//!
//! **Connections are bounded.** Store handles use pools of
//! [`TEST_POOL_SIZE`] connections, and at most [`SLOTS`] PostgreSQL tests
//! run at once against one server, whatever runs them (threads of one test
//! binary, or one process per test as with nextest): a test first takes one
//! of the slots, a session-level advisory lock held by its admin connection
//! until cleanup. A test uses at most about 20 connections (9 store handles
//! of 2, or a handle and 8 worker processes), so the tests stay well inside
//! the server's default `max_connections` of 100.

use crate::fixtures::stored_wave;
use lf_handoff_adapters::ListQuery;
use lf_handoff_adapters::WatchFrom;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use lf_handoff_adapters::{
    open_store, GenerateId, Pooler, PostgresConfig, StorageConfig, UnavailableKind,
};
use lf_handoff_domain::id::WaveId;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::Mutex;

use crate::fixtures::open_on_new_wave;
use crate::pgbouncer::{PgBouncer, PoolMode, REQUIRE_PGBOUNCER_VAR};
use crate::upgrade::{fixtures, Release};
use crate::{Backend, BoxFuture, Unusable};

/// The environment variable naming the test server.
pub const TEST_URL_VAR: &str = "LF_HANDOFF_TEST_POSTGRES_URL";

/// The environment variable naming the PEM file of the certificate
/// authority that signed the test server's TLS certificate. The TLS tests
/// skip, saying so, when it is unset.
pub const TLS_CA_VAR: &str = "LF_HANDOFF_TEST_POSTGRES_TLS_CA";

/// The environment variable naming a host name the test server's
/// certificate lists and that reaches the server (default `localhost`).
pub const TLS_HOST_VAR: &str = "LF_HANDOFF_TEST_POSTGRES_TLS_HOST";

/// How many PostgreSQL tests may run at once against one server.
pub const SLOTS: i32 = 4;

/// The pool size of every store handle in the tests.
pub const TEST_POOL_SIZE: u32 = 2;

/// The advisory lock class of the slots ("LFTT").
const SLOT_LOCK_CLASS: i32 = 0x4C46_5454;

/// A fresh schema on the test server, dropped in cleanup.
#[derive(Debug)]
pub struct PostgresBackend {
    /// What the stores of the test are opened on: the test server, or a
    /// pooler in front of it.
    base: PostgresConfig,
    /// The test server itself, for the raw SQL of the tests.
    direct: PostgresConfig,
    schema: String,
    /// Holds the test's slot lock; runs the raw SQL of the tests.
    admin: Mutex<Option<PgConnection>>,
}

/// Builds the PostgreSQL backend, or says why it cannot run here.
pub async fn postgres() -> Result<Box<dyn Backend>, String> {
    PostgresBackend::connect()
        .await
        .map(|backend| backend as Box<dyn Backend>)
}

/// The PostgreSQL backend with its stores behind the PgBouncer of this
/// process in session pooling mode (C25).
pub async fn pgbouncer_session() -> Result<Box<dyn Backend>, String> {
    through_pgbouncer(PoolMode::Session).await
}

/// The PostgreSQL backend with its stores behind the PgBouncer of this
/// process in transaction pooling mode, with `pooler=transaction` and a
/// `listen_url` of the test server itself (C25).
pub async fn pgbouncer_transaction() -> Result<Box<dyn Backend>, String> {
    through_pgbouncer(PoolMode::Transaction).await
}

/// The backend behind the shared PgBouncer in `mode`; its raw SQL still
/// goes to the test server. Fails instead of skipping when CI requires
/// PgBouncer.
async fn through_pgbouncer(mode: PoolMode) -> Result<Box<dyn Backend>, String> {
    let port =
        match tokio::task::spawn_blocking(move || PgBouncer::shared(mode).map(PgBouncer::port))
            .await
        {
            Ok(Ok(port)) => port,
            Ok(Err(reason)) => {
                if std::env::var(REQUIRE_PGBOUNCER_VAR).as_deref() == Ok("1") {
                    panic!("{REQUIRE_PGBOUNCER_VAR}=1 but no PgBouncer: {reason}");
                }
                return Err(reason);
            }
            Err(panic) => return Err(format!("starting PgBouncer panicked: {panic}")),
        };
    let mut backend = PostgresBackend::connect().await?;
    backend.base = pooled(&backend.direct, port, mode);
    Ok(backend)
}

/// `direct` reached through the pooler on `port` of 127.0.0.1 in `mode`:
/// the same user, database and options, and for transaction mode
/// `pooler=transaction` with `direct` as the `listen_url`.
pub fn pooled(direct: &PostgresConfig, port: u16, mode: PoolMode) -> PostgresConfig {
    let mut config = direct.clone();
    let (scheme, rest) = direct
        .connection
        .split_once("://")
        .unwrap_or(("postgres", &direct.connection));
    let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = location.split_at(location.find('/').unwrap_or(location.len()));
    let userinfo = authority
        .rsplit_once('@')
        .map(|(userinfo, _)| format!("{userinfo}@"))
        .unwrap_or_default();
    config.connection = format!("{scheme}://{userinfo}127.0.0.1:{port}{path}");
    if !query.is_empty() {
        config.connection.push('?');
        config.connection.push_str(query);
    }
    if mode == PoolMode::Transaction {
        config.pooler = Pooler::Transaction;
        config.listen_url = Some(direct.connection.clone());
    }
    config
}

impl PostgresBackend {
    /// Connects to the test server, takes a slot and names a fresh schema.
    ///
    /// # Errors
    /// Why the tests cannot run: the variable is unset or malformed, or the
    /// server cannot be reached.
    pub async fn connect() -> Result<Box<Self>, String> {
        let url = std::env::var(TEST_URL_VAR).map_err(|_| {
            format!(
                "{TEST_URL_VAR} is not set; set it to a PostgreSQL server, as in \
                 {TEST_URL_VAR}=postgres://postgres@127.0.0.1:5432/test, to run the PostgreSQL \
                 tests"
            )
        })?;
        let StorageConfig::Postgres(mut base) = StorageConfig::from_url(&url)
            .map_err(|e| format!("{TEST_URL_VAR} is not a usable PostgreSQL URL: {e}"))?
        else {
            return Err(format!("{TEST_URL_VAR} must be a postgres:// URL"));
        };
        base.pool_size = TEST_POOL_SIZE;
        let options = PgConnectOptions::from_str(&base.connection)
            .map_err(|e| format!("{TEST_URL_VAR} is malformed: {e}"))?;
        let shown = StorageConfig::Postgres(base.clone()).to_string();
        let mut admin = tokio::time::timeout(Duration::from_secs(10), options.connect())
            .await
            .map_err(|_| format!("the server of {TEST_URL_VAR} ({shown}) does not answer"))?
            .map_err(|e| format!("cannot connect to {TEST_URL_VAR} ({shown}): {e}"))?;
        take_slot(&mut admin).await?;
        let schema = format!("lft_{}", hex_of(WaveId::new().as_str()));
        Ok(Box::new(Self {
            direct: base.clone(),
            base,
            schema,
            admin: Mutex::new(Some(admin)),
        }))
    }

    /// [`connect`](Self::connect), for the TLS tests: also needs
    /// [`TLS_CA_VAR`].
    ///
    /// # Errors
    /// As `connect`, and when [`TLS_CA_VAR`] is unset or names no file.
    pub async fn connect_tls() -> Result<Box<Self>, String> {
        let ca = std::env::var_os(TLS_CA_VAR).ok_or_else(|| {
            format!(
                "{TLS_CA_VAR} is not set; set it to the PEM file of the authority that signed \
                 the test server's certificate (a Debian server's own: \
                 /etc/ssl/certs/ssl-cert-snakeoil.pem) to run the TLS tests"
            )
        })?;
        if !Path::new(&ca).is_file() {
            return Err(format!("{TLS_CA_VAR} names {ca:?}, which is not a file"));
        }
        Self::connect().await
    }

    /// A connection URL to the test server over TLS: `sslmode` and the
    /// extra driver options `extra` (`key=value` pairs), with the
    /// connection's `application_name` set to `name` so the server's
    /// `pg_stat_ssl` can be asked about it.
    pub fn tls_config(&self, name: &str, extra: &[String]) -> StorageConfig {
        let mut config = self.base.clone();
        config.schema = self.schema.clone();
        let mut options = vec![format!("application_name={name}")];
        options.extend(extra.iter().cloned());
        for option in options {
            config.connection.push(if config.connection.contains('?') {
                '&'
            } else {
                '?'
            });
            config.connection.push_str(&option);
        }
        StorageConfig::Postgres(config)
    }

    /// The test's own schema.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// The configuration of a store in `schema` on the test server.
    pub fn config_in(&self, schema: &str) -> StorageConfig {
        let mut config = self.base.clone();
        config.schema = schema.to_string();
        StorageConfig::Postgres(config)
    }

    /// Runs `statement` on the admin connection.
    pub async fn execute(&self, statement: &str) {
        let mut admin = self.admin.lock().await;
        let conn = admin
            .as_mut()
            .expect("the admin connection is open until cleanup");
        sqlx::query(statement)
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }

    /// The first column of every row `query` returns, as text.
    pub async fn texts(&self, query: &str) -> Vec<Option<String>> {
        let mut admin = self.admin.lock().await;
        let conn = admin
            .as_mut()
            .expect("the admin connection is open until cleanup");
        sqlx::query_scalar(query)
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{query}: {e}"))
    }

    /// A text fingerprint of everything in `schema`: its relations and
    /// every row of its tables.
    pub async fn fingerprint(&self, schema: &str) -> Vec<Option<String>> {
        let mut rows = self
            .texts(&format!(
                "SELECT c.relname::text || ':' || c.relkind::text FROM pg_catalog.pg_class c \
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = '{schema}' ORDER BY c.relname"
            ))
            .await;
        let tables = self
            .texts(&format!(
                "SELECT c.relname::text FROM pg_catalog.pg_class c \
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = '{schema}' AND c.relkind = 'r' ORDER BY c.relname"
            ))
            .await;
        for table in tables.into_iter().flatten() {
            rows.extend(
                self.texts(&format!(
                    "SELECT t::text FROM \"{schema}\".\"{table}\" t ORDER BY t::text"
                ))
                .await,
            );
        }
        rows
    }

    /// Creates a store in `schema` holding a few handoffs, then marks it as
    /// written by a newer lf-handoff (schema version 99).
    pub async fn newer_store(&self, schema: &str, dir: &Path) {
        let store = open_store(&self.config_in(schema)).await.unwrap();
        for _ in 0..5 {
            open_on_new_wave(&store, dir).await;
        }
        drop(store);
        self.execute(&format!(
            "UPDATE \"{schema}\".lf_handoff_meta SET value = 99 WHERE name = 'schema_version'"
        ))
        .await;
    }

    /// Creates `schema` holding another program's table.
    pub async fn foreign_schema(&self, schema: &str) {
        self.execute(&format!("CREATE SCHEMA \"{schema}\"")).await;
        self.execute(&format!(
            "CREATE TABLE \"{schema}\".accounts (id INTEGER PRIMARY KEY, owner TEXT)"
        ))
        .await;
        self.execute(&format!(
            "INSERT INTO \"{schema}\".accounts VALUES (1, 'someone else')"
        ))
        .await;
    }
}

impl Backend for PostgresBackend {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn config(&self, _location: PathBuf) -> StorageConfig {
        self.config_in(&self.schema)
    }

    fn shares_across_processes(&self) -> bool {
        true
    }

    fn other_config(&self, name: &str, _location: PathBuf) -> StorageConfig {
        self.config_in(&format!("{}_{name}", self.schema))
    }

    fn release_store<'a>(
        &'a self,
        release: Release,
        _dir: &'a Path,
    ) -> BoxFuture<'a, StorageConfig> {
        Box::pin(async move {
            // The dump, replayed into this test's schema on a connection of
            // its own: psql's `\restrict` lines are dropped, and the dump's
            // SET lines last only for this session.
            let dump = std::fs::read_to_string(fixtures(release).join("postgres.sql")).unwrap();
            let script: String = dump
                .lines()
                .filter(|line| !line.starts_with('\\'))
                .map(|line| line.replace(release.postgres_schema(), &self.schema) + "\n")
                .collect();
            self.execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ))
            .await;
            let options = PgConnectOptions::from_str(&self.direct.connection).unwrap();
            let mut conn = options.connect().await.unwrap();
            sqlx::Executor::execute(&mut conn, script.as_str())
                .await
                .unwrap_or_else(|e| panic!("the dump of {release} does not replay: {e}"));
            let conn = reach_the_fixtures_transaction_ids(conn, &self.schema).await;
            conn.close().await.ok();
            self.config(PathBuf::new())
        })
    }

    fn unusable_stores<'a>(&'a self, dir: &'a Path) -> BoxFuture<'a, Vec<Unusable>> {
        Box::pin(async move {
            let mut cases = vec![Unusable {
                what: "an unreachable server".into(),
                config: StorageConfig::from_url(
                    "postgres://postgres@127.0.0.1:1/none?retry_window=200ms",
                )
                .unwrap(),
                kind: UnavailableKind::Unreachable,
                message_names: "127.0.0.1:1".into(),
                guarded: Vec::new(),
            }];

            let newer = format!("{}_newer", self.schema);
            self.newer_store(&newer, dir).await;
            cases.push(Unusable {
                what: "a schema written by a newer version".into(),
                config: self.config_in(&newer),
                kind: UnavailableKind::NewerSchema,
                message_names: newer.clone(),
                guarded: Vec::new(),
            });

            let foreign = format!("{}_foreign", self.schema);
            self.foreign_schema(&foreign).await;
            cases.push(Unusable {
                what: "a schema holding another program's tables".into(),
                config: self.config_in(&foreign),
                kind: UnavailableKind::Damaged,
                message_names: foreign.clone(),
                guarded: Vec::new(),
            });

            let mut missing = self.base.clone();
            missing
                .connection
                .push(if missing.connection.contains('?') {
                    '&'
                } else {
                    '?'
                });
            missing
                .connection
                .push_str("dbname=lf_handoff_no_such_database");
            cases.push(Unusable {
                what: "a database that does not exist".into(),
                config: StorageConfig::Postgres(missing),
                kind: UnavailableKind::Refused,
                message_names: "lf_handoff_no_such_database".into(),
                guarded: Vec::new(),
            });
            cases
        })
    }

    fn cut_watch_connections(&self) -> BoxFuture<'_, usize> {
        Box::pin(async move {
            let mut admin = self.admin.lock().await;
            let admin = admin
                .as_mut()
                .expect("the admin session is open until cleanup");
            // A watch registers its session a moment after it starts.
            let started = std::time::Instant::now();
            loop {
                let cut: Vec<bool> = sqlx::query_scalar(&format!(
                    "SELECT pg_terminate_backend(pid) FROM \"{}\".handoff_watchers",
                    self.schema
                ))
                .fetch_all(&mut *admin)
                .await
                .unwrap();
                let cut = cut.into_iter().filter(|cut| *cut).count();
                if cut > 0 || started.elapsed() > Duration::from_secs(10) {
                    return cut;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    }

    fn delete_store<'a>(&'a self, _location: &'a Path) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let mut admin = self.admin.lock().await;
            let admin = admin
                .as_mut()
                .expect("the admin session is open until cleanup");
            sqlx::query(&format!("DROP SCHEMA \"{}\" CASCADE", self.schema))
                .execute(admin)
                .await
                .unwrap();
        })
    }

    fn cleanup(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(mut admin) = self.admin.lock().await.take() else {
                return;
            };
            let schema = &self.schema;
            // The test's schema and those named after it (`_newer`,
            // `_foreign`, `other_config`'s).
            let schemas: Vec<String> = sqlx::query_scalar(
                "SELECT nspname::text FROM pg_catalog.pg_namespace \
                 WHERE nspname = $1 OR starts_with(nspname, $1 || '_')",
            )
            .bind(schema)
            .fetch_all(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("cleanup cannot list the schemas of {schema}: {e}"));
            for name in schemas {
                sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                    .execute(&mut admin)
                    .await
                    .unwrap_or_else(|e| panic!("cleanup left schema {name} behind: {e}"));
            }
            // Closing the session releases the slot.
            admin.close().await.ok();
        })
    }
}

/// Waits for one of the [`SLOTS`] advisory locks and keeps it on `admin`.
async fn take_slot(admin: &mut PgConnection) -> Result<(), String> {
    loop {
        for slot in 0..SLOTS {
            let taken: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1, $2)")
                .bind(SLOT_LOCK_CLASS)
                .bind(slot)
                .fetch_one(&mut *admin)
                .await
                .map_err(|e| format!("cannot take a test slot on {TEST_URL_VAR}: {e}"))?;
            if taken {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn hex_of(id: &str) -> String {
    let uuid = id.split_once('_').map_or(id, |(_, uuid)| uuid);
    uuid.chars()
        .filter(char::is_ascii_hexdigit)
        .collect::<String>()
        .to_ascii_lowercase()
}

/// A test URL's scheme, user part and what follows the `@` (hosts, path,
/// options).
fn url_parts(connection: &str) -> (&str, &str, &str) {
    let (scheme, rest) = connection.split_once("://").unwrap();
    let (userinfo, location) = rest.split_once('@').unwrap();
    (scheme, userinfo, location)
}

/// The backend's store config led through a relay of the test's own in
/// front of the URL's first host (in the clear, so the relay can read what
/// passes), with the relay, which counts the pieces holding `marker`.
async fn through_relay(
    backend: &PostgresBackend,
    dir: &Path,
    marker: &[u8],
) -> (PostgresConfig, crate::relay::Relay) {
    let StorageConfig::Postgres(mut config) = backend.config(dir.join("unused")) else {
        unreachable!("the postgres backend's config")
    };
    let connection = config.connection.clone();
    let (scheme, userinfo, location) = url_parts(&connection);
    let (authority, path) = location.split_at(location.find('/').unwrap_or(location.len()));
    let first = authority.split(',').next().unwrap();
    let target = if first.contains(':') {
        first.to_string()
    } else {
        format!("{first}:5432")
    };
    let relay = crate::relay::Relay::start(&target, marker).await;
    let separator = if path.contains('?') { '&' } else { '?' };
    config.connection = format!(
        "{scheme}://{userinfo}@127.0.0.1:{}{path}{separator}sslmode=disable",
        relay.port()
    );
    (config, relay)
}

/// The tests only PostgreSQL has: what "nothing was changed" means on a
/// server, and that a schema is a store of its own.
pub mod scenarios {
    use super::*;
    use lf_handoff_adapters::StoreError;

    /// C16: an event committed behind a writer still running (here a
    /// session holding a lock on `handoff_events` with a transaction id)
    /// is held back, never passed on early; when that writer ends without
    /// a notification (it rolls back), the watcher reads again by itself,
    /// within moments.
    pub async fn events_held_back_by_a_running_writer_come_once_it_ends(backend: &PostgresBackend) {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(&backend.config(dir.path().join("unused")))
            .await
            .unwrap();
        let mut watcher = store
            .watch(WatchFrom::Now, lf_handoff_adapters::WatchFilter::default())
            .await
            .unwrap();
        crate::watch::assert_quiet(&mut watcher, 100).await;
        let schema = backend.schema().to_string();
        backend.execute("BEGIN").await;
        backend
            .execute(&format!(
                "LOCK TABLE \"{schema}\".handoff_events IN ROW EXCLUSIVE MODE"
            ))
            .await;
        backend.execute("SELECT pg_current_xact_id()").await;
        let opened = crate::fixtures::open_on_new_wave(&store, dir.path()).await;
        // An event above a running writer is held back.
        crate::watch::assert_quiet(&mut watcher, 500).await;
        backend.execute("ROLLBACK").await;
        let event = watcher
            .next_within(Duration::from_secs(4))
            .await
            .unwrap()
            .expect("the held-back event comes once the writer ended, before the 5 s recheck");
        assert_eq!(event.handoff_id, opened.id);
    }

    /// C16: a notification that never comes (here the watching session's
    /// registration is removed, so writes send none) costs a waiter the
    /// feed's safety check, a few seconds, not the waiter's own re-read
    /// minutes later: the feed reads the store's mark every 5 s and wakes
    /// its waiters when it moved.
    pub async fn a_write_without_a_notification_wakes_a_waiter_within_the_recheck(
        backend: &PostgresBackend,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(&backend.config(dir.path().join("unused")))
            .await
            .unwrap();
        let opened = open_on_new_wave(&store, dir.path()).await;
        let waiter = {
            let (store, id) = (store.clone(), opened.id.clone());
            tokio::spawn(async move { store.wait(&id, Some(Duration::from_secs(60))).await })
        };
        // The feed has registered and sent its late wakes.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let schema = backend.schema().to_string();
        backend
            .execute(&format!("DELETE FROM \"{schema}\".handoff_watchers"))
            .await;
        let writer = open_store(&backend.config(dir.path().join("unused")))
            .await
            .unwrap();
        writer
            .finish_interactive_handoff(&opened.id, &crate::fixtures::outcome(0), None)
            .await
            .unwrap();
        let started = std::time::Instant::now();
        let waited = tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("the waiter was not woken by the mark within 30 s")
            .unwrap()
            .unwrap();
        assert!(
            matches!(waited, lf_handoff_adapters::Waited::Ended(_)),
            "{waited:?}"
        );
        // The mark is read every 5 s; a loaded machine may add a little.
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "woken after {:?}",
            started.elapsed()
        );
    }

    /// C25: a server that stops answering without closing anything (powered
    /// off, or cut off by the network; here a relay that passes nothing on
    /// any connection, new ones too, and keeps them open, so TCP never
    /// gives up). A write, then a read, sent on a connection the silent
    /// server holds fail once the store URL's `reply_timeout` has passed,
    /// saying so; with a retry window, the retries (new connections, none
    /// of which connects) end as `unreachable` too, instead of waiting with
    /// no end; when the server answers again, the same store works.
    pub async fn a_server_gone_silent_fails_calls_in_time_and_the_store_recovers(
        backend: &PostgresBackend,
    ) {
        let dir = tempfile::tempdir().unwrap();
        // A transition's compare-and-swap, prepared (its text sent) on the
        // first connection that runs it.
        let (mut config, relay) = through_relay(backend, dir.path(), b"UPDATE").await;
        config.reply_timeout = Duration::from_secs(1);
        config.acquire_timeout = Duration::from_secs(1);
        let store = open_store(&StorageConfig::Postgres(config)).await.unwrap();
        // Without retries, a call's error is its first attempt's.
        let once = store.with_retry_window(Duration::ZERO);
        let opened = open_on_new_wave(&store, dir.path()).await;
        let limit = Duration::from_secs(60);

        // The write goes out on the connection the open left idle.
        let updates = relay.marked();
        relay.silence_all();
        let write = tokio::time::timeout(limit, once.attach_interactive_handoff(&opened.id)).await;
        assert_unreachable(
            "attach",
            answered("the attach", write).map(|_| ()),
            "reply_timeout",
        );
        assert!(relay.marked() > updates, "the attach sent no UPDATE");
        relay.pass_again();

        // So does the read, on the connection a read before it left idle.
        assert_eq!(
            store.get_interactive_handoff(&opened.id).await.unwrap(),
            Some(opened.clone()),
            "the silenced write did not reach the server"
        );
        relay.silence_all();
        let read = tokio::time::timeout(limit, once.get_interactive_handoff(&opened.id)).await;
        assert_unreachable(
            "get",
            answered("the get", read).map(|_| ()),
            "reply_timeout",
        );

        // With a retry window: new connections that never connect, then
        // unreachable.
        let retried = store.with_retry_window(Duration::from_secs(2));
        let read = tokio::time::timeout(limit, retried.get_interactive_handoff(&opened.id)).await;
        assert_unreachable(
            "retried get",
            answered("the retried get", read).map(|_| ()),
            "",
        );

        relay.pass_again();
        let attached = store.attach_interactive_handoff(&opened.id).await.unwrap();
        assert_eq!(
            attached.status,
            lf_handoff_domain::interactive_handoff::InteractiveHandoffStatus::Attached
        );
        assert_eq!(
            store.get_interactive_handoff(&opened.id).await.unwrap(),
            Some(attached)
        );
    }

    /// What `waited` (a call bounded by a test's own patience) answered.
    fn answered<T>(what: &str, waited: Result<T, tokio::time::error::Elapsed>) -> T {
        waited.unwrap_or_else(|_| panic!("{what} waited on the silent server past 60 s"))
    }

    /// That `result` is `Unavailable` of kind `unreachable` naming the
    /// relay's address and holding `needle`.
    fn assert_unreachable(call: &str, result: Result<(), StoreError>, needle: &str) {
        match result {
            Err(StoreError::Unavailable {
                kind: UnavailableKind::Unreachable,
                message,
                ..
            }) => assert!(
                message.contains("127.0.0.1") && message.contains(needle),
                "{call}: {message}"
            ),
            other => panic!("{call}: expected Unavailable (unreachable), got {other:?}"),
        }
    }

    /// C16: a listening connection that stops delivering without a word
    /// (a firewall that forgot it, a host gone with no reset; here a relay
    /// that stops passing its bytes and keeps it open) is found by the
    /// feed's echo within two rechecks and made again, and a finish then
    /// wakes the waiter.
    pub async fn a_listening_connection_gone_silent_is_made_again(backend: &PostgresBackend) {
        let dir = tempfile::tempdir().unwrap();
        // The session's last statement on its listening connection.
        let (config, relay) = through_relay(backend, dir.path(), b"lf_handoff_echo_").await;
        let store = open_store(&StorageConfig::Postgres(config)).await.unwrap();
        let direct = open_store(&backend.config(dir.path().join("unused")))
            .await
            .unwrap();
        let opened = open_on_new_wave(&store, dir.path()).await;
        let waiter = {
            let (store, id) = (store.clone(), opened.id.clone());
            tokio::spawn(async move { store.wait(&id, Some(Duration::from_secs(90))).await })
        };
        let listening = relay.listens_within(1, Duration::from_secs(10)).await
            && relay.marked_within(1, Duration::from_secs(10)).await;
        assert!(
            listening,
            "no LISTEN of the echo passed through the relay within 10 s"
        );
        // Its answer passes, and the session settles, before the silence.
        tokio::time::sleep(Duration::from_secs(1)).await;
        relay.silence_listeners();
        // Rechecks come every 5 s: the echo sent at one is missed at the
        // next; a loaded machine may add a little.
        assert!(
            relay.listens_within(2, Duration::from_secs(30)).await,
            "the silent listening connection was not made again within 30 s"
        );
        direct
            .finish_interactive_handoff(&opened.id, &crate::fixtures::outcome(0), None)
            .await
            .unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(30), waiter)
            .await
            .expect("the waiter was not woken within 30 s")
            .unwrap()
            .unwrap();
        assert!(
            matches!(waited, lf_handoff_adapters::Waited::Ended(_)),
            "{waited:?}"
        );
    }

    /// A store from a newer version is refused and not one relation or row
    /// of its schema changes.
    pub async fn newer_schema_is_left_untouched(backend: &PostgresBackend) {
        let dir = tempfile::tempdir().unwrap();
        let newer = format!("{}_newer", backend.schema());
        backend.newer_store(&newer, dir.path()).await;
        let before = backend.fingerprint(&newer).await;
        assert!(before.len() > 10, "the store holds handoffs: {before:?}");
        let refused = open_store(&backend.config_in(&newer)).await;
        assert!(
            matches!(&refused, Err(StoreError::Unavailable { kind: UnavailableKind::NewerSchema, message, .. })
                if message.contains("version 99")),
            "{:?}",
            refused.err()
        );
        assert_eq!(backend.fingerprint(&newer).await, before);
    }

    /// An upgrade whose tables another session holds (a long transaction,
    /// a dump) gives up after a few seconds as `Locked`, changing nothing,
    /// and the next open after that session ends upgrades the store.
    pub async fn an_upgrade_blocked_by_another_session_is_locked_and_changes_nothing(
        backend: &PostgresBackend,
    ) {
        let dir = tempfile::tempdir().unwrap();
        // The oldest release's store, which every later build upgrades (a
        // store of 0.2.0 is at this build's schema and needs no upgrade).
        let config = backend.release_store(Release::V1, dir.path()).await;
        let before = backend.fingerprint(backend.schema()).await;
        let options = PgConnectOptions::from_str(&backend.base.connection).unwrap();
        let mut reader = options.connect().await.unwrap();
        sqlx::Executor::execute(
            &mut reader,
            format!(
                "BEGIN; LOCK TABLE \"{}\".handoffs IN ACCESS SHARE MODE",
                backend.schema()
            )
            .as_str(),
        )
        .await
        .unwrap();
        match open_store(&config).await {
            Err(StoreError::Unavailable {
                kind: UnavailableKind::Locked,
                message,
                ..
            }) => assert!(message.contains(backend.schema()), "{message}"),
            Err(other) => panic!("expected Locked, got {other}"),
            Ok(_) => panic!("the upgrade ran past another session's lock"),
        }
        sqlx::Executor::execute(&mut reader, "ROLLBACK")
            .await
            .unwrap();
        reader.close().await.ok();
        assert_eq!(backend.fingerprint(backend.schema()).await, before);
        let store = open_store(&config).await.unwrap();
        assert_eq!(
            store
                .list_interactive_handoffs(ListQuery::default())
                .await
                .unwrap()
                .len(),
            5
        );
    }

    /// A schema holding another program's tables is refused and left as it
    /// was: no lf-handoff table appears in it.
    pub async fn foreign_schema_is_left_untouched(backend: &PostgresBackend) {
        let foreign = format!("{}_foreign", backend.schema());
        backend.foreign_schema(&foreign).await;
        let before = backend.fingerprint(&foreign).await;
        let refused = open_store(&backend.config_in(&foreign)).await;
        assert!(
            matches!(&refused, Err(StoreError::Unavailable { kind: UnavailableKind::Damaged, message, .. })
                if message.contains(&foreign)),
            "{:?}",
            refused.err()
        );
        assert_eq!(backend.fingerprint(&foreign).await, before);
    }

    /// A host name the test server's certificate lists.
    fn tls_host() -> String {
        std::env::var(TLS_HOST_VAR).unwrap_or_else(|_| "localhost".into())
    }

    /// The store on the test server with `sslmode=verify-full`, trusting the
    /// server's authority, reached by `host`.
    fn verify_full_config(backend: &PostgresBackend, name: &str, host: &str) -> StorageConfig {
        let ca = std::env::var(TLS_CA_VAR).expect("connect_tls checked it");
        backend.tls_config(
            name,
            &[
                "sslmode=verify-full".into(),
                format!("sslrootcert={ca}"),
                format!("host={host}"),
            ],
        )
    }

    /// Opens a store on `config`, writes and reads a wave through it, and
    /// checks on the server that every connection named `name` is
    /// encrypted.
    async fn assert_round_trip_over_tls(
        backend: &PostgresBackend,
        config: &StorageConfig,
        name: &str,
    ) {
        let store = open_store(config)
            .await
            .unwrap_or_else(|e| panic!("{config}: {e}"));
        let wave =
            lf_handoff_domain::wave::Wave::new(WaveId::new(), "over TLS".into(), "/src/tls".into());
        store.create_wave(&wave).await.unwrap();
        assert_eq!(stored_wave(&store, wave.id()).await, Some(wave));
        let encrypted = backend
            .texts(&format!(
                "SELECT s.ssl::text FROM pg_catalog.pg_stat_ssl s \
                 JOIN pg_catalog.pg_stat_activity a ON a.pid = s.pid \
                 WHERE a.application_name = '{name}'"
            ))
            .await;
        assert!(!encrypted.is_empty(), "no connection named {name} is open");
        assert!(
            encrypted.iter().all(|ssl| ssl.as_deref() == Some("true")),
            "connections named {name}: ssl {encrypted:?}"
        );
    }

    /// `sslmode=require` encrypts every connection of the store's pool.
    pub async fn tls_require_encrypts_every_connection(backend: &PostgresBackend) {
        let name = format!("{}_require", backend.schema());
        let config = backend.tls_config(&name, &["sslmode=require".into()]);
        assert_round_trip_over_tls(backend, &config, &name).await;
    }

    /// `sslmode=verify-full` with the server's authority connects by a
    /// name the certificate lists, and the connection is encrypted.
    pub async fn tls_verify_full_connects_by_the_certificates_name(backend: &PostgresBackend) {
        let name = format!("{}_verify", backend.schema());
        let config = verify_full_config(backend, &name, &tls_host());
        assert_round_trip_over_tls(backend, &config, &name).await;
    }

    /// `sslmode=verify-full` refuses a server reached by a name its
    /// certificate does not list (here 127.0.0.1, which a certificate made
    /// for a host name does not), as `Unavailable` with the remedy, before
    /// anything is written: the schema is not even created.
    pub async fn tls_verify_full_refuses_a_host_the_certificate_does_not_name(
        backend: &PostgresBackend,
    ) {
        let name = format!("{}_wrong", backend.schema());
        let config = verify_full_config(backend, &name, "127.0.0.1");
        match open_store(&config).await {
            Err(StoreError::Unavailable { kind, message, .. }) => {
                assert_eq!(kind, UnavailableKind::Refused, "{message}");
                assert!(message.contains("127.0.0.1"), "{message}");
                assert!(message.contains("sslmode=require"), "{message}");
            }
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("verify-full accepted a certificate for another name"),
        }
        let schemas = backend
            .texts(&format!(
                "SELECT nspname::text FROM pg_catalog.pg_namespace WHERE nspname = '{}'",
                backend.schema()
            ))
            .await;
        assert!(schemas.is_empty(), "the refused store created its schema");
    }

    /// Ends every server session of the store whose connections carry
    /// `name` as their `application_name` (only this test's: other tests
    /// run on the same server), waits until they are gone, and returns how
    /// many there were.
    async fn terminate_sessions(backend: &PostgresBackend, name: &str) -> usize {
        let ended = backend
            .texts(&format!(
                "SELECT count(pg_catalog.pg_terminate_backend(pid))::text \
                 FROM pg_catalog.pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_catalog.pg_backend_pid() \
                 AND application_name = '{name}'"
            ))
            .await;
        let ended: usize = ended[0].as_deref().unwrap().parse().unwrap();
        for _ in 0..500 {
            let left = backend
                .texts(&format!(
                    "SELECT count(*)::text FROM pg_catalog.pg_stat_activity \
                     WHERE application_name = '{name}'"
                ))
                .await;
            if left[0].as_deref() == Some("0") {
                return ended;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the sessions named {name} did not end");
    }

    /// Every server session of a store is terminated
    /// (`pg_terminate_backend`, as an administrator or a failover does)
    /// between calls: without a retry window the next call fails as
    /// `Unreachable`; with the default one each call of a whole lifecycle
    /// succeeds on a fresh connection (C18, transient faults).
    pub async fn terminated_sessions_are_ridden_out_by_the_next_call(backend: &PostgresBackend) {
        let dir = tempfile::tempdir().unwrap();
        let name = format!("{}_term", backend.schema());
        let store = open_store(&backend.tls_config(&name, &[])).await.unwrap();
        assert_eq!(
            store.retry_window(),
            lf_handoff_adapters::DEFAULT_RETRY_WINDOW
        );
        let opened = open_on_new_wave(&store, dir.path()).await;

        // Without retries, the fault is what the caller sees.
        assert!(terminate_sessions(backend, &name).await >= 1);
        let impatient = store.clone().with_retry_window(Duration::ZERO);
        match impatient.get_interactive_handoff(&opened.id).await {
            Err(error) => assert_eq!(
                error.unavailable_kind(),
                Some(UnavailableKind::Unreachable),
                "{error}"
            ),
            Ok(_) => panic!("a call on a terminated session succeeded without a retry"),
        }
        // The broken connection was dropped: the next call connects again.
        assert_eq!(
            store.get_interactive_handoff(&opened.id).await.unwrap(),
            Some(opened.clone())
        );

        assert!(terminate_sessions(backend, &name).await >= 1);
        let attached = store.attach_interactive_handoff(&opened.id).await.unwrap();
        assert!(terminate_sessions(backend, &name).await >= 1);
        let outcome = crate::fixtures::outcome(0);
        let finished = store
            .finish_interactive_handoff(&opened.id, &outcome, None)
            .await
            .unwrap();
        assert_eq!(finished.attached_at, attached.attached_at);
        assert!(terminate_sessions(backend, &name).await >= 1);
        assert!(
            store
                .claim_interactive_handoff_wake(&opened.id, 1)
                .await
                .unwrap()
                .claimed
        );
        assert!(terminate_sessions(backend, &name).await >= 1);
        let stored = store
            .get_interactive_handoff(&opened.id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.wake_claimed_by_generation, Some(1));
        assert_eq!(stored.outcome, Some(outcome));
        assert_eq!(store.history(&opened.id).await.unwrap().len(), 4);
    }

    /// C25: a store URL of several hosts whose first host does not answer
    /// (nothing listens on port 1) uses the next, the test server; with
    /// every host down, the open is `Unavailable` naming each.
    pub async fn a_url_whose_first_host_is_down_uses_the_next(backend: &PostgresBackend) {
        let dir = tempfile::tempdir().unwrap();
        let StorageConfig::Postgres(mut config) = backend.config(dir.path().join("unused")) else {
            unreachable!("the postgres backend's config")
        };
        let connection = config.connection.clone();
        let (scheme, userinfo, hosts) = url_parts(&connection);
        config.connection = format!("{scheme}://{userinfo}@127.0.0.1:1,{hosts}");
        let store = open_store(&StorageConfig::Postgres(config.clone()))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let id = crate::fixtures::lifecycle(&store, dir.path(), 0).await;
        let direct = open_store(&backend.config(dir.path().join("unused")))
            .await
            .unwrap();
        assert_eq!(
            direct.get_interactive_handoff(&id).await.unwrap(),
            store.get_interactive_handoff(&id).await.unwrap()
        );

        config.connection = format!("{scheme}://{userinfo}@127.0.0.1:1,127.0.0.1:2/none");
        config.retry_window = Duration::from_millis(200);
        match open_store(&StorageConfig::Postgres(config)).await {
            Err(StoreError::Unavailable { kind, message, .. }) => {
                assert_eq!(kind, UnavailableKind::Unreachable, "{message}");
                for host in ["127.0.0.1:1", "127.0.0.1:2"] {
                    assert!(message.contains(host), "{message}");
                }
                assert!(message.contains("connection refused"), "{message}");
            }
            Err(other) => panic!("expected Unavailable, got {other}"),
            Ok(_) => panic!("a store opened with every host down"),
        }
    }

    /// The schema named in the URL is created and holds the tables; two
    /// schemas on one server are separate registries.
    pub async fn each_schema_is_a_separate_store(backend: &PostgresBackend) {
        let dir = tempfile::tempdir().unwrap();
        let own = backend.schema().to_string();
        let other = format!("{own}_newer");
        let first = open_store(&backend.config_in(&own)).await.unwrap();
        let second = open_store(&backend.config_in(&other)).await.unwrap();
        let opened = open_on_new_wave(&first, dir.path()).await;
        assert_eq!(
            first
                .list_interactive_handoffs(ListQuery::default())
                .await
                .unwrap(),
            vec![opened.clone()]
        );
        assert!(second
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap()
            .is_empty());
        assert_eq!(
            second.get_interactive_handoff(&opened.id).await.unwrap(),
            None
        );
        let tables = backend
            .texts(&format!(
                "SELECT tablename::text FROM pg_catalog.pg_tables WHERE schemaname = '{own}' \
                 ORDER BY tablename"
            ))
            .await;
        let tables: Vec<&str> = tables.iter().flatten().map(String::as_str).collect();
        for table in ["handoffs", "lf_handoff_meta", "parents", "task_prs"] {
            assert!(
                tables.contains(&table),
                "{table} is not in {own}: {tables:?}"
            );
        }
        let version = backend
            .texts(&format!(
                "SELECT value::text FROM \"{own}\".lf_handoff_meta WHERE name = 'schema_version'"
            ))
            .await;
        let version: i64 = version[0].as_deref().unwrap().parse().unwrap();
        assert!(version >= 1, "schema version {version}");
    }
}

/// Event positions on PostgreSQL come from transaction ids (C16), and an
/// import keeps a file's positions only when they are below its own
/// transaction's (else it numbers them 1, 2, 3, ...: the contract's C17).
/// A release's fixture was made on a server whose transaction ids had
/// reached its positions; a fresh server (a new CI machine) has not, and
/// would renumber them. So the server is made to use up transaction ids
/// until it is past the fixture's, as the server that wrote it was.
async fn reach_the_fixtures_transaction_ids(mut conn: PgConnection, schema: &str) -> PgConnection {
    /// Positions are a transaction id times 2^20 plus an order.
    const PER_TRANSACTION: i64 = 1 << 20;
    /// Empty transactions sent in one round trip.
    const BATCH: usize = 500;
    let events = format!("\"{schema}\".handoff_events");
    let exists: bool = sqlx::Row::get(
        &sqlx::Executor::fetch_one(
            &mut conn,
            sqlx::query("SELECT to_regclass($1) IS NOT NULL").bind(&events),
        )
        .await
        .unwrap(),
        0,
    );
    if !exists {
        // A release before history (0.3.0) has no events.
        return conn;
    }
    let newest = format!("SELECT COALESCE(MAX(position), 0) FROM {events}");
    let newest: i64 = sqlx::Row::get(
        &sqlx::Executor::fetch_one(&mut conn, newest.as_str())
            .await
            .unwrap(),
        0,
    );
    let wanted = newest / PER_TRANSACTION + 1;
    let batch = "BEGIN; SELECT pg_current_xact_id(); COMMIT; ".repeat(BATCH);
    loop {
        let now: i64 = sqlx::Row::get(
            &sqlx::Executor::fetch_one(&mut conn, "SELECT pg_current_xact_id()::text::bigint")
                .await
                .unwrap(),
            0,
        );
        if now > wanted {
            return conn;
        }
        sqlx::Executor::execute(&mut conn, sqlx::raw_sql(batch.as_str()))
            .await
            .unwrap();
    }
}
