//! Every route of the service, called through HTTP on a real server over
//! a real SQLite store: what it answers, that each answer's status is one
//! the OpenAPI document gives for the route, and that its body fits the
//! document's schema for that status. The JSON bodies are the `--json`
//! shapes (the api crate's types, which the command line prints).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use lf_handoff_api::routes::{route, Body, RouteId, ROUTES};
use lf_handoff_api::{Claimed, Counts, HandoffJson, Health, Opened, Pruned, WaitJson};
use lf_handoff_conformance::fixtures;
use lf_handoff_domain::child_session::ChildProcessGeneration;
use lf_handoff_domain::interactive_handoff::{HandoffEvent, InteractiveHandoffListRow};
use lf_handoff_domain::parent::Parent;
use lf_handoff_domain::project_session::ProjectSession;
use lf_handoff_domain::task::TaskSession;
use lf_handoff_domain::wave::Wave;
use serde_json::{json, Value};
use support::{open_body, schema, Reply, Served};

/// The statuses each route answered in this test, to check at the end
/// that every route was called.
static SEEN: Mutex<BTreeMap<String, BTreeSet<u16>>> = Mutex::new(BTreeMap::new());

fn document() -> Value {
    serde_json::from_str(&lf_handoff_api::openapi::document_json()).unwrap()
}

