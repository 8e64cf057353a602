//! A store that becomes unavailable: 503 with the error object (and
//! `Retry-After` when the cause is transient), `/readyz` says so,
//! `/healthz` still answers, nothing is changed, and the service serves
//! again when the store is back, without a restart.
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
