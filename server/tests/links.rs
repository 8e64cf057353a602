//! Links act as their maker (C29), through HTTP: a token makes links only
//! for its own name, only a token of scope `person` makes links that act,
//! a link lives at most 30 days, and a notification's link acts as the
//! name its endpoint is configured with.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use lf_handoff_domain::id::InteractiveHandoffId;
use lf_handoff_server::{bind, NotifyConfig, ServeConfig};
use serde_json::{json, Value};
use support::Served;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Completes the handoff of the link at `url` through its page's form, as
/// a browser would (no token), and returns the actor the history records for it.
async fn complete_through(served: &Served, url: &str, id: &str) -> String {
    let path = url.strip_prefix(&served.url).unwrap();
    let shown = served.send("GET", path, None, None, Vec::new()).await;
    assert_eq!(shown.status, 200, "{}", shown.text);
    let start = shown.text.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    let end = shown.text[start..].find('"').unwrap();
    let form = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("csrf", &shown.text[start..start + end]),
            ("action", "complete"),
            ("text", "done"),
        ])
        .finish();
    // The form's answer is a redirect back to the link, which the client
    // follows: the link's page, showing the outcome.
    let done = served
        .send(
            "POST",
            path,
            None,
            Some("application/x-www-form-urlencoded"),
            form.into_bytes(),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.text);
    let id = InteractiveHandoffId::parse(id).unwrap();
    let history = served.store.history(&id).await.unwrap();
    history.last().unwrap().actor.as_str().to_string()
}

