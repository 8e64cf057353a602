//! The legitimate client of the soak: agents and a person using the
//! service as they should, from `127.0.0.1`, every answer checked.
//!
//! Lanes run at once until the deadline, each one request after another:
//!
//! - **openers** create a wave and open a handoff on it (201, created),
//!   and queue the handoff for a finisher (at most [`BACKLOG`] wait);
//! - **API finishers** read a queued handoff (200) and complete it, send
//!   it back or fail it (200), then claim its wake as the agent (200,
//!   claimed);
//! - **link finishers** make a link for it (200), read the link's page
//!   without a token (200), post its form as a browser does (303), then
//!   claim the wake;
//! - a **lister** lists the active handoffs and the newest, in turn;
//! - a **waiter** long-polls the newest handoff opened, up to 2 s;
//! - one **event stream** is read throughout; once the lanes stop it must
//!   have seen an event for every open, finish and claim acknowledged.
//!
//! Every request's time is recorded by its kind. A request that fails, or
//! an answer with another status or shape than the one expected, is an
//! error of the legitimate client; a soak passes only without any.
//!
//! reqwest keeps the lanes' connections alive between requests; it drops
//! one idle for 2 s, before the server's header timeout (5 s by default)
//! would close it, so no request is sent on a connection the server is
//! closing (a race of keep-alive itself, not of the service).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lf_handoff_adapters::GenerateId as _;
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::wave::Wave;
use serde_json::{json, Value};
use tokio::task::JoinSet;

use crate::problems::Problems;
use crate::rng::Rng;

use super::LEGIT_ADDR;

/// Handoffs opened and not yet taken by a finisher, at most.
pub const BACKLOG: usize = 64;

/// How long the event stream has, once the lanes stopped, to show the
/// events of the last changes.
const STREAM_PATIENCE: Duration = Duration::from_secs(15);

/// The service and the tokens the client uses.
#[derive(Debug)]
pub struct Access {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// A token of scope `agent`.
    pub agent: String,
    /// A token of scope `person`.
    pub person: String,
    /// The handoffs' working directory.
    pub work_dir: PathBuf,
}

/// What the client had acknowledged, for the store's check.
#[derive(Debug, Clone, Default)]
pub struct Acked {
    /// Handoffs whose open was answered 201.
    pub opened: BTreeSet<String>,
    /// Handoffs whose finish was answered, with the status it set.
    pub finished: BTreeMap<String, &'static str>,
    /// Handoffs whose wake the agent claimed (generation 1).
    pub claimed: BTreeSet<String>,
}

impl Acked {
    /// The changes acknowledged: each is one history event.
    pub fn changes(&self) -> u64 {
        (self.opened.len() + self.finished.len() + self.claimed.len()) as u64
    }
}

/// The legitimate client's figures.
#[derive(Debug, Default)]
pub struct LegitFigures {
    /// Requests answered as expected, by kind.
    pub served: BTreeMap<&'static str, u64>,
    /// Each request's time, by kind.
    pub times: BTreeMap<&'static str, Vec<Duration>>,
    /// Failed requests and unexpected answers.
    pub errors: u64,
    /// The first errors, described.
    pub problems: Problems,
    /// What the store must hold.
    pub acked: Acked,
    /// Long polls answered because the handoff ended.
    pub waits_ended: u64,
    /// Events the stream delivered.
    pub stream_events: u64,
}

impl LegitFigures {
    /// Every request's time but the long polls' (which last until their
    /// handoff ends or their timeout).
    pub fn times_without_waits(&self) -> Vec<Duration> {
        self.times
            .iter()
            .filter(|(kind, _)| **kind != "wait")
            .flat_map(|(_, times)| times.iter().copied())
            .collect()
    }

    /// Requests answered as expected, in all.
    pub fn total(&self) -> u64 {
        self.served.values().sum()
    }
}

/// The lanes' shared state.
#[derive(Debug)]
struct Shared {
    access: Arc<Access>,
    client: reqwest::Client,
    deadline: Instant,
    figures: Mutex<LegitFigures>,
    queue: Mutex<VecDeque<String>>,
    newest: Mutex<Option<String>>,
}

