//! The person's pages (C21, C22) through HTTP: sign-in and its cookie,
//! the anti-forgery token and the origin check on every form, signed
//! links (a GET changes nothing, a POST acts once as `link:NAME`, a
//! tampered, expired or rotated link or a pruned handoff is refused), an
//! oversized summary, hostile text shown as text, and the environment
//! names beside the attach command (C29).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use lf_handoff_adapters::GenerateId as _;
use lf_handoff_domain::id::{InteractiveHandoffId, WaveId};
use lf_handoff_domain::interactive_handoff::OpenOptions;
use lf_handoff_domain::wave::Wave;
use lf_handoff_server::links::LinkSecret;
use lf_handoff_server::tokens::{self, TokenTable};
use serde_json::{json, Value};
use support::{browse_with, Reply, Served};

/// The exact policy every page carries.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The answer to the printed sign-in URL of the person's token.
async fn signed_in(served: &Served) -> Reply {
    let signed = browse_with(
        served,
        "GET",
        &format!("/?token={}", served.person),
        None,
        None,
        &[],
    )
    .await;
    assert_eq!(signed.status, 303, "{}", signed.text);
    signed
}

/// The sign-in cookie's value for the person's token, as the printed
/// sign-in URL sets it.
async fn sign_in(served: &Served) -> String {
    cookie_value(
        &signed_in(served)
            .await
            .header("set-cookie")
            .unwrap_or_default(),
    )
}

/// The value of `lfh_session` in a `Set-Cookie` header.
fn cookie_value(set_cookie: &str) -> String {
    set_cookie
        .strip_prefix("lfh_session=")
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("no sign-in cookie in {set_cookie:?}"))
        .to_string()
}

async fn history_len(served: &Served, id: &str) -> usize {
    let id = InteractiveHandoffId::parse(id).unwrap();
    served.store.history(&id).await.unwrap().len()
}

