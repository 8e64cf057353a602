//! `POST /mcp` (C28) as the service serves it: agent tokens only, the
//! history naming the token, the caller's own wave, and the service's
//! limits (C29) on its bodies and its waits. The protocol itself is
//! driven by the official Python SDK in `cli/tests/cli/mcp.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use lf_handoff_server::tokens::{self, TokenTable};
use lf_handoff_server::Limits;
use serde_json::{json, Value};
use support::{Reply, Served};

/// A JSON-RPC message to `/mcp`, as an MCP client sends it.
async fn call(served: &Served, token: Option<&str>, message: &Value) -> Reply {
    let mut request = served
        .client
        .post(format!("{}/mcp", served.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .body(serde_json::to_vec(message).unwrap());
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    Reply {
        status: response.status().as_u16(),
        headers: response.headers().clone(),
        text: response.text().await.unwrap(),
    }
}

fn tool_call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": arguments}})
}

/// `ask_person` with `question` through `/mcp` as the agent, in a task of
/// its own: its status and body once it answers.
fn ask_in_background(served: &Served, question: &str) -> tokio::task::JoinHandle<(u16, String)> {
    let url = format!("{}/mcp", served.url);
    let agent = served.agent.clone();
    let client = served.client.clone();
    let body =
        serde_json::to_vec(&tool_call(1, "ask_person", json!({"question": question}))).unwrap();
    tokio::spawn(async move {
        let reply = client
            .post(url)
            .bearer_auth(agent)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body)
            .send()
            .await
            .unwrap();
        (reply.status().as_u16(), reply.text().await.unwrap())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_takes_agent_tokens_and_asks_under_the_tokens_own_wave_in_its_name() {
    let served = Served::start_with(Limits {
        mcp_wait: Duration::from_millis(200),
        ..Limits::default()
    })
    .await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    call(&served, None, &list).await.error(401, "unauthorized");
    call(&served, Some(&served.wrong), &list)
        .await
        .error(401, "unauthorized");
    for token in [&served.person, &served.operator] {
        call(&served, Some(token), &list)
            .await
            .error(403, "forbidden");
    }
    let reply = call(&served, Some(&served.agent), &list).await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let names: Vec<String> = reply.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, lf_handoff_mcp::TOOLS);

    let asked = call(
        &served,
        Some(&served.agent),
        &tool_call(
            2,
            "ask_person",
            json!({"question": "Ship it?", "step": "ship"}),
        ),
    )
    .await;
    assert_eq!(asked.status, 200, "{}", asked.text);
    let result = &asked.json()["result"];
    assert_eq!(result["isError"], false, "{result}");
    let question = &result["structuredContent"];
    assert_eq!(question["state"], "waiting", "{question}");
    let id = question["id"].as_str().unwrap();
    // The link is the question's page in the inbox of this service.
    assert_eq!(
        question["link"],
        format!("{}/inbox/{id}", served.url),
        "{question}"
    );
    // Under a wave of the token's own, in the token's name.
    let handoff = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await;
    let handoff = handoff.json();
    assert_eq!(handoff["parent"]["kind"], "wave");
    assert_eq!(
        handoff["parent"]["id"],
        lf_handoff_mcp::ParentChoice::wave_id("token:bot@ci").as_str()
    );
    let history = served
        .get(&format!("/v1/handoffs/{id}/history"), &served.person)
        .await;
    for event in history.json().as_array().unwrap() {
        assert_eq!(event["actor"], "bot@ci", "{event}");
    }
    // A wrong argument is a tool error with the kind, in a 200.
    let wrong = call(
        &served,
        Some(&served.agent),
        &tool_call(3, "await_answer", json!({"id": "nope"})),
    )
    .await;
    assert_eq!(wrong.status, 200, "{}", wrong.text);
    let result = &wrong.json()["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(
        result["structuredContent"]["error"]["kind"],
        "invalid_input"
    );
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_bodies_are_held_to_the_services_size_and_time() {
    let served = Served::start_with(Limits {
        max_body: 1024,
        body_timeout: Duration::from_millis(500),
        ..Limits::default()
    })
    .await;
    let before = served.snapshot().await;
    let large = tool_call(1, "ask_person", json!({"question": "x".repeat(2048)}));
    call(&served, Some(&served.agent), &large)
        .await
        .error(413, "payload_too_large");

    // A body that stalls is refused at the body's time, not held.
    let body = serde_json::to_vec(&tool_call(2, "list_waiting", json!({}))).unwrap();
    let answer = support::stalled_post(
        &served,
        "/mcp",
        &served.agent,
        "Accept: application/json, text/event-stream\r\n",
        &body,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("did not arrive whole"), "{answer}");
    assert_eq!(served.snapshot().await, before);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_tool_call_holds_a_long_poll_place() {
    let served = Served::start_with(Limits {
        max_streams: 1,
        mcp_wait: Duration::from_secs(2),
        ..Limits::default()
    })
    .await;
    let asking = ask_in_background(&served, "Wait?");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let busy = call(
        &served,
        Some(&served.agent),
        &tool_call(2, "list_waiting", json!({})),
    )
    .await;
    busy.error(503, "unavailable");
    assert_eq!(asking.await.unwrap().0, 200);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_tool_call_ends_when_its_token_is_revoked_and_the_question_stays() {
    let served = Served::start_with(Limits {
        mcp_wait: Duration::from_secs(60),
        ..Limits::default()
    })
    .await;
    let asking = ask_in_background(&served, "Revoke?");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let path = served.dir.path().join("tokens");
    tokens::revoke(&path, "bot@ci").unwrap();
    served
        .state
        .replace_tokens(TokenTable::new(tokens::read_file(&path).unwrap()).unwrap());
    let (status, text) = tokio::time::timeout(Duration::from_secs(5), asking)
        .await
        .expect("the tool call of a revoked token was held on")
        .unwrap();
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("revoked"), "{text}");
    // The question it opened waits on, whole.
    let listed = served.get("/v1/handoffs?active=true", &served.person).await;
    let rows = listed.json();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["reason"], "Revoke?");
    assert_eq!(rows[0]["status"], "waiting");
    served.stop().await;
}