impl Shared {
    fn figures(&self) -> std::sync::MutexGuard<'_, LegitFigures> {
        self.figures.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn error(&self, message: String) {
        let mut figures = self.figures();
        let figures = &mut *figures;
        figures.problems.count(&mut figures.errors, message);
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.access.base)
    }

    /// Sends `request` (of `kind`), and returns its body when the answer
    /// has `status`; otherwise counts an error.
    async fn call(
        &self,
        kind: &'static str,
        request: reqwest::RequestBuilder,
        status: u16,
    ) -> Option<String> {
        let started = Instant::now();
        let answer = match request.send().await {
            Ok(response) => {
                let got = response.status().as_u16();
                response.text().await.map(|text| (got, text))
            }
            Err(e) => Err(e),
        };
        let took = started.elapsed();
        match answer {
            Ok((got, text)) if got == status => {
                let mut figures = self.figures();
                *figures.served.entry(kind).or_default() += 1;
                figures.times.entry(kind).or_default().push(took);
                Some(text)
            }
            Ok((got, text)) => {
                let text: String = text.chars().take(300).collect();
                self.error(format!("{kind}: answered {got}, not {status}: {text}"));
                None
            }
            Err(e) => {
                self.error(format!("{kind}: {e}"));
                None
            }
        }
    }

    /// [`call`](Self::call), its body as JSON.
    async fn call_json(
        &self,
        kind: &'static str,
        request: reqwest::RequestBuilder,
        status: u16,
    ) -> Option<Value> {
        let text = self.call(kind, request, status).await?;
        match serde_json::from_str(&text) {
            Ok(value) => Some(value),
            Err(e) => {
                self.error(format!("{kind}: the answer is not JSON ({e})"));
                None
            }
        }
    }

    fn running(&self) -> bool {
        Instant::now() < self.deadline
    }

    fn take(&self) -> Option<String> {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }

    fn queued(&self) -> usize {
        self.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// The client's lanes, running.
#[derive(Debug)]
pub struct Load {
    shared: Arc<Shared>,
    lanes: JoinSet<()>,
    stream: tokio::task::JoinHandle<()>,
    stream_events: Arc<AtomicU64>,
    stream_stop: Arc<AtomicBool>,
}

impl Load {
    /// Connects the event stream, then starts `lanes` openers, API
    /// finishers and link finishers, a lister and a waiter, all running
    /// until `deadline`.
    ///
    /// # Errors
    /// When the client cannot be built or the event stream not opened.
    pub async fn start(
        access: Arc<Access>,
        lanes: usize,
        mut rng: Rng,
        deadline: Instant,
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .local_address(std::net::IpAddr::V4(LEGIT_ADDR))
            .pool_idle_timeout(Duration::from_secs(2))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(60))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let shared = Arc::new(Shared {
            access,
            client,
            deadline,
            figures: Mutex::new(LegitFigures::default()),
            queue: Mutex::new(VecDeque::new()),
            newest: Mutex::new(None),
        });
        let stream_events = Arc::new(AtomicU64::new(0));
        let stream_stop = Arc::new(AtomicBool::new(false));
        let stream = open_stream(&shared, stream_events.clone(), stream_stop.clone()).await?;
        let mut set = JoinSet::new();
        for _ in 0..lanes.max(1) {
            set.spawn(opener(shared.clone()));
            set.spawn(api_finisher(shared.clone(), rng.fork()));
            set.spawn(link_finisher(shared.clone()));
        }
        set.spawn(lister(shared.clone()));
        set.spawn(waiter(shared.clone()));
        Ok(Self {
            shared,
            lanes: set,
            stream,
            stream_events,
            stream_stop,
        })
    }

    /// Waits for the lanes to stop at the deadline, then for the event
    /// stream to show every change acknowledged; returns the figures.
    pub async fn finish(mut self) -> LegitFigures {
        while let Some(done) = self.lanes.join_next().await {
            if let Err(e) = done {
                self.shared.error(format!("a lane stopped: {e}"));
            }
        }
        let changes = self.shared.figures().acked.changes();
        let waited = Instant::now();
        while self.stream_events.load(Ordering::SeqCst) < changes
            && waited.elapsed() < STREAM_PATIENCE
            && !self.stream.is_finished()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.stream_stop.store(true, Ordering::SeqCst);
        let seen = self.stream_events.load(Ordering::SeqCst);
        if seen < changes {
            self.shared.error(format!(
                "the event stream showed {seen} events for {changes} acknowledged changes"
            ));
        }
        self.stream.abort();
        let _ = (&mut self.stream).await;
        let mut figures = std::mem::take(&mut *self.shared.figures());
        figures.stream_events = seen;
        figures
    }
}

