//! What holds a token or a secret prints it redacted in `Debug` (C29): a
//! debug line or a panic message never carries a credential. One test per
//! type, each with the secret it must not show.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_adapters::http::{HttpConfig, Token};
use lf_handoff_adapters::{open_store, StorageConfig};
use lf_handoff_api::{HandoffJson, LinkJson, Scope};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_server::links::{LinkSecret, SessionValue};
use lf_handoff_server::notify::{Endpoint, NotifyConfig};
use lf_handoff_server::{bind, tokens, ServeConfig};
use serde_json::json;
use support::Served;
use time::OffsetDateTime;

/// Asserts `shown` holds none of `secrets` and says it hid something.
fn redacted(shown: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!shown.contains(secret), "{secret:?} shows in {shown}");
    }
    assert!(
        shown.contains("<redacted>") || shown.contains("***") || shown.contains("<set>"),
        "{shown}"
    );
}

/// The hex of the SHA-256 of `token`: what the tokens file keeps.
fn hash_hex(token: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_new_tokens_debug_hides_the_token_and_its_hash() {
    let made = tokens::make_token("alice", &[Scope::Person], OffsetDateTime::UNIX_EPOCH).unwrap();
    let hash = hash_hex(&made.token);
    redacted(&format!("{made:?}"), &[&made.token[4..], &hash[..16]]);
    redacted(&format!("{:?}", made.entry), &[&hash[..16]]);
    assert!(format!("{:?}", made.entry).contains("alice"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_tokens_debug_hides_the_token() {
    let dir = tempfile::tempdir().unwrap();
    let store = support::sqlite_store(dir.path()).await;
    let server = bind(ServeConfig::new("127.0.0.1:0".parse().unwrap()), store)
        .await
        .unwrap();
    let shown = format!("{:?}", server.run_tokens());
    let secrets: Vec<&str> = server
        .run_tokens()
        .iter()
        .map(|run| &run.token[4..])
        .collect();
    redacted(&shown, &secrets);
    assert!(shown.contains("serve-person"), "{shown}");
}

#[test]
fn a_sign_ins_debug_hides_its_tag() {
    let secret = LinkSecret::random().unwrap();
    let now = OffsetDateTime::now_utc();
    let value = secret.session_value(&[7; 32], now.unix_timestamp() + 60, b"a-sign-in-nonce");
    let (rest, tag) = value.rsplit_once('.').unwrap();
    let nonce = rest.rsplit_once('.').unwrap().1;
    let session = SessionValue::parse(&value, now).unwrap();
    redacted(&format!("{session:?}"), &[tag, nonce]);
}

#[test]
fn a_signed_links_debug_hides_its_signature() {
    let secret = LinkSecret::random().unwrap();
    let id = InteractiveHandoffId::parse("ih_0b4f3c2a-6e1d-4c3b-9a8f-2d1e0c9b8a7f").unwrap();
    let link = secret
        .sign(
            &id,
            "alice",
            OffsetDateTime::now_utc() + time::Duration::hours(1),
        )
        .unwrap();
    let path = link.path();
    let signature = path.rsplit_once("sig=").unwrap().1;
    redacted(&format!("{link:?} {secret:?}"), &[signature]);
}

#[test]
fn a_notification_configs_debug_hides_its_secret_and_paths() {
    let mut config = NotifyConfig::new(vec![
        "https://hooks.slack.com/services/T0/B0/HOOKSECRET#for=oncall".into(),
    ]);
    config.secret = Some(b"a shared secret of some length".to_vec());
    redacted(&format!("{config:?}"), &["HOOKSECRET", "shared secret"]);
    let endpoint = Endpoint::parse(&config.endpoints[0]).unwrap();
    let shown = format!("{endpoint:?}");
    assert!(!shown.contains("HOOKSECRET"), "{shown}");
    assert!(
        shown.contains("oncall") && shown.contains("hooks.slack.com"),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_state_and_answers_hide_tokens_and_links() {
    let served = Served::start().await;
    let hash = hash_hex(&served.person);
    let shown = format!("{:?}", served.state);
    for secret in [&served.person[4..], &hash[..16]] {
        assert!(!shown.contains(secret), "{secret:?} shows in {shown}");
    }
    let id = served.open_id().await;
    let answer = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await;
    let handoff: HandoffJson = serde_json::from_str(&answer.text).unwrap();
    let signature = handoff
        .link
        .as_deref()
        .unwrap()
        .rsplit_once("sig=")
        .unwrap()
        .1;
    redacted(&format!("{handoff:?}"), &[signature]);
    let made = served
        .post(
            &format!("/v1/handoffs/{id}/link"),
            &served.person,
            &json!({}),
        )
        .await;
    let made: LinkJson = serde_json::from_str(&made.text).unwrap();
    let signature = made.link.rsplit_once("sig=").unwrap().1;
    redacted(&format!("{made:?}"), &[signature]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_over_the_service_hides_its_token() {
    let config = HttpConfig::new("http://127.0.0.1:1")
        .unwrap()
        .with_token(Token::new("lfh_BEARERSECRET").unwrap());
    redacted(&format!("{config:?}"), &["BEARERSECRET"]);
    let store = open_store(&StorageConfig::Http(config)).await.unwrap();
    let shown = format!("{store:?}");
    assert!(!shown.contains("BEARERSECRET"), "{shown}");
}
