//! TLS with rustls (C20): a service given a certificate and key answers
//! over HTTPS only, and certificate files that cannot be used are refused
//! before anything listens.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use lf_handoff_adapters::{open_store, StorageConfig};
use lf_handoff_server::{bind, ServeConfig, TlsFiles};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_with_a_certificate_answers_over_https_only() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.key_pair.serialize_pem()).unwrap();
    let store = open_store(&StorageConfig::sqlite(dir.path().join("r.db")))
        .await
        .unwrap();
    let mut config = ServeConfig::new("127.0.0.1:0".parse().unwrap());
    config.tls = Some(TlsFiles { cert, key });
    let server = bind(config, store).await.unwrap();
    let port = server.local_addr().port();
    assert!(server.url().starts_with("https://"));
    let person = server.run_tokens()[1].token.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    let client = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).unwrap(),
        )
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let reply = client
        .get(format!("https://localhost:{port}/v1/handoffs"))
        .bearer_auth(&person)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    assert_eq!(reply.text().await.unwrap(), "[]");
    // Under TLS the person's sign-in cookie is Secure too.
    let no_redirects = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).unwrap(),
        )
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let signed = no_redirects
        .get(format!("https://localhost:{port}/?token={person}"))
        .send()
        .await
        .unwrap();
    assert_eq!(signed.status().as_u16(), 303);
    let cookie = signed.headers()["set-cookie"].to_str().unwrap();
    assert!(
        cookie.contains("; Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    // Plain HTTP to the TLS port gets no answer.
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    assert!(plain
        .get(format!("http://localhost:{port}/healthz"))
        .send()
        .await
        .is_err());
    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_files_that_cannot_be_used_are_refused_before_listening() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let cert = write("cert.pem", certified.cert.pem());
    let key = write("key.pem", certified.key_pair.serialize_pem());
    let other_key = write("other.pem", other.key_pair.serialize_pem());
    let empty = write("empty.pem", String::new());
    let store = open_store(&StorageConfig::sqlite(dir.path().join("r.db")))
        .await
        .unwrap();
    for (cert, key, names) in [
        (dir.path().join("missing.pem"), key.clone(), "missing.pem"),
        (empty.clone(), key.clone(), "no certificate"),
        (cert.clone(), empty, "empty.pem"),
        (cert, other_key, "do not fit"),
    ] {
        let mut config = ServeConfig::new("127.0.0.1:0".parse().unwrap());
        config.tls = Some(TlsFiles { cert, key });
        let error = bind(config, store.clone()).await.unwrap_err();
        assert!(error.is_invalid_input(), "{error}");
        assert!(error.message().contains(names), "{error}");
    }
}
