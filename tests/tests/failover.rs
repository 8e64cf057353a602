//! Failover without loss (contract C25), on servers of the tests' own: a
//! primary killed under clients and replaced by its promoted synchronous
//! standby loses no acknowledged write and keeps every invariant
//! ([`failover::run`], one failover here; the long form is the
//! `lf-handoff-failover` program); a store whose URL names a standby first
//! writes to the primary after it; a killed primary rebuilt as a standby
//! is never written to; a store opened during a failover or a restart
//! waits for the server within its retry window, and a wrong password
//! fails at once.
// A test file: panicking on a failed expectation is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lf_handoff_adapters::ListQuery;
use std::sync::Arc;
use std::time::Duration;

use lf_handoff_adapters::{open_store, StorageConfig, Store, StoreError, UnavailableKind};
use lf_handoff_conformance::failover::{
    self, blocking, primary_and_standby, Commit, Failure, Plan,
};
use lf_handoff_conformance::fixtures::{lifecycle, open_on_new_wave};
use lf_handoff_conformance::own_postgres::{skip_or_fail, OwnPostgres};

/// Runs one failover with `commit` and 4 clients, and asserts that nothing
/// acknowledged was lost and every invariant holds.
async fn one_failover(commit: Commit) {
    let plan = Plan {
        commit,
        clients: 4,
        failovers: 1,
        seed: 1,
    };
    let report = match failover::run(&plan, &|line| println!("{line}")).await {
        Ok(report) => report,
        Err(Failure::Setup(reason)) => return skip_or_fail(&reason),
        Err(failure) => panic!("{failure}"),
    };
    println!("{report}");
    for error in &report.errors {
        println!("unknown outcome: {error}");
    }
    assert_eq!(report.failovers, 1, "{report}");
    assert!(report.acknowledged > 0, "{report}");
    assert_eq!(report.lost, 0, "{report}");
    assert!(
        report.violations.is_empty(),
        "{report}: {:#?}",
        report.violations
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_synchronous_standby_promoted_after_a_kill_9_loses_no_acknowledged_write() {
    one_failover(Commit::On).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_remote_apply_standby_promoted_after_a_kill_9_loses_no_acknowledged_write() {
    one_failover(Commit::RemoteApply).await;
}

/// A primary and its standby, or `None` when they cannot run here.
async fn pair() -> Option<(Arc<OwnPostgres>, Arc<OwnPostgres>)> {
    match primary_and_standby().await {
        Ok((primary, standby)) => Some((Arc::new(primary), Arc::new(standby))),
        Err(reason) => {
            skip_or_fail(&reason);
            None
        }
    }
}

/// A store on the hosts `ports`, in that order.
fn config(ports: &[u16], query: &str) -> StorageConfig {
    let hosts: Vec<String> = ports
        .iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    StorageConfig::from_url(&format!(
        "postgres://postgres@{}/postgres?pool_size=2{query}",
        hosts.join(",")
    ))
    .unwrap()
}

/// Waits until `standby` has replayed everything `primary` wrote.
async fn caught_up(primary: &Arc<OwnPostgres>, standby: &Arc<OwnPostgres>) {
    let (primary, standby) = (primary.clone(), standby.clone());
    blocking(move || {
        let lsn = primary.psql("SELECT pg_current_wal_lsn()")?;
        for _ in 0..1000 {
            let behind = standby.psql(&format!(
                "SELECT pg_last_wal_replay_lsn() < '{lsn}'::pg_lsn"
            ))?;
            if behind == "f" {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err("the standby did not catch up within 10 s".to_string())
    })
    .await
    .unwrap();
}

/// The store's sessions on `server` (their `application_name` is the
/// store's).
async fn sessions_on(server: &Arc<OwnPostgres>) -> usize {
    let server = server.clone();
    blocking(move || {
        server.psql(
            "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE application_name = \
             'lf-handoff'",
        )
    })
    .await
    .unwrap()
    .parse()
    .unwrap()
}

/// Asserts that `store`'s every connection is on `primary` and none on
/// `standby`, while it holds two.
async fn connected_only_to(store: &Store, primary: &Arc<OwnPostgres>, standby: &Arc<OwnPostgres>) {
    // Two calls at once make the store hold two connections.
    let (a, b) = tokio::join!(
        store.list_interactive_handoffs(ListQuery::default()),
        store.list_interactive_handoffs(ListQuery::default())
    );
    a.unwrap();
    b.unwrap();
    assert!(sessions_on(primary).await >= 1);
    assert_eq!(
        sessions_on(standby).await,
        0,
        "the store holds a session on the standby"
    );
}

/// A store whose URL names the standby first writes to the primary named
/// second; one naming only the standby is `Unavailable` saying so, unless
/// `target_session_attrs=any`, which reads there and cannot write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_first_host_is_a_standby_writes_to_the_second() {
    let Some((primary, standby)) = pair().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(&config(&[standby.port(), primary.port()], ""))
        .await
        .unwrap_or_else(|e| panic!("{e}; {}", primary.log_tail()));
    let id = lifecycle(&store, dir.path(), 0).await;
    connected_only_to(&store, &primary, &standby).await;
    let on_primary = open_store(&config(&[primary.port()], "")).await.unwrap();
    assert_eq!(
        on_primary.get_interactive_handoff(&id).await.unwrap(),
        store.get_interactive_handoff(&id).await.unwrap()
    );

    // The standby alone: refused for writing, naming it and why.
    match open_store(&config(&[standby.port()], "&retry_window=1s")).await {
        Err(StoreError::Unavailable { kind, message, .. }) => {
            assert_eq!(kind, UnavailableKind::Unreachable, "{message}");
            assert!(
                message.contains(&format!("127.0.0.1:{}", standby.port())),
                "{message}"
            );
            assert!(message.contains("standby"), "{message}");
            assert!(message.contains("target_session_attrs=any"), "{message}");
        }
        Err(other) => panic!("expected Unavailable, got {other}"),
        Ok(_) => panic!("a store opened for writing on a standby"),
    }
    // With `any`, the standby serves reads and refuses writes.
    caught_up(&primary, &standby).await;
    let reader = open_store(&config(&[standby.port()], "&target_session_attrs=any"))
        .await
        .unwrap();
    assert!(reader.get_interactive_handoff(&id).await.unwrap().is_some());
    let refused = reader
        .create_wave(&lf_handoff_domain::wave::Wave::new(
            lf_handoff_adapters::GenerateId::new(),
            "product".into(),
            "/src".into(),
        ))
        .await
        .unwrap_err();
    assert_eq!(
        refused.unavailable_kind(),
        Some(UnavailableKind::PermissionDenied),
        "{refused}"
    );
}

/// Every host down: `Unavailable` (`unreachable`) naming each host and
/// why, after the retry window for a call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_hosts_are_all_down_names_each() {
    let Some((primary, standby)) = pair().await else {
        return;
    };
    let store = open_store(&config(&[primary.port(), standby.port()], ""))
        .await
        .unwrap()
        .with_retry_window(Duration::from_secs(1));
    let dir = tempfile::tempdir().unwrap();
    open_on_new_wave(&store, dir.path()).await;
    let (a, b) = (primary.clone(), standby.clone());
    blocking(move || {
        a.kill_9()?;
        b.kill_9()
    })
    .await
    .unwrap();
    let error = store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap_err();
    assert_eq!(
        error.unavailable_kind(),
        Some(UnavailableKind::Unreachable),
        "{error}"
    );
    let message = error.to_string();
    for server in [&primary, &standby] {
        assert!(
            message.contains(&format!("127.0.0.1:{}", server.port())),
            "{message}"
        );
    }
    assert!(message.contains("gave up"), "{message}");
}

/// A killed primary rebuilt as a standby of the promoted one and started
/// again is never written to, though the store URL names it first: every
/// lifecycle of a handle opened before the failover and of one opened
/// after succeeds, on the new primary, and no session of the store stays
/// on the old one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_old_primary_restarted_as_a_standby_is_never_written_to() {
    let Some((old, new)) = pair().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = config(&[old.port(), new.port()], "");
    let before = open_store(&url).await.unwrap();
    let first = lifecycle(&before, dir.path(), 0).await;
    caught_up(&old, &new).await;
    let (killed, promoted) = (old.clone(), new.clone());
    blocking(move || {
        killed.kill_9()?;
        promoted.promote()?;
        killed.rebuild_as_standby_of(&promoted)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let after = open_store(&url).await.unwrap();
    let mut ids = vec![first];
    for n in 1..4 {
        ids.push(lifecycle(&before, dir.path(), n).await);
        ids.push(lifecycle(&after, dir.path(), 10 + n).await);
    }
    for store in [&before, &after] {
        connected_only_to(store, &new, &old).await;
    }
    let (standby, primary) = (old.clone(), new.clone());
    let roles = blocking(move || {
        Ok((
            standby.psql("SELECT pg_is_in_recovery()")?,
            primary.psql("SELECT pg_is_in_recovery()")?,
        ))
    })
    .await
    .unwrap();
    assert_eq!(roles, ("t".to_string(), "f".to_string()));
    let on_new = open_store(&config(&[new.port()], "")).await.unwrap();
    for id in &ids {
        let stored = on_new.get_interactive_handoff(id).await.unwrap().unwrap();
        assert_eq!(stored.wake_claimed_by_generation, Some(1), "{id}");
    }
}

/// A store opened after its primary was killed and before the standby is
/// promoted waits, within its retry window, for the promotion, and then
/// writes to the promoted server: a command started in the gap succeeds
/// (C18, C25).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_between_the_kill_and_the_promotion_writes_after_the_promotion() {
    let Some((primary, standby)) = pair().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let url = config(&[primary.port(), standby.port()], "");
    let before = open_store(&url).await.unwrap();
    let first = lifecycle(&before, dir.path(), 0).await;
    caught_up(&primary, &standby).await;
    drop(before);
    let killed = primary.clone();
    blocking(move || killed.kill_9()).await.unwrap();
    // The standby accepts no writes until promoted, so the store can only
    // open after the promotion.
    let promoted = standby.clone();
    let promotion = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        promoted.promote()
    });
    let during = open_store(&url)
        .await
        .unwrap_or_else(|e| panic!("opening during the failover: {e}"));
    let second = lifecycle(&during, dir.path(), 1).await;
    promotion.join().unwrap().unwrap();
    let on_promoted = open_store(&config(&[standby.port()], "")).await.unwrap();
    for id in [&first, &second] {
        let stored = on_promoted
            .get_interactive_handoff(id)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{id} is not on the promoted server"));
        assert_eq!(stored.wake_claimed_by_generation, Some(1), "{id}");
    }
}

/// A single server started, stopped, and opened while it is down: the
/// store opens once the server is back within the retry window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_while_its_server_restarts_opens_when_it_is_back() {
    let server = match blocking(OwnPostgres::start).await {
        Ok(server) => Arc::new(server),
        Err(reason) => return skip_or_fail(&reason),
    };
    let stopped = server.clone();
    blocking(move || stopped.stop("fast")).await.unwrap();
    let started = server.clone();
    let back = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        started.start_again()
    });
    let store = open_store(&server.config(""))
        .await
        .unwrap_or_else(|e| panic!("opening during the restart: {e}"));
    back.join().unwrap().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let id = lifecycle(&store, dir.path(), 0).await;
    assert!(store.get_interactive_handoff(&id).await.unwrap().is_some());
}

