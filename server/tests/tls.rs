//! TLS with rustls (C20): a service given a certificate and key answers
//! over HTTPS only, and certificate files that cannot be used are refused
//! before anything listens. Under TLS every answer carries
//! `Strict-Transport-Security` (C29).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use lf_handoff_adapters::{open_store, StorageConfig};
use lf_handoff_server::{bind, Limits, ServeConfig, TlsFiles, HSTS};

/// A service with a new self-signed certificate for `localhost`, running
/// within `limits` until `stop` is sent.
struct Tls {
    _dir: tempfile::TempDir,
    port: u16,
    /// The run's token of scope `person`.
    person: String,
    /// The certificate, PEM, for a client to trust.
    cert: String,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<lf_handoff_adapters::StoreResult<()>>,
}

impl Tls {
    async fn start(limits: Limits) -> Self {
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
        config.limits = limits;
        let server = bind(config, store).await.unwrap();
        assert!(server.url().starts_with("https://"));
        let port = server.local_addr().port();
        let person = server.run_tokens()[1].token.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Self {
            _dir: dir,
            port,
            person,
            cert: certified.cert.pem(),
            stop,
            task,
        }
    }

    /// A client that trusts the certificate and follows no redirect.
    fn client(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(self.cert.as_bytes()).unwrap())
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap()
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_with_a_certificate_answers_over_https_only() {
    let served = Tls::start(Limits::default()).await;
    let (port, person, client) = (served.port, served.person.clone(), served.client());
    let reply = client
        .get(format!("https://localhost:{port}/v1/handoffs"))
        .bearer_auth(&person)
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    assert_eq!(reply.text().await.unwrap(), "[]");
    // Under TLS the person's sign-in cookie is Secure too.
    let signed = client
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
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_under_tls_carries_hsts() {
    let served = Tls::start(Limits::default()).await;
    let (port, person, client) = (served.port, served.person.clone(), served.client());
    let base = format!("https://localhost:{port}");
    for (method, path, token, status) in [
        ("GET", "/v1/handoffs", Some(person.as_str()), 200),
        ("GET", "/healthz", None, 200),
        ("GET", "/v1/handoffs", None, 401),
        ("GET", "/nowhere", Some(person.as_str()), 404),
        ("DELETE", "/v1/handoffs", Some(person.as_str()), 405),
        ("GET", "/", None, 200),
        ("GET", &format!("/?token={person}"), None, 303),
        ("GET", "/static/inbox.css", None, 200),
        (
            "GET",
            "/h/ih_00000000-0000-4000-8000-000000000000",
            None,
            400,
        ),
    ] {
        let mut request = client.request(method.parse().unwrap(), format!("{base}{path}"));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let reply = request.send().await.unwrap();
        assert_eq!(reply.status().as_u16(), status, "{method} {path}");
        assert_eq!(
            reply.headers()["strict-transport-security"],
            HSTS,
            "{method} {path}"
        );
    }
    served.stop().await;
    // The refusal of a connection over the limit carries it too: one
    // connection that sends nothing holds the only place.
    let served = Tls::start(Limits {
        max_connections: 1,
        ..Limits::default()
    })
    .await;
    let held = tokio::net::TcpStream::connect(("127.0.0.1", served.port))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = served
        .client()
        .get(format!("https://localhost:{}/healthz", served.port))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 503);
    assert_eq!(refused.headers()["strict-transport-security"], HSTS);
    drop(held);
    served.stop().await;
}

/// An `https://` store whose service has a certificate of a private
/// authority: without `ca=` the call is refused at once (not retried as a
/// lost connection) naming the option that sets the authority; with it,
/// the call goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_names_the_option_that_sets_the_authority() {
    use lf_handoff_adapters::{HttpConfig, Token, UnavailableKind};
    let served = Tls::start(Limits::default()).await;
    let url = format!("https://localhost:{}", served.port);
    let unknown = "ih_01a23770-d145-7233-b23a-4c031002983d".parse().unwrap();
    let store = |config: HttpConfig| async {
        open_store(&StorageConfig::Http(
            config.with_token(Token::new(&served.person).unwrap()),
        ))
        .await
        .unwrap()
    };
    let untrusting = store(HttpConfig::new(&url).unwrap()).await;
    let started = std::time::Instant::now();
    let error = untrusting
        .get_interactive_handoff(&unknown)
        .await
        .unwrap_err();
    assert_eq!(
        error.unavailable_kind(),
        Some(UnavailableKind::Refused),
        "{error}"
    );
    assert!(error.to_string().contains("?ca=/abs/path"), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "not retried: {:?}",
        started.elapsed()
    );
    let authority = served._dir.path().join("authority.pem");
    std::fs::write(&authority, &served.cert).unwrap();
    let trusting =
        store(HttpConfig::new(&format!("{url}?ca={}", authority.display())).unwrap()).await;
    assert!(trusting
        .get_interactive_handoff(&unknown)
        .await
        .unwrap()
        .is_none());
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_without_tls_sends_no_hsts() {
    let served = support::Served::start().await;
    let reply = served.get("/healthz", &served.person).await;
    assert_eq!(reply.status, 200);
    assert!(reply.header("strict-transport-security").is_none());
    served.stop().await;
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
