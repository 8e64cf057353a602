//! What bad input gets (issue 22): malformed JSON, a wrong content type, a
//! body over the limit, invalid UTF-8, 10,000-deep nesting, huge numbers,
//! unknown fields, an unknown route or id, a missing or wrong token, the
//! wrong scope. Each is a clear 4xx with the error object, never a 500;
//! the server goes on serving, and nothing is written.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_adapters::ListQuery;
use lf_handoff_server::Limits;
use serde_json::json;
use support::{open_body, Served};

/// Sends `body` as `content_type` to `path` with the agent's token.
async fn post_raw(
    served: &Served,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> support::Reply {
    served
        .send("POST", path, Some(&served.agent), content_type, body)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_are_refused_with_the_error_object_and_change_nothing() {
    let served = Served::start().await;
    let wave = served.wave().await;
    let good = open_body(&wave, served.dir.path(), json!({}));
    let before = served.snapshot().await;
    let json_type = Some("application/json");

    let mut deep = "[".repeat(10_000);
    deep.push_str(&"]".repeat(10_000));
    let mut deep_object = String::new();
    for _ in 0..10_000 {
        deep_object.push_str("{\"a\":");
    }
    deep_object.push('1');
    deep_object.push_str(&"}".repeat(10_000));
    let with = |key: &str, value: serde_json::Value| {
        let mut body = good.clone();
        body[key] = value;
        serde_json::to_vec(&body).unwrap()
    };
    let mut invalid_utf8 = serde_json::to_vec(&good).unwrap();
    let at = invalid_utf8.windows(5).position(|w| w == b"OAuth").unwrap();
    invalid_utf8[at] = 0xff;
    let mut unknown_nested = good.clone();
    unknown_nested["parent"]["colour"] = json!("red");

    // What, its content type and body, and the status, category and
    // words of the answer.
    type Case<'a> = (&'a str, Option<&'a str>, Vec<u8>, u16, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        (
            "malformed JSON",
            json_type,
            b"{\"parent\": ".to_vec(),
            400,
            "invalid_input",
            "not valid JSON",
        ),
        (
            "an empty body",
            json_type,
            Vec::new(),
            400,
            "invalid_input",
            "not valid JSON",
        ),
        (
            "not an object",
            json_type,
            b"[1, 2]".to_vec(),
            400,
            "invalid_input",
            "does not fit",
        ),
        (
            "a wrong content type",
            Some("text/plain"),
            serde_json::to_vec(&good).unwrap(),
            415,
            "unsupported_media_type",
            "text/plain",
        ),
        (
            "form data",
            Some("application/x-www-form-urlencoded"),
            b"a=b".to_vec(),
            415,
            "unsupported_media_type",
            "application/x-www-form-urlencoded",
        ),
        (
            "no content type",
            None,
            serde_json::to_vec(&good).unwrap(),
            415,
            "unsupported_media_type",
            "no Content-Type",
        ),
        (
            "invalid UTF-8",
            json_type,
            invalid_utf8,
            400,
            "invalid_input",
            "UTF-8",
        ),
        (
            "10,000-deep arrays",
            json_type,
            deep.into_bytes(),
            400,
            "invalid_input",
            "recursion limit",
        ),
        (
            "10,000-deep objects",
            json_type,
            deep_object.into_bytes(),
            400,
            "invalid_input",
            "recursion limit",
        ),
        (
            "a number out of range",
            json_type,
            br#"{"body_generation": 1e400}"#.to_vec(),
            400,
            "invalid_input",
            "number out of range",
        ),
        (
            "a huge integer",
            json_type,
            with("body_generation", json!(99_999_999_999_999_999_999_f64)),
            400,
            "invalid_input",
            "does not fit",
        ),
        (
            "a generation past u32",
            json_type,
            with("body_generation", json!(4_294_967_296_u64)),
            400,
            "invalid_input",
            "does not fit",
        ),
        (
            "a negative generation",
            json_type,
            with("body_generation", json!(-1)),
            400,
            "invalid_input",
            "does not fit",
        ),
        (
            "a 400-digit number",
            json_type,
            format!("{{\"body_generation\": {}}}", "9".repeat(400)).into_bytes(),
            400,
            "invalid_input",
            "JSON",
        ),
        (
            "an unknown field",
            json_type,
            with("colour", json!("red")),
            400,
            "invalid_input",
            "colour",
        ),
        (
            "an unknown nested field",
            json_type,
            serde_json::to_vec(&unknown_nested).unwrap(),
            400,
            "invalid_input",
            "parent.colour",
        ),
        (
            "a malformed id inside",
            json_type,
            with("parent", json!({"kind": "wave", "id": "wv_nope"})),
            400,
            "invalid_input",
            "wv_nope",
        ),
        (
            "a deadline that is not a duration",
            json_type,
            with("expires_in", json!("soon")),
            400,
            "invalid_input",
            "expires_in",
        ),
        (
            "a NUL in a string",
            json_type,
            with("reason", json!("a\u{0}b")),
            400,
            "invalid_input",
            "reason",
        ),
        (
            "a blank reason",
            json_type,
            with("reason", json!("  ")),
            400,
            "invalid_input",
            "reason",
        ),
    ];
    for (what, content_type, body, status, category, names) in cases {
        let reply = post_raw(&served, "/v1/handoffs", content_type, body).await;
        let kind = reply.error(status, category);
        assert_eq!(kind, category, "{what}");
        let message = reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            message.contains(names),
            "{what}: {message:?} does not name {names:?}"
        );
    }

    // Both deadlines at once: refused, naming them.
    let mut both = good.clone();
    both["expires_in"] = json!("1h");
    both["expires_at"] = json!("2099-01-01T00:00:00Z");
    let reply = served.post("/v1/handoffs", &served.agent, &both).await;
    reply.error(400, "invalid_input");

    // Bodies of the other routes.
    let id = "ih_01a23770-d145-7233-b23a-4c031002983d";
    for (path, body, status, category) in [
        (
            format!("/v1/handoffs/{id}/complete"),
            json!({"summary": "x", "extra": 1}),
            400,
            "invalid_input",
        ),
        (
            format!("/v1/handoffs/{id}/complete"),
            json!({}),
            400,
            "invalid_input",
        ),
        (
            format!("/v1/handoffs/{id}/fail"),
            json!({"summary": "wrong field"}),
            400,
            "invalid_input",
        ),
        (
            format!("/v1/handoffs/{id}/extend"),
            json!({}),
            400,
            "invalid_input",
        ),
        (
            format!("/v1/handoffs/{id}/extend"),
            json!({"by": "1h", "until": "2099-01-01T00:00:00Z"}),
            400,
            "invalid_input",
        ),
        (
            format!("/v1/handoffs/{id}/claim-wake"),
            json!({"generation": "two"}),
            400,
            "invalid_input",
        ),
        (
            format!("/v1/handoffs/{id}/claim-wake"),
            json!({"generation": 1}),
            404,
            "not_found",
        ),
        (
            format!("/v1/handoffs/{id}/claim-wake"),
            json!({"generation": 0}),
            400,
            "invalid_input",
        ),
        (
            "/v1/handoffs/ih_nope/claim-wake".to_string(),
            json!({"generation": 1}),
            400,
            "invalid_input",
        ),
        (
            "/v1/waves".to_string(),
            json!({"id": "wv_x"}),
            400,
            "invalid_input",
        ),
        (
            "/v1/tasks".to_string(),
            json!({"task": {}, "pr": {}, "more": true}),
            400,
            "invalid_input",
        ),
    ] {
        let token =
            if path.contains("/complete") || path.contains("/fail") || path.contains("/extend") {
                &served.person
            } else {
                &served.agent
            };
        let reply = served.post(&path, token, &body).await;
        reply.error(status, category);
    }
    let reply = served
        .send(
            "POST",
            &format!("/v1/handoffs/{id}/attach"),
            Some(&served.person),
            Some("application/json"),
            b"{\"x\":1}".to_vec(),
        )
        .await;
    reply.error(400, "invalid_input");
    let reply = served
        .send(
            "POST",
            "/v1/import",
            Some(&served.operator),
            Some("application/json"),
            b"{}".to_vec(),
        )
        .await;
    reply.error(415, "unsupported_media_type");
    let reply = served
        .send(
            "POST",
            "/v1/import",
            Some(&served.operator),
            Some("application/x-ndjson"),
            b"not an export\n".to_vec(),
        )
        .await;
    // The store holds records: refused before the body is looked at.
    assert_eq!(reply.error(409, "conflict"), "not_empty");
    let reply = served
        .send(
            "POST",
            "/v1/import",
            Some(&served.operator),
            Some("application/x-ndjson"),
            vec![0xff, 0xfe, b'\n'],
        )
        .await;
    assert!(reply.status == 400 || reply.status == 409, "{}", reply.text);

    assert_eq!(
        served.snapshot().await,
        before,
        "a refused request wrote something"
    );
    let health = served.send("GET", "/healthz", None, None, Vec::new()).await;
    assert_eq!(health.status, 200);
    served.stop().await;
}