async fn handoff(served: &Served, id: &str) -> Value {
    served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await
        .json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_signs_in_with_a_cookie_and_sees_the_inbox() {
    let served = Served::start().await;
    let opened = served
        .open(json!({"reason": "Log in to the staging console"}))
        .await;
    let id = opened["handoff"]["id"].as_str().unwrap().to_string();

    // Without a cookie: the sign-in form, with the policy.
    let anonymous = browse_with(&served, "GET", "/", None, None, &[]).await;
    assert_eq!(anonymous.status, 200);
    assert!(anonymous.text.contains("action=\"/sign-in\""));
    assert_eq!(
        anonymous
            .header("content-security-policy")
            .unwrap_or_default(),
        CSP
    );
    assert_eq!(
        anonymous.header("referrer-policy").unwrap_or_default(),
        "same-origin"
    );
    assert_eq!(
        anonymous.header("x-frame-options").unwrap_or_default(),
        "DENY"
    );
    assert!(!anonymous.text.contains("Log in to the staging console"));

    // The sign-in URL followed from another site's page is refused (it
    // would sign the person in as the link's maker), and sets no cookie.
    for site in ["cross-site", "same-site"] {
        let forged = browse_with(
            &served,
            "GET",
            &format!("/?token={}", served.person),
            None,
            None,
            &[("sec-fetch-site", site)],
        )
        .await;
        assert_eq!(forged.status, 403, "{site}");
        assert!(forged.headers.get("set-cookie").is_none(), "{site}");
    }

    // The printed sign-in URL: a cookie, and the token leaves the URL.
    let signed = signed_in(&served).await;
    assert_eq!(signed.header("location").unwrap_or_default(), "/");
    let cookie = signed.header("set-cookie").unwrap_or_default();
    let session = cookie_value(&cookie);
    // The cookie is a signed sign-in that lasts a week, never the token.
    assert!(session.starts_with("s2."), "{cookie}");
    assert!(!cookie.contains(&served.person), "{cookie}");
    assert!(cookie.contains("Max-Age=604800"), "{cookie}");
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP on loopback: {cookie}"
    );

    let inbox = browse_with(&served, "GET", "/", Some(&session), None, &[]).await;
    assert_eq!(inbox.status, 200, "{}", inbox.text);
    assert!(inbox.text.contains("Log in to the staging console"));
    assert!(inbox.text.contains(&format!("href=\"/inbox/{id}\"")));
    assert!(
        !inbox.text.contains(&served.person),
        "the token is never in the page"
    );
    let rows = browse_with(
        &served,
        "GET",
        "/inbox/rows?status=finished",
        Some(&session),
        None,
        &[],
    )
    .await;
    assert_eq!(rows.status, 200);
    assert!(rows.text.contains("Nothing waits with these filters"));
    let filtered = browse_with(
        &served,
        "GET",
        "/?status=nonsense",
        Some(&session),
        None,
        &[],
    )
    .await;
    assert_eq!(filtered.status, 400);
    assert!(filtered.text.contains("is not active, waiting"));

    // The sign-in form works too; another scope's or an unknown token
    // does not.
    let form = browse_with(
        &served,
        "POST",
        "/sign-in",
        None,
        Some(&[("token", &served.person)]),
        &[],
    )
    .await;
    assert_eq!(form.status, 303);
    for token in [&served.agent, &served.operator, &served.wrong] {
        let refused =
            browse_with(&served, "GET", &format!("/?token={token}"), None, None, &[]).await;
        assert_eq!(refused.status, 401);
        assert!(refused.header("set-cookie").unwrap_or_default().is_empty());
    }
    // A token is no sign-in, not even the person's; nor is a sign-in
    // whose tag or expiry was changed.
    let (expires, rest) = session["s2.".len()..].split_once('.').unwrap();
    let (nonce, tag) = rest.split_once('.').unwrap();
    let later: i64 = expires.parse::<i64>().unwrap() + 1;
    let changed = |text: &str| {
        format!(
            "{}{}",
            if text.starts_with('A') { 'B' } else { 'A' },
            &text[1..]
        )
    };
    for cookie in [
        served.agent.clone(),
        served.person.clone(),
        format!("s2.{later}.{nonce}.{tag}"),
        format!("s2.{expires}.{}.{tag}", changed(nonce)),
        format!("s2.{expires}.{nonce}.{}", changed(tag)),
        format!("s1.{expires}.{tag}"),
        "s2.1.AAAA.AAAA".to_string(),
    ] {
        let refused = browse_with(&served, "GET", "/", Some(&cookie), None, &[]).await;
        assert_eq!(refused.status, 401, "{cookie}");
        let read = served
            .client
            .get(format!("{}/v1/handoffs/{id}", served.url))
            .header("cookie", format!("lfh_session={cookie}"))
            .send()
            .await
            .unwrap();
        assert_eq!(read.status().as_u16(), 401, "{cookie}");
    }

    // The script's reads take the cookie; a change through the API does
    // not.
    let read = served
        .client
        .get(format!("{}/v1/handoffs/{id}", served.url))
        .header("cookie", format!("lfh_session={session}"))
        .send()
        .await
        .unwrap();
    assert_eq!(read.status().as_u16(), 200);
    let before = history_len(&served, &id).await;
    let change = served
        .client
        .post(format!("{}/v1/handoffs/{id}/complete", served.url))
        .header("cookie", format!("lfh_session={session}"))
        .json(&json!({"summary": "done"}))
        .send()
        .await
        .unwrap();
    assert_eq!(change.status().as_u16(), 401);
    assert_eq!(history_len(&served, &id).await, before);

    // A revoked token's cookie stops working once the file is read again.
    let path = served.dir.path().join("tokens");
    tokens::revoke(&path, "alice").unwrap();
    served
        .state
        .replace_tokens(TokenTable::new(tokens::read_file(&path).unwrap()).unwrap());
    let revoked = browse_with(&served, "GET", "/", Some(&session), None, &[]).await;
    assert_eq!(revoked.status, 401);
    assert!(revoked.text.contains("no longer valid"));
    assert!(revoked
        .header("set-cookie")
        .unwrap_or_default()
        .contains("Max-Age=0"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forms_need_their_anti_forgery_token_and_this_origin() {
    let served = Served::start().await;
    let id = served.open_id().await;
    let path = format!("/inbox/{id}");
    let session = sign_in(&served).await;
    let cookie = Some(session.as_str());
    let shown = browse_with(&served, "GET", &path, cookie, None, &[]).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    assert_eq!(
        shown.header("content-security-policy").unwrap_or_default(),
        CSP
    );
    // A person who has only the service can paste it: it names the store.
    assert!(
        shown
            .text
            .contains(&format!("lf-handoff --store {} attach {id}", served.url)),
        "{}",
        shown.text
    );
    assert!(shown.text.contains("LF_HANDOFF_TOKEN"));
    let csrf = shown.csrf();
    let before = history_len(&served, &id).await;

    let back = |csrf: &'static str| [("csrf", csrf), ("action", "back"), ("text", "done")];
    for (what, form, extra) in [
        (
            "no token",
            vec![("action", "back"), ("text", "done")],
            vec![],
        ),
        ("a wrong token", back("AAAA").to_vec(), vec![]),
        (
            "another site's origin",
            vec![
                ("csrf", csrf.as_str()),
                ("action", "back"),
                ("text", "done"),
            ],
            vec![("origin", "http://evil.example")],
        ),
        (
            "a cross-site fetch",
            vec![
                ("csrf", csrf.as_str()),
                ("action", "back"),
                ("text", "done"),
            ],
            vec![("sec-fetch-site", "cross-site")],
        ),
    ] {
        let refused = browse_with(&served, "POST", &path, cookie, Some(&form), &extra).await;
        assert_eq!(refused.status, 403, "{what}: {}", refused.text);
        assert!(refused.text.contains("nothing was changed"), "{what}");
    }
    // Without the cookie: sign in first.
    let anonymous = browse_with(
        &served,
        "POST",
        &path,
        None,
        Some(&[("csrf", &csrf), ("action", "back"), ("text", "x")]),
        &[],
    )
    .await;
    assert_eq!(anonymous.status, 401);
    // An unknown action, and a summary over the limit of a text (64 KiB).
    let odd = browse_with(
        &served,
        "POST",
        &path,
        cookie,
        Some(&[("csrf", &csrf), ("action", "delete")]),
        &[],
    )
    .await;
    assert_eq!(odd.status, 400);
    let long = "x".repeat(70_000);
    let oversized = browse_with(
        &served,
        "POST",
        &path,
        cookie,
        Some(&[("csrf", &csrf), ("action", "back"), ("text", &long)]),
        &[],
    )
    .await;
    assert_eq!(oversized.status, 400, "{}", &oversized.text[..200]);
    assert_eq!(
        history_len(&served, &id).await,
        before,
        "nothing was written"
    );

    // The right token, from this origin: handed back, as the person.
    let done = browse_with(
        &served,
        "POST",
        &path,
        cookie,
        Some(&[
            ("csrf", &csrf),
            ("action", "back"),
            ("text", "Logged in; go on"),
        ]),
        &[("origin", &served.url), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.text);
    assert_eq!(
        done.header("location").unwrap_or_default(),
        format!("{path}?done=back")
    );
    let record = handoff(&served, &id).await;
    assert_eq!(record["status"], "handed_back");
    assert_eq!(record["outcome"]["summary"], "Logged in; go on");
    let id_typed = InteractiveHandoffId::parse(&id).unwrap();
    let history = served.store.history(&id_typed).await.unwrap();
    assert_eq!(history.last().unwrap().actor.as_str(), "alice");
    let after = browse_with(
        &served,
        "GET",
        &format!("{path}?done=back"),
        cookie,
        None,
        &[],
    )
    .await;
    assert!(after.text.contains("Handed back."));
    assert!(after.text.contains("Logged in; go on"));
    assert!(
        !after.text.contains("name=\"action\""),
        "no forms once finished"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_link_shows_on_get_and_acts_once_on_post() {
    let served = Served::start().await;
    let id = served.open_id().await;
    let typed = InteractiveHandoffId::parse(&id).unwrap();
    let secret = served.state.link_secret();
    let now = served.store.now();
    let link = secret
        .sign(&typed, "carol", now + time::Duration::hours(1))
        .unwrap();
    let before = served.snapshot().await;

    // GET, as a mail scanner would, twice: nothing changes.
    for _ in 0..2 {
        let shown = browse_with(&served, "GET", &link.path(), None, None, &[]).await;
        assert_eq!(shown.status, 200, "{}", shown.text);
        assert!(shown.text.contains("link for carol"));
        assert_eq!(
            shown.header("content-security-policy").unwrap_or_default(),
            CSP
        );
        assert_eq!(
            shown.header("referrer-policy").unwrap_or_default(),
            "same-origin"
        );
    }
    assert_eq!(served.snapshot().await, before, "a GET changes nothing");

    let shown = browse_with(&served, "GET", &link.path(), None, None, &[]).await;
    let csrf = shown.csrf();
    // The inbox's token is no link token, and the other way round.
    let wrong = browse_with(
        &served,
        "POST",
        &link.path(),
        None,
        Some(&[("csrf", "AAAA"), ("action", "complete"), ("text", "x")]),
        &[],
    )
    .await;
    assert_eq!(wrong.status, 403);
    assert_eq!(served.snapshot().await, before);

    let done = browse_with(
        &served,
        "POST",
        &link.path(),
        None,
        Some(&[
            ("csrf", &csrf),
            ("action", "complete"),
            ("text", "Approved"),
        ]),
        &[],
    )
    .await;
    assert_eq!(done.status, 303, "{}", done.text);
    let record = handoff(&served, &id).await;
    assert_eq!(record["status"], "completed");
    let history = served.store.history(&typed).await.unwrap();
    assert_eq!(history.last().unwrap().actor.as_str(), "link:carol");

    // The link now shows the outcome; a second POST writes nothing.
    // (The link in a person's answer is one such link, made for them.)
    let given = handoff(&served, &id).await["link"]
        .as_str()
        .unwrap()
        .to_string();
    let given = given.strip_prefix(&served.url).unwrap();
    assert!(given.contains("for=alice"), "{given}");
    let shown_given = browse_with(&served, "GET", given, None, None, &[]).await;
    assert_eq!(shown_given.status, 200);
    assert!(shown_given.text.contains("link for alice"));
    let finished = served.snapshot().await;
    let outcome = browse_with(&served, "GET", &link.path(), None, None, &[]).await;
    assert_eq!(outcome.status, 200);
    assert!(outcome.text.contains("Completed") && outcome.text.contains("Approved"));
    let again = browse_with(
        &served,
        "POST",
        &link.path(),
        None,
        Some(&[("csrf", &csrf), ("action", "fail"), ("text", "no")]),
        &[],
    )
    .await;
    assert_eq!(again.status, 409);
    assert!(again.text.contains("already finished; nothing was changed"));
    assert!(again.text.contains("Approved"));
    assert_eq!(served.snapshot().await, finished);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_expired_rotated_and_pruned_links_are_refused() {
    let served = Served::start().await;
    let id = served.open_id().await;
    let typed = InteractiveHandoffId::parse(&id).unwrap();
    let now = served.store.now();
    let secret = served.state.link_secret();
    let good = secret
        .sign(&typed, "carol", now + time::Duration::hours(1))
        .unwrap();
    let before = served.snapshot().await;

    let tampered = good.path().replace("for=carol", "for=mallory");
    let expired = secret
        .sign(&typed, "carol", now - time::Duration::seconds(1))
        .unwrap()
        .path();
    for (what, path, status, words) in [
        ("tampered", tampered.as_str(), 403, "signature is not valid"),
        ("expired", expired.as_str(), 403, "expired at"),
        (
            "cut",
            &format!("/h/{id}?for=carol"),
            400,
            "not a whole link",
        ),
    ] {
        for method in ["GET", "POST"] {
            let refused = browse_with(
                &served,
                method,
                path,
                None,
                Some(&[("csrf", "x"), ("action", "complete"), ("text", "x")]),
                &[],
            )
            .await;
            assert_eq!(refused.status, status, "{what} {method}: {}", refused.text);
            assert!(refused.text.contains(words), "{what}: {}", refused.text);
        }
    }
    assert_eq!(served.snapshot().await, before);

    // A link to a handoff that is not there (pruned): a clear 404.
    let gone = InteractiveHandoffId::parse("ih_00000000-0000-4000-8000-000000000000").unwrap();
    let pruned = secret
        .sign(&gone, "carol", now + time::Duration::hours(1))
        .unwrap();
    let missing = browse_with(&served, "GET", &pruned.path(), None, None, &[]).await;
    assert_eq!(missing.status, 404);
    assert!(missing.text.contains("may have been pruned"));

    // Rotating the secret invalidates every link.
    served
        .state
        .replace_link_secret(LinkSecret::random().unwrap());
    let rotated = browse_with(&served, "GET", &good.path(), None, None, &[]).await;
    assert_eq!(rotated.status, 403);
    assert!(rotated.text.contains("rotated"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_text_is_shown_as_text() {
    let served = Served::start().await;
    let hostile = "<script>alert(1)</script> \"><img src=x onerror=alert(2)> \u{202e}gnp.exe";
    let opened = served
        .open(json!({
            "reason": hostile,
            "environment": {"HOSTILE": hostile},
            "step": "<b>step</b>",
        }))
        .await;
    let id = opened["handoff"]["id"].as_str().unwrap().to_string();
    let session = sign_in(&served).await;
    let cookie = Some(session.as_str());
    let link = served
        .state
        .link_secret()
        .sign(
            &InteractiveHandoffId::parse(&id).unwrap(),
            "<i>carol</i>",
            served.store.now() + time::Duration::hours(1),
        )
        .unwrap();
    for path in [
        "/".to_string(),
        format!("/inbox/{id}"),
        "/inbox/rows".into(),
        link.path(),
    ] {
        let shown = browse_with(&served, "GET", &path, cookie, None, &[]).await;
        assert_eq!(shown.status, 200, "{path}: {}", shown.text);
        for raw in ["<script>alert", "<img src=x", "<b>step", "<i>carol"] {
            assert!(!shown.text.contains(raw), "{path} holds {raw}");
        }
        assert!(
            shown
                .text
                .contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{path}: {}",
            shown.text
        );
        assert!(
            shown.text.contains("\u{202e}gnp.exe"),
            "{path}: shown as it is, as text"
        );
    }
}

/// The attach section of a handoff page: what a person reads before
/// running the command.
fn attach_section(page: &Reply) -> &str {
    let start = page
        .text
        .find("<section class=\"attach\">")
        .unwrap_or_else(|| panic!("no attach section: {}", page.text));
    let end = page.text[start..].find("</section>").unwrap() + start;
    &page.text[start..end]
}

/// The attach boundary (C29): the page names every environment variable
/// the attach command sets beside the command, as text, not folded away;
/// a handoff an earlier release stored with a name `open` now refuses is
/// shown with a warning that `lf-handoff attach` refuses to run it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handoff_page_names_the_environment_beside_the_attach_command() {
    let served = Served::start().await;
    // An export of an earlier release's store, holding `BASH_ENV`.
    let older_dir = tempfile::tempdir().unwrap();
    let older = support::sqlite_store(older_dir.path()).await;
    let stored = lf_handoff_conformance::fixtures::open_on_new_wave(&older, older_dir.path()).await;
    let mut file = Vec::new();
    older.export(&mut file, None).await.unwrap();
    let file = String::from_utf8(file).unwrap().replace(
        r#""environment":{"LF_HOME":"/tmp/lf"}"#,
        r#""environment":{"BASH_ENV":"/tmp/x","LF_HOME":"/tmp/lf"}"#,
    );
    served
        .store
        .import(&mut file.as_bytes(), None)
        .await
        .unwrap();
    let opened = served
        .open(json!({"environment": {"DEMO_TOKEN": "abc123", "<b>NAME</b>": "v"}}))
        .await;
    let id = opened["handoff"]["id"].as_str().unwrap();
    let session = sign_in(&served).await;
    let cookie = Some(session.as_str());

    let shown = browse_with(&served, "GET", &format!("/inbox/{id}"), cookie, None, &[]).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    let attach = attach_section(&shown);
    for name in [
        "<code>DEMO_TOKEN</code>",
        "<code>&#60;b&#62;NAME&#60;/b&#62;</code>",
    ] {
        assert!(
            attach.contains(name),
            "{name} is not beside the command: {attach}"
        );
    }
    assert!(!shown.text.contains("<b>NAME"), "a name is shown as text");
    assert!(!attach.contains("abc123"), "values stay folded away");
    assert!(!attach.contains("refuses to run"), "{attach}");

    let older_path = format!("/inbox/{}", stored.id);
    let older_page = browse_with(&served, "GET", &older_path, cookie, None, &[]).await;
    assert_eq!(older_page.status, 200, "{}", older_page.text);
    let attach = attach_section(&older_page);
    assert!(attach.contains("<code>BASH_ENV</code>"), "{attach}");
    assert!(attach.contains("<code>LF_HOME</code>"), "{attach}");
    assert!(attach.contains("refuses to run it"), "{attach}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_link_route_makes_a_link_for_a_name_and_a_time() {
    let served = Served::start().await;
    let id = served.open_id().await;
    let path = format!("/v1/handoffs/{id}/link");
    let made = served
        .post(
            &path,
            &served.person,
            &json!({"for": "alice", "valid_for": "2h"}),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.text);
    let made = made.json();
    assert_eq!(made["id"], json!(id));
    assert_eq!(made["for"], "alice");
    let link = made["link"].as_str().unwrap();
    let local = link.strip_prefix(&served.url).unwrap();
    assert!(
        local.starts_with(&format!("/h/{id}?for=alice&exp=")),
        "{link}"
    );
    let expires = time::OffsetDateTime::parse(
        made["expires"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let left = expires - served.store.now();
    assert!(left > time::Duration::minutes(119) && left <= time::Duration::hours(2));
    let shown = browse_with(&served, "GET", local, None, None, &[]).await;
    assert_eq!(shown.status, 200);
    assert!(shown.text.contains("link for alice"));

    // For the token's name by default.
    let mine = served.post(&path, &served.person, &json!({})).await.json();
    assert_eq!(mine["for"], "alice");

    served
        .post(&path, &served.agent, &json!({}))
        .await
        .error(403, "forbidden");
    served
        .post(&path, &served.person, &json!({"valid_for": "soon"}))
        .await
        .error(400, "invalid_input");
    served
        .post(&path, &served.person, &json!({"for": " "}))
        .await
        .error(403, "forbidden");
    served
        .post(&path, &served.person, &json!({"colour": "red"}))
        .await
        .error(400, "invalid_input");
    served
        .post(
            "/v1/handoffs/ih_00000000-0000-4000-8000-000000000000/link",
            &served.person,
            &json!({}),
        )
        .await
        .error(404, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_filters_by_status_parent_and_due() {
    let served = Served::start().await;
    let session = sign_in(&served).await;
    let soon = served
        .open(json!({"reason": "due soon", "expires_in": "30m"}))
        .await["handoff"]
        .clone();
    let later = served
        .open(json!({"reason": "due later", "expires_in": "3h"}))
        .await["handoff"]
        .clone();
    let done = served.open(json!({"reason": "done already"})).await["handoff"].clone();
    let done_id = done["id"].as_str().unwrap();
    let reply = served
        .post(
            &format!("/v1/handoffs/{done_id}/complete"),
            &served.person,
            &json!({"summary": "ok"}),
        )
        .await;
    assert_eq!(reply.status, 200);
    // Finished before its deadline: never due.
    let in_time = served
        .open(json!({"reason": "finished in time", "expires_in": "30m"}))
        .await["handoff"]
        .clone();
    let reply = served
        .post(
            &format!("/v1/handoffs/{}/fail", in_time["id"].as_str().unwrap()),
            &served.person,
            &json!({"reason": "no"}),
        )
        .await;
    assert_eq!(reply.status, 200);
    let rows = |query: &'static str| {
        let (served, session) = (&served, &session);
        async move {
            let shown = browse_with(
                served,
                "GET",
                &format!("/inbox/rows?{query}"),
                Some(session),
                None,
                &[],
            )
            .await;
            assert_eq!(shown.status, 200, "{query}: {}", shown.text);
            ["due soon", "due later", "done already", "finished in time"]
                .into_iter()
                .filter(|reason| shown.text.contains(reason))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(rows("").await, ["due soon", "due later"]);
    assert_eq!(rows("due=soon").await, ["due soon"]);
    assert_eq!(rows("status=all&due=soon").await, ["due soon"]);
    assert_eq!(rows("status=finished&due=soon").await, Vec::<&str>::new());
    assert_eq!(
        rows("status=finished").await,
        ["done already", "finished in time"]
    );
    assert_eq!(
        rows("status=all").await,
        ["due soon", "due later", "done already", "finished in time"]
    );
    let parent = format!("wave:{}", later["parent"]["id"].as_str().unwrap());
    let shown = browse_with(
        &served,
        "GET",
        &format!("/?parent={parent}"),
        Some(&session),
        None,
        &[],
    )
    .await;
    assert!(shown.text.contains("due later") && !shown.text.contains("due soon"));
    // Newest first.
    let all = browse_with(&served, "GET", "/", Some(&session), None, &[]).await;
    assert!(all.text.find("due later").unwrap() < all.text.find("due soon").unwrap());
    assert!(soon["expires_at"].is_string());
    let bad = browse_with(
        &served,
        "GET",
        "/?parent=nonsense",
        Some(&session),
        None,
        &[],
    )
    .await;
    assert_eq!(bad.status, 400);
}

/// The inbox shows the newest 500 handoffs, newest first: with more, the
/// oldest are the ones left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_shows_the_newest_handoffs_when_there_are_more_than_a_page() {
    let served = Served::start().await;
    let session = sign_in(&served).await;
    let count = 503;
    for n in 0..count {
        let wave = Wave::new(WaveId::new(), format!("wave {n}"), "/repo".into());
        served.store.create_wave(&wave).await.unwrap();
        let mut request = support::open_request(&wave, served.dir.path());
        request.reason = format!("handoff number {n:04}");
        // The three oldest fall due within the hour.
        let options = OpenOptions {
            step: None,
            expires_at: (n < 3)
                .then(|| time::OffsetDateTime::now_utc() + time::Duration::minutes(30)),
            ..OpenOptions::default()
        };
        served
            .store
            .open_interactive_handoff(request.with_options(options))
            .await
            .unwrap();
    }
    let shown = browse_with(&served, "GET", "/", Some(&session), None, &[]).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    let listed: Vec<usize> = (0..count)
        .filter(|n| shown.text.contains(&format!("handoff number {n:04}")))
        .collect();
    assert_eq!(listed, (3..count).collect::<Vec<_>>());
    let newest = shown.text.find("handoff number 0502").unwrap();
    let older = shown.text.find("handoff number 0501").unwrap();
    assert!(newest < older, "newest first");
    // Due soon: found behind the newest page of active handoffs.
    let due = browse_with(&served, "GET", "/?due=soon", Some(&session), None, &[]).await;
    assert_eq!(due.status, 200, "{}", due.text);
    let listed: Vec<usize> = (0..count)
        .filter(|n| due.text.contains(&format!("handoff number {n:04}")))
        .collect();
    assert_eq!(listed, [0, 1, 2]);
    served.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_asked_with_another_method_answers_405_with_its_error_page() {
    let served = Served::start().await;
    let id = served.open_id().await;
    let link = served
        .state
        .link_secret()
        .sign(
            &InteractiveHandoffId::parse(&id).unwrap(),
            "carol",
            served.store.now() + time::Duration::hours(1),
        )
        .unwrap();
    let signature = link.path().rsplit_once("sig=").unwrap().1.to_string();
    for (method, path, allow) in [
        ("DELETE", "/".to_string(), "GET, HEAD"),
        ("POST", "/inbox/rows".to_string(), "GET, HEAD"),
        ("PUT", format!("/inbox/{id}"), "GET, HEAD, POST"),
        ("DELETE", link.path(), "GET, HEAD, POST"),
        ("GET", "/sign-in".to_string(), "POST"),
        ("GET", "/sign-out".to_string(), "POST"),
        ("POST", "/static/inbox.css".to_string(), "GET, HEAD"),
        ("PATCH", "/static/inbox.js".to_string(), "GET, HEAD"),
    ] {
        let answer = browse_with(&served, method, &path, None, None, &[]).await;
        assert_eq!(answer.status, 405, "{method} {path}");
        assert!(
            answer
                .header("content-type")
                .unwrap_or_default()
                .starts_with("text/html"),
            "{method} {path}: {}",
            answer.header("content-type").unwrap_or_default()
        );
        assert!(
            answer.text.contains(&format!("does not take {method}")),
            "{method} {path}: {}",
            answer.text
        );
        assert_eq!(
            answer.header("allow").unwrap_or_default(),
            allow,
            "{method} {path}"
        );
        assert_eq!(
            answer.header("content-security-policy").unwrap_or_default(),
            CSP
        );
        assert!(!answer.text.contains(&signature), "{}", answer.text);
    }
}
