//! The event stream and the long poll (C16 through C19): the stream
//! resumes after `Last-Event-ID`, missing and repeating nothing, and
//! carries live events; the long poll answers when the handoff ends or the
//! timeout passes; a shutdown ends streams (to be resumed) and answers
//! long polls with what they have, within the drain bound.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_adapters::ListQuery;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use lf_handoff_domain::interactive_handoff::HandoffEvent;
use serde_json::{json, Value};
use support::Served;

/// An open event stream, read event by event.
struct Events {
    stream: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    text: String,
}

impl Events {
    async fn open(served: &Served, path: &str, last_event_id: Option<u64>) -> Self {
        let mut request = served
            .client
            .get(format!("{}{path}", served.url))
            .bearer_auth(&served.person);
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        Self {
            stream: response.bytes_stream().boxed(),
            text: String::new(),
        }
    }

    /// The next event (`None` when the stream ends), waiting at most
    /// `within`.
    async fn next(&mut self, within: Duration) -> Option<HandoffEvent> {
        let deadline = Instant::now() + within;
        loop {
            while let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let mut id = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("id:") {
                        id = Some(value.trim().parse::<u64>().unwrap());
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data = Some(value.trim().to_string());
                    }
                }
                if let (Some(id), Some(data)) = (id, data) {
                    let event: HandoffEvent = serde_json::from_str(&data).unwrap();
                    assert_eq!(event.position, id, "an event's id is its position");
                    return Some(event);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.stream.next())
                .await
                .expect("the stream sends in time")?;
            self.text
                .push_str(std::str::from_utf8(&chunk.ok()?).unwrap());
        }
    }
}

const SOON: Duration = Duration::from_secs(10);

