//! Tests of what the conformance suite cannot reach through the service:
//! a transition stores the whole record the domain returned; the upgrade
//! of a store of release 0.1.0 (schema version 1) keeps every row, a store
//! of this build reopens without migrating, a newer one is refused
//! untouched; the insert outcomes each unique index gives, also to racing
//! handles; the plan of the snapshot `open` reads.
//!
//! The PostgreSQL variants run when `LF_HANDOFF_TEST_POSTGRES_URL` names a
//! test server, each in a fresh schema it drops afterwards; otherwise they
//! say they skipped.

use lf_handoff_application::ListQuery;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lf_handoff_application::ports::{
    HandoffRepository, InsertOutcome, ParentRegistry, TransitionOutcome,
};
use lf_handoff_application::testing::OpenRequest;
use lf_handoff_application::{GenerateId, Store, StoreError, UnavailableKind};
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::{
    InteractiveHandoff, InteractiveHandoffOutcome, InteractiveHandoffParent,
    InteractiveHandoffStatus, StepKey, Transition,
};
use lf_handoff_domain::wave::Wave;
use lf_handoff_domain::wave_home::WaveHome;
use sqlx::{ConnectOptions as _, Connection as _};

use super::columns::HANDOFF_COLUMNS;
use super::schema::{LATEST_VERSION, ONE_ACTIVE_PER_PARENT, ONE_PER_PARENT_STEP, UNIQUE_INDEXES};
use super::statements::PARENT_WITH_ACTIVE;
use super::SqlStore;
use crate::postgres::{PostgresEngine, Server};
use crate::sqlite::{SqliteEngine, SqliteFile};
use crate::{open_store, StorageConfig};

#[tokio::test(flavor = "multi_thread")]
async fn a_transition_stores_every_field_the_domain_returned() {
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig::sqlite(dir.path().join("store.db"));
    let store = open_store(&config).await.unwrap();
    let wave = Wave::new(WaveId::new(), "w".into(), dir.path().display().to_string());
    store.create_wave(&wave).await.unwrap();
    let (opened, _) = store
        .open_interactive_handoff(
            OpenRequest::on_wave(&wave)
                .cwd(dir.path())
                .at_step(step("login@1"))
                .build(),
        )
        .await
        .unwrap();

    // Fields no transition of today's domain changes: the store must keep
    // them as the domain returned them all the same.
    let mut next = opened.clone();
    next.status = InteractiveHandoffStatus::Attached;
    next.attached_at = Some(next.updated_at);
    next.home = WaveHome::parse("ssh://jill@example.org:2222").unwrap();
    next.cwd = PathBuf::from("/elsewhere");
    next.provider = "claude".into();
    next.provider_session_id = Some("session-2".into());
    next.body_generation = 2;
    next.reason = "review".into();
    next.environment = BTreeMap::from([("TERM".into(), "xterm".into())]);
    next.attach_argv = vec!["ssh".into(), "-t".into()];
    next.step = Some(step("login@2"));

    let StorageConfig::Sqlite(sqlite) = &config else {
        unreachable!("a SQLite configuration")
    };
    let sql = SqlStore::new(SqliteEngine::open(sqlite).await.unwrap());
    let decided = next.clone();
    let outcome = sql
        .transition(
            &opened.id,
            Arc::new(move |_| Ok(Transition::Changed(decided.clone()).into())),
            &lf_handoff_application::this_process_actor(),
        )
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Some(TransitionOutcome::Applied {
            handoff: Box::new(next.clone()),
            answer: Ok(true),
        })
    );
    let stored = sql.load(&opened.id).await.unwrap().unwrap();
    assert_eq!(stored.value, next);
    assert_eq!(stored.version, 2);
}

// ----- helpers -----

fn step(text: &str) -> StepKey {
    StepKey::parse(text).unwrap()
}

/// Both ports of one store handle, whatever its engine.
trait Ports: HandoffRepository + ParentRegistry {}
impl<T: HandoffRepository + ParentRegistry> Ports for T {}

/// A handle on the store `config` names, through the shared SQL repository.
async fn ports(config: &StorageConfig) -> Arc<dyn Ports> {
    match config {
        StorageConfig::Sqlite(sqlite) => {
            Arc::new(SqlStore::new(SqliteEngine::open(sqlite).await.unwrap()))
        }
        StorageConfig::Postgres(postgres) => {
            Arc::new(SqlStore::new(PostgresEngine::open(postgres).await.unwrap()))
        }
        StorageConfig::Sled(_) | StorageConfig::Http(_) => unreachable!("a SQL store"),
    }
}

/// `handoff` under a fresh id, at `at`.
fn copy_at(handoff: &InteractiveHandoff, at: Option<&str>) -> InteractiveHandoff {
    let mut copy = handoff.clone();
    copy.id = InteractiveHandoffId::new();
    copy.step = at.map(step);
    copy
}

/// Runs `scenario` on a fresh SQLite store and, when the test server is
/// named, on a fresh PostgreSQL schema ([`on_postgres`]).
async fn on_both_engines<F, Fut>(scenario: F)
where
    F: Fn(StorageConfig, PathBuf) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let dir = tempfile::tempdir().unwrap();
    scenario(
        StorageConfig::sqlite(dir.path().join("store.db")),
        dir.path().to_path_buf(),
    )
    .await;
    on_postgres(dir.path(), scenario).await;
}

