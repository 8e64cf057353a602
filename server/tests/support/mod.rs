//! What the service's tests share: a real server on `127.0.0.1:0` over a
//! real store (SQLite in a temporary directory unless a test gives
//! another), a tokens file with one token of each scope, and a small HTTP
//! client (reqwest) that returns status, headers and body as they came.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use lf_handoff_adapters::{open_store, GenerateId as _, StorageConfig, Store, StoreResult};
use lf_handoff_api::Scope;
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::interactive_handoff::OpenInteractiveHandoff;
use lf_handoff_domain::wave::Wave;
use lf_handoff_server::{bind, tokens, AppState, Limits, ServeConfig};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub mod schema;

/// A served store and the tokens to call it with.
#[derive(Debug)]
pub struct Served {
    pub url: String,
    pub dir: TempDir,
    /// A handle on the same store, for checks behind the service's back.
    pub store: Store,
    pub state: AppState,
    pub agent: String,
    pub person: String,
    pub operator: String,
    /// A token of the right form that the tokens file does not hold.
    pub wrong: String,
    pub client: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    pub task: Option<JoinHandle<StoreResult<()>>>,
}

/// One answer, as it came.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text))
    }

    /// Asserts the answer is the error object of `status` and `category`
    /// (with the exit code of the category) and returns its kind.
    pub fn error(&self, status: u16, category: &str) -> String {
        assert_eq!(self.status, status, "{}", self.text);
        let value = self.json();
        let error = &value["error"];
        assert_eq!(error["category"], category, "{}", self.text);
        assert!(error["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty() && !m.contains('\n')));
        assert!(error["code"].as_u64().is_some(), "{}", self.text);
        assert_eq!(value.as_object().unwrap().len(), 1, "{}", self.text);
        let content_type = self.headers.get("content-type").unwrap().to_str().unwrap();
        assert_eq!(content_type, "application/json");
        error["kind"].as_str().unwrap().to_string()
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    }

    /// The first form's anti-forgery token.
    pub fn csrf(&self) -> String {
        let marker = "name=\"csrf\" value=\"";
        let start = self
            .text
            .find(marker)
            .unwrap_or_else(|| panic!("no form on {}", self.text))
            + marker.len();
        let end = self.text[start..].find('"').unwrap();
        self.text[start..start + end].to_string()
    }
}

/// A SQLite store in `dir`.
pub async fn sqlite_store(dir: &Path) -> Store {
    open_store(&StorageConfig::sqlite(dir.join("registry.db")))
        .await
        .unwrap()
}

impl Served {
    /// A server over a new SQLite store, with the default limits.
    pub async fn start() -> Self {
        Self::start_with(Limits::default()).await
    }

    /// A server over a new SQLite store, within `limits`.
    pub async fn start_with(limits: Limits) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = sqlite_store(dir.path()).await;
        Self::serve(dir, store, limits).await
    }

    /// A server over `store`, its tokens file in `dir`.
    pub async fn serve(dir: TempDir, store: Store, limits: Limits) -> Self {
        Self::serve_configured(dir, store, |config| config.limits = limits).await
    }

    /// A server over a new SQLite store, configured by `configure` after
    /// the defaults (listening on `127.0.0.1:0`, the tokens file) are set.
    pub async fn start_configured(configure: impl FnOnce(&mut ServeConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = sqlite_store(dir.path()).await;
        Self::serve_configured(dir, store, configure).await
    }

    /// A server over `store`, its tokens file in `dir`, configured by
    /// `configure`.
    pub async fn serve_configured(
        dir: TempDir,
        store: Store,
        configure: impl FnOnce(&mut ServeConfig),
    ) -> Self {
        let path = dir.path().join("tokens");
        let now = store.now();
        let agent = tokens::create(&path, "bot@ci", &[Scope::Agent], now)
            .unwrap()
            .token;
        let person = tokens::create(&path, "alice", &[Scope::Person], now)
            .unwrap()
            .token;
        let operator = tokens::create(&path, "ops", &[Scope::Operator], now)
            .unwrap()
            .token;
        let wrong = tokens::make_token("nobody", &[Scope::Operator], now)
            .unwrap()
            .token;
        Self::serve_with_tokens(dir, store, configure, agent, person, operator, wrong).await
    }

    async fn serve_with_tokens(
        dir: TempDir,
        store: Store,
        configure: impl FnOnce(&mut ServeConfig),
        agent: String,
        person: String,
        operator: String,
        wrong: String,
    ) -> Self {
        let mut config = ServeConfig::new("127.0.0.1:0".parse().unwrap());
        config.tokens = Some(dir.path().join("tokens"));
        configure(&mut config);
        let server = bind(config, store.clone()).await.unwrap();
        let url = server.url();
        let state = server.state().clone();
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Self {
            url,
            dir,
            store,
            state,
            agent,
            person,
            operator,
            wrong,
            client: client(),
            shutdown: Some(shutdown),
            task: Some(task),
        }
    }

    /// A second server over another handle on a store, with the same
    /// tokens file and link secret, as the servers of one service share.
    pub async fn beside(&self, store: Store) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for file in ["tokens", "link-secret"] {
            std::fs::copy(self.dir.path().join(file), dir.path().join(file)).unwrap();
        }
        Self::serve_with_tokens(
            dir,
            store,
            |_| {},
            self.agent.clone(),
            self.person.clone(),
            self.operator.clone(),
            self.wrong.clone(),
        )
        .await
    }

    /// Starts the drain, as SIGTERM does, and waits for the loop to end.
    pub async fn stop(mut self) {
        self.stop_in_place().await;
    }

    pub async fn stop_in_place(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), task)
                .await
                .expect("the server drains within 30 s")
                .unwrap()
                .unwrap();
        }
    }

    /// The token of `scope`.
    pub fn token(&self, scope: Scope) -> &str {
        match scope {
            Scope::Agent => &self.agent,
            Scope::Person => &self.person,
            Scope::Operator => &self.operator,
        }
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Reply {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.client.request(method, format!("{}{path}", self.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        if !body.is_empty() {
            request = request.body(body);
        }
        let response = request.send().await.unwrap();
        Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            text: response.text().await.unwrap(),
        }
    }

    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.send("GET", path, Some(token), None, Vec::new()).await
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> Reply {
        self.send(
            "POST",
            path,
            Some(token),
            Some("application/json"),
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    /// Creates a wave through the service and returns it.
    pub async fn wave(&self) -> Wave {
        let wave = Wave::new(WaveId::new(), "wave".into(), "/repo".into());
        let reply = self
            .post(
                "/v1/waves",
                &self.agent,
                &serde_json::to_value(&wave).unwrap(),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        wave
    }

    /// Opens a handoff on a new wave through the service; returns the
    /// `open` answer.
    pub async fn open(&self, extra: Value) -> Value {
        let wave = self.wave().await;
        let reply = self
            .post(
                "/v1/handoffs",
                &self.agent,
                &open_body(&wave, self.dir.path(), extra),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.json()
    }

    /// Opens a handoff on a new wave with the fields of `extra` and the
    /// form written as `form` (JSON text: its properties keep their order,
    /// which a `serde_json::Value` would sort); returns its id.
    pub async fn open_form(&self, form: &str, extra: Value) -> String {
        let body = open_body(&self.wave().await, self.dir.path(), extra);
        let mut text = body.to_string();
        text.pop();
        let text = format!("{text},\"form\":{form}}}");
        let reply = self
            .send(
                "POST",
                "/v1/handoffs",
                Some(&self.agent),
                Some("application/json"),
                text.into_bytes(),
            )
            .await;
        assert_eq!(reply.status, 201, "{}", reply.text);
        reply.json()["handoff"]["id"].as_str().unwrap().to_string()
    }

    /// Opens a handoff and returns its id.
    pub async fn open_id(&self) -> String {
        self.open(json!({})).await["handoff"]["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The whole store as an export, to compare before and after.
    pub async fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.store.export(&mut out, None).await.unwrap();
        // The header names the time of the export; the records follow.
        let text = String::from_utf8(out).unwrap();
        text.lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n")
            .into_bytes()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// The request to open a handoff on `wave`, with `extra` fields merged
/// in (step, expires_in, ...).
pub fn open_request(wave: &Wave, dir: &Path) -> OpenInteractiveHandoff {
    lf_handoff_conformance::fixtures::wave_request(wave, dir)
}

pub fn open_body(wave: &Wave, dir: &Path, extra: Value) -> Value {
    let mut body = serde_json::to_value(open_request(wave, dir)).unwrap();
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    body
}

/// What a browser does with the sign-in pages, from this origin: no
/// redirects followed, the sign-in cookie sent when given.
pub async fn browse(
    served: &Served,
    method: &str,
    path: &str,
    cookie: Option<&str>,
    form: Option<&[(&str, &str)]>,
) -> Reply {
    let origin = [("origin", served.url.as_str())];
    browse_with(served, method, path, cookie, form, &origin).await
}

/// A browser-like request: no redirects followed, the sign-in cookie sent
/// when given, a form as its body, and the `extra` headers (an `Origin`
/// only when given there).
pub async fn browse_with(
    served: &Served,
    method: &str,
    path: &str,
    cookie: Option<&str>,
    form: Option<&[(&str, &str)]>,
    extra: &[(&str, &str)],
) -> Reply {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = client.request(method, format!("{}{path}", served.url));
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("lfh_session={cookie}"));
    }
    if let Some(form) = form {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        request = request
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
    }
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    Reply {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        text: response.text().await.unwrap(),
    }
}

/// Signs the person in with the sign-in form and returns the cookie's
/// value.
pub async fn sign_in_cookie(served: &Served) -> String {
    let reply = browse(
        served,
        "POST",
        "/sign-in",
        None,
        Some(&[("token", served.person.as_str())]),
    )
    .await;
    assert_eq!(reply.status, 303, "{}", reply.text);
    let set = reply.header("set-cookie").unwrap_or_default();
    set.strip_prefix("lfh_session=")
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no sign-in cookie in {set:?}"))
        .to_string()
}

/// Signs out the sign-in `cookie` through `served`'s sign-out form (the
/// inbox's anti-forgery token with it).
pub async fn sign_out(served: &Served, cookie: &str) {
    let inbox = browse(served, "GET", "/", Some(cookie), None).await;
    assert_eq!(inbox.status, 200, "{}", inbox.text);
    let csrf = inbox.csrf();
    let out = browse(
        served,
        "POST",
        "/sign-out",
        Some(cookie),
        Some(&[("csrf", csrf.as_str())]),
    )
    .await;
    assert_eq!(out.status, 303, "{}", out.text);
}

/// What a webhook receiver was posted: the path and the JSON body of each
/// message.
pub type Received = std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>;

/// A webhook receiver on `127.0.0.1:0` that takes every post; its base
/// URL and what it received.
pub async fn receiver() -> (String, Received) {
    let received = Received::default();
    let kept = received.clone();
    let app = axum::Router::new().fallback(move |uri: axum::http::Uri, body: String| {
        let kept = kept.clone();
        async move {
            let value: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            kept.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((uri.path().to_string(), value));
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, received)
}

/// The `opened` message each endpoint was posted about one handoff.
#[derive(Debug)]
pub struct Told {
    /// The handoff.
    pub id: String,
    /// Each endpoint's path and its message.
    pub messages: std::collections::BTreeMap<String, Value>,
}

impl std::ops::Index<&str> for Told {
    type Output = Value;

    fn index(&self, path: &str) -> &Value {
        &self.messages[path]
    }
}

/// Opens handoffs (with the fields of `extra`) until every endpoint of
/// `paths` was posted the `opened` message of one of them: a new endpoint
/// starts from the log's end once its delivery started, so the first
/// handoffs may come before it.
pub async fn told(served: &Served, received: &Received, paths: &[&str], extra: Value) -> Told {
    for _ in 0..40 {
        let id = served.open(extra.clone()).await["handoff"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        tokio::time::sleep(Duration::from_millis(250)).await;
        let posted = received
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let messages: std::collections::BTreeMap<String, Value> = posted
            .into_iter()
            .filter(|(path, body)| {
                paths.contains(&path.as_str())
                    && body["kind"] == "opened"
                    && body["handoff"]["id"] == id.as_str()
            })
            .collect();
        if messages.len() == paths.len() {
            return Told { id, messages };
        }
    }
    panic!("the endpoints {paths:?} were told of no handoff");
}

/// Posts `body` to `path` as `token` with the extra header lines `headers`
/// (each ending in `\r\n`), sending only its first 10 bytes, and returns
/// what the server answers within 5 s: a body that stalls.
pub async fn stalled_post(
    served: &Served,
    path: &str,
    token: &str,
    headers: &str,
    body: &[u8],
) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let address = served.url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..10]).await.unwrap();
    let mut buffer = vec![0_u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer))
        .await
        .expect("answered within 5 s")
        .unwrap();
    String::from_utf8_lossy(&buffer[..n]).into_owned()
}
