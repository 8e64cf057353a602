//! The service's sections run at tiny sizes, so they cannot rot: each
//! gives figures of the size asked for, and its answers were checked.

use std::path::PathBuf;

use super::{events, get, idle, lifecycle, Access};
use crate::backends::{PostgresBench, SqliteBench, DEFAULT_POSTGRES_URL};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_and_get_rate_through_the_service_are_measured() {
    let dir = tempfile::tempdir().unwrap();
    let backend = SqliteBench::new(dir.path().to_path_buf());
    let access = Access::create().unwrap();

    let figures = lifecycle::measure(&backend, &access, 3).await.unwrap();
    assert_eq!(figures.lifecycles, 3);
    assert_eq!(figures.steps.len(), 4);
    assert!(figures.service_per_sec > 0.0 && figures.library_per_sec > 0.0);
    assert!(figures.steps.iter().all(|s| s.service.samples == 3));

    let rates = get::measure(&backend, &access, &[1, 3], 0.1, 1)
        .await
        .unwrap();
    assert!(rates.body_bytes > 0);
    let connections: Vec<usize> = rates.rows.iter().map(|r| r.connections).collect();
    assert_eq!(connections, [1, 3]);
    assert!(rates.client_store_per_sec > 0.0 && rates.library_per_sec > 0.0);
    for row in &rates.rows {
        assert!(row.service_requests > 0 && row.bare_requests > 0, "{row:?}");
        assert!(row.ratio > 0.0 && row.read_only_per_sec > 0.0, "{row:?}");
    }
    let ceiling = rates.one_connection_ceiling.unwrap();
    assert!(ceiling > 0.0 && ceiling < 1.0, "{ceiling}");
}

#[test]
fn the_ceiling_adds_the_bare_request_and_one_get() {
    // 50,000 bare requests a second (20 µs) and 20,000 gets (50 µs):
    // a request that does both takes 70 µs, 20/70 of the bare rate.
    assert!((get::ceiling(50_000.0, 20_000.0) - 20.0 / 70.0).abs() < 1e-9);
    assert!((get::ceiling(1.0, 1.0) - 0.5).abs() < 1e-9);
    assert!(get::ceiling(0.0, 1.0).abs() < f64::EPSILON);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finish_reaches_another_servers_event_stream() {
    let url = std::env::var("LF_HANDOFF_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string());
    let dir = tempfile::tempdir().unwrap();
    let backend = match PostgresBench::connect(&url, dir.path().to_path_buf()).await {
        Ok(backend) => backend,
        Err(reason) => {
            eprintln!("skipped: PostgreSQL unavailable: {reason}");
            return;
        }
    };
    let access = Access::create().unwrap();
    let figures = events::measure(&backend, &access, 3).await.unwrap();
    assert_eq!(figures.latency.samples, 3);
    assert!(figures.latency.median_us > 0.0);
    assert!(figures.p95_us >= figures.latency.median_us);
}

/// The `lf-handoff` binary of this build (`target/debug/lf-handoff`),
/// when it has been built.
fn cli() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let cli = exe.parent()?.parent()?.join("lf-handoff");
    cli.exists().then_some(cli)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_process_holds_idle_streams_and_long_polls() {
    let Some(cli) = cli() else {
        eprintln!("skipped: no lf-handoff binary beside the tests (cargo build -p lf-handoff-cli)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let backend = SqliteBench::new(dir.path().to_path_buf());
    let access = Access::create().unwrap();
    let figures = idle::measure(&backend, &access, Some(&cli), 4, 6, 0.2)
        .await
        .unwrap();
    assert_eq!((figures.streams, figures.long_polls), (4, 6));
    assert!(figures.open_files_limit >= 10);
    for window in [&figures.baseline, &figures.held] {
        assert!(window.rss_bytes > 0 && window.peak_rss_bytes >= window.rss_bytes);
        assert!(window.seconds >= 0.2);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_server_binary_is_a_clear_failure() {
    let dir = tempfile::tempdir().unwrap();
    let backend = SqliteBench::new(dir.path().to_path_buf());
    let access = Access::create().unwrap();
    let missing = dir.path().join("no-such-lf-handoff");
    let error = idle::measure(&backend, &access, Some(&missing), 1, 1, 0.1)
        .await
        .unwrap_err();
    assert!(error.0.contains("lf-handoff binary"), "{error}");
}
