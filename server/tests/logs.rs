//! Tokens never reach the log (C20): one INFO line per request names the
//! method, the route template, the status and the duration, never a path
//! value, a query or a header. The log of a run that used tokens in the
//! Authorization header, in a sign-in link's query and in a path holds no
//! token text. Making a link is logged with its maker, handoff and
//! expiry, never its signature.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use support::Served;
use tracing_subscriber::fmt::MakeWriter;

/// Collects everything logged.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Self;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// What this test binary logs, from one subscriber its tests share.
fn captured() -> Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new("trace"))
                .with_writer(captured.clone())
                .with_ansi(false)
                .init();
            captured
        })
        .clone()
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn making_a_link_is_logged_with_its_maker_handoff_and_expiry_never_its_signature() {
    let captured = captured();
    let served = Served::start().await;
    let id = served.open_id().await;
    let made = served
        .post(
            &format!("/v1/handoffs/{id}/link"),
            &served.person,
            &serde_json::json!({"valid_for": "2h"}),
        )
        .await
        .json();
    let link = made["link"].as_str().unwrap();
    let signature = link.rsplit_once("sig=").unwrap().1;
    let expires = made["expires"].as_str().unwrap();
    let given = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await
        .json();
    let given = given["link"].as_str().unwrap();
    let given_signature = given.rsplit_once("sig=").unwrap().1;
    let log = captured.text();
    assert!(
        log.lines().any(|line| line.contains("link made")
            && line.contains("maker=\"alice\"")
            && line.contains(&format!("handoff={id}"))
            && line.contains(&format!("expires={expires}"))
            && line.contains("via=\"route\"")),
        "no line for the link the route made:\n{log}"
    );
    assert!(
        log.lines().any(|line| line.contains("link made")
            && line.contains("maker=\"alice\"")
            && line.contains("via=\"answer\"")),
        "no line for the link the answer carried:\n{log}"
    );
    for secret in [signature, given_signature, &served.person[4..]] {
        assert!(
            !log.contains(secret),
            "a link's signature is in the log:\n{log}"
        );
    }
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_has_one_line_per_request_and_no_token() {
    let captured = captured();
    let served = Served::start().await;
    let id = served.open_id().await;
    let person = served.person.clone();
    served.get(&format!("/v1/handoffs/{id}"), &person).await;
    served.get(&format!("/?token={person}"), &person).await;
    served.get(&format!("/nope?token={person}"), &person).await;
    served.get(&format!("/v1/handoffs/{person}"), &person).await;
    served
        .get(&format!("/v1/handoffs?after={person}"), &person)
        .await;
    served.get("/v1/handoffs", &served.wrong).await;
    served
        .send(
            "GET",
            "/v1/handoffs",
            Some(&format!("{person}x")),
            None,
            Vec::new(),
        )
        .await;
    let log = captured.text();
    for token in [
        &served.agent,
        &served.person,
        &served.operator,
        &served.wrong,
    ] {
        let secret = &token[4..];
        assert!(!log.contains(secret), "a token is in the log:\n{log}");
    }
    let requests: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("lf_handoff_server::layers") && line.contains("request"))
        .collect();
    for expected in [
        "route=/v1/waves status=201",
        "route=/v1/handoffs status=201",
        "route=/v1/handoffs/{id} status=200",
        "route=unmatched status=404",
        "route=/ status=303",
        "route=/v1/handoffs/{id} status=400",
        "route=/v1/handoffs status=400",
        "route=/v1/handoffs status=401",
    ] {
        assert!(
            requests
                .iter()
                .any(|line| line.contains(expected) && line.contains(" INFO ")),
            "no INFO line with {expected}:\n{}",
            requests.join("\n")
        );
    }
    served.stop().await;
}