fn expiry(made: &Value) -> OffsetDateTime {
    OffsetDateTime::parse(made["expires"].as_str().unwrap(), &Rfc3339).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_acts_as_its_maker_and_only_a_persons_token_makes_one() {
    let served = Served::start().await;
    let id = served.open_id().await;
    let path = format!("/v1/handoffs/{id}/link");
    let before = served.snapshot().await;

    // No token makes a link that acts under another name.
    let other = served
        .post(&path, &served.person, &json!({"for": "person-1"}))
        .await;
    assert_eq!(other.error(403, "forbidden"), "link_for_another_name");
    assert!(other.text.contains("alice"), "{}", other.text);
    // An operator's token makes no link, and its answers carry none:
    // operators do not finish handoffs.
    for body in [json!({}), json!({"for": "person-1"}), json!({"for": "ops"})] {
        let refused = served.post(&path, &served.operator, &body).await;
        assert_eq!(refused.error(403, "forbidden"), "forbidden");
    }
    let seen = served
        .get(&format!("/v1/handoffs/{id}"), &served.operator)
        .await
        .json();
    assert_eq!(seen["id"], json!(id));
    assert!(seen.get("link").is_none(), "{seen}");
    let listed = served
        .get("/v1/handoff-records", &served.operator)
        .await
        .json();
    assert!(listed[0].get("link").is_none(), "{listed}");
    assert_eq!(served.snapshot().await, before, "a refusal writes nothing");

    // A person's link, named or not, acts as that person's link.
    let named = served
        .post(&path, &served.person, &json!({"for": "alice"}))
        .await;
    assert_eq!(named.status, 200, "{}", named.text);
    assert_eq!(named.json()["for"], "alice");
    let made = served.post(&path, &served.person, &json!({})).await.json();
    assert_eq!(made["for"], "alice");
    let link = made["link"].as_str().unwrap();
    assert!(link.contains("for=alice&"), "{link}");
    assert_eq!(complete_through(&served, link, &id).await, "link:alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_lives_at_most_thirty_days() {
    let served = Served::start().await;
    let id = served.open_id().await;
    let path = format!("/v1/handoffs/{id}/link");
    let month = time::Duration::days(30);

    let longer = served
        .post(&path, &served.person, &json!({"valid_for": "31d"}))
        .await;
    assert_eq!(longer.error(400, "invalid_input"), "invalid_input");
    assert!(longer.text.contains("30 days"), "{}", longer.text);
    let made = served
        .post(&path, &served.person, &json!({"valid_for": "30d"}))
        .await;
    assert_eq!(made.status, 200, "{}", made.text);
    let left = expiry(&made.json()) - served.store.now();
    assert!(left > month - time::Duration::minutes(1) && left <= month);

    // A deadline further away is not waited for: the link made by
    // default, and the one a person's answer carries, stop at 30 days.
    let far = served.open(json!({"expires_in": "9w"})).await["handoff"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let made = served
        .post(
            &format!("/v1/handoffs/{far}/link"),
            &served.person,
            &json!({}),
        )
        .await
        .json();
    assert!(expiry(&made) - served.store.now() <= month, "{made}");
    let given = served
        .get(&format!("/v1/handoffs/{far}"), &served.person)
        .await
        .json()["link"]
        .as_str()
        .unwrap()
        .to_string();
    let exp: i64 = given
        .split("exp=")
        .nth(1)
        .unwrap()
        .split('&')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        exp <= (served.store.now() + month).unix_timestamp(),
        "{given}"
    );

    // A link signed by hand to live longer (`lf-handoff link` of an older
    // release, say) is refused, and changes nothing.
    let long = served
        .state
        .link_secret()
        .sign(
            &InteractiveHandoffId::parse(&far).unwrap(),
            "alice",
            served.store.now() + time::Duration::days(60),
        )
        .unwrap();
    let before = served.snapshot().await;
    for method in ["GET", "POST"] {
        let refused = served
            .send(method, &long.path(), None, None, Vec::new())
            .await;
        assert_eq!(refused.status, 403, "{method}: {}", refused.text);
        assert!(
            refused.text.contains("longer than the 30 days"),
            "{}",
            refused.text
        );
    }
    assert_eq!(served.snapshot().await, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notifications_link_acts_as_the_name_its_endpoint_is_configured_with() {
    let (hooks, received) = support::receiver().await;
    let mut notify = NotifyConfig::new(vec![
        format!("{hooks}/named?key=SECRET#for=On%20call"),
        format!("{hooks}/plain"),
    ]);
    notify.lease = Duration::from_secs(3);
    let served = Served::start_configured(|config| config.notify = Some(notify)).await;

    let told = support::told(&served, &received, &["/named", "/plain"], json!({})).await;
    let link = |path: &str| told[path]["link"].as_str().unwrap().to_string();
    let (id, named, plain) = (told.id.clone(), link("/named"), link("/plain"));
    assert!(named.contains("for=On+call&"), "{named}");
    // Without a name, the links act as `notification`, as before.
    assert!(plain.contains("for=notification&"), "{plain}");
    assert_eq!(complete_through(&served, &named, &id).await, "link:On call");

    // A fragment that is not `for=NAME`, or a name that makes no actor, is
    // refused before the service starts, naming the endpoint by its host.
    for bad in ["#who=x", "#for=", "#for=a&for=b"] {
        let mut config = ServeConfig::new("127.0.0.1:0".parse().unwrap());
        config.notify = Some(NotifyConfig::new(vec![format!("{hooks}/hook/SECRET{bad}")]));
        let refused = bind(config, served.store.clone()).await.err().unwrap();
        assert!(refused.is_invalid_input(), "{bad}: {refused}");
        assert!(refused.message().contains(&hooks), "{refused}");
        assert!(!refused.message().contains("SECRET"), "{refused}");
    }
}

/// The links a token made stop working once it is revoked (C29), those
/// of its answers and those of the link route alike; a link made by the
/// token issued anew under the same name works, and the old ones stay
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_links_a_token_made_stop_when_it_is_revoked() {
    use lf_handoff_server::tokens::{self, TokenTable};
    let served = Served::start().await;
    let id = served.open_id().await;
    let made = served
        .post(
            &format!("/v1/handoffs/{id}/link"),
            &served.person,
            &json!({}),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.text);
    let routed = made.json()["link"].as_str().unwrap().to_string();
    let answered = served
        .get(&format!("/v1/handoffs/{id}"), &served.person)
        .await;
    let answered = answered.json()["link"].as_str().unwrap().to_string();
    for url in [&routed, &answered] {
        let path = url.strip_prefix(&served.url).unwrap();
        let shown = served.send("GET", path, None, None, Vec::new()).await;
        assert_eq!(shown.status, 200, "{}", shown.text);
    }

    let file = served.dir.path().join("tokens");
    tokens::revoke(&file, "alice").unwrap();
    let again = tokens::create(
        &file,
        "alice",
        &[lf_handoff_api::Scope::Person],
        served.store.now(),
    )
    .unwrap()
    .token;
    served
        .state
        .replace_tokens(TokenTable::new(tokens::read_file(&file).unwrap()).unwrap());
    let before = served.snapshot().await;
    for url in [&routed, &answered] {
        let path = url.strip_prefix(&served.url).unwrap();
        let shown = served.send("GET", path, None, None, Vec::new()).await;
        assert_eq!(shown.status, 403, "{}", shown.text);
        assert!(shown.text.contains("revoked"), "{}", shown.text);
        let posted = served
            .send(
                "POST",
                path,
                None,
                Some("application/x-www-form-urlencoded"),
                b"action=complete&text=x".to_vec(),
            )
            .await;
        assert_eq!(posted.status, 403, "{}", posted.text);
    }
    assert_eq!(served.snapshot().await, before, "nothing was written");
    // The new token of the same name makes links that work.
    let renewed = served
        .post(&format!("/v1/handoffs/{id}/link"), &again, &json!({}))
        .await;
    assert_eq!(renewed.status, 200, "{}", renewed.text);
    let url = renewed.json()["link"].as_str().unwrap().to_string();
    assert_eq!(complete_through(&served, &url, &id).await, "link:alice");
}