/// Runs `scenario` on a fresh PostgreSQL schema of the test server (a pool
/// of 2), dropped afterwards, also when the scenario fails; says it skipped
/// when no test server is named.
async fn on_postgres<F, Fut>(dir: &Path, scenario: F)
where
    F: FnOnce(StorageConfig, PathBuf) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let Ok(url) = std::env::var("LF_HANDOFF_TEST_POSTGRES_URL") else {
        eprintln!("PostgreSQL part skipped: LF_HANDOFF_TEST_POSTGRES_URL is not set");
        return;
    };
    let schema = format!("lfa_{}", WaveId::new().as_str().replace(['-', '_'], ""));
    let StorageConfig::Postgres(mut postgres) = StorageConfig::postgres(&url).unwrap() else {
        unreachable!("a postgres:// URL")
    };
    postgres.schema = schema.clone();
    postgres.pool_size = 2;
    let outcome = tokio::spawn(scenario(
        StorageConfig::Postgres(postgres.clone()),
        dir.to_path_buf(),
    ))
    .await;
    let mut admin = postgres.connect_options().unwrap().connect().await.unwrap();
    sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
}

/// A wave with a finished handoff (no step) and a waiting one at
/// `login@1`, with the service that made them.
async fn wave_with_handoffs(
    config: &StorageConfig,
    dir: &Path,
) -> (Store, Wave, InteractiveHandoff, InteractiveHandoff) {
    let store = open_store(config).await.unwrap();
    let wave = Wave::new(WaveId::new(), "w".into(), dir.display().to_string());
    store.create_wave(&wave).await.unwrap();
    let (first, _) = store
        .open_interactive_handoff(OpenRequest::on_wave(&wave).cwd(dir).build())
        .await
        .unwrap();
    let done = InteractiveHandoffOutcome::Completed {
        summary: "done".into(),
    };
    let finished = store
        .finish_interactive_handoff(&first.id, &done, None)
        .await
        .unwrap();
    let (waiting, _) = store
        .open_interactive_handoff(
            OpenRequest::on_wave(&wave)
                .cwd(dir)
                .at_step(step("login@1"))
                .build(),
        )
        .await
        .unwrap();
    (store, wave, finished, waiting)
}

// ----- insert outcomes and the snapshot -----