/// The attach boundary (C29): an open whose environment sets a name that
/// changes how programs load or start is 400 `invalid_input` naming the
/// name, never a 500, whether it would create a handoff, replay the
/// parent's active one or return its handoff for a step; nothing is
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_whose_environment_changes_how_programs_start_is_400_naming_it() {
    let served = Served::start().await;
    let wave = served.wave().await;
    let stepped = served.wave().await;
    let dir = served.dir.path();
    let opened = served
        .post(
            "/v1/handoffs",
            &served.agent,
            &open_body(&wave, dir, json!({})),
        )
        .await;
    assert_eq!(opened.status, 201, "{}", opened.text);
    let step = json!({"step": "login@turn-1"});
    let at_step = served
        .post(
            "/v1/handoffs",
            &served.agent,
            &open_body(&stepped, dir, step.clone()),
        )
        .await;
    assert_eq!(at_step.status, 201, "{}", at_step.text);
    let fresh = served.wave().await;
    let before = served.snapshot().await;
    for name in [
        "BASH_ENV",
        "LD_PRELOAD",
        "PROMPT_COMMAND",
        "GIT_SSH_COMMAND",
    ] {
        let mut environment = json!({"environment": {"LF_HOME": "/tmp/lf"}});
        environment["environment"][name] = json!("/tmp/x");
        let mut stepped_environment = environment.clone();
        stepped_environment["step"] = step["step"].clone();
        for body in [
            open_body(&fresh, dir, environment.clone()),
            open_body(&wave, dir, environment),
            open_body(&stepped, dir, stepped_environment),
        ] {
            let reply = served.post("/v1/handoffs", &served.agent, &body).await;
            assert_eq!(reply.error(400, "invalid_input"), "invalid_input");
            let message = reply.json()["error"]["message"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(message.contains(name), "{message:?} does not name {name}");
        }
    }
    assert_eq!(
        served.snapshot().await,
        before,
        "a refused open wrote something"
    );
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_ids_methods_and_queries_are_4xx_with_the_error_object() {
    let served = Served::start().await;
    let id = served.open_id().await;
    let before = served.snapshot().await;
    let unknown = "ih_01a23770-d145-7233-b23a-4c031002983d";
    let person = served.person.clone();
    for (method, path, token, status, category) in [
        (
            "GET",
            "/v2/handoffs".to_string(),
            Some(&person),
            404,
            "not_found",
        ),
        ("GET", "/nope".to_string(), None, 404, "not_found"),
        (
            "GET",
            "/v1/handoffs/x/y/z".to_string(),
            Some(&person),
            404,
            "not_found",
        ),
        (
            "GET",
            format!("/v1/handoffs/{unknown}"),
            Some(&person),
            404,
            "not_found",
        ),
        (
            "GET",
            format!("/v1/handoffs/{unknown}/history"),
            Some(&person),
            404,
            "not_found",
        ),
        (
            "GET",
            format!("/v1/handoffs/{unknown}/wait?timeout=0ms"),
            Some(&person),
            404,
            "not_found",
        ),
        (
            "GET",
            "/v1/handoffs/ih_nope".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/handoffs/%FF%FE".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/waves/wv_01a23770-d145-7233-b23a-4c031002983d".to_string(),
            Some(&person),
            404,
            "not_found",
        ),
        (
            "GET",
            "/v1/waves/ih_01a23770-d145-7233-b23a-4c031002983d".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/task-prs/pr_01a23770-d145-7233-b23a-4c031002983d".to_string(),
            Some(&person),
            404,
            "not_found",
        ),
        (
            "DELETE",
            format!("/v1/handoffs/{id}"),
            Some(&person),
            405,
            "method_not_allowed",
        ),
        (
            "PUT",
            "/v1/handoffs".to_string(),
            Some(&person),
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            format!("/v1/handoffs/{id}/complete"),
            Some(&person),
            405,
            "method_not_allowed",
        ),
        (
            "GET",
            "/v1/handoffs?limit=ten".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/handoffs?limit=0".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/handoffs?limit=99999999999999999999999".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/handoffs?status=done".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/handoffs?sort=age".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/handoffs?older_than=%FF".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            format!("/v1/handoffs?after={unknown}"),
            Some(&person),
            404,
            "not_found",
        ),
        (
            "GET",
            format!("/v1/handoffs/{id}/wait?timeout=1h"),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/events?from=-1".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        (
            "GET",
            "/v1/events?from=1&from=2".to_string(),
            Some(&person),
            400,
            "invalid_input",
        ),
        ("GET", "/metrics".to_string(), None, 401, "unauthorized"),
        (
            "GET",
            "/v1/openapi.json".to_string(),
            None,
            401,
            "unauthorized",
        ),
    ] {
        let reply = served
            .send(method, &path, token.map(String::as_str), None, Vec::new())
            .await;
        reply.error(status, category);
        assert!(
            !reply.text.contains(&person),
            "the answer repeats the token"
        );
    }
    let reply = served
        .client
        .get(format!("{}/v1/events", served.url))
        .bearer_auth(&served.person)
        .header("last-event-id", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 400);
    assert_eq!(served.snapshot().await, before);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_are_413_whether_or_not_they_say_their_length() {
    let served = Served::start_with(Limits {
        max_body: 4096,
        max_import_body: 8192,
        ..Limits::default()
    })
    .await;
    let wave = served.wave().await;
    let before = served.snapshot().await;
    let mut big = open_body(&wave, served.dir.path(), json!({}));
    big["reason"] = json!("x".repeat(5000));
    let bytes = serde_json::to_vec(&big).unwrap();
    let reply = served
        .send(
            "POST",
            "/v1/handoffs",
            Some(&served.agent),
            Some("application/json"),
            bytes.clone(),
        )
        .await;
    let kind = reply.error(413, "payload_too_large");
    assert_eq!(kind, "payload_too_large");
    // Without a length: sent in chunks, cut when the limit is passed.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(1000).map(|c| Ok(c.to_vec())).collect();
    let response = served
        .client
        .post(format!("{}/v1/handoffs", served.url))
        .bearer_auth(&served.agent)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    // An import goes to an empty store.
    let empty = Served::start_with(Limits {
        max_body: 4096,
        max_import_body: 8192,
        ..Limits::default()
    })
    .await;
    let import = vec![b'x'; 9000];
    let reply = empty
        .send(
            "POST",
            "/v1/import",
            Some(&empty.operator),
            Some("application/x-ndjson"),
            import.clone(),
        )
        .await;
    reply.error(413, "payload_too_large");
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        import.chunks(1000).map(|c| Ok(c.to_vec())).collect();
    let response = empty
        .client
        .post(format!("{}/v1/import", empty.url))
        .bearer_auth(&empty.operator)
        .header("content-type", "application/x-ndjson")
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert!(
        [413, 400].contains(&response.status().as_u16()),
        "a chunked import over the limit: {}",
        response.status()
    );
    for body in [
        b"not an export\n".to_vec(),
        vec![0xff, 0xfe, b'\n'],
        Vec::new(),
    ] {
        let reply = empty
            .send(
                "POST",
                "/v1/import",
                Some(&empty.operator),
                Some("application/x-ndjson"),
                body,
            )
            .await;
        reply.error(400, "invalid_input");
    }
    assert!(empty
        .store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap()
        .is_empty());
    empty.stop().await;
    assert_eq!(served.snapshot().await, before);
    // A body within the limit is served.
    let reply = served
        .post(
            "/v1/handoffs",
            &served.agent,
            &open_body(&wave, served.dir.path(), json!({})),
        )
        .await;
    assert_eq!(reply.status, 201, "{}", reply.text);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bodies_never_give_a_5xx() {
    let served = Served::start().await;
    let wave = served.wave().await;
    let good = serde_json::to_vec(&open_body(&wave, served.dir.path(), json!({}))).unwrap();
    let before = served.snapshot().await;
    // A fixed-seed generator: the same bodies every run.
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..300 {
        let mut body = good.clone();
        match round % 3 {
            // Flip bytes of a good body.
            0 => {
                for _ in 0..(1 + next() % 4) {
                    let at = (next() as usize) % body.len();
                    body[at] = (next() % 256) as u8;
                }
            }
            // Cut it short.
            1 => body.truncate((next() as usize) % body.len()),
            // Random bytes.
            _ => body = (0..(next() % 200)).map(|_| (next() % 256) as u8).collect(),
        }
        let reply = served
            .send(
                "POST",
                "/v1/handoffs",
                Some(&served.agent),
                Some("application/json"),
                body.clone(),
            )
            .await;
        assert!(
            (400..500).contains(&reply.status) || reply.status == 201 || reply.status == 200,
            "round {round}: {} {}",
            reply.status,
            reply.text
        );
        if reply.status >= 400 {
            assert!(reply.json()["error"]["kind"].is_string());
        }
    }
    // A flipped byte inside a string can still be a good request, which
    // opens (or reuses) the wave's handoff; anything else wrote nothing.
    let after = served.snapshot().await;
    let opened = served
        .store
        .list_interactive_handoffs(ListQuery::default())
        .await
        .unwrap();
    assert!(opened.len() <= 1);
    if opened.is_empty() {
        assert_eq!(after, before);
    }
    served.stop().await;
}

/// `GET /v1/parents` answers the parents as `{kind, value}`; a bad query
/// (a typo, an unknown kind, a malformed id, a page out of range) is 400,
/// an unknown wave or project 404, an agent's token 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parent_list_refuses_bad_queries_and_unknown_parents() {
    let served = Served::start().await;
    served.open_id().await;
    let person = served.person.clone();
    let listed = served.get("/v1/parents", &person).await;
    assert_eq!(listed.status, 200, "{}", listed.text);
    let parents = listed.json();
    let wave = parents
        .as_array()
        .unwrap()
        .iter()
        .find(|parent| parent["kind"] == "wave")
        .unwrap_or_else(|| panic!("no wave in {parents}"));
    let wave_id = wave["value"]["id"].as_str().unwrap();
    let under = served
        .get(&format!("/v1/parents?wave={wave_id}&kind=wave"), &person)
        .await;
    assert_eq!(under.json(), json!([wave]));

    let unknown_wave = "wv_01a23770-d145-7233-b23a-4c031002983d";
    let unknown_project = "ps_01a23770-d145-7233-b23a-4c031002983d";
    for (query, status, category) in [
        ("kind=handoff", 400, "invalid_input"),
        ("kind=Wave", 400, "invalid_input"),
        ("knd=wave", 400, "invalid_input"),
        ("kind=wave&kind=task", 400, "invalid_input"),
        (
            "wave=ps_01a23770-d145-7233-b23a-4c031002983d",
            400,
            "invalid_input",
        ),
        ("project=nope", 400, "invalid_input"),
        (
            "after=ih_01a23770-d145-7233-b23a-4c031002983d",
            400,
            "invalid_input",
        ),
        ("limit=0", 400, "invalid_input"),
        ("limit=1001", 400, "invalid_input"),
        ("limit=ten", 400, "invalid_input"),
        (&format!("wave={unknown_wave}") as &str, 404, "not_found"),
        (
            &format!("project={unknown_project}") as &str,
            404,
            "not_found",
        ),
    ] {
        let reply = served.get(&format!("/v1/parents?{query}"), &person).await;
        reply.error(status, category);
    }
    served
        .get("/v1/parents", &served.agent)
        .await
        .error(403, "forbidden");
    served.stop().await;
}
