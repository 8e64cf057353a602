//! Signing out ends the sign-in on the server (C29), not only in the
//! browser: the cookie is refused afterwards, in any spelling of it, and
//! what it held open (an event stream of the inbox) ends; a new sign-in
//! works. (Across two servers of one store: `postgres.rs`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use futures_util::StreamExt as _;
use support::Served;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_ends_the_sign_in_whatever_its_spelling_and_what_it_holds_open() {
    let served = Served::start().await;
    let cookie = support::sign_in_cookie(&served).await;
    let inbox = support::browse(&served, "GET", "/", Some(&cookie), None).await;
    assert_eq!(inbox.status, 200, "{}", inbox.text);
    let response = served
        .client
        .get(format!("{}/v1/events", served.url))
        .header("cookie", format!("lfh_session={cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut events = response.bytes_stream();

    support::sign_out(&served, &cookie).await;

    // The same sign-in spelt with a leading zero in its expiry.
    let variant = format!("s2.0{}", &cookie["s2.".len()..]);
    for spelling in [&cookie, &variant] {
        let inbox = support::browse(&served, "GET", "/", Some(spelling), None).await;
        assert_eq!(inbox.status, 401, "{spelling}: {}", inbox.text);
        let read =
            support::browse(&served, "GET", "/v1/handoff-records", Some(spelling), None).await;
        assert_eq!(read.status, 401, "{spelling}: {}", read.text);
    }
    let mut text = String::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("the signed-out sign-in's stream was held on")
    {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(text.contains("event: error"), "{text}");

    let again = support::sign_in_cookie(&served).await;
    let inbox = support::browse(&served, "GET", "/", Some(&again), None).await;
    assert_eq!(inbox.status, 200, "{}", inbox.text);
    served.stop().await;
}
