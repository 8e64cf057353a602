//! A store behind PgBouncer (contract C25), on poolers of the tests' own
//! in front of the test server (`LF_HANDOFF_TEST_POSTGRES_URL`): what the
//! conformance suite does not show (it runs whole through PgBouncer in
//! both modes, `tests/conformance.rs`). A pooler that refuses a startup
//! parameter is reported as such; a store never reaches a registry kept in
//! another schema of its database, though the pooler drops every startup
//! option; a transaction pooler reached without `pooler=transaction` is
//! reported as such at the first clash of prepared statements; behind a
//! transaction pooler without `listen_url`, a wait still returns within
//! the documented re-check; a `LISTEN` held through a transaction pooler
//! is reported as such when its notification meets another statement.
// A test file: panicking on a failed expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lf_handoff_adapters::ListQuery;
use std::str::FromStr;
use std::time::{Duration, Instant};

use lf_handoff_adapters::{
    open_store, GenerateId, PostgresConfig, StorageConfig, StoreError, UnavailableKind, Waited,
};
use lf_handoff_conformance::backends::postgres::TEST_URL_VAR;
use lf_handoff_conformance::fixtures::{lifecycle, open_on_new_wave, outcome, wave_request};
use lf_handoff_conformance::pgbouncer::{skip_or_fail, PgBouncer, PoolMode};
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::wave::Wave;
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions as _, Connection as _};

/// The test server's configuration, or `None` (having said why) when the
/// tests cannot run.
fn test_server() -> Option<PostgresConfig> {
    let Ok(url) = std::env::var(TEST_URL_VAR) else {
        eprintln!("skipped: {TEST_URL_VAR} is not set");
        return None;
    };
    match StorageConfig::from_url(&url) {
        Ok(StorageConfig::Postgres(config)) => Some(config),
        _ => panic!("{TEST_URL_VAR} is not a postgres:// URL"),
    }
}

/// A PgBouncer of the test's own in `mode` in front of the test server,
/// with `settings`, or `None` when it cannot run here.
async fn bouncer(mode: PoolMode, settings: &'static [&'static str]) -> Option<PgBouncer> {
    let server = test_server()?;
    let options = PgConnectOptions::from_str(&server.connection).unwrap();
    let (host, port) = (options.get_host().to_string(), options.get_port());
    match tokio::task::spawn_blocking(move || PgBouncer::start(mode, &host, port, settings))
        .await
        .unwrap()
    {
        Ok(bouncer) => Some(bouncer),
        Err(reason) => {
            skip_or_fail(&reason);
            None
        }
    }
}

/// A store URL of database `database` as user postgres through `bouncer`,
/// with `query`.
fn through(bouncer: &PgBouncer, database: &str, query: &str) -> StorageConfig {
    StorageConfig::from_url(&format!(
        "postgres://postgres@127.0.0.1:{}/{database}?{query}",
        bouncer.port()
    ))
    .unwrap()
}

/// PgBouncer's default configuration refuses the startup parameter
/// `options` (here asked for in the store URL): the open is `Refused`
/// (not retried as a lost connection), naming the parameter and the
/// setting that admits it. Without it, a store opens through the same
/// pooler (lf-handoff's own startup packet holds nothing it refuses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooler_refusing_a_startup_parameter_is_refused_naming_it() {
    let Some(bouncer) = bouncer(PoolMode::Session, &[]).await else {
        return;
    };
    let database = test_database();
    let schema = format!("lfp_{}", suffix());
    let refused = open_store(&through(
        &bouncer,
        &database,
        &format!("schema={schema}&pool_size=2&options=-c%20statement_timeout%3D5000"),
    ))
    .await;
    match refused {
        Err(StoreError::Unavailable { kind, message, .. }) => {
            assert_eq!(kind, UnavailableKind::Refused, "{message}");
            assert!(message.contains("startup parameter options"), "{message}");
            assert!(message.contains("ignore_startup_parameters"), "{message}");
            assert!(
                message.contains(&format!("127.0.0.1:{}", bouncer.port())),
                "{message}"
            );
        }
        Err(other) => panic!("expected Unavailable, got {other}"),
        Ok(_) => panic!("PgBouncer's default configuration passed `options` on"),
    }
    let store = open_store(&through(
        &bouncer,
        &database,
        &format!("schema={schema}&pool_size=2"),
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}; {}", bouncer.log_tail()));
    let dir = tempfile::tempdir().unwrap();
    lifecycle(&store, dir.path(), 0).await;
    drop(store);
    drop_schemas(&[&schema]).await;
}