/// Asserts `reply` is an answer `id`'s document entry gives, with a body
/// that fits its schema; returns the body as JSON (`Null` for a body that
/// is not JSON).
fn documented(id: RouteId, reply: &Reply) -> Value {
    let route = route(id);
    let document = document();
    let operation = &document["paths"][route.path][route.method.as_str().to_ascii_lowercase()];
    let response = &operation["responses"][reply.status.to_string()];
    assert!(
        response.is_object(),
        "{} {} answered {}, which the document does not give: {}",
        route.method.as_str(),
        route.path,
        reply.status,
        reply.text
    );
    SEEN.lock()
        .unwrap()
        .entry(format!("{} {}", route.method.as_str(), route.path))
        .or_default()
        .insert(reply.status);
    let content = response["content"].as_object().expect("a documented body");
    let (content_type, media) = content.iter().next().unwrap();
    let sent = reply.header("content-type").unwrap_or_default();
    assert!(
        sent.starts_with(content_type.split(';').next().unwrap()),
        "{}: sent {sent}, documented {content_type}",
        route.path
    );
    if !content_type.starts_with("application/json") {
        return Value::Null;
    }
    let body = reply.json();
    if let Err(why) = schema::check(&document, &media["schema"], &body) {
        panic!(
            "{} {} {}: {why}\n{}",
            route.method.as_str(),
            route.path,
            reply.status,
            reply.text
        );
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_as_documented_through_a_whole_lifecycle() {
    let served = Served::start().await;
    let (agent, person, operator) = (&served.agent, &served.person, &served.operator);

    // Parents.
    let wave = Wave::new(
        lf_handoff_domain::id::WaveId::parse("wv_01a23770-d145-7233-b23a-4c031002983d").unwrap(),
        "product".into(),
        "/repo".into(),
    );
    let reply = served
        .post("/v1/waves", agent, &serde_json::to_value(&wave).unwrap())
        .await;
    let body = documented(RouteId::CreateWave, &reply);
    assert_eq!(serde_json::from_value::<Wave>(body).unwrap(), wave);
    let again = served
        .post("/v1/waves", agent, &serde_json::to_value(&wave).unwrap())
        .await;
    assert_eq!(
        again.status, 201,
        "creating an equal wave again is idempotent"
    );
    let reply = served
        .get(&format!("/v1/waves/{}", wave.id()), person)
        .await;
    assert_eq!(
        serde_json::from_value::<Wave>(documented(RouteId::GetWave, &reply)).unwrap(),
        wave
    );

    let project = fixtures::fresh_project(wave.id());
    let reply = served
        .post(
            "/v1/projects",
            agent,
            &serde_json::to_value(&project).unwrap(),
        )
        .await;
    documented(RouteId::CreateProject, &reply);
    let reply = served
        .get(&format!("/v1/projects/{}", project.id), operator)
        .await;
    let stored: ProjectSession =
        serde_json::from_value(documented(RouteId::GetProject, &reply)).unwrap();
    assert_eq!(stored.id, project.id);

    let (task, pr) = fixtures::fresh_task(&project, served.dir.path());
    let reply = served
        .post("/v1/tasks", agent, &json!({"task": task, "pr": pr}))
        .await;
    let created: TaskSession =
        serde_json::from_value(documented(RouteId::CreateTask, &reply)).unwrap();
    assert_eq!(created.id, task.id);
    let reply = served.get(&format!("/v1/tasks/{}", task.id), agent).await;
    documented(RouteId::GetTask, &reply);
    let reply = served.get(&format!("/v1/task-prs/{}", pr.id), agent).await;
    let stored_pr = documented(RouteId::GetTaskPr, &reply);
    assert_eq!(stored_pr["id"], pr.id.as_str());

    // The parents of the wave: the wave, its project and its task, in id
    // order, each tagged with its kind.
    let reply = served
        .get(&format!("/v1/parents?wave={}", wave.id()), person)
        .await;
    let listed: Vec<Parent> =
        serde_json::from_value(documented(RouteId::ListParents, &reply)).unwrap();
    let kinds: Vec<&str> = listed.iter().map(|p| p.kind().as_str()).collect();
    assert_eq!(kinds, ["project", "task", "wave"]);

    // Bodies: the parent after the call, itself (not a tagged wrapper).
    let reply = served
        .post(
            &format!("/v1/tasks/{}/body", task.id),
            agent,
            &serde_json::to_value(fixtures::body(5, Some("task-thread"))).unwrap(),
        )
        .await;
    let after: TaskSession =
        serde_json::from_value(documented(RouteId::RecordTaskBody, &reply)).unwrap();
    assert_eq!(after.latest_process.as_ref().map(|p| p.generation), Some(5));
    let reply = served
        .post(
            &format!("/v1/projects/{}/body", project.id),
            agent,
            &serde_json::to_value(fixtures::body(2, Some("project-thread"))).unwrap(),
        )
        .await;
    documented(RouteId::RecordProjectBody, &reply);
    let first_body: ChildProcessGeneration = fixtures::body(1, None);
    let reply = served
        .post(
            &format!("/v1/waves/{}/body", wave.id()),
            agent,
            &serde_json::to_value(&first_body).unwrap(),
        )
        .await;
    let wave_after: Wave =
        serde_json::from_value(documented(RouteId::RecordWaveBody, &reply)).unwrap();
    assert_eq!(wave_after.latest_process().map(|p| p.generation), Some(1));

    // Open, then open again: 201 created, 200 reused.
    let mut request = serde_json::to_value(fixtures::task_request(&after)).unwrap();
    request["step"] = json!("oauth-login@turn-1");
    request["expires_in"] = json!("2h");
    let reply = served.post("/v1/handoffs", agent, &request).await;
    let opened: Opened = serde_json::from_value(documented(RouteId::Open, &reply)).unwrap();
    assert_eq!(reply.status, 201);
    assert!(opened.created);
    assert!(opened.handoff.handoff.expires_at.is_some());
    assert!(!opened.handoff.due);
    let id = opened.handoff.handoff.id.to_string();
    let reply = served.post("/v1/handoffs", agent, &request).await;
    let reused: Opened = serde_json::from_value(documented(RouteId::Open, &reply)).unwrap();
    assert_eq!((reply.status, reused.created), (200, false));
    assert_eq!(reused.handoff.handoff.id.to_string(), id);

    // Read.
    let reply = served
        .get("/v1/handoffs?active=true&limit=10", person)
        .await;
    let rows: Vec<InteractiveHandoffListRow> =
        serde_json::from_value(documented(RouteId::List, &reply)).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].session_id.to_string(), id);
    let reply = served.get(&format!("/v1/handoffs/{id}"), agent).await;
    let read: HandoffJson = serde_json::from_value(documented(RouteId::Get, &reply)).unwrap();
    assert_eq!(read.handoff, opened.handoff.handoff);
    // The same list as whole records, filtered by a creation time.
    let reply = served
        .get(
            "/v1/handoff-records?active=true&limit=10&created_before=2999-01-01T00:00:00Z",
            person,
        )
        .await;
    let records: Vec<HandoffJson> =
        serde_json::from_value(documented(RouteId::ListRecords, &reply)).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].handoff, read.handoff);
    // A person's answer carries a signed link; an agent's does not.
    assert!(read.link.is_none());
    let link = records[0].link.as_deref().unwrap();
    assert!(
        link.starts_with(&format!("{}/h/{id}?for=alice&exp=", served.url)),
        "{link}"
    );
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/link"),
            person,
            &json!({"valid_for": "1h"}),
        )
        .await;
    let made: lf_handoff_api::LinkJson =
        serde_json::from_value(documented(RouteId::Link, &reply)).unwrap();
    assert_eq!(made.holder, "alice");
    let reply = served
        .get(
            "/v1/handoff-records?created_before=2000-01-01T00:00:00Z",
            person,
        )
        .await;
    let records: Vec<HandoffJson> =
        serde_json::from_value(documented(RouteId::ListRecords, &reply)).unwrap();
    assert!(records.is_empty());

    // Act: the actor of each change is the token's name.
    let reply = served
        .send(
            "POST",
            &format!("/v1/handoffs/{id}/attach"),
            Some(person),
            None,
            Vec::new(),
        )
        .await;
    let attached: HandoffJson =
        serde_json::from_value(documented(RouteId::Attach, &reply)).unwrap();
    assert_eq!(attached.handoff.status.as_str(), "attached");
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/extend"),
            person,
            &json!({"by": "3h"}),
        )
        .await;
    let extended: HandoffJson =
        serde_json::from_value(documented(RouteId::Extend, &reply)).unwrap();
    assert!(extended.handoff.expires_at > opened.handoff.handoff.expires_at);
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/claim-wake"),
            agent,
            &json!({"generation": 5}),
        )
        .await;
    documented(RouteId::ClaimWake, &reply);
    assert_eq!(reply.error(409, "conflict"), "not_finished");
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/back"),
            person,
            &json!({"summary": "logged in; carry on"}),
        )
        .await;
    let back: HandoffJson = serde_json::from_value(documented(RouteId::Back, &reply)).unwrap();
    assert_eq!(back.handoff.status.as_str(), "handed_back");
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/complete"),
            person,
            &json!({"summary": "other"}),
        )
        .await;
    documented(RouteId::Complete, &reply);
    assert_eq!(reply.error(409, "conflict"), "other_outcome");
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/fail"),
            person,
            &json!({"reason": "other"}),
        )
        .await;
    documented(RouteId::Fail, &reply);
    assert_eq!(reply.error(409, "conflict"), "other_outcome");

    let reply = served
        .get(&format!("/v1/handoffs/{id}/wait?timeout=5s"), agent)
        .await;
    let waited: WaitJson = serde_json::from_value(documented(RouteId::Wait, &reply)).unwrap();
    assert!(waited.ended);
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/claim-wake"),
            agent,
            &json!({"generation": 5}),
        )
        .await;
    let claimed: Claimed = serde_json::from_value(documented(RouteId::ClaimWake, &reply)).unwrap();
    assert!(claimed.claimed);
    assert_eq!(claimed.holder, Some(5));

    let reply = served
        .get(&format!("/v1/handoffs/{id}/history"), operator)
        .await;
    let events: Vec<HandoffEvent> =
        serde_json::from_value(documented(RouteId::History, &reply)).unwrap();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["opened", "attached", "extended", "finished", "wake_claimed"]
    );
    let actors: Vec<&str> = events.iter().map(|e| e.actor.as_str()).collect();
    assert_eq!(actors, ["bot@ci", "alice", "alice", "alice", "bot@ci"]);

    // The event stream from the start carries the same events, each with
    // its position as its id.
    let reply = events_until(&served, "/v1/events?from=0", events.len()).await;
    assert_eq!(reply.len(), events.len());
    for ((position, data), event) in reply.iter().zip(&events) {
        assert_eq!(*position, event.position);
        assert_eq!(&serde_json::from_str::<HandoffEvent>(data).unwrap(), event);
    }

    // Upkeep.
    let reply = served
        .send("POST", "/v1/expire", Some(operator), None, Vec::new())
        .await;
    let expired: Vec<InteractiveHandoffListRow> =
        serde_json::from_value(documented(RouteId::Expire, &reply)).unwrap();
    assert!(expired.is_empty());
    // The same sweep answering whole records, as their changes left them.
    let due = served
        .post(
            "/v1/handoffs",
            agent,
            &open_body(&wave, served.dir.path(), json!({"expires_in": "1s"})),
        )
        .await;
    let due: Opened = serde_json::from_value(documented(RouteId::Open, &due)).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let expired = expire_records(&served, operator).await;
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].handoff.id, due.handoff.handoff.id);
    assert_eq!(expired[0].handoff.status.as_str(), "expired");
    let reply = served
        .get(
            &format!("/v1/handoffs/{}", due.handoff.handoff.id),
            operator,
        )
        .await;
    let read: HandoffJson = serde_json::from_value(reply.json()).unwrap();
    assert_eq!(read.handoff, expired[0].handoff);
    assert!(
        expire_records(&served, operator).await.is_empty(),
        "expired once"
    );
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let reply = served
        .post(
            "/v1/prune",
            operator,
            &json!({"finished_before": now, "dry_run": true}),
        )
        .await;
    let pruned: Pruned = serde_json::from_value(documented(RouteId::Prune, &reply)).unwrap();
    assert_eq!(
        (pruned.handoffs, pruned.events, pruned.dry_run),
        (1, 5, true)
    );

    let reply = served
        .send("GET", "/v1/export", Some(operator), None, Vec::new())
        .await;
    documented(RouteId::Export, &reply);
    assert_eq!(
        reply.header("content-type").unwrap(),
        "application/x-ndjson"
    );
    let mut direct = Vec::new();
    served.store.export(&mut direct, None).await.unwrap();
    let records = |text: &str| text.lines().skip(1).map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        records(&reply.text),
        records(&String::from_utf8(direct).unwrap())
    );

    // Import the export into a second, empty service.
    let other = Served::start().await;
    let imported = other
        .send(
            "POST",
            "/v1/import",
            Some(&other.operator),
            Some("application/x-ndjson"),
            reply.text.clone().into_bytes(),
        )
        .await;
    let counts: Counts = serde_json::from_value(documented(RouteId::Import, &imported)).unwrap();
    assert_eq!(
        (
            counts.parents,
            counts.task_prs,
            counts.handoffs,
            counts.events
        ),
        (3, 1, 2, 7)
    );
    let again = other
        .send(
            "POST",
            "/v1/import",
            Some(&other.operator),
            Some("application/x-ndjson"),
            reply.text.into_bytes(),
        )
        .await;
    documented(RouteId::Import, &again);
    assert_eq!(again.error(409, "conflict"), "not_empty");
    // The refusal names no path or URL of the server's own.
    let message = again.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.starts_with("the service's store is not empty"),
        "{message}"
    );
    assert!(
        !message.contains(&*other.dir.path().to_string_lossy()),
        "{message}"
    );

    // The service itself.
    let reply = served.send("GET", "/healthz", None, None, Vec::new()).await;
    let health: Health = serde_json::from_value(documented(RouteId::Healthz, &reply)).unwrap();
    assert_eq!(
        (health.status.as_str(), health.backend.as_str()),
        ("ok", "sqlite")
    );
    let reply = served.send("GET", "/readyz", None, None, Vec::new()).await;
    documented(RouteId::Readyz, &reply);
    let reply = served.get("/metrics", agent).await;
    documented(RouteId::Metrics, &reply);
    assert!(reply
        .header("content-type")
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    for line in [
        "lf_handoff_handoffs_open 0",
        "lf_handoff_handoffs_due 0",
        "# TYPE lf_handoff_http_request_duration_seconds histogram",
        "lf_handoff_http_requests_total{method=\"POST\",route=\"/v1/handoffs\",status=\"201\"} 2",
        "lf_handoff_http_requests_total{method=\"POST\",route=\"/v1/handoffs\",status=\"200\"} 1",
        "lf_handoff_event_streams 0",
        "lf_handoff_long_polls 0",
    ] {
        assert!(
            reply.text.lines().any(|l| l == line),
            "{line} not in\n{}",
            reply.text
        );
    }
    let reply = served.get("/v1/openapi.json", person).await;
    let document = documented(RouteId::OpenApi, &reply);
    assert_eq!(document, self::document());

    // Every JSON route of the table was called (the pages are pages.rs's).
    let seen = SEEN.lock().unwrap().clone();
    for route in ROUTES.iter().filter(|route| route.documented()) {
        let key = format!("{} {}", route.method.as_str(), route.path);
        assert!(seen.contains_key(&key), "{key} was not called");
    }
    served.stop().await;
    other.stop().await;
}

