//! Several servers on one PostgreSQL store are one service (C19): a watch
//! on one sees a finish made through the other, and a long poll on one
//! ends when the other finishes the handoff. Skipped, saying why, without
//! `LF_HANDOFF_TEST_POSTGRES_URL`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use lf_handoff_adapters::open_store;
use lf_handoff_conformance::backends::postgres::PostgresBackend;
use lf_handoff_conformance::Backend as _;
use lf_handoff_server::Limits;
use serde_json::{json, Value};
use support::Served;

/// Two servers over one PostgreSQL store (a schema of its own), sharing
/// their tokens and link secret; `None`, saying why, without a server.
async fn two_servers() -> Option<(Box<PostgresBackend>, Served, Served)> {
    let backend = match PostgresBackend::connect().await {
        Ok(backend) => backend,
        Err(why) => {
            eprintln!("skipped: {why}");
            return None;
        }
    };
    let config = backend.config(std::path::PathBuf::new());
    let first = Served::serve(
        tempfile::tempdir().unwrap(),
        open_store(&config).await.unwrap(),
        Limits::default(),
    )
    .await;
    let second = first.beside(open_store(&config).await.unwrap()).await;
    Some((backend, first, second))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_store_are_one_service() {
    let Some((backend, first, second)) = two_servers().await else {
        return;
    };
    let id = first.open_id().await;

    // A watch on the first, from now, and a long poll on the first.
    let response = first
        .client
        .get(format!("{}/v1/events", first.url))
        .bearer_auth(&first.person)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut events = response.bytes_stream();
    let polling = {
        let client = first.client.clone();
        let url = format!("{}/v1/handoffs/{id}/wait?timeout=60s", first.url);
        let token = first.agent.clone();
        tokio::spawn(async move {
            client
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;

    // The finish goes through the second.
    let finished_at = Instant::now();
    let reply = second
        .post(
            &format!("/v1/handoffs/{id}/complete"),
            &second.person,
            &json!({"summary": "done"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);

    let mut text = String::new();
    let seen = loop {
        let chunk = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("the first server's stream sees the finish within 10 s")
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        if let Some(line) = text
            .lines()
            .find(|line| line.starts_with("data:") && line.contains("\"finished\""))
        {
            break line.to_string();
        }
    };
    let event: Value = serde_json::from_str(seen.trim_start_matches("data:").trim()).unwrap();
    assert_eq!(event["handoff_id"], id.as_str());
    assert_eq!(event["actor"], "alice");
    eprintln!(
        "finish through one server seen by the other's stream after {:?}",
        finished_at.elapsed()
    );
    let waited = tokio::time::timeout(Duration::from_secs(10), polling)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(waited["ended"], true);
    assert_eq!(waited["handoff"]["status"], "completed");

    drop(events);
    first.stop().await;
    second.stop().await;
    backend.cleanup().await;
}

/// A sign-out through one server ends the sign-in on every server of the
/// store (C29): the sign-out is in the store, not only in the browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_through_one_server_ends_the_sign_in_on_another() {
    let Some((backend, first, second)) = two_servers().await else {
        return;
    };
    let cookie = support::sign_in_cookie(&first).await;
    for served in [&first, &second] {
        let inbox = support::browse(served, "GET", "/", Some(&cookie), None).await;
        assert_eq!(inbox.status, 200, "signed in on both: {}", inbox.text);
    }
    support::sign_out(&first, &cookie).await;
    for served in [&first, &second] {
        let inbox = support::browse(served, "GET", "/", Some(&cookie), None).await;
        assert_eq!(
            inbox.status, 401,
            "the old cookie still works: {}",
            inbox.text
        );
        assert!(inbox.text.contains("Sign in"), "{}", inbox.text);
        // Nor does it read through the API.
        let records =
            support::browse(served, "GET", "/v1/handoff-records", Some(&cookie), None).await;
        assert_eq!(records.status, 401, "{}", records.text);
    }
    // A new sign-in works.
    let again = support::sign_in_cookie(&second).await;
    let inbox = support::browse(&first, "GET", "/", Some(&again), None).await;
    assert_eq!(inbox.status, 200, "{}", inbox.text);
    first.stop().await;
    second.stop().await;
    backend.cleanup().await;
}
