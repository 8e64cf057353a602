//! A store that becomes unavailable: 503 with the error object (and
//! `Retry-After` when the cause is transient), `/readyz` says so,
//! `/healthz` still answers, nothing is changed, and the service serves
//! again when the store is back, without a restart. A client learns the
//! failure's kind and an id, never the store's own words (which name
//! files and hosts): those are in the log under that id (C29).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use lf_handoff_adapters::UnavailableKind;
use lf_handoff_conformance::backends::sqlite;
use lf_handoff_conformance::faults::{store_losing_replies, LostReplies};
use lf_handoff_server::Limits;
use serde_json::json;
use support::Served;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unavailable_store_is_503_and_the_service_serves_again_when_it_is_back() {
    let (dir, store, outage) = store_losing_replies(&*sqlite().await.unwrap()).await;
    // A short retry window, so an unreachable store is reported soon.
    let store = store.with_retry_window(Duration::from_millis(200));
    let served = Served::serve(dir, store, Limits::default()).await;
    let id = served.open_id().await;

    outage.take_down(Some(UnavailableKind::Unreachable));
    for (method, path) in [
        ("GET", format!("/v1/handoffs/{id}")),
        ("GET", "/v1/handoffs".to_string()),
        ("GET", "/readyz".to_string()),
        ("GET", "/metrics".to_string()),
    ] {
        let reply = served
            .send(method, &path, Some(&served.operator), None, Vec::new())
            .await;
        assert_eq!(reply.error(503, "unavailable"), "unreachable", "{path}");
        assert_eq!(reply.header("retry-after").as_deref(), Some("1"), "{path}");
        assert_eq!(reply.json()["error"]["code"], 5);
    }
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/complete"),
            &served.person,
            &json!({"summary": "x"}),
        )
        .await;
    assert_eq!(reply.error(503, "unavailable"), "unreachable");
    let health = served.send("GET", "/healthz", None, None, Vec::new()).await;
    assert_eq!(health.status, 200, "the process still answers");

    // A store that is damaged is not transient: no Retry-After.
    outage.take_down(Some(UnavailableKind::Damaged));
    let reply = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await;
    assert_eq!(reply.error(503, "unavailable"), "damaged");
    assert_eq!(reply.header("retry-after"), None);

    // Back: served again, and the refused finish did not happen.
    outage.take_down(None);
    let ready = served.send("GET", "/readyz", None, None, Vec::new()).await;
    assert_eq!(ready.status, 200, "{}", ready.text);
    let reply = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["status"], "waiting");
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/complete"),
            &served.person,
            &json!({"summary": "x"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_back_within_the_retry_window_is_ridden_out() {
    let (dir, store, outage) = store_losing_replies(&*sqlite().await.unwrap()).await;
    let served = Served::serve(
        dir,
        store.with_retry_window(Duration::from_secs(10)),
        Limits::default(),
    )
    .await;
    let id = served.open_id().await;
    outage.take_down(Some(UnavailableKind::Unreachable));
    let back = {
        let outage: std::sync::Arc<LostReplies> = outage.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            outage.take_down(None);
        })
    };
    let reply = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    back.await.unwrap();
    let metrics = served.get("/metrics", &served.operator).await;
    let retries = metrics
        .text
        .lines()
        .find_map(|line| line.strip_prefix("lf_handoff_store_retries_total "))
        .unwrap();
    assert!(retries.parse::<u64>().unwrap() > 0, "{retries}");
    served.stop().await;
}

/// Everything logged by this test binary.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Self;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failure_reaches_clients_as_its_kind_and_an_id_and_the_log_has_the_details() {
    let captured = Captured::default();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "lf_handoff_server=debug",
        ))
        .with_writer(captured.clone())
        .with_ansi(false)
        .init();
    let (dir, store, outage) = store_losing_replies(&*sqlite().await.unwrap()).await;
    let store = store.with_retry_window(Duration::ZERO);
    let served = Served::serve(dir, store, Limits::default()).await;
    let id = served.open_id().await;
    outage.take_down(Some(UnavailableKind::Locked));
    // Without a token (`/readyz`), and with one.
    let without = served.send("GET", "/readyz", None, None, Vec::new()).await;
    let with = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await;
    for reply in [without, with] {
        assert_eq!(reply.error(503, "unavailable"), "locked");
        let error = &reply.json()["error"];
        let message = error["message"].as_str().unwrap();
        // The store's own words ("the store is down (locked, injected)")
        // are withheld; its kind is said plainly.
        assert!(!message.contains("injected"), "{message}");
        assert!(
            !message.contains(served.dir.path().to_str().unwrap()),
            "{message}"
        );
        assert!(message.contains("busy"), "{message}");
        let error_id = error["id"].as_str().unwrap().to_string();
        assert!(message.contains(&error_id), "{message}");
        let log = String::from_utf8_lossy(
            &captured
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into_owned();
        let line = log
            .lines()
            .find(|line| line.contains(&error_id))
            .unwrap_or_else(|| panic!("no log line names {error_id}: {log}"));
        assert!(line.contains("injected"), "{line}");
    }
    served.stop().await;
}