/// A registry kept in `public` and a store configured for schema
/// `team_b` of the same database, both behind a session pooler that
/// drops every startup option (`ignore_startup_parameters =
/// extra_float_digits, options`, the usual setting) and resets nothing
/// between clients, with one server session for all: `team_b` sees
/// nothing of `public`'s registry and writes nothing into it, though
/// `public` is on every session's search path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_never_reaches_a_registry_in_another_schema_through_a_pooler() {
    const SETTINGS: &[&str] = &[
        "ignore_startup_parameters = extra_float_digits, options",
        "server_reset_query =",
        "max_db_connections = 1",
    ];
    let Some(bouncer) = bouncer(PoolMode::Session, SETTINGS).await else {
        return;
    };
    let database = format!("lfp_{}", suffix());
    admin(&format!("CREATE DATABASE {database}")).await;
    let dir = tempfile::tempdir().unwrap();
    let public = open_store(&through(&bouncer, &database, "schema=public&pool_size=1"))
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", bouncer.log_tail()));
    let kept = lifecycle(&public, dir.path(), 0).await;
    let before = public
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    drop(public);

    let team = open_store(&through(&bouncer, &database, "schema=team_b&pool_size=1"))
        .await
        .unwrap();
    assert!(team
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(team.get_interactive_handoff(&kept).await.unwrap(), None);
    let own = lifecycle(&team, dir.path(), 1).await;
    assert_eq!(
        team.list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap()
            .len(),
        1
    );
    drop(team);

    let public = open_store(&through(&bouncer, &database, "schema=public&pool_size=1"))
        .await
        .unwrap();
    assert_eq!(
        public
            .list_interactive_handoffs(ListQuery::default())
            .await
            .unwrap(),
        before
    );
    assert_eq!(public.get_interactive_handoff(&own).await.unwrap(), None);
    drop(public);
    drop(bouncer);
    admin(&format!("DROP DATABASE {database} WITH (FORCE)")).await;
}

/// Behind a pooler in transaction mode, a store URL without
/// `pooler=transaction` prepares statements that another client's
/// transactions meet in the same server session (here PgBouncer keeps
/// one): the clash is `Refused`, saying to add `pooler=transaction`, and
/// not retried as a lost connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_pooler_without_pooler_transaction_is_refused_saying_so() {
    let Some(bouncer) = bouncer(PoolMode::Transaction, &["max_db_connections = 1"]).await else {
        return;
    };
    let database = test_database();
    let schema = format!("lfp_{}", suffix());
    let config = through(&bouncer, &database, &format!("schema={schema}&pool_size=1"));
    let first = open_store(&config)
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", bouncer.log_tail()));
    let second = open_store(&config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The second handle prepares a statement of each step of a lifecycle
    // in the one server session; the first then prepares its own, under
    // the same names.
    let id = lifecycle(&second, dir.path(), 0).await;
    let mut errors = Vec::new();
    errors.extend(
        first
            .list_interactive_handoffs(ListQuery::default())
            .await
            .err(),
    );
    errors.extend(first.get_interactive_handoff(&id).await.err());
    errors.extend(first.history(&id).await.err());
    let Some(error) = errors.first() else {
        panic!("no call of a second client clashed in the one server session");
    };
    println!("{} of 3 calls refused; the first: {error}", errors.len());
    assert_eq!(
        error.unavailable_kind(),
        Some(UnavailableKind::Refused),
        "{error}"
    );
    assert!(error.to_string().contains("pooler=transaction"), "{error}");
    drop((first, second));
    drop(bouncer);
    drop_schemas(&[&schema]).await;
}

/// Behind a pooler in transaction mode, without `listen_url` (no session
/// can hold a `LISTEN`), a `wait` in another store handle still returns
/// the finish, within the documented re-check of a second (here, well
/// before the watchers' own 5 s re-read); with `listen_url` naming the
/// server, it returns by the notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_behind_a_transaction_pooler_returns_within_the_recheck() {
    let Some(bouncer) = bouncer(PoolMode::Transaction, &[]).await else {
        return;
    };
    let server = test_server().unwrap();
    let database = test_database();
    let schema = format!("lfp_{}", suffix());
    let listen = encode(&server.connection);
    for query in [
        format!("schema={schema}&pool_size=2&pooler=transaction"),
        format!("schema={schema}&pool_size=2&pooler=transaction&listen_url={listen}"),
    ] {
        let config = through(&bouncer, &database, &query);
        let store = open_store(&config).await.unwrap();
        let waiter = open_store(&config).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let handoff = open_on_new_wave(&store, dir.path()).await;
        let id = handoff.id.clone();
        let waiting = tokio::spawn(async move {
            waiter
                .wait(&id, Some(Duration::from_secs(30)))
                .await
                .map(|waited| (waited, Instant::now()))
        });
        // The waiter is asleep before the finish.
        tokio::time::sleep(Duration::from_millis(300)).await;
        store.attach_interactive_handoff(&handoff.id).await.unwrap();
        store
            .finish_interactive_handoff(&handoff.id, &outcome(0), None)
            .await
            .unwrap();
        let finished = Instant::now();
        let (waited, returned) = waiting.await.unwrap().unwrap();
        assert!(matches!(waited, Waited::Ended(_)), "{query}: {waited:?}");
        let latency = returned.saturating_duration_since(finished);
        println!("{query}: wait returned {latency:?} after the finish");
        assert!(
            latency < Duration::from_secs(4),
            "{query}: the wait returned {latency:?} after the finish, past the 1 s re-check"
        );
    }
    drop_schemas(&[&schema]).await;
}