async fn lifecycle(served: &Served) -> String {
    let id = served.open_id().await;
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/complete"),
            &served.person,
            &json!({"summary": "done"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_resumed_after_its_last_event_id_misses_and_repeats_nothing() {
    let served = Served::start().await;
    for _ in 0..3 {
        lifecycle(&served).await;
    }
    let mut all = Events::open(&served, "/v1/events?from=0", None).await;
    let mut positions = Vec::new();
    for _ in 0..6 {
        positions.push(all.next(SOON).await.unwrap().position);
    }
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    drop(all);
    // Resume after the third, as a browser's EventSource does (its
    // Last-Event-ID wins over the URL's from).
    let mut resumed = Events::open(&served, "/v1/events?from=0", Some(positions[2])).await;
    for expected in &positions[3..] {
        assert_eq!(resumed.next(SOON).await.unwrap().position, *expected);
    }
    // Then live: a new handoff's events arrive as they commit.
    let id = lifecycle(&served).await;
    let opened = resumed.next(SOON).await.unwrap();
    assert_eq!(
        (opened.handoff_id.to_string(), opened.kind.as_str()),
        (id.clone(), "opened")
    );
    let finished = resumed.next(SOON).await.unwrap();
    assert_eq!(finished.kind.as_str(), "finished");
    assert_eq!(finished.actor.as_str(), "alice");
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_from_now_with_a_parent_carries_only_that_parents_new_events() {
    let served = Served::start().await;
    lifecycle(&served).await;
    let wave = served.wave().await;
    let mut stream = Events::open(
        &served,
        &format!("/v1/events?parent=wave:{}", wave.id()),
        None,
    )
    .await;
    // Another parent's handoff, then this one's.
    lifecycle(&served).await;
    let body = support::open_body(&wave, served.dir.path(), json!({}));
    let reply = served.post("/v1/handoffs", &served.agent, &body).await;
    let id = reply.json()["handoff"]["id"].as_str().unwrap().to_string();
    let event = stream.next(SOON).await.unwrap();
    assert_eq!(event.handoff_id.to_string(), id);
    assert_eq!(event.kind.as_str(), "opened");
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_answers_when_the_handoff_ends_or_the_timeout_passes() {
    let served = Served::start().await;
    let id = served.open_id().await;
    let started = Instant::now();
    let reply = served
        .get(
            &format!("/v1/handoffs/{id}/wait?timeout=300ms"),
            &served.agent,
        )
        .await;
    assert_eq!(reply.status, 200);
    let body = reply.json();
    assert_eq!(body["ended"], false);
    assert_eq!(body["handoff"]["status"], "waiting");
    assert!(started.elapsed() >= Duration::from_millis(300));

    let waiting = {
        let client = served.client.clone();
        let url = format!("{}/v1/handoffs/{id}/wait?timeout=60s", served.url);
        let token = served.agent.clone();
        tokio::spawn(async move {
            let response = client.get(url).bearer_auth(token).send().await.unwrap();
            response.json::<Value>().await.unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/fail"),
            &served.person,
            &json!({"reason": "no VPN"}),
        )
        .await;
    assert_eq!(reply.status, 200);
    let body = tokio::time::timeout(SOON, waiting).await.unwrap().unwrap();
    assert_eq!(body["ended"], true);
    assert_eq!(body["handoff"]["status"], "failed");
    assert_eq!(body["handoff"]["outcome"]["reason"], "no VPN");

    // A deadline that passes while waiting ends it as expired, by the
    // waiter's token.
    let opened = served.open(json!({"expires_in": "1s"})).await;
    let id = opened["handoff"]["id"].as_str().unwrap();
    let reply = served
        .get(
            &format!("/v1/handoffs/{id}/wait?timeout=30s"),
            &served.agent,
        )
        .await;
    let body = reply.json();
    assert_eq!(body["ended"], true);
    assert_eq!(body["handoff"]["status"], "expired");
    let history = served
        .get(&format!("/v1/handoffs/{id}/history"), &served.person)
        .await;
    let last = history.json().as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["kind"].as_str(), last["actor"].as_str()),
        (Some("expired"), Some("bot@ci"))
    );
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_ends_streams_and_answers_long_polls_with_what_they_have() {
    let mut served = Served::start().await;
    let id = served.open_id().await;
    let mut stream = Events::open(&served, "/v1/events", None).await;
    let polling = {
        let client = served.client.clone();
        let url = format!("{}/v1/handoffs/{id}/wait?timeout=5m", served.url);
        let token = served.agent.clone();
        tokio::spawn(async move {
            let response = client.get(url).bearer_auth(token).send().await.unwrap();
            (
                response.status().as_u16(),
                response.json::<Value>().await.unwrap(),
            )
        })
    };
    let started = Instant::now();
    while served
        .state
        .metrics()
        .gauge_value(lf_handoff_server::Gauge::LongPolls)
        < 1
    {
        assert!(started.elapsed() < SOON);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stopping = Instant::now();
    served.stop_in_place().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "{:?}",
        stopping.elapsed()
    );
    let (status, body) = tokio::time::timeout(SOON, polling).await.unwrap().unwrap();
    assert_eq!(status, 200);
    assert_eq!(body["ended"], false);
    assert_eq!(body["handoff"]["status"], "waiting");
    assert!(stream.next(SOON).await.is_none(), "the stream ends");
    // The store was left as it was; nothing is served any more.
    let stored = served
        .store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert!(served
        .client
        .get(format!("{}/healthz", served.url))
        .send()
        .await
        .is_err());
}

/// Revoking a token cuts it off as soon as the tokens file is read again
/// (C29): its event stream ends with an `error` event saying so, its long
/// poll is answered 401, and a stream of another token goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_ends_its_event_streams_and_long_polls() {
    use lf_handoff_server::tokens::{self, TokenTable};
    let served = Served::start().await;
    let id = served.open_id().await;
    let mut revoked_stream = served
        .client
        .get(format!("{}/v1/events", served.url))
        .bearer_auth(&served.person)
        .send()
        .await
        .unwrap()
        .bytes_stream();
    let kept_token_stream = served
        .client
        .get(format!("{}/v1/events", served.url))
        .bearer_auth(&served.operator)
        .send()
        .await
        .unwrap();
    assert_eq!(kept_token_stream.status().as_u16(), 200);
    let polling = {
        let client = served.client.clone();
        let url = format!("{}/v1/handoffs/{id}/wait?timeout=60s", served.url);
        let token = served.agent.clone();
        tokio::spawn(async move {
            let reply = client.get(url).bearer_auth(token).send().await.unwrap();
            (reply.status().as_u16(), reply.text().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;

    let path = served.dir.path().join("tokens");
    tokens::revoke(&path, "alice").unwrap();
    tokens::revoke(&path, "bot@ci").unwrap();
    let table = TokenTable::new(tokens::read_file(&path).unwrap()).unwrap();
    served.state.replace_tokens(table);

    let (status, text) = tokio::time::timeout(Duration::from_secs(5), polling)
        .await
        .expect("the long poll of a revoked token was held on")
        .unwrap();
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("revoked"), "{text}");

    let mut text = String::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), revoked_stream.next())
        .await
        .expect("the stream of a revoked token was held on")
    {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(text.contains("event: error"), "{text}");
    assert!(text.contains("unauthorized"), "{text}");
    // The operator's stream goes on, and carries the next change.
    let handoff_id = lf_handoff_domain::id::InteractiveHandoffId::parse(&id).unwrap();
    served
        .store
        .attach_interactive_handoff(&handoff_id)
        .await
        .unwrap();
    let mut operator_stream = kept_token_stream.bytes_stream();
    let mut seen = String::new();
    while !seen.contains(&id) {
        let chunk = tokio::time::timeout(Duration::from_secs(5), operator_stream.next())
            .await
            .expect("the operator's stream ended or stalled")
            .expect("the operator's stream ended")
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    served.stop().await;
}