/// Opens `GET /v1/events` as the person and reads it in a task until
/// `stop`, counting its events; its ending before that is an error.
async fn open_stream(
    shared: &Arc<Shared>,
    events: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let response = shared
        .client
        .get(shared.url("/v1/events"))
        .bearer_auth(&shared.access.person)
        .timeout(Duration::from_secs(24 * 3600))
        .send()
        .await
        .map_err(|e| format!("cannot open the event stream: {e}"))?;
    if response.status().as_u16() != 200 {
        return Err(format!("the event stream answered {}", response.status()));
    }
    let shared = shared.clone();
    Ok(tokio::spawn(async move {
        let mut response = response;
        let mut line = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    for &byte in chunk.iter() {
                        if byte == b'\n' {
                            if line.starts_with(b"data:") {
                                events.fetch_add(1, Ordering::SeqCst);
                            }
                            line.clear();
                        } else {
                            line.push(byte);
                        }
                    }
                }
                Ok(None) => {
                    if !stop.load(Ordering::SeqCst) {
                        shared.error("the event stream ended".into());
                    }
                    return;
                }
                Err(e) => {
                    if !stop.load(Ordering::SeqCst) {
                        shared.error(format!("the event stream failed: {e}"));
                    }
                    return;
                }
            }
        }
    }))
}