/// What no wait mends is not retried: a wrong password fails at once as
/// `refused`, within a retry window of a minute, and its message does not
/// say it tried again; the right password opens the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_fails_at_once_without_retrying() {
    let server = match blocking(OwnPostgres::start).await {
        Ok(server) => Arc::new(server),
        Err(reason) => return skip_or_fail(&reason),
    };
    // A user whose TCP logins need its password, ahead of the cluster's
    // trust rules (which the tests' own psql keeps using).
    let setup = server.clone();
    blocking(move || {
        setup.psql("CREATE ROLE lf_pw LOGIN SUPERUSER PASSWORD 'right'")?;
        let hba = setup.psql("SHOW hba_file")?;
        let rules = std::fs::read_to_string(&hba).map_err(|e| format!("{hba}: {e}"))?;
        std::fs::write(
            &hba,
            format!("host all lf_pw 127.0.0.1/32 scram-sha-256\n{rules}"),
        )
        .map_err(|e| format!("{hba}: {e}"))?;
        setup.psql("SELECT pg_reload_conf()").map(drop)
    })
    .await
    .unwrap();
    let url = |password: &str| {
        StorageConfig::from_url(&format!(
            "postgres://lf_pw:{password}@127.0.0.1:{}/postgres?retry_window=60s",
            server.port()
        ))
        .unwrap()
    };
    let started = std::time::Instant::now();
    match open_store(&url("wrong")).await {
        Err(StoreError::Unavailable { kind, message, .. }) => {
            assert_eq!(kind, UnavailableKind::Refused, "{message}");
            assert!(message.contains("lf_pw"), "{message}");
            assert!(!message.contains("gave up"), "{message}");
        }
        Err(other) => panic!("expected Unavailable, got {other}"),
        Ok(_) => panic!("a wrong password opened the store"),
    }
    // Far below the window: it was not spent waiting.
    assert!(started.elapsed() < Duration::from_secs(30));
    open_store(&url("right"))
        .await
        .unwrap_or_else(|e| panic!("the right password: {e}"));
}