/// `POST /v1/expire-records`: the handoffs this sweep expired.
async fn expire_records(served: &Served, operator: &str) -> Vec<HandoffJson> {
    let reply = served
        .send(
            "POST",
            "/v1/expire-records",
            Some(operator),
            None,
            Vec::new(),
        )
        .await;
    serde_json::from_value(documented(RouteId::ExpireRecords, &reply)).unwrap()
}

/// The first `count` events of the stream at `path`, as (id, data).
async fn events_until(served: &Served, path: &str, count: usize) -> Vec<(u64, String)> {
    use futures_util::StreamExt as _;
    let response = served
        .client
        .get(format!("{}{path}", served.url))
        .bearer_auth(&served.person)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    SEEN.lock()
        .unwrap()
        .entry("GET /v1/events".to_string())
        .or_default()
        .insert(200);
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let mut events = Vec::new();
    while events.len() < count {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), stream.next())
            .await
            .expect("the stream sends within 10 s")
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let mut id = None;
            let mut data = None;
            for line in block.lines() {
                if let Some(value) = line
                    .strip_prefix("id: ")
                    .or_else(|| line.strip_prefix("id:"))
                {
                    id = Some(value.trim().parse().unwrap());
                }
                if let Some(value) = line
                    .strip_prefix("data: ")
                    .or_else(|| line.strip_prefix("data:"))
                {
                    data = Some(value.to_string());
                }
            }
            if let (Some(id), Some(data)) = (id, data) {
                events.push((id, data));
            }
        }
    }
    events
}

#[test]
fn the_document_lists_every_route_with_the_body_schemas_it_names() {
    let document = document();
    let documented: Vec<_> = ROUTES.iter().filter(|route| route.documented()).collect();
    for route in &documented {
        let operation = &document["paths"][route.path][route.method.as_str().to_ascii_lowercase()];
        assert_eq!(operation["operationId"], route.operation_id());
        for status in route.statuses() {
            assert!(operation["responses"][status.to_string()].is_object());
        }
        if let Body::Json(name) = route.request {
            assert_eq!(
                operation["requestBody"]["content"]["application/json"]["schema"]["$ref"],
                format!("#/components/schemas/{name}")
            );
        }
        let secured = operation["security"].is_array();
        assert_eq!(
            secured,
            route.access != lf_handoff_api::Access::Public,
            "{}",
            route.path
        );
    }
    let paths = document["paths"].as_object().unwrap();
    let operations: usize = paths
        .values()
        .map(|item| item.as_object().unwrap().len())
        .sum();
    assert_eq!(operations, documented.len());
}
