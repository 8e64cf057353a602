//! A question with a shape (C26) on the service's faces: the routes take
//! `choices`, `form`, `on_expiry` and `answer` and refuse an answer that
//! does not fit with a 400 naming the field and the rule, writing
//! nothing; the OpenAPI document describes them; the `http` backend
//! passes answers through; the inbox shows one button per choice and a
//! form's typed inputs, keeps a refused form's values with the message
//! beside the field; a notification carries one signed link per choice,
//! whose GET changes nothing and whose POST completes with that choice
//! once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use lf_handoff_adapters::{open_store, HttpConfig, StorageConfig, Token};
use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_domain::interactive_handoff::{Answer, InteractiveHandoffOutcome};
use lf_handoff_domain::testing::{sample_form_answer, SAMPLE_FORM};
use lf_handoff_server::NotifyConfig;
use serde_json::{json, Value};
use support::{browse_with, schema, sign_in_cookie, Reply, Served};

fn document() -> Value {
    serde_json::from_str(&lf_handoff_api::openapi::document_json()).unwrap()
}

/// Asserts `reply`'s body fits the document's schema of `path`'s
/// `method` answer of its status.
fn fits(reply: &Reply, path: &str, method: &str) -> Value {
    let document = document();
    let media = &document["paths"][path][method]["responses"][reply.status.to_string()]["content"]
        ["application/json"];
    assert!(media.is_object(), "{method} {path} {}", reply.status);
    let body = reply.json();
    if let Err(why) = schema::check(&document, &media["schema"], &body) {
        panic!("{method} {path}: {why}\n{}", reply.text);
    }
    body
}

fn form() -> Value {
    serde_json::from_str(SAMPLE_FORM).unwrap()
}

async fn open_asking(served: &Served, extra: Value) -> String {
    let reply = served.open(extra).await;
    reply["handoff"]["id"].as_str().unwrap().to_string()
}

/// Asserts a finish of `id` with `body` is a 400 of invalid input whose
/// message holds each of `words`, and that nothing was written.
async fn refused(served: &Served, id: &str, route: &str, body: Value, words: &[&str]) {
    let path = format!("/v1/handoffs/{id}/{route}");
    refused_post(served, &path, &served.person, body, words).await;
}

