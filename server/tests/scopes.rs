//! Who may do what (C20), route by route: every route of the table is
//! called with no token, a wrong token, and a token of each scope. A
//! route that needs a token answers 401 without one or with one the
//! service does not know, 403 to a scope it does not allow (before the
//! body is read: nothing is written), and serves a scope it allows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_adapters::GenerateId as _;
use lf_handoff_api::routes::{Access, Route, RouteId, ROUTES};
use lf_handoff_api::Scope;
use lf_handoff_conformance::fixtures;
use lf_handoff_domain::id::WaveId;
use lf_handoff_domain::wave::Wave;
use serde_json::{json, Value};
use support::{open_body, Reply, Served};

/// The ids a request can name.
struct Ids {
    wave: Wave,
    project_session: lf_handoff_domain::project_session::ProjectSession,
    project: String,
    task: String,
    pr: String,
    handoff: String,
}

/// A request to `route` that it would serve: its path and body (and the
/// body's content type).
fn request(served: &Served, route: &Route, ids: &Ids) -> (String, Option<(&'static str, Vec<u8>)>) {
    let json_body = |value: Value| Some(("application/json", serde_json::to_vec(&value).unwrap()));
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let path = route.path.replace(
        "{id}",
        match route.id {
            RouteId::GetWave | RouteId::RecordWaveBody => ids.wave.id().as_str(),
            RouteId::GetProject | RouteId::RecordProjectBody => &ids.project,
            RouteId::GetTask | RouteId::RecordTaskBody => &ids.task,
            RouteId::GetTaskPr => &ids.pr,
            _ => &ids.handoff,
        },
    );
    let body = match route.id {
        RouteId::CreateWave => json_body(
            serde_json::to_value(Wave::new(WaveId::new(), "w".into(), "/r".into())).unwrap(),
        ),
        RouteId::CreateProject => {
            json_body(serde_json::to_value(fixtures::fresh_project(ids.wave.id())).unwrap())
        }
        RouteId::CreateTask => {
            let (task, pr) = fixtures::fresh_task(&ids.project_session, served.dir.path());
            json_body(json!({"task": task, "pr": pr}))
        }
        RouteId::RecordWaveBody | RouteId::RecordProjectBody | RouteId::RecordTaskBody => {
            json_body(serde_json::to_value(fixtures::body(9, None)).unwrap())
        }
        RouteId::Open => json_body(open_body(&ids.wave, served.dir.path(), json!({}))),
        RouteId::Complete | RouteId::Back => json_body(json!({"summary": "done"})),
        RouteId::Fail => json_body(json!({"reason": "no"})),
        RouteId::Extend => json_body(json!({"by": "1h"})),
        RouteId::Link => json_body(json!({})),
        RouteId::ClaimWake => json_body(json!({"generation": 1})),
        RouteId::Prune => json_body(json!({"finished_before": now, "dry_run": true})),
        RouteId::Import => Some(("application/x-ndjson", b"{}\n".to_vec())),
        _ => None,
    };
    let path = match route.id {
        RouteId::Wait => format!("{path}?timeout=0ms"),
        _ => path,
    };
    (path, body)
}

/// Calls `route` with `token`; an event stream is read no further than
/// its status.
async fn call(served: &Served, route: &Route, ids: &Ids, token: Option<&str>) -> Reply {
    let (path, body) = request(served, route, ids);
    if route.id == RouteId::Events {
        let mut request = served.client.get(format!("{}{path}", served.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = if status == 200 {
            String::new()
        } else {
            response.text().await.unwrap()
        };
        return Reply {
            status,
            headers,
            text,
        };
    }
    let (content_type, bytes) = body.map_or((None, Vec::new()), |(t, b)| (Some(t), b));
    served
        .send(route.method.as_str(), &path, token, content_type, bytes)
        .await
}

async fn setup(served: &Served) -> Ids {
    let opened = served.open(json!({})).await;
    let wave = served.wave().await;
    let project = fixtures::fresh_project(wave.id());
    let reply = served
        .post(
            "/v1/projects",
            &served.agent,
            &serde_json::to_value(&project).unwrap(),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let (task, pr) = fixtures::fresh_task(&project, served.dir.path());
    let reply = served
        .post("/v1/tasks", &served.agent, &json!({"task": task, "pr": pr}))
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    Ids {
        wave,
        project: project.id.to_string(),
        project_session: project.clone(),
        task: task.id.to_string(),
        pr: pr.id.to_string(),
        handoff: opened["handoff"]["id"].as_str().unwrap().to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_refuses_no_token_a_wrong_token_and_a_wrong_scope_and_serves_its_scopes() {
    let served = Served::start().await;
    let ids = setup(&served).await;
    let before = served.snapshot().await;

    // Refusals first: none of them may write anything.
    let mut refused = 0;
    for route in ROUTES.iter().filter(|route| route.documented()) {
        let what = format!("{} {}", route.method.as_str(), route.path);
        for (token, label) in [
            (None, "no token"),
            (Some(served.wrong.as_str()), "a wrong token"),
        ] {
            let reply = call(&served, route, &ids, token).await;
            if route.access == Access::Public {
                assert_eq!(reply.status, 200, "{what} with {label}: {}", reply.text);
            } else {
                assert_eq!(
                    reply.error(401, "unauthorized"),
                    "unauthorized",
                    "{what} with {label}"
                );
                assert_eq!(reply.json()["error"]["code"], 6);
                refused += 1;
            }
        }
        for scope in Scope::ALL {
            if route.access.allows(Some(&[scope])) {
                continue;
            }
            let reply = call(&served, route, &ids, Some(served.token(scope))).await;
            assert_eq!(
                reply.error(403, "forbidden"),
                "forbidden",
                "{what} as {scope}"
            );
            let message = reply.json()["error"]["message"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(message.contains(scope.as_str()), "{message}");
            assert!(
                message.starts_with("this needs a token of scope "),
                "{message}"
            );
            assert!(message.contains(&what), "{message}");
            assert_eq!(reply.json()["error"]["code"], 7);
            refused += 1;
        }
    }
    assert!(refused > 60, "{refused} refusals");
    assert_eq!(
        served.snapshot().await,
        before,
        "a refused request wrote something"
    );

    // Then each scope a route allows is served (an answer the route gives,
    // never 401 or 403).
    for route in ROUTES.iter().filter(|route| route.documented()) {
        let what = format!("{} {}", route.method.as_str(), route.path);
        for scope in Scope::ALL {
            if !route.access.allows(Some(&[scope])) {
                continue;
            }
            let reply = call(&served, route, &ids, Some(served.token(scope))).await;
            assert!(
                route.statuses().contains(&reply.status) && ![401, 403].contains(&reply.status),
                "{what} as {scope}: {} {}",
                reply.status,
                reply.text
            );
        }
    }
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_with_several_scopes_may_do_what_each_allows_and_names_itself_in_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let store = support::sqlite_store(dir.path()).await;
    let path = dir.path().join("tokens");
    let both = lf_handoff_server::tokens::create(
        &path,
        "carol the operator",
        &[Scope::Agent, Scope::Person],
        store.now(),
    )
    .unwrap();
    let served = Served::serve(dir, store, lf_handoff_server::Limits::default()).await;
    let wave = Wave::new(WaveId::new(), "w".into(), "/r".into());
    let reply = served
        .post(
            "/v1/waves",
            &both.token,
            &serde_json::to_value(&wave).unwrap(),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    let reply = served
        .post(
            "/v1/handoffs",
            &both.token,
            &open_body(&wave, served.dir.path(), json!({})),
        )
        .await;
    let id = reply.json()["handoff"]["id"].as_str().unwrap().to_string();
    let reply = served
        .post(
            &format!("/v1/handoffs/{id}/fail"),
            &both.token,
            &json!({"reason": "no access"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let reply = served
        .get(&format!("/v1/handoffs/{id}/history"), &both.token)
        .await;
    for event in reply.json().as_array().unwrap() {
        assert_eq!(event["actor"], "carol the operator");
    }
    let reply = served
        .send("POST", "/v1/expire", Some(&both.token), None, Vec::new())
        .await;
    reply.error(403, "forbidden");
    // A scheme other than Bearer is no token.
    let reply = served
        .client
        .get(format!("{}/v1/handoffs", served.url))
        .header("authorization", format!("Basic {}", both.token))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 401);
    served.stop().await;
}

/// A HEAD of a GET route runs the GET's handler (the body dropped), so it
/// is refused as the GET is: without a token, with a wrong one or of a
/// scope the GET does not allow (it once ran reads, and an export, for
/// anyone); another method is 405 and runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_request_is_authorized_as_its_get_and_other_methods_run_nothing() {
    let served = Served::start().await;
    let ids = setup(&served).await;
    let before = served.snapshot().await;
    let mut checked = 0;
    for route in ROUTES
        .iter()
        .filter(|route| route.documented() && route.method.as_str() == "GET")
    {
        if route.access == Access::Public || route.id == RouteId::Events {
            continue;
        }
        let (path, _) = request(&served, route, &ids);
        for token in [None, Some(served.wrong.as_str())] {
            let reply = served.send("HEAD", &path, token, None, Vec::new()).await;
            assert_eq!(reply.status, 401, "HEAD {path} with {token:?}");
        }
        for scope in Scope::ALL {
            if route.access.allows(Some(&[scope])) {
                continue;
            }
            let reply = served
                .send("HEAD", &path, Some(served.token(scope)), None, Vec::new())
                .await;
            assert_eq!(reply.status, 403, "HEAD {path} as {scope}");
        }
        checked += 1;
    }
    assert!(checked > 10, "{checked} routes");
    for method in ["PUT", "DELETE", "PATCH"] {
        let path = format!("/v1/handoffs/{}", ids.handoff);
        let reply = served.send(method, &path, None, None, Vec::new()).await;
        assert_eq!(reply.status, 405, "{method} {path}");
    }
    assert_eq!(
        served.snapshot().await,
        before,
        "a refused request wrote something"
    );
    served.stop().await;
}