#[tokio::test(flavor = "multi_thread")]
async fn each_unique_index_gives_its_insert_outcome() {
    on_both_engines(|config, dir| async move {
        let (_store, wave, finished, waiting) = wave_with_handoffs(&config, &dir).await;
        let sql = ports(&config).await;
        let parent = InteractiveHandoffParent::Wave(wave.id().clone());
        let version = sql.load_parent(&parent).await.unwrap().unwrap().version;

        // The active slot is taken (by login@1): a second active handoff,
        // at another step or none, is refused by the active slot's index.
        for at in [Some("login@2"), None] {
            assert_eq!(
                sql.insert(
                    &copy_at(&waiting, at),
                    version,
                    &lf_handoff_application::this_process_actor()
                )
                .await
                .unwrap(),
                InsertOutcome::ParentBusy,
                "{at:?}"
            );
        }
        // A finished handoff at a step the parent has is refused by the
        // step's index; at a new step, or none, it is stored.
        assert_eq!(
            sql.insert(
                &copy_at(&finished, Some("login@1")),
                version,
                &lf_handoff_application::this_process_actor()
            )
            .await
            .unwrap(),
            InsertOutcome::StepTaken
        );
        for at in [Some("login@3"), None, None] {
            assert_eq!(
                sql.insert(
                    &copy_at(&finished, at),
                    version,
                    &lf_handoff_application::this_process_actor()
                )
                .await
                .unwrap(),
                InsertOutcome::Inserted,
                "{at:?}"
            );
        }
        assert_eq!(
            sql.insert(
                &copy_at(&finished, Some("login@3")),
                version,
                &lf_handoff_application::this_process_actor()
            )
            .await
            .unwrap(),
            InsertOutcome::StepTaken
        );
        // A parent's step is its own: another parent may use it.
        let other = Wave::new(WaveId::new(), "v".into(), dir.display().to_string());
        let store = open_store(&config).await.unwrap();
        store.create_wave(&other).await.unwrap();
        let mut elsewhere = copy_at(&finished, Some("login@1"));
        elsewhere.parent = InteractiveHandoffParent::Wave(other.id().clone());
        elsewhere.wave_id = other.id().clone();
        assert_eq!(
            sql.insert(&elsewhere, 1, &lf_handoff_application::this_process_actor())
                .await
                .unwrap(),
            InsertOutcome::Inserted
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn handoffs_created_in_one_microsecond_are_listed_by_id() {
    on_both_engines(|config, dir| async move {
        let (_store, wave, finished, _waiting) = wave_with_handoffs(&config, &dir).await;
        let sql = ports(&config).await;
        let parent = InteractiveHandoffParent::Wave(wave.id().clone());
        let version = sql.load_parent(&parent).await.unwrap().unwrap().version;
        crate::list_ties::ties_are_listed_by_id(&*sql, &finished, version).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_snapshot_holds_the_parent_its_active_handoff_and_the_steps() {
    on_both_engines(|config, dir| async move {
        let (store, wave, finished, waiting) = wave_with_handoffs(&config, &dir).await;
        let sql = ports(&config).await;
        let parent = InteractiveHandoffParent::Wave(wave.id().clone());
        let version = sql.load_parent(&parent).await.unwrap().unwrap().version;
        let old = copy_at(&finished, Some("login@0"));
        assert_eq!(
            sql.insert(&old, version, &lf_handoff_application::this_process_actor())
                .await
                .unwrap(),
            InsertOutcome::Inserted
        );

        let snapshot = |at: Option<&'static str>| {
            let sql = sql.clone();
            let parent = parent.clone();
            async move {
                let key = at.map(step);
                sql.load_parent_with_active(&parent, key.as_ref())
                    .await
                    .unwrap()
                    .unwrap()
            }
        };
        // The active handoff is also the one at its own step.
        let at_1 = snapshot(Some("login@1")).await;
        assert_eq!(at_1.parent.version, version);
        assert_eq!(at_1.parent.value.reference(), parent);
        let active = at_1.active.unwrap();
        assert_eq!(active.value, waiting);
        assert_eq!(at_1.at_step, Some(active));
        // A finished handoff is found at its step, whatever its status.
        let at_0 = snapshot(Some("login@0")).await;
        assert_eq!(at_0.active.map(|h| h.value), Some(waiting.clone()));
        assert_eq!(at_0.at_step.map(|h| (h.value, h.version)), Some((old, 1)));
        // No handoff at the step, or no step asked for.
        for at in [Some("login@9"), None] {
            let none = snapshot(at).await;
            assert_eq!(none.active.map(|h| h.value), Some(waiting.clone()));
            assert_eq!(none.at_step, None, "{at:?}");
        }
        // No active handoff: the step's still.
        let done = InteractiveHandoffOutcome::Completed {
            summary: "done".into(),
        };
        store
            .finish_interactive_handoff(&waiting.id, &done, None)
            .await
            .unwrap();
        let idle = snapshot(Some("login@1")).await;
        assert_eq!(idle.active, None);
        let found = idle.at_step.unwrap();
        assert_eq!(found.value.status, InteractiveHandoffStatus::Completed);
        assert_eq!(found.version, 2);
        // An unknown parent.
        let unknown = InteractiveHandoffParent::Wave(WaveId::new());
        assert_eq!(
            sql.load_parent_with_active(&unknown, Some(&step("login@1")))
                .await
                .unwrap(),
            None
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn racing_inserts_of_one_step_from_two_handles_store_one() {
    on_both_engines(|config, dir| async move {
        let (_store, wave, finished, _) = wave_with_handoffs(&config, &dir).await;
        let (a, b) = (ports(&config).await, ports(&config).await);
        let parent = InteractiveHandoffParent::Wave(wave.id().clone());
        let version = a.load_parent(&parent).await.unwrap().unwrap().version;
        for round in 0..20 {
            let at = format!("race@{round}");
            // Finished records, so only the step's index can refuse one.
            let (first, second) = (copy_at(&finished, Some(&at)), copy_at(&finished, Some(&at)));
            let (a, b) = (a.clone(), b.clone());
            let one = tokio::spawn(async move {
                a.insert(
                    &first,
                    version,
                    &lf_handoff_application::this_process_actor(),
                )
                .await
                .unwrap()
            });
            let two = tokio::spawn(async move {
                b.insert(
                    &second,
                    version,
                    &lf_handoff_application::this_process_actor(),
                )
                .await
                .unwrap()
            });
            let mut outcomes = [one.await.unwrap(), two.await.unwrap()];
            outcomes.sort_by_key(|outcome| format!("{outcome:?}"));
            assert_eq!(
                outcomes,
                [InsertOutcome::Inserted, InsertOutcome::StepTaken],
                "round {round}"
            );
        }
        let stored = a
            .list(&lf_handoff_application::ports::ListQuery {
                parent: Some(parent),
                active_only: false,
                ..Default::default()
            })
            .await
            .unwrap();
        for round in 0..20 {
            let at = step(&format!("race@{round}"));
            let at_step = stored.iter().filter(|h| h.step.as_ref() == Some(&at));
            assert_eq!(at_step.count(), 1, "round {round}");
        }
    })
    .await;
}

#[tokio::test]
async fn the_snapshot_is_three_index_probes_on_sqlite() {
    let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
        .await
        .unwrap();
    for statement in crate::sqlite::migrations_after(0) {
        sqlx::query(&statement).execute(&mut conn).await.unwrap();
    }
    let rows = sqlx::query(&format!("EXPLAIN QUERY PLAN {}", *PARENT_WITH_ACTIVE))
        .bind("wv_1")
        .bind("login@1")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let plan: Vec<String> = rows
        .iter()
        .map(|row| sqlx::Row::try_get(row, "detail").unwrap())
        .collect();
    let plan = plan.join("\n");
    for probe in [
        "SEARCH p USING INDEX sqlite_autoindex_parents_1 (id=?)",
        "SEARCH handoffs USING INDEX handoffs_one_active_per_parent (parent_id=?)",
        "SEARCH handoffs USING INDEX handoffs_one_per_parent_step (parent_id=? AND step=?)",
    ] {
        assert!(plan.contains(probe), "{probe} is not in\n{plan}");
    }
    assert!(!plan.contains("SCAN"), "{plan}");
}

#[tokio::test]
async fn a_sweep_and_a_history_read_use_their_indexes_on_sqlite() {
    let plan = |sql: String| {
        let sql = format!("EXPLAIN QUERY PLAN {sql}");
        async move {
            let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
                .await
                .unwrap();
            for statement in crate::sqlite::migrations_after(0) {
                sqlx::query(&statement).execute(&mut conn).await.unwrap();
            }
            let rows = sqlx::query(&sql)
                .bind(1_i64)
                .bind(10_i64)
                .fetch_all(&mut conn)
                .await
                .unwrap();
            rows.iter()
                .map(|row| sqlx::Row::try_get::<String, _>(row, "detail").unwrap())
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let due = plan(super::list::due_handoffs::<SqliteFile>()).await;
    assert!(
        due.contains("SEARCH handoffs USING INDEX handoffs_due (expires_at>? AND expires_at<?)"),
        "{due}"
    );
    assert!(
        !due.contains("SCAN") && !due.contains("TEMP B-TREE"),
        "{due}"
    );
    let history = plan(super::statements::HISTORY.clone()).await;
    assert!(
        history.contains("USING INDEX") && !history.contains("SCAN"),
        "{history}"
    );
    assert!(!history.contains("TEMP B-TREE"), "{history}");
}

/// The plan SQLite gives `sql` with `params` on a fresh schema, one line
/// per step.
async fn sqlite_plan(sql: &str, params: &[super::driver::Param<'_>]) -> String {
    let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
        .await
        .unwrap();
    for statement in crate::sqlite::migrations_after(0) {
        sqlx::query(&statement).execute(&mut conn).await.unwrap();
    }
    let explain = format!("EXPLAIN QUERY PLAN {sql}");
    let rows = super::driver::bind::<sqlx::Sqlite>(sqlx::query(&explain), params)
        .fetch_all(&mut conn)
        .await
        .unwrap();
    rows.iter()
        .map(|row| sqlx::Row::try_get::<String, _>(row, "detail").unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn every_list_filter_is_served_by_its_index_on_sqlite() {
    use super::list::{list_statement, ListIndex};
    use lf_handoff_application::ListQuery;
    use InteractiveHandoffStatus::{Attached, Completed, Failed, Waiting};

    let parent = InteractiveHandoffParent::Wave(WaveId::new());
    let after = InteractiveHandoffId::new();
    let before = time::OffsetDateTime::now_utc();
    let home = WaveHome::parse("jack@local").unwrap();
    let base = ListQuery::default();
    let with = |edit: &dyn Fn(&mut ListQuery)| {
        let mut query = base.clone();
        edit(&mut query);
        query
    };
    // (query, the index that serves it, whether the engine sorts: only
    // several statuses read several ranges, and a parent's one active
    // handoff needs no order).
    let shapes = [
        (base.clone(), ListIndex::ByCreated, false),
        (
            with(&|q| q.parent = Some(parent.clone())),
            ListIndex::ByParent,
            false,
        ),
        (with(&|q| q.active_only = true), ListIndex::Active, false),
        (
            with(&|q| {
                q.parent = Some(parent.clone());
                q.active_only = true;
            }),
            ListIndex::ParentActive,
            true,
        ),
        (
            with(&|q| q.statuses = vec![Waiting]),
            ListIndex::ByStatus,
            false,
        ),
        (
            with(&|q| q.statuses = vec![Attached, Waiting]),
            ListIndex::Active,
            false,
        ),
        (
            with(&|q| q.statuses = vec![Completed, Failed]),
            ListIndex::ByStatus,
            true,
        ),
        (
            with(&|q| {
                q.statuses = vec![Completed];
                q.parent = Some(parent.clone());
            }),
            ListIndex::ByParent,
            false,
        ),
        (
            with(&|q| {
                q.statuses = vec![Waiting];
                q.parent = Some(parent.clone());
            }),
            ListIndex::ParentActive,
            true,
        ),
        (
            with(&|q| q.home = Some(home.clone())),
            ListIndex::ByHome,
            false,
        ),
        (
            with(&|q| {
                q.home = Some(home.clone());
                q.statuses = vec![Waiting];
            }),
            ListIndex::ByStatus,
            false,
        ),
        (
            with(&|q| q.created_before = Some(before)),
            ListIndex::ByCreated,
            false,
        ),
        (
            with(&|q| {
                q.after = Some(after.clone());
                q.limit = Some(50);
            }),
            ListIndex::ByCreated,
            false,
        ),
        (
            with(&|q| {
                q.statuses = vec![Waiting];
                q.after = Some(after.clone());
                q.limit = Some(50);
                q.created_before = Some(before);
            }),
            ListIndex::ByStatus,
            false,
        ),
        (
            with(&|q| {
                q.active_only = true;
                q.home = Some(home.clone());
                q.after = Some(after.clone());
                q.limit = Some(50);
            }),
            ListIndex::Active,
            false,
        ),
        (
            with(&|q| {
                q.parent = Some(parent.clone());
                q.after = Some(after.clone());
                q.limit = Some(5);
            }),
            ListIndex::ByParent,
            false,
        ),
        // A deadline: a range of the due handoffs, sorted into list order.
        (with(&|q| q.due_by = Some(before)), ListIndex::Due, true),
        (
            with(&|q| {
                q.due_by = Some(before);
                q.statuses = vec![Waiting];
                q.home = Some(home.clone());
            }),
            ListIndex::Due,
            true,
        ),
        (
            with(&|q| {
                q.due_by = Some(before);
                q.created_before = Some(before);
                q.after = Some(after.clone());
                q.limit = Some(50);
            }),
            ListIndex::Due,
            true,
        ),
        (
            with(&|q| {
                q.due_by = Some(before);
                q.parent = Some(parent.clone());
            }),
            ListIndex::ParentActive,
            false,
        ),
    ];
    // Each shape oldest first and newest first: the same index, read
    // backwards, and no more sorting.
    let both_orders = shapes.into_iter().flat_map(|(query, index, sorts)| {
        let newest = ListQuery {
            newest_first: true,
            ..query.clone()
        };
        [(query, index, sorts), (newest, index, sorts)]
    });
    for (query, index, sorts) in both_orders {
        let home = query.home.as_ref().map(ToString::to_string);
        let statement = list_statement::<SqliteFile>(&query, home.as_deref()).unwrap();
        assert_eq!(statement.index, index, "{query:?}");
        let plan = sqlite_plan(&statement.sql, &statement.params).await;
        let first = plan.lines().next().unwrap();
        assert!(
            first.starts_with(&format!("SEARCH handoffs USING INDEX {} (", index.name()))
                || first == format!("SCAN handoffs USING INDEX {}", index.name()),
            "{query:?}:\n{plan}"
        );
        assert_eq!(plan.contains("TEMP B-TREE"), sorts, "{query:?}:\n{plan}");
        // A page's start and the creation bound are ranges of the index,
        // not filters on what it returns.
        if query.due_by.is_some() && index == ListIndex::Due {
            assert!(first.contains("expires_at<?"), "{query:?}:\n{plan}");
        }
        let ordered = !matches!(index, ListIndex::ParentActive | ListIndex::Due);
        if query.after.is_some() && ordered {
            let range = match query.newest_first {
                false => "(created_at,id)>(?,?)",
                true => "(created_at,id)<(?,?)",
            };
            assert!(first.contains(range), "{query:?}:\n{plan}");
        }
        if query.created_before.is_some() && query.after.is_none() && ordered {
            assert!(first.contains("created_at<?"), "{query:?}:\n{plan}");
        }
    }
    // No handoff can pass, or none is asked for: no statement at all.
    for query in [
        with(&|q| {
            q.active_only = true;
            q.statuses = vec![Completed];
        }),
        with(&|q| q.limit = Some(0)),
    ] {
        assert_eq!(
            list_statement::<SqliteFile>(&query, None),
            None,
            "{query:?}"
        );
    }
}

#[tokio::test]
async fn the_lists_of_the_first_version_keep_their_text_and_plans() {
    use super::list::list_statement;
    use lf_handoff_application::ListQuery;

    let parent = InteractiveHandoffParent::Wave(WaveId::new());
    let columns = super::columns::column_list();
    for (parent, active_only, rest, index) in [
        (
            None,
            false,
            "ORDER BY created_at, id",
            "SCAN handoffs USING INDEX handoffs_by_created",
        ),
        (
            Some(parent.clone()),
            false,
            "WHERE parent_id = $1 ORDER BY created_at, id",
            "SEARCH handoffs USING INDEX handoffs_by_parent (parent_id=?)",
        ),
        (
            None,
            true,
            "WHERE status IN ('waiting', 'attached') ORDER BY created_at, id",
            "SCAN handoffs USING INDEX handoffs_active",
        ),
        (
            Some(parent.clone()),
            true,
            "WHERE parent_id = $1 AND status IN ('waiting', 'attached') ORDER BY created_at, id",
            "SEARCH handoffs USING INDEX handoffs_one_active_per_parent (parent_id=?)",
        ),
    ] {
        let query = ListQuery {
            parent,
            active_only,
            ..ListQuery::default()
        };
        // PostgreSQL runs the first version's text as it was.
        let statement = list_statement::<Server>(&query, None).unwrap();
        assert_eq!(
            statement.sql,
            format!("SELECT {columns} FROM handoffs {rest}")
        );
        // SQLite names the index its planner chose before the new ones.
        let pinned = list_statement::<SqliteFile>(&query, None).unwrap();
        let plan = sqlite_plan(&pinned.sql, &pinned.params).await;
        assert!(plan.starts_with(index), "{plan}");
    }
}

#[tokio::test]
async fn a_prune_reads_only_what_it_removes_on_sqlite() {
    use super::driver::Param;
    use super::statements::COUNT_PRUNABLE;
    use crate::sqlite::dialect::{PRUNE_EVENTS, PRUNE_HANDOFFS};
    let params = [Param::Int(1_000), Param::Int(256)];
    for (sql, expected) in [
        (
            &*PRUNE_EVENTS,
            &[
                "SEARCH handoff_events USING COVERING INDEX sqlite_autoindex_handoff_events_1 \
                 (handoff_id=?)",
                "SEARCH handoffs USING INDEX handoffs_prunable (terminal_at<?)",
            ][..],
        ),
        (
            &*PRUNE_HANDOFFS,
            &[
                "SEARCH handoffs USING COVERING INDEX sqlite_autoindex_handoffs_1 (id=?)",
                "SEARCH handoffs USING INDEX handoffs_prunable (terminal_at<?)",
            ][..],
        ),
        (
            &*COUNT_PRUNABLE,
            &[
                "SEARCH handoffs USING INDEX handoffs_prunable (terminal_at<?)",
                "SEARCH handoff_events USING COVERING INDEX sqlite_autoindex_handoff_events_1 \
                 (handoff_id=?)",
            ][..],
        ),
    ] {
        let plan = sqlite_plan(sql, &params[..]).await;
        for step in expected {
            assert!(plan.contains(step), "{step} is not in\n{plan}");
        }
        assert!(!plan.contains("SCAN"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{plan}");
    }
}

#[tokio::test]
async fn the_unique_indexes_are_the_schemas() {
    let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
        .await
        .unwrap();
    for statement in crate::sqlite::migrations_after(0) {
        sqlx::query(&statement).execute(&mut conn).await.unwrap();
    }
    let mut unique: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM pragma_index_list('handoffs') WHERE \"unique\" AND origin = 'c'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    unique.sort();
    let mut known: Vec<&str> = UNIQUE_INDEXES.iter().map(|index| index.name).collect();
    known.sort_unstable();
    assert_eq!(unique, known);
    assert_ne!(ONE_ACTIVE_PER_PARENT, ONE_PER_PARENT_STEP);
}

/// SQLite's result code does not say which unique index refused a row, so
/// its dialect asks the table, the step's index first, as SQLite itself
/// checks them: a second active handoff at a step the parent has is a
/// taken step.
#[tokio::test(flavor = "multi_thread")]
async fn a_row_both_indexes_refuse_is_a_taken_step_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig::sqlite(dir.path().join("store.db"));
    let (_store, wave, _finished, waiting) = wave_with_handoffs(&config, dir.path()).await;
    let sql = ports(&config).await;
    let parent = InteractiveHandoffParent::Wave(wave.id().clone());
    let version = sql.load_parent(&parent).await.unwrap().unwrap().version;
    let actor = lf_handoff_application::this_process_actor();
    assert_eq!(
        sql.insert(&copy_at(&waiting, Some("login@1")), version, &actor)
            .await
            .unwrap(),
        InsertOutcome::StepTaken
    );
}

// ----- upgrades (SQLite; the conformance suite upgrades every backend) -----

/// A copy of the SQLite store release 0.1.0 wrote (the fixture itself is
/// never opened: opening may write).
fn release_1_copy(dir: &Path) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/v1/registry.db");
    let path = dir.join("release-1.db");
    std::fs::copy(fixture, &path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// A plain connection to the SQLite file at `path`.
async fn raw(path: &Path) -> sqlx::SqliteConnection {
    sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap()
}

/// Every row of the tables of release 0.1.0, as JSON arrays of the columns
/// it had, in key order; and the user version.
async fn rows_of_release_1(path: &Path) -> (Vec<String>, i64) {
    let mut conn = raw(path).await;
    let handoff_columns: Vec<&str> = HANDOFF_COLUMNS
        .iter()
        .map(|column| column.name)
        // The columns release 0.1.0 had: later migrations add the rest.
        .filter(|name| {
            ![
                "step",
                "expires_at",
                "events",
                "choices",
                "form",
                "on_expiry",
                "answer",
            ]
            .contains(name)
        })
        .collect();
    let mut rows = Vec::new();
    for sql in [
        format!(
            "SELECT json_array({}) FROM handoffs ORDER BY id",
            handoff_columns.join(", ")
        ),
        "SELECT json_array(id, kind, wave_id, version, record) FROM parents ORDER BY id".into(),
        "SELECT json_array(id, task_session_id, record) FROM task_prs ORDER BY id".into(),
    ] {
        let table: Vec<String> = sqlx::query_scalar(&sql).fetch_all(&mut conn).await.unwrap();
        assert!(!table.is_empty(), "{sql}");
        rows.extend(table);
    }
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    (rows, version)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_of_release_1_is_upgraded_keeping_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = release_1_copy(dir.path());
    let (before, version) = rows_of_release_1(&path).await;
    assert_eq!(version, 1);

    let config = StorageConfig::sqlite(path.clone());
    let store = open_store(&config).await.unwrap();
    let handoffs = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert!(!handoffs.is_empty());
    assert!(handoffs.iter().all(|handoff| handoff.step.is_none()));
    drop(store);

    let (after, version) = rows_of_release_1(&path).await;
    assert_eq!(version, LATEST_VERSION);
    assert_eq!(after, before);
    let mut conn = raw(&path).await;
    let (steps, index): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(step) FROM handoffs), \
                (SELECT count(*) FROM sqlite_master \
                   WHERE name = 'handoffs_one_per_parent_step')",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!((steps, index), (0, 1));
    // Migration 3: no deadline, no events, the due index and the history.
    let (deadlines, counted, events, due): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(expires_at) FROM handoffs), \
                (SELECT coalesce(sum(events), 0) FROM handoffs), \
                (SELECT count(*) FROM handoff_events), \
                (SELECT count(*) FROM sqlite_master WHERE name = 'handoffs_due')",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    assert_eq!((deadlines, counted, events, due), (0, 0, 0, 1));
}

/// Opens `config` from eight handles at once (separate connections, as
/// separate processes or hosts would), and checks each one sees the
/// upgraded store.
async fn open_eight_at_once(config: &StorageConfig) {
    let opens: Vec<_> = (0..8)
        .map(|_| {
            let config = config.clone();
            tokio::spawn(async move {
                let store = open_store(&config).await?;
                store.list_interactive_handoffs(ListQuery::default()).await
            })
        })
        .collect();
    let mut counts = Vec::new();
    for open in opens {
        // A second migration would fail on the step column it adds again.
        counts.push(open.await.unwrap().unwrap().len());
    }
    assert!(counts[0] > 0);
    assert_eq!(counts, vec![counts[0]; 8]);
}

#[tokio::test(flavor = "multi_thread")]
async fn handles_opening_a_store_of_release_1_at_once_migrate_it_once() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = release_1_copy(dir.path());
        let (before, _) = rows_of_release_1(&path).await;
        open_eight_at_once(&StorageConfig::sqlite(path.clone())).await;
        assert_eq!(rows_of_release_1(&path).await, (before, LATEST_VERSION));
    }
    let Ok(url) = std::env::var("LF_HANDOFF_TEST_POSTGRES_URL") else {
        eprintln!("PostgreSQL part skipped: LF_HANDOFF_TEST_POSTGRES_URL is not set");
        return;
    };
    // The release-0.1.0 dump, replayed into a schema of its own; psql's
    // meta-commands dropped.
    let schema = format!("lfa_{}", WaveId::new().as_str().replace(['-', '_'], ""));
    let dump = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/v1/postgres.sql"),
    )
    .unwrap();
    let script: String = dump
        .lines()
        .filter(|line| !line.starts_with('\\'))
        .map(|line| line.replace("lf_fixture_v1", &schema) + "\n")
        .collect();
    let StorageConfig::Postgres(mut postgres) = StorageConfig::postgres(&url).unwrap() else {
        unreachable!("a postgres:// URL")
    };
    postgres.schema = schema.clone();
    postgres.pool_size = 2;
    let options = postgres.connect_options().unwrap();
    // The dump's session settings (an empty search path) last for the
    // connection that replays it: a connection of its own.
    let mut replay = options.connect().await.unwrap();
    sqlx::Executor::execute(&mut replay, script.as_str())
        .await
        .unwrap();
    replay.close().await.unwrap();
    let config = StorageConfig::Postgres(postgres);
    let outcome = tokio::spawn(async move { open_eight_at_once(&config).await }).await;
    let mut admin = options.connect().await.unwrap();
    let version: i64 = sqlx::query_scalar(&format!(
        "SELECT value FROM \"{schema}\".lf_handoff_meta WHERE name = 'schema_version'"
    ))
    .fetch_one(&mut admin)
    .await
    .unwrap();
    sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
    if let Err(error) = outcome {
        std::panic::resume_unwind(error.into_panic());
    }
    assert_eq!(version, LATEST_VERSION);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_of_this_build_reopens_without_migrating() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let config = StorageConfig::sqlite(path.clone());
    let (store, _, _, waiting) = wave_with_handoffs(&config, dir.path()).await;
    drop(store);
    let schema = |path: PathBuf| async move {
        let mut conn = raw(&path).await;
        // The schema cookie: every schema change increments it.
        let cookie: (i64, i64, String) = sqlx::query_as(
            "SELECT (SELECT schema_version FROM pragma_schema_version), \
                    (SELECT user_version FROM pragma_user_version), \
                    (SELECT group_concat(sql, ';') FROM sqlite_master)",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        conn.close().await.unwrap();
        cookie
    };
    let before = schema(path.clone()).await;
    assert_eq!(before.1, LATEST_VERSION);

    let again = open_store(&config).await.unwrap();
    let stored = again
        .get_interactive_handoff(&waiting.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, waiting);
    assert_eq!(stored.step, Some(step("login@1")));
    drop(again);
    assert_eq!(schema(path).await, before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_of_a_newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    // Release 0.1.0's store, as a build of a newer schema version would leave it
    // (the version is all this build can know of a newer one).
    let path = release_1_copy(dir.path());
    let mut conn = raw(&path).await;
    sqlx::query(&format!("PRAGMA user_version = {}", LATEST_VERSION + 1))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let bytes = std::fs::read(&path).unwrap();

    match open_store(&StorageConfig::sqlite(path.clone())).await {
        Err(StoreError::Unavailable { kind, message, .. }) => {
            assert_eq!(kind, UnavailableKind::NewerSchema, "{message}");
            let newer = format!("schema version {}", LATEST_VERSION + 1);
            assert!(message.contains(&newer), "{message}");
        }
        Err(other) => panic!("expected Unavailable, got {other}"),
        Ok(_) => panic!("a store of a newer schema opened"),
    }
    assert!(std::fs::read(&path).unwrap() == bytes, "the file changed");
    let mut conn = raw(&path).await;
    let columns: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pragma_table_info('handoffs') WHERE name = 'step'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    assert_eq!(columns, 0, "no migration ran");
}

/// Every row of every table of the SQLite store at `path` and its
/// position counter, as text, in key order.
async fn sqlite_rows(path: &Path) -> Vec<String> {
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .connect()
        .await
        .unwrap();
    let handoff_columns: Vec<&str> = HANDOFF_COLUMNS.iter().map(|c| c.name).collect();
    let queries = [
        "SELECT json_array(id, kind, wave_id, version, record) FROM parents ORDER BY id"
            .to_string(),
        "SELECT json_array(id, task_session_id, record) FROM task_prs ORDER BY id".into(),
        format!(
            "SELECT json_array({}) FROM handoffs ORDER BY id",
            handoff_columns.join(", ")
        ),
        "SELECT json_array(position, handoff_id, seq, at, kind, status_before, status_after, \
         actor, detail) FROM handoff_events ORDER BY position"
            .into(),
        "SELECT json_array(name, seq) FROM sqlite_sequence ORDER BY name".into(),
    ];
    let mut rows = Vec::new();
    for query in queries {
        let found: Vec<String> = sqlx::query_scalar(&query)
            .fetch_all(&mut conn)
            .await
            .unwrap();
        rows.push(format!("-- {query}"));
        rows.extend(found);
    }
    conn.close().await.unwrap();
    rows
}

#[tokio::test(flavor = "multi_thread")]
async fn an_import_writes_the_rows_and_the_position_counter_the_stores_own_writes_did() {
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.db");
    let store = open_store(&StorageConfig::sqlite(source.clone()))
        .await
        .unwrap();
    let wave = Wave::new(WaveId::new(), "w".into(), dir.path().display().to_string());
    store.create_wave(&wave).await.unwrap();
    let (first, _) = store
        .open_interactive_handoff(
            OpenRequest::on_wave(&wave)
                .cwd(dir.path())
                .at_step(step("login@1"))
                .build(),
        )
        .await
        .unwrap();
    store.attach_interactive_handoff(&first.id).await.unwrap();
    store
        .finish_interactive_handoff(
            &first.id,
            &InteractiveHandoffOutcome::Completed {
                summary: "done".into(),
            },
            None,
        )
        .await
        .unwrap();
    store
        .claim_interactive_handoff_wake(&first.id, 1)
        .await
        .unwrap();
    store
        .open_interactive_handoff(OpenRequest::on_wave(&wave).cwd(dir.path()).build())
        .await
        .unwrap();
    let mut file = Vec::new();
    let summary = store.export(&mut file, None).await.unwrap();
    assert_eq!((summary.events, summary.last_position), (5, 5));

    let copy = dir.path().join("copy.db");
    let imported = open_store(&StorageConfig::sqlite(copy.clone()))
        .await
        .unwrap();
    imported.import(&mut file.as_slice(), None).await.unwrap();
    drop((store, imported));
    assert_eq!(sqlite_rows(&copy).await, sqlite_rows(&source).await);

    // A last position past the last event's (the newest events were
    // removed) is kept, and the next event takes the one after it.
    let text = String::from_utf8(file).unwrap();
    let later = text.replace("\"last_position\":5}", "\"last_position\":40}");
    let moved = dir.path().join("moved.db");
    let imported = open_store(&StorageConfig::sqlite(moved.clone()))
        .await
        .unwrap();
    imported.import(&mut later.as_bytes(), None).await.unwrap();
    let second = imported
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap()
        .into_iter()
        .find(InteractiveHandoff::is_active)
        .unwrap();
    imported
        .attach_interactive_handoff(&second.id)
        .await
        .unwrap();
    let history = imported.history(&second.id).await.unwrap();
    assert_eq!(history.last().unwrap().position, 41);
}

/// The shared SQL code names no backend (docs/ARCHITECTURE.md): what
/// differs is a `Dialect` method in the backend's own folder.
#[test]
fn the_shared_sql_code_names_no_backend() {
    let files = [
        ("archive.rs", include_str!("archive.rs")),
        ("columns.rs", include_str!("columns.rs")),
        ("connections.rs", include_str!("connections.rs")),
        ("deliveries.rs", include_str!("deliveries.rs")),
        ("driver.rs", include_str!("driver.rs")),
        ("engine.rs", include_str!("engine.rs")),
        ("events.rs", include_str!("events.rs")),
        ("handoffs.rs", include_str!("handoffs.rs")),
        ("list.rs", include_str!("list.rs")),
        ("mod.rs", include_str!("mod.rs")),
        ("parents.rs", include_str!("parents.rs")),
        ("revocations.rs", include_str!("revocations.rs")),
        ("row.rs", include_str!("row.rs")),
        ("schema.rs", include_str!("schema.rs")),
        ("statements.rs", include_str!("statements.rs")),
        ("watch.rs", include_str!("watch.rs")),
    ];
    let listed = std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/sql"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != "tests.rs")
        .count();
    assert_eq!(listed, files.len(), "a file of sql/ is not checked");
    for (name, text) in files {
        // Tests may open a backend; the product code above them may not.
        let product = text.split("#[cfg(test)]\nmod tests {").next().unwrap();
        for backend in [
            "crate::sqlite",
            "crate::postgres",
            "sqlx::Sqlite",
            "sqlx::Postgres",
            "SqliteConnection",
            "PgConnection",
        ] {
            assert!(!product.contains(backend), "sql/{name} names {backend}");
        }
    }
}

/// A call cancelled inside its transaction (a client that went away from
/// the service mid-request) leaves no transaction open on the server:
/// another handle's write of the same row goes through while the first
/// handle sits idle. Before, its connection went back to the pool with the
/// `ROLLBACK` only queued, and the server kept the row locked until that
/// connection's next use: here, for ever.
#[tokio::test(flavor = "multi_thread")]
async fn a_call_cancelled_inside_its_transaction_leaves_no_lock_on_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    on_postgres(dir.path(), |config, _| async move {
        let StorageConfig::Postgres(postgres) = &config else {
            unreachable!("a PostgreSQL store")
        };
        let first = open_store(&config).await.unwrap();
        let second = open_store(&config).await.unwrap();
        let wave = Wave::new(WaveId::new(), "w".into(), "/tmp/cancelled".into());
        first.create_wave(&wave).await.unwrap();
        let project = lf_handoff_application::testing::fresh_project(wave.id());
        first.create_project_session(&project).await.unwrap();
        let (task, pr) = lf_handoff_application::testing::fresh_task(&project, Path::new("/tmp"));
        // A task is stored with its first PR in one transaction: the
        // parent's row, then the PR's. An administrator's lock on the PRs
        // makes the first handle wait inside that transaction, after the
        // parent's insert, where the call is then cancelled.
        let mut admin = postgres.connect_options().unwrap().connect().await.unwrap();
        sqlx::query("BEGIN").execute(&mut admin).await.unwrap();
        sqlx::query(&format!(
            "LOCK TABLE \"{}\".task_prs IN EXCLUSIVE MODE",
            postgres.schema
        ))
        .execute(&mut admin)
        .await
        .unwrap();
        let cancelled = tokio::time::timeout(
            std::time::Duration::from_millis(300),
            first.create_task_session(&task, &pr),
        )
        .await;
        assert!(cancelled.is_err(), "the insert waited for the lock");
        sqlx::query("ROLLBACK").execute(&mut admin).await.unwrap();
        admin.close().await.unwrap();
        // A hang guard, not a speed goal: without the fix the parent's row
        // stays locked by the first handle's open transaction for ever.
        tokio::time::timeout(
            std::time::Duration::from_secs(30),
            second.create_task_session(&task, &pr),
        )
        .await
        .expect("the second handle's write waited for a lock nobody releases")
        .unwrap();
        let reference = InteractiveHandoffParent::Task(task.id.clone());
        assert!(second.get_parent(&reference).await.unwrap().is_some());
        drop(first);
    })
    .await;
}