/// Creates a wave and opens a handoff on it, queueing it for a finisher.
async fn opener(shared: Arc<Shared>) {
    while shared.running() {
        if shared.queued() >= BACKLOG {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        let wave = Wave::new(WaveId::new(), "soak".into(), "/repo".into());
        let body = match serde_json::to_value(&wave) {
            Ok(body) => body,
            Err(e) => return shared.error(format!("cannot encode a wave: {e}")),
        };
        let request = shared
            .client
            .post(shared.url("/v1/waves"))
            .bearer_auth(&shared.access.agent)
            .json(&body);
        if shared.call("wave", request, 201).await.is_none() {
            continue;
        }
        let open = crate::requests::wave_request(wave.id(), &shared.access.work_dir);
        let body = match serde_json::to_value(&open) {
            Ok(body) => body,
            Err(e) => return shared.error(format!("cannot encode an open: {e}")),
        };
        let request = shared
            .client
            .post(shared.url("/v1/handoffs"))
            .bearer_auth(&shared.access.agent)
            .json(&body);
        let Some(answer) = shared.call_json("open", request, 201).await else {
            continue;
        };
        let id = answer["handoff"]["id"].as_str().map(str::to_string);
        match (answer["created"].as_bool(), id) {
            (Some(true), Some(id)) => {
                shared.figures().acked.opened.insert(id.clone());
                *shared.newest.lock().unwrap_or_else(PoisonError::into_inner) = Some(id.clone());
                shared
                    .queue
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push_back(id);
            }
            _ => shared.error(format!("open: not a created handoff: {answer}")),
        }
    }
}

/// The next queued handoff, waiting for one while the run lasts.
async fn next(shared: &Shared) -> Option<String> {
    while shared.running() {
        if let Some(id) = shared.take() {
            return Some(id);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

/// Reads a queued handoff and finishes it through the API, then claims
/// its wake.
async fn api_finisher(shared: Arc<Shared>, mut rng: Rng) {
    while let Some(id) = next(&shared).await {
        let request = shared
            .client
            .get(shared.url(&format!("/v1/handoffs/{id}")))
            .bearer_auth(&shared.access.person);
        if shared.call("get", request, 200).await.is_none() {
            continue;
        }
        let (route, body, status) = match rng.below(3) {
            0 => (
                "complete",
                json!({"summary": "done in the soak"}),
                "completed",
            ),
            1 => (
                "back",
                json!({"summary": "back to the agent"}),
                "handed_back",
            ),
            _ => (
                "fail",
                json!({"reason": "the soak fails this one"}),
                "failed",
            ),
        };
        let request = shared
            .client
            .post(shared.url(&format!("/v1/handoffs/{id}/{route}")))
            .bearer_auth(&shared.access.person)
            .json(&body);
        let Some(answer) = shared.call_json("finish", request, 200).await else {
            continue;
        };
        if answer["status"].as_str() != Some(status) {
            shared.error(format!("{route} of {id} left status {}", answer["status"]));
            continue;
        }
        shared.figures().acked.finished.insert(id.clone(), status);
        claim(&shared, &id).await;
    }
}

/// Finishes a queued handoff through a link's page and form, as a person
/// who got the link does, then claims its wake.
async fn link_finisher(shared: Arc<Shared>) {
    while let Some(id) = next(&shared).await {
        let request = shared
            .client
            .post(shared.url(&format!("/v1/handoffs/{id}/link")))
            .bearer_auth(&shared.access.person)
            .json(&json!({}));
        let Some(made) = shared.call_json("link", request, 200).await else {
            continue;
        };
        let Some(link) = made["link"].as_str() else {
            shared.error(format!("link: no link in {made}"));
            continue;
        };
        let Some(page) = shared.call("link page", shared.client.get(link), 200).await else {
            continue;
        };
        let Some(csrf) = form_token(&page) else {
            shared.error(format!("link page of {id}: no form"));
            continue;
        };
        let form = form_encode(&[
            ("csrf", csrf),
            ("action", "complete"),
            ("text", "done through the link"),
        ]);
        let request = shared
            .client
            .post(link)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form);
        if shared.call("link form", request, 303).await.is_none() {
            continue;
        }
        shared
            .figures()
            .acked
            .finished
            .insert(id.clone(), "completed");
        claim(&shared, &id).await;
    }
}

/// Claims the wake of `id` for generation 1 as the agent.
async fn claim(shared: &Shared, id: &str) {
    let request = shared
        .client
        .post(shared.url(&format!("/v1/handoffs/{id}/claim-wake")))
        .bearer_auth(&shared.access.agent)
        .json(&json!({"generation": 1}));
    let Some(answer) = shared.call_json("claim", request, 200).await else {
        return;
    };
    if answer["claimed"].as_bool() == Some(true) {
        shared.figures().acked.claimed.insert(id.to_string());
    } else {
        shared.error(format!("claim of {id} was not won: {answer}"));
    }
}

/// Lists the active handoffs, then the newest, in turn.
async fn lister(shared: Arc<Shared>) {
    let mut turn = 0_u64;
    while shared.running() {
        let path = if turn % 2 == 0 {
            "/v1/handoffs?active=true&limit=100"
        } else {
            "/v1/handoffs?newest_first=true&limit=50"
        };
        turn += 1;
        let request = shared
            .client
            .get(shared.url(path))
            .bearer_auth(&shared.access.person);
        if let Some(rows) = shared.call_json("list", request, 200).await {
            if !rows.is_array() {
                shared.error(format!("list: not a list: {rows}"));
            }
        }
    }
}

/// Long-polls the newest handoff opened, up to 2 s each.
async fn waiter(shared: Arc<Shared>) {
    while shared.running() {
        let newest = shared
            .newest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(id) = newest else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let request = shared
            .client
            .get(shared.url(&format!("/v1/handoffs/{id}/wait?timeout=2s")))
            .bearer_auth(&shared.access.agent);
        let Some(answer) = shared.call_json("wait", request, 200).await else {
            continue;
        };
        match answer["ended"].as_bool() {
            Some(true) => shared.figures().waits_ended += 1,
            Some(false) => {}
            None => shared.error(format!("wait: no `ended` in {answer}")),
        }
    }
}

/// The anti-forgery token of the first form on `page`.
fn form_token(page: &str) -> Option<&str> {
    let marker = "name=\"csrf\" value=\"";
    let start = page.find(marker)? + marker.len();
    let end = page[start..].find('"')?;
    Some(&page[start..start + end])
}

/// `pairs` as an `application/x-www-form-urlencoded` body.
fn form_encode(pairs: &[(&str, &str)]) -> String {
    let encode = |text: &str| {
        let mut out = String::new();
        for byte in text.bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    out.push(char::from(byte));
                }
                b' ' => out.push('+'),
                other => out.push_str(&format!("%{other:02X}")),
            }
        }
        out
    };
    pairs
        .iter()
        .map(|(key, value)| format!("{}={}", encode(key), encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::{form_encode, form_token};

    #[test]
    fn a_form_is_encoded_as_a_browser_encodes_it() {
        assert_eq!(
            form_encode(&[("csrf", "a/b+c="), ("text", "done here")]),
            "csrf=a%2Fb%2Bc%3D&text=done+here"
        );
    }

    #[test]
    fn the_forms_token_is_found_on_the_page() {
        let page = r#"<form><input type="hidden" name="csrf" value="abc123"></form>"#;
        assert_eq!(form_token(page), Some("abc123"));
        assert_eq!(form_token("<p>no form</p>"), None);
    }
}