/// Asserts a POST of `body` to `path` is a 400 of invalid input whose
/// message holds each of `words`, and that nothing was written.
async fn refused_post(served: &Served, path: &str, token: &str, body: Value, words: &[&str]) {
    let before = served.snapshot().await;
    let reply = served.post(path, token, &body).await;
    reply.error(400, "invalid_input");
    let message = reply.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    for word in words {
        assert!(message.contains(word), "{body}: {word:?} not in {message}");
    }
    assert_eq!(served.snapshot().await, before, "{body}: nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn choices_are_opened_answered_and_checked_through_the_routes() {
    let served = Served::start().await;
    let opened = served
        .post(
            "/v1/handoffs",
            &served.agent,
            &support::open_body(
                &served.wave().await,
                served.dir.path(),
                json!({"choices": [{"value": "allow", "label": "Allow"}, "deny"],
                       "on_expiry": "deny", "expires_in": "1h"}),
            ),
        )
        .await;
    assert_eq!(opened.status, 201, "{}", opened.text);
    let body = fits(&opened, "/v1/handoffs", "post");
    let id = body["handoff"]["id"].as_str().unwrap().to_string();
    assert_eq!(
        body["handoff"]["choices"],
        json!([{"value": "allow", "label": "Allow"}, {"value": "deny", "label": "deny"}])
    );
    assert_eq!(body["handoff"]["on_expiry"], "deny");
    assert_eq!(body["handoff"]["answer"], Value::Null);

    let path = format!("/v1/handoffs/{id}/complete");
    refused(
        &served,
        &id,
        "complete",
        json!({"summary": "ok", "answer": "maybe"}),
        &["\"maybe\"", "not one of the choices", "allow, deny"],
    )
    .await;
    refused(
        &served,
        &id,
        "complete",
        json!({"summary": "ok"}),
        &["answer"],
    )
    .await;
    refused(
        &served,
        &id,
        "complete",
        json!({"summary": "ok", "answer": {"allow": true}}),
        &["not one of the choices"],
    )
    .await;
    refused(
        &served,
        &id,
        "fail",
        json!({"reason": "no", "answer": "deny"}),
        &["answer"],
    )
    .await;

    // The agent waits; the person allows.
    let waiting = {
        let (client, url, token) = (
            served.client.clone(),
            format!("{}/v1/handoffs/{id}/wait?timeout=30s", served.url),
            served.agent.clone(),
        );
        tokio::spawn(async move {
            let reply = client.get(url).bearer_auth(token).send().await.unwrap();
            reply.json::<Value>().await.unwrap()
        })
    };
    let done = served
        .post(
            &path,
            &served.person,
            &json!({"summary": "go ahead", "answer": "allow"}),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.text);
    let done = fits(&done, "/v1/handoffs/{id}/complete", "post");
    assert_eq!(done["answer"], "allow");
    assert_eq!(done["status"], "completed");
    let waited = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(waited["ended"], true, "{waited}");
    assert_eq!(waited["handoff"]["answer"], "allow", "{waited}");

    // Finishing again with the same answer changes nothing; another
    // answer is a conflict.
    let again = served
        .post(
            &path,
            &served.person,
            &json!({"summary": "go ahead", "answer": "allow"}),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.text);
    let other = served
        .post(
            &path,
            &served.person,
            &json!({"summary": "go ahead", "answer": "deny"}),
        )
        .await;
    other.error(409, "conflict");

    // The agent's claim and the history carry the answer.
    let claimed = served
        .post(
            &format!("/v1/handoffs/{id}/claim-wake"),
            &served.agent,
            &json!({"generation": 1}),
        )
        .await;
    let claimed = fits(&claimed, "/v1/handoffs/{id}/claim-wake", "post");
    assert_eq!(claimed["handoff"]["answer"], "allow", "{claimed}");
    let history = served
        .get(&format!("/v1/handoffs/{id}/history"), &served.person)
        .await;
    let history = fits(&history, "/v1/handoffs/{id}/history", "get");
    let finished = history
        .as_array()
        .unwrap()
        .iter()
        .find(|event| event["kind"] == "finished")
        .unwrap();
    assert_eq!(finished["answer"], "allow", "{history}");

    // The event stream (what `watch` follows) carries it too.
    let response = served
        .client
        .get(format!("{}/v1/events?from=0", served.url))
        .bearer_auth(&served.person)
        .send()
        .await
        .unwrap();
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    let started = Instant::now();
    let event = loop {
        if let Some(event) = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|event| event["kind"] == "finished" && event["handoff_id"] == id.as_str())
        {
            break event;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{text}");
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    };
    assert_eq!(event["answer"], "allow", "{event}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_is_answered_through_the_routes_and_a_spec_outside_the_subset_is_a_400() {
    let served = Served::start().await;
    let wave = served.wave().await;
    let open = |extra: Value| support::open_body(&wave, served.dir.path(), extra);

    // Specs outside the subset: each a 400 naming the rule, never a 500.
    let many: Vec<String> = (0..11).map(|n| format!("c{n}")).collect();
    let mut wide = json!({"type": "object", "properties": {}});
    for n in 0..21 {
        wide["properties"][format!("f{n}")] = json!({"type": "string"});
    }
    for (extra, words) in [
        (
            json!({"form": {"type": "object", "properties": {"a": {"type": "object"}}}}),
            vec!["\"a\""],
        ),
        (
            json!({"form": {"type": "object", "properties": {"a": {"type": "date"}}}}),
            vec!["date"],
        ),
        (
            json!({"form": {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}}),
            vec!["pattern"],
        ),
        (json!({"form": wide}), vec!["20"]),
        (json!({"choices": many}), vec!["choices", "10"]),
        (json!({"choices": ["a", "a"]}), vec!["\"a\"", "twice"]),
        (json!({"choices": ["a b", "c"]}), vec!["\"a b\""]),
        (
            json!({"choices": ["a", "b"], "form": form()}),
            vec!["not both"],
        ),
        (
            json!({"choices": ["a", "b"], "on_expiry": "c"}),
            vec!["on_expiry"],
        ),
        (json!({"on_expiry": "c"}), vec!["on_expiry"]),
    ] {
        refused_post(&served, "/v1/handoffs", &served.agent, open(extra), &words).await;
    }

    let id = served.open_form(SAMPLE_FORM, json!({})).await;
    let shown = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await;
    let shown = fits(&shown, "/v1/handoffs/{id}", "get");
    assert_eq!(shown["form"], form(), "the spec reads back as given");
    for (answer, words) in [
        (
            json!({"budget": 5000, "branch": "x"}),
            vec!["\"budget\"", "maximum 1000"],
        ),
        (
            json!({"budget": 1.5, "branch": "x"}),
            vec!["\"budget\"", "integer"],
        ),
        (json!({"budget": 1}), vec!["\"branch\"", "required"]),
        (
            json!({"budget": 1, "branch": "x".repeat(21)}),
            vec!["\"branch\"", "maxLength is 20"],
        ),
        (
            json!({"budget": 1, "branch": "x", "env": "qa"}),
            vec!["\"env\"", "allowed"],
        ),
        (
            json!({"budget": 1, "branch": "x", "ratio": 0.1}),
            vec!["\"ratio\"", "minimum"],
        ),
        (
            json!({"budget": 1, "branch": "x", "notify": "yes"}),
            vec!["\"notify\"", "boolean"],
        ),
        (
            json!({"budget": 1, "branch": "x", "extra": 1}),
            vec!["\"extra\""],
        ),
        (json!("allow"), vec!["object"]),
        (
            json!({"budget": 1, "branch": "x".repeat(70_000)}),
            vec!["65536"],
        ),
    ] {
        refused(
            &served,
            &id,
            "complete",
            json!({"summary": "s", "answer": answer}),
            &words,
        )
        .await;
    }
    // A hand-back may carry an answer; it must fit too.
    refused(
        &served,
        &id,
        "back",
        json!({"summary": "s", "answer": {"budget": -1, "branch": "x"}}),
        &["\"budget\"", "minimum"],
    )
    .await;
    let back = served
        .post(
            &format!("/v1/handoffs/{id}/back"),
            &served.person,
            &json!({"summary": "half of it", "answer": sample_form_answer().0}),
        )
        .await;
    assert_eq!(back.status, 200, "{}", back.text);
    let back = fits(&back, "/v1/handoffs/{id}/back", "post");
    assert_eq!(back["answer"], sample_form_answer().0);
    assert_eq!(back["status"], "handed_back");
}

#[test]
fn the_openapi_document_describes_choices_forms_and_answers() {
    let document = document();
    let schemas = &document["components"]["schemas"];
    let text = document.to_string();
    for name in ["Choice", "FormSpec", "Answer"] {
        assert!(schemas[name].is_object(), "{name} is not in the document");
    }
    let form = &schemas["FormSpec"];
    assert_eq!(form["type"], "object");
    let field = &form["properties"]["properties"]["additionalProperties"];
    assert_eq!(
        field["properties"]["type"]["enum"],
        json!(["string", "integer", "number", "boolean"])
    );
    for keyword in [
        "title",
        "description",
        "default",
        "enum",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
    ] {
        assert!(field["properties"][keyword].is_object(), "{keyword}");
    }
    for (schema, fields) in [
        ("OpenRequest", &["choices", "form", "on_expiry"][..]),
        ("Summary", &["answer"][..]),
        (
            "HandoffJson",
            &["choices", "form", "on_expiry", "answer"][..],
        ),
        ("HandoffEvent", &["answer"][..]),
    ] {
        for field in fields {
            assert!(
                text.contains(&format!("\"{field}\"")),
                "{schema}.{field} not in the document"
            );
        }
    }
    // The form is described by its schema, not as any object.
    assert!(text.contains("#/components/schemas/FormSpec"), "{text}");
    // The sample form and its answer fit the document's schemas.
    schema::check(&document, form, &self::form()).unwrap();
    let mut handoff_json = json!({});
    handoff_json["answer"] = sample_form_answer().0;
    schema::check(&document, &schemas["Answer"], &handoff_json["answer"]).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_backend_passes_answers_through() {
    let served = Served::start().await;
    let config = HttpConfig::new(&served.url)
        .unwrap()
        .with_token(Token::new(&served.person).unwrap());
    let person = open_store(&StorageConfig::Http(config)).await.unwrap();

    let id = InteractiveHandoffId::parse(&served.open_form(SAMPLE_FORM, json!({})).await).unwrap();
    let record = person.get_interactive_handoff(&id).await.unwrap().unwrap();
    assert_eq!(record.form, Some(lf_handoff_domain::testing::sample_form()));
    let complete = InteractiveHandoffOutcome::Completed {
        summary: "settings".into(),
    };
    let bad = Answer(json!({"budget": 5000, "branch": "x"}));
    let error = person
        .finish_interactive_handoff(&id, &complete, Some(&bad))
        .await
        .unwrap_err();
    assert!(error.is_invalid_input(), "{error}");
    assert!(error.message().contains("budget"), "{error}");
    let finished = person
        .finish_interactive_handoff(&id, &complete, Some(&sample_form_answer()))
        .await
        .unwrap();
    assert_eq!(finished.answer, Some(sample_form_answer()));
    let read = person.get_interactive_handoff(&id).await.unwrap().unwrap();
    assert_eq!(read.answer, Some(sample_form_answer()));
    let history = person.history(&id).await.unwrap();
    assert_eq!(history.last().unwrap().answer, Some(sample_form_answer()));
    // Behind the service's back: the same answer, stored.
    let stored = served.store.get_interactive_handoff(&id).await.unwrap();
    assert_eq!(stored.unwrap().answer, Some(sample_form_answer()));
}

/// The inbox page of `id` for the signed-in `cookie`.
async fn page(served: &Served, cookie: &str, id: &str) -> Reply {
    let reply = browse_with(
        served,
        "GET",
        &format!("/inbox/{id}"),
        Some(cookie),
        None,
        &[],
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply
}

async fn post_page(served: &Served, cookie: &str, id: &str, form: &[(&str, &str)]) -> Reply {
    support::browse(
        served,
        "POST",
        &format!("/inbox/{id}"),
        Some(cookie),
        Some(form),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_offers_a_button_per_choice_and_answers_with_it() {
    let served = Served::start().await;
    let cookie = sign_in_cookie(&served).await;
    let hostile = "<b>Allow</b> & \"go\"";
    let id = open_asking(
        &served,
        json!({"choices": [{"value": "allow", "label": hostile}, {"value": "deny", "label": "Deny"}]}),
    )
    .await;
    let shown = page(&served, &cookie, &id).await;
    assert!(
        shown
            .text
            .contains("name=\"choice\" value=\"allow\">&#60;b&#62;Allow&#60;/b&#62; &#38; &#34;go&#34;</button>")
            || shown.text.contains(
                "name=\"choice\" value=\"allow\">&lt;b&gt;Allow&lt;/b&gt; &amp; &quot;go&quot;</button>"
            ),
        "{}",
        shown.text
    );
    assert!(shown
        .text
        .contains("name=\"choice\" value=\"deny\">Deny</button>"));
    assert!(!shown.text.contains("<b>Allow"), "labels are escaped");
    assert!(
        !shown.text.contains("value=\"complete\""),
        "a handoff that asks is completed by its answer"
    );
    let inbox = browse_with(&served, "GET", "/", Some(&cookie), None, &[]).await;
    assert!(inbox.text.contains("asks: allow | deny"), "{}", inbox.text);

    let csrf = shown.csrf();
    let before = served.snapshot().await;
    let wrong = post_page(
        &served,
        &cookie,
        &id,
        &[("csrf", &csrf), ("action", "answer"), ("choice", "maybe")],
    )
    .await;
    assert_eq!(wrong.status, 400, "{}", wrong.text);
    assert!(
        wrong.text.contains("not one of the choices"),
        "{}",
        wrong.text
    );
    assert_eq!(served.snapshot().await, before);

    let done = post_page(
        &served,
        &cookie,
        &id,
        &[("csrf", &csrf), ("action", "answer"), ("choice", "deny")],
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.text);
    let record = served
        .store
        .get_interactive_handoff(&InteractiveHandoffId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.answer, Some(Answer::choice("deny")));
    assert_eq!(record.outcome.unwrap().text(), "Chose Deny");
    let after = page(&served, &cookie, &id).await;
    assert!(after.text.contains("Deny (deny)"), "{}", after.text);
    assert!(!after.text.contains("name=\"choice\""));
    let finished = browse_with(
        &served,
        "GET",
        "/?status=finished",
        Some(&cookie),
        None,
        &[],
    )
    .await;
    assert!(finished.text.contains("answer: deny"), "{}", finished.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_renders_a_form_and_keeps_a_refused_answer_beside_its_field() {
    let served = Served::start().await;
    let cookie = sign_in_cookie(&served).await;
    let spec = SAMPLE_FORM.replace(
        r#""maxLength": 20}"#,
        r#""maxLength": 20, "description": "<script>alert(1)</script> branch"}"#,
    );
    assert_ne!(spec, SAMPLE_FORM);
    let id = served.open_form(&spec, json!({})).await;
    let shown = page(&served, &cookie, &id).await;
    let text = &shown.text;
    for input in [
        "type=\"number\" id=\"field-budget\" name=\"f.budget\" value=\"\" required min=\"0\" max=\"1000\" step=\"1\"",
        "type=\"text\" id=\"field-branch\" name=\"f.branch\" value=\"\" required minlength=\"1\" maxlength=\"20\"",
        "<select id=\"field-env\" name=\"f.env\"",
        "<option value=\"staging\" selected>staging</option>",
        "type=\"number\" id=\"field-ratio\" name=\"f.ratio\" value=\"\" min=\"0.5\" step=\"any\"",
        "type=\"checkbox\" id=\"field-notify\" name=\"f.notify\" value=\"true\">",
        "Budget (EUR) <span class=\"required\"",
        "What the run may spend",
        "Deploy settings",
    ] {
        assert!(text.contains(input), "{input:?} not in {text}");
    }
    assert!(!text.contains("<script>alert"), "a description is escaped");

    let csrf = shown.csrf();
    let before = served.snapshot().await;
    let refused = post_page(
        &served,
        &cookie,
        &id,
        &[
            ("csrf", &csrf),
            ("action", "answer"),
            ("f.budget", "5000"),
            ("f.branch", "release/<1>"),
            ("f.env", "prod"),
            ("f.notify", "true"),
        ],
    )
    .await;
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(served.snapshot().await, before, "nothing written");
    let text = &refused.text;
    // The message beside the field, the values kept (escaped).
    assert!(text.contains("name=\"f.budget\" value=\"5000\""), "{text}");
    assert!(
        text.contains("value=\"release/&#60;1&#62;\"")
            || text.contains("value=\"release/&lt;1&gt;\""),
        "{text}"
    );
    assert!(
        text.contains("<option value=\"prod\" selected>prod</option>"),
        "{text}"
    );
    assert!(
        text.contains("name=\"f.notify\" value=\"true\" checked"),
        "{text}"
    );
    let budget = text.find("id=\"field-budget\"").unwrap();
    let error = text.find("class=\"error field-error\"").unwrap();
    let branch = text.find("id=\"field-branch\"").unwrap();
    assert!(
        budget < error && error < branch,
        "the message sits beside budget"
    );
    assert!(text.contains("5000 is above its maximum 1000"), "{text}");

    // Not a number at all: refused the same way.
    let typed = post_page(
        &served,
        &cookie,
        &id,
        &[
            ("csrf", &csrf),
            ("action", "answer"),
            ("f.budget", "lots"),
            ("f.branch", "b"),
        ],
    )
    .await;
    assert_eq!(typed.status, 400);
    assert!(
        typed.text.contains("is not a whole number"),
        "{}",
        typed.text
    );

    let done = post_page(
        &served,
        &cookie,
        &id,
        &[
            ("csrf", &csrf),
            ("action", "answer"),
            ("f.budget", "250"),
            ("f.branch", "release/1.2"),
            ("f.env", ""),
            ("f.ratio", ""),
            ("text", "Set."),
        ],
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.text);
    let record = served
        .store
        .get_interactive_handoff(&InteractiveHandoffId::parse(&id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        record.answer,
        Some(Answer(
            json!({"budget": 250, "branch": "release/1.2", "notify": false})
        )),
        "an unchecked checkbox is false; an empty optional field is left out"
    );
    assert_eq!(record.outcome.unwrap().text(), "Set.");
    let after = page(&served, &cookie, &id).await;
    assert!(
        after.text.contains("<dt>Budget (EUR)</dt><dd>250</dd>"),
        "{}",
        after.text
    );
    assert!(after.text.contains("<dd>no</dd>"), "{}", after.text);
}

/// A link's form sent to `path`, from this origin, without signing in.
async fn post_link(served: &Served, path: &str, form: &[(&str, &str)]) -> Reply {
    support::browse(served, "POST", path, None, Some(form)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_carries_a_one_tap_link_per_choice_that_acts_only_on_post() {
    let (hooks, received) = support::receiver().await;
    let mut notify = NotifyConfig::new(vec![format!("{hooks}/hook#for=oncall")]);
    notify.lease = Duration::from_secs(3);
    let served = Served::start_configured(|config| config.notify = Some(notify)).await;
    let told = support::told(
        &served,
        &received,
        &["/hook"],
        json!({"choices": [{"value": "allow", "label": "Allow it"}, {"value": "deny", "label": "Deny"}]}),
    )
    .await;
    let message = &told["/hook"];
    let choices = message["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2, "{message}");
    assert_eq!(choices[0]["value"], "allow");
    assert_eq!(choices[0]["label"], "Allow it");
    let text = message["text"].as_str().unwrap();
    for choice in choices {
        let link = choice["link"].as_str().unwrap();
        assert!(link.contains("choice="), "{link}");
        assert!(text.contains(link), "{text}");
    }
    assert!(text.contains("|Allow it> (allow)"), "{text}");
    let path = |link: &str| {
        let at = link.find("/h/").unwrap();
        link[at..].to_string()
    };
    let allow = path(choices[0]["link"].as_str().unwrap());
    let id = InteractiveHandoffId::parse(&told.id).unwrap();

    // Opened, as a chat's link preview would, twice: nothing changes.
    let before = served.snapshot().await;
    for _ in 0..2 {
        let shown = browse_with(&served, "GET", &allow, None, None, &[]).await;
        assert_eq!(shown.status, 200, "{}", shown.text);
        assert!(
            shown.text.contains("Confirm your answer: Allow it"),
            "{}",
            shown.text
        );
        assert!(shown.text.contains("name=\"choice\" value=\"allow\""));
        assert!(!shown.text.contains("value=\"deny\""), "only its choice");
    }
    assert_eq!(served.snapshot().await, before, "a GET changes nothing");
    let shown = browse_with(&served, "GET", &allow, None, None, &[]).await;
    let csrf = shown.csrf();

    // A forged choice: the signature no longer holds.
    let forged = allow.replace("choice=allow", "choice=deny");
    for method in ["GET", "POST"] {
        let reply = browse_with(
            &served,
            method,
            &forged,
            None,
            Some(&[("csrf", &csrf), ("action", "answer"), ("choice", "deny")]),
            &[("origin", served.url.as_str())],
        )
        .await;
        assert_eq!(reply.status, 403, "{method}: {}", reply.text);
    }
    // The link's form may give its own choice only.
    let confirm = [
        ("csrf", csrf.as_str()),
        ("action", "answer"),
        ("choice", "allow"),
    ];
    for refused in [
        [confirm[0], confirm[1], ("choice", "deny")],
        [confirm[0], ("action", "fail"), ("text", "no")],
    ] {
        let reply = post_link(&served, &allow, &refused).await;
        assert_eq!(reply.status, 403, "{refused:?}: {}", reply.text);
    }
    assert_eq!(served.snapshot().await, before);

    let done = post_link(&served, &allow, &confirm).await;
    assert_eq!(done.status, 303, "{}", done.text);
    let record = served
        .store
        .get_interactive_handoff(&id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.answer, Some(Answer::choice("allow")));
    let history = served.store.history(&id).await.unwrap();
    assert_eq!(history.last().unwrap().actor.as_str(), "link:oncall");

    // A second POST changes nothing and says so.
    let finished = served.snapshot().await;
    let again = post_link(&served, &allow, &confirm).await;
    assert_eq!(again.status, 409, "{}", again.text);
    assert!(again.text.contains("already finished"), "{}", again.text);
    assert_eq!(served.snapshot().await, finished);
    let outcome = browse_with(&served, "GET", &allow, None, None, &[]).await;
    assert!(
        outcome.text.contains("Allow it (allow)"),
        "{}",
        outcome.text
    );
}