/// Behind a pooler in transaction mode, a store URL without
/// `pooler=transaction` holds a `LISTEN` for a `wait` in a server session
/// the pooler then hands to other clients: a change's notification meets
/// the next statement there. Whatever fails then says what is wrong and
/// what to set (`pooler=transaction`), never that the server does not
/// answer like PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_through_a_transaction_pooler_is_refused_saying_what_to_set() {
    let Some(bouncer) = bouncer(PoolMode::Transaction, &["max_db_connections = 1"]).await else {
        return;
    };
    let database = test_database();
    let schema = format!("lfp_{}", suffix());
    let config = through(&bouncer, &database, &format!("schema={schema}&pool_size=1"));
    let store = open_store(&config)
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", bouncer.log_tail()));
    let waiter = open_store(&config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut errors = Vec::new();
    for n in 0..5 {
        let wave = Wave::new(
            WaveId::new(),
            format!("product-{n}"),
            dir.path().display().to_string(),
        );
        if let Err(error) = store.create_wave(&wave).await {
            errors.push(error);
            continue;
        }
        let handoff = match store
            .open_interactive_handoff(wave_request(&wave, dir.path()))
            .await
        {
            Ok((handoff, _)) => handoff,
            Err(error) => {
                errors.push(error);
                continue;
            }
        };
        let id = handoff.id.clone();
        let waiter = waiter.clone();
        let waiting =
            tokio::spawn(async move { waiter.wait(&id, Some(Duration::from_secs(2))).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        errors.extend(store.attach_interactive_handoff(&handoff.id).await.err());
        errors.extend(
            store
                .finish_interactive_handoff(&handoff.id, &outcome(0), None)
                .await
                .err(),
        );
        errors.extend(
            store
                .list_interactive_handoffs(ListQuery::default())
                .await
                .err(),
        );
        if let Ok(Err(error)) = waiting.await {
            errors.push(error);
        }
    }
    println!("{} calls failed", errors.len());
    assert!(
        errors
            .iter()
            .any(|error| error.to_string().contains("NotificationResponse")),
        "no call met a notification in its server session: {errors:?}"
    );
    for error in &errors {
        let message = error.to_string();
        println!("{message}");
        assert!(
            !message.contains("does not answer like a PostgreSQL server"),
            "{message}"
        );
        assert!(message.contains("pooler=transaction"), "{message}");
    }
    drop((store, waiter));
    drop(bouncer);
    drop_schemas(&[&schema]).await;
}

/// The test server's database.
fn test_database() -> String {
    let server = test_server().unwrap();
    let options = PgConnectOptions::from_str(&server.connection).unwrap();
    options.get_database().unwrap_or("postgres").to_string()
}

/// A fresh lowercase suffix for names of the test's own.
fn suffix() -> String {
    WaveId::new()
        .as_str()
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect::<String>()
        .to_ascii_lowercase()
}

/// Runs `statement` on the test server directly.
async fn admin(statement: &str) {
    let server = test_server().unwrap();
    let mut conn = PgConnectOptions::from_str(&server.connection)
        .unwrap()
        .connect()
        .await
        .unwrap();
    sqlx::Executor::execute(&mut conn, statement)
        .await
        .unwrap_or_else(|e| panic!("{statement}: {e}"));
    conn.close().await.ok();
}

async fn drop_schemas(schemas: &[&str]) {
    for schema in schemas {
        admin(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).await;
    }
}

/// `value` escaped for a URL's query.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|byte| {
            if byte.is_ascii_alphanumeric() || b"-._~:/@".contains(&byte) {
                char::from(byte).to_string()
            } else {
                format!("%{byte:02X}")
            }
        })
        .collect()
}
